"""`ccltune bench` when a rank dies, hangs, or the user presses Ctrl-C: every process ends
within a bound, the output names the rank and host, rows already measured stay stored."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from dist_helpers import alive, background_fixture, count_rows, describe, only_run, ran, wait_rows, worker

TIMEOUT_S = 3
# many sizes: the run is still going when the test acts on it
LONG = ["all_reduce", "-b", "8", "-e", "64M", "-f", "2", "-n", "20", "-w", "1", "--nproc", "2"]


class Stderr:
    """Collects a process's stderr as it arrives, so a test can wait for a line."""

    def __init__(self, proc):
        self.text = ""
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc):
        for line in proc.stderr:
            self.text += line

    def wait_for(self, needle: str, timeout: float) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if needle in self.text:
                return time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} not in stderr after {timeout:g}s:\n{self.text}")

    def join(self):
        self._thread.join(timeout=10)
        return self.text


def _start(launcher, tmp_path):
    db = tmp_path / "t.db"
    proc = launcher.start(*LONG, "--db", str(db), "--timeout", str(TIMEOUT_S))
    err = Stderr(proc)
    before = wait_rows(db, 4, proc)
    launcher.note(proc)
    return proc, err, db, before


def _killed_rank_stops_the_others_and_is_named(launcher, tmp_path):
    proc, err, db, before = _start(launcher, tmp_path)
    victim = worker(proc.pid, 1)
    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    proc.wait(timeout=60)
    assert time.monotonic() - t0 < 60
    text = err.join()
    assert proc.returncode != 0
    # rank 0 names rank 1 itself; or, when it was waiting inside a collective for rank 1 and did not end
    # within the launcher's grace (a loaded machine), the launcher names rank 1 and says it stopped rank 0
    errors = [line for line in text.splitlines() if line.startswith("ccltune: error: ")]
    assert errors and errors[0].startswith("ccltune: error: rank 1 on host "), text
    if "exited (killed or crashed)" not in errors[0]:
        assert "was killed by SIGKILL" in errors[0] and len(errors) == 1, text
        assert "ccltune: rank 0 on host " in text and "was then stopped by the launcher" in text
    assert "interrupted" not in text and "Traceback" not in text
    assert not any(alive(p) for p in launcher.seen)
    run, rows = only_run(db)
    assert run.status == "failed"
    assert len(rows) >= before and run.summary["rows"] == len(rows)
    assert all(m.wrong in (0, None) for m in rows)


def _hung_rank_is_named_within_the_timeout(launcher, tmp_path):
    proc, err, db, before = _start(launcher, tmp_path)
    victim = worker(proc.pid, 1)
    os.kill(victim, signal.SIGSTOP)
    try:
        # gloo's own timeout is --timeout; the roll call that names the rank takes a few seconds more
        waited = err.wait_for("stopped answering", TIMEOUT_S + 15)
        assert waited >= TIMEOUT_S - 1
    finally:
        os.kill(victim, signal.SIGKILL)   # torchrun would wait 30 s on a stopped process
        os.kill(victim, signal.SIGCONT)
    proc.wait(timeout=60)
    text = err.join()
    assert proc.returncode != 0
    assert "ccltune: error: rank 1 on host " in text
    assert "rank 0 on " in text and f"gives up after {TIMEOUT_S}s (--timeout)" in text
    assert "Traceback" not in text
    run, rows = only_run(db)
    assert run.status == "failed" and len(rows) >= before


# -N 0 (nccl-tests: cycles without end): the size loop repeats until Ctrl-C
N0 = ["all_reduce", "-b", "8", "-e", "64", "-n", "1", "-w", "0", "-N", "0", "--nproc", "2"]


def _ctrl_c_keeps_rows_and_marks_the_run_interrupted(launcher, tmp_path):
    """Ctrl-C (SIGINT to ccltune's process group, which holds ccltune alone: torchrun runs in a session of its
    own) of a -N 0 run: the size loop went round until then; the whole job is gone within 5 s, the run ends
    'interrupted' with exit 130, every row measured stays stored."""
    db = tmp_path / "t.db"
    proc = launcher.start(*N0, "--db", str(db), "--timeout", str(TIMEOUT_S))
    err = Stderr(proc)
    before = wait_rows(db, 12, proc)  # three cycles of 2 sizes x 2 placements: it went round
    job = launcher.note(proc)
    assert len(job) >= 3  # torchrun and two workers
    os.killpg(proc.pid, signal.SIGINT)   # what the terminal does: the launcher's whole group
    left = _job_gone_within(job, 5.0)
    assert not left, f"processes of the job still alive 5 s after Ctrl-C: {describe(left)}"
    proc.wait(timeout=5)
    out = proc.stdout.read()
    text = err.join()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "ccltune: error" not in text
    run, rows = only_run(db)
    assert run.status == "interrupted"
    assert len(rows) >= before and run.summary["rows"] == len(rows) == count_rows(db)
    assert f"ccltune: interrupted; {len(rows)} rows kept in {db} (run {run.id})" in text
    assert text.count("ccltune: interrupted") == 1   # rank 0 speaks for the job
    _only_ccltune_lines(text)
    assert "-N 0: the size loop runs until interrupted" in out and out.count("# Collective test starting") == 1
    assert not any(alive(p) for p in launcher.seen)


def _job_gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def _job_files(pids: list[int]) -> str:
    """The folder of the job's own files (the stop and run files), read from its processes' environment."""
    for pid in pids:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"CCLTUNE_STOP_FILE="):
                    return os.path.dirname(item.split(b"=", 1)[1].decode())
    raise AssertionError(f"no process of the job {pids} has CCLTUNE_STOP_FILE")


def _only_ccltune_lines(text: str) -> None:
    """Nothing but ccltune's own lines: no torchrun report, warning or C++ abort message."""
    others = [line for line in text.splitlines() if line.strip() and not line.startswith("ccltune")]
    assert not others, text
    assert "terminate called" not in text and "Root Cause" not in text and "Traceback" not in text


def _stopping_ccltune_stops_the_whole_job_within_5_s(launcher, tmp_path, sig):
    """kill (TERM), a closed terminal (HUP) or kill -9 of the ccltune process (Ctrl-C: the test above): torchrun
    and every worker are gone within 5 s, every row measured is kept and the run's status is final.
    (Before: the workers ran on under PID 1 after TERM, HUP and KILL, and the run stayed 'running'.)"""
    proc, err, db, before = _start(launcher, tmp_path)
    job = launcher.note(proc)
    assert len(job) >= 3  # torchrun and two workers
    workdir = _job_files(job)
    os.kill(proc.pid, getattr(signal, sig))
    left = _job_gone_within(job, 5.0)
    assert not left, f"{sig}: processes of the job still alive 5 s later: {describe(left)}"
    proc.wait(timeout=5)
    text = err.join()
    run, rows = only_run(db)
    assert len(rows) >= before
    assert not os.path.exists(workdir), f"{sig}: the job's files are left in {workdir}"
    if sig == "SIGKILL":  # the parent said nothing: torchrun stopped the job in its place
        assert run.status == "interrupted" and run.summary["rows"] == len(rows) == count_rows(db), run
        assert f"ccltune: interrupted; {len(rows)} rows kept in {db} (run {run.id})" in text
    else:
        assert proc.returncode == 130, text
        assert run.status == "interrupted" and run.summary["rows"] == len(rows) == count_rows(db)
        assert f"ccltune: interrupted; {len(rows)} rows kept in {db} (run {run.id})" in text
    _only_ccltune_lines(text)


def _rank_0_killed_or_stopped_the_parent_finishes_the_run(launcher, tmp_path, sig):
    """Rank 0 writes the run; when it is killed (or stopped, so the others give up after --timeout)
    the parent marks the run failed, keeps the rows, says it in ccltune's words and exits 3."""
    proc, err, db, before = _start(launcher, tmp_path)
    victim = worker(proc.pid, 0)
    os.kill(victim, getattr(signal, sig))
    proc.wait(timeout=TIMEOUT_S + 25)
    text = err.join()
    assert proc.returncode == 3, text
    run, rows = only_run(db)
    assert run.status == "failed" and len(rows) >= before and run.summary["rows"] == len(rows)
    assert f"ccltune: run {run.id} failed; {len(rows)} rows kept in {db}" in text
    assert "rank 0 on host " in text
    _only_ccltune_lines(text)
    assert not any(alive(p) for p in launcher.seen)  # the stopped rank too: killed, not left stopped


# Every job of this module runs at once, each test's body in its own thread (background_fixture):
# a job mostly waits (torch's import, --timeout running out), so they overlap well, three at a time.
# Each body acts on its own job as soon as that job has stored its rows.
STOP_SIGNALS = ["SIGTERM", "SIGHUP", "SIGKILL"]
background = background_fixture({   # the two that wait out --timeout first
    "test_rank_0_killed_or_stopped_the_parent_finishes_the_run[SIGSTOP]":
        (_rank_0_killed_or_stopped_the_parent_finishes_the_run, "SIGSTOP"),
    "test_hung_rank_is_named_within_the_timeout": (_hung_rank_is_named_within_the_timeout,),
    "test_killed_rank_stops_the_others_and_is_named": (_killed_rank_stops_the_others_and_is_named,),
    "test_ctrl_c_keeps_rows_and_marks_the_run_interrupted": (_ctrl_c_keeps_rows_and_marks_the_run_interrupted,),
    **{f"test_stopping_ccltune_stops_the_whole_job_within_5_s[{sig}]": (_stopping_ccltune_stops_the_whole_job_within_5_s, sig)
       for sig in STOP_SIGNALS},
    "test_rank_0_killed_or_stopped_the_parent_finishes_the_run[SIGKILL]":
        (_rank_0_killed_or_stopped_the_parent_finishes_the_run, "SIGKILL"),
})


def test_killed_rank_stops_the_others_and_is_named(background, request):
    ran(background, request)


def test_hung_rank_is_named_within_the_timeout(background, request):
    ran(background, request)


def test_ctrl_c_keeps_rows_and_marks_the_run_interrupted(background, request):
    ran(background, request)


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_stopping_ccltune_stops_the_whole_job_within_5_s(background, request, sig):
    ran(background, request)


@pytest.mark.parametrize("sig", ["SIGKILL", pytest.param("SIGSTOP", marks=pytest.mark.slow)])
def test_rank_0_killed_or_stopped_the_parent_finishes_the_run(background, request, sig):
    ran(background, request)
