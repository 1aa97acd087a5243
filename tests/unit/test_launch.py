"""The job's end, whatever happens: runs left running are judged (abandoned), finished by the
launcher, workers die with their launcher, and a dead rank is exit code 3 in ccltune's words."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

from ccltune import launch, processes
from ccltune.cli import main
from ccltune.store import Store


def _run_by(db, processes):
    with Store(db) as st:
        return st.begin_run("bench", command="ccltune bench all", env={"processes": processes})


def test_a_running_run_whose_processes_are_gone_is_shown_abandoned(tmp_path, capsys):
    db = tmp_path / "t.db"
    me = os.getpid()
    gone = _run_by(db, {"host": socket.gethostname(), "pids": {str(me): processes.process_start(me) + 1}})  # pid reused
    live = _run_by(db, {"host": socket.gethostname(), "pids": {str(me): processes.process_start(me)}})
    elsewhere = _run_by(db, {"host": "node-that-is-not-here", "pids": {"1": None}})
    old = _run_by(db, None)  # recorded before runs kept their processes: nothing to judge by
    with Store(db) as st:
        assert st.run(gone).status == "abandoned" and "gone" in st.run(gone).note
        assert st.run(live).status == "running" and not st.run(live).note
        assert st.run(elsewhere).status == "running" and "cannot be judged" in st.run(elsewhere).note
        assert st.run(old).status == "running"
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"  {gone:>4}  bench     abandoned" in out and f"# run {elsewhere} running: running on host node" in out
    assert main(["export", str(gone), "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["status"] == "abandoned"


def test_the_launcher_finishes_a_run_rank_0_left_running(tmp_path, capsys):
    db = tmp_path / "t.db"
    run_id = _run_by(db, {"host": socket.gethostname(), "pids": {str(os.getpid()): None}})
    (tmp_path / "run").write_text(f"{db}\n{run_id}\n")
    launch._finish_left_running(str(tmp_path / "run"), "failed", "a rank died or hung (exit code 3)")
    with Store(db) as st:
        run = st.run(run_id)
        assert run.status == "failed" and run.summary["rows"] == 0 and "a rank died" in run.summary["error"]
        st.finish_run(run_id, "complete", {"rows": 0})
    assert f"ccltune: run {run_id} failed; 0 rows kept in {db}" in capsys.readouterr().err
    launch._finish_left_running(str(tmp_path / "run"), "failed", "x")  # finished already: left as it is
    with Store(db) as st:
        assert st.run(run_id).status == "complete"
    assert capsys.readouterr().err == ""


def test_a_process_dies_with_its_parent_killed_by_signal_9(tmp_path):
    """PR_SET_PDEATHSIG: kill -9 of a parent leaves no child of it running (Linux)."""
    pidfile = tmp_path / "pid"
    child = textwrap.dedent(f"""
        import os, sys, time
        from ccltune import launch, processes
        launch.die_with_parent()
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)"],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while processes.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes.alive(pid), "the child outlived its parent by 5 s"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pidfile.exists() and pidfile.read_text() and processes.alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def _failed(*codes):
    failures = {rank: SimpleNamespace(exitcode=code, pid=100 + rank) for rank, code in enumerate(codes)}
    return SimpleNamespace(failures=failures, get_first_failure=lambda: next(iter(failures.items())))


def test_a_rank_that_died_is_exit_code_3_said_once(capsys):
    assert launch._failure_code(_failed(-9, 3)) == 3  # a survivor said it (exit 3): nothing more
    assert capsys.readouterr().err == ""
    assert launch._failure_code(_failed(-9, -15)) == 3  # nobody said anything: the launcher does
    err = capsys.readouterr().err
    assert "ccltune: error: rank 0 on host " in err and "killed by SIGKILL" in err and "Root Cause" not in err
    assert launch._failure_code(_failed(2, 2)) == 2  # every worker refused the input: its code


def test_a_rank_stopped_by_torchrun_after_another_refused_does_not_make_it_a_death(monkeypatch, capsys):
    """Rank 0 raised an error after the job ran (exit 2) while rank 1 was still tearing down: torchrun
    then stopped rank 1 (SIGTERM). The job's code is rank 0's, whichever way the timing fell (it was
    3, 'a rank died', one run in six on a loaded machine)."""
    monkeypatch.setattr(launch, "_STOPPED", {101})
    assert launch._failure_code(_failed(2, -15)) == 2 and capsys.readouterr().err == ""
    monkeypatch.setattr(launch, "_STOPPED", set())   # rank 1 ended of itself, killed: a death
    assert launch._failure_code(_failed(2, -15)) == 3


def test_the_rank_that_ended_first_is_the_error_the_ones_stopped_after_it_are_not():
    """Rank 1 killed; rank 0 was waiting inside a collective for it, so it did not end within the
    launcher's grace and was killed too: rank 1 is the error, rank 0 what followed."""
    failures = _failed(-9, -9).failures
    lines = launch.failure_lines(failures, "h", stopped={100})
    assert lines[0] == "ccltune: error: rank 1 on host h (pid 101) was killed by SIGKILL"
    assert lines[1].startswith("ccltune: rank 0 on host h (pid 100) was then stopped by the launcher, killed")
    assert len(lines) == 2
    # a crash (exit code 1) with the other rank ending on torchrun's SIGTERM: not killed, only stopped
    lines = launch.failure_lines(_failed(-15, 1).failures, "h", stopped={100})
    assert lines == ["ccltune: error: rank 1 on host h (pid 101) exited with code 1",
                     "ccltune: rank 0 on host h (pid 100) was then stopped by the launcher"]
    # nothing known about who was stopped: every rank is said as it ended
    assert len([x for x in launch.failure_lines(failures, "h", stopped=set()) if "error" in x]) == 2


def test_job_size_is_the_launchers_else_nproc_else_one_per_gpu(monkeypatch):
    import pytest

    from ccltune.errors import UsageError

    monkeypatch.setattr(launch.dist, "launch_info", lambda: SimpleNamespace(launcher="single", world_size=1))
    assert launch.job_size(None, True, lambda: 4) == 4
    assert launch.job_size(None, False, lambda: 0) == launch.CPU_NPROC
    assert launch.job_size(3, False, lambda: 0) == 3  # an engine without GPU (gloo) counts none
    with pytest.raises(UsageError, match="--nproc 5: one process per GPU, and 4 GPUs are visible here"):
        launch.job_size(5, True, lambda: 4)
    with pytest.raises(UsageError, match="--nproc must be >= 1, got 0"):
        launch.job_size(0, False, lambda: 0)
    monkeypatch.setattr(launch.dist, "launch_info", lambda: SimpleNamespace(launcher="mpirun", world_size=8))
    assert launch.job_size(None, True, lambda: 1) == 8  # under a launcher, its world
    assert launch.job_size(8, True, lambda: 1) == 8
    with pytest.raises(UsageError, match=r"^--nproc 2 under mpirun, whose job has 8 processes: the launcher starts "
                                         r"them, so leave out --nproc or have it start 2$"):
        launch.job_size(2, True, lambda: 1)  # was silently 8


def test_runs_here_only_one_process_and_from_python_only_gloo_in_the_main_thread():
    import threading

    caller = launch.Caller()
    assert launch.runs_here(1, True, None) and not launch.runs_here(2, False, None)
    assert not launch.runs_here(1, True, caller) and launch.runs_here(1, False, caller)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(launch.runs_here(1, False, caller)))
    worker.start()
    worker.join()
    assert seen == [False]


def test_ctrl_c_while_the_job_starts_is_said_not_silent(monkeypatch, capsys):
    """Ctrl-C before rank 0 began a run (torchrun still starting its workers): one line, exit 130."""
    import threading

    monkeypatch.setattr(launch, "torchrun_argv", lambda n, a: [sys.executable, "-c", "import time; time.sleep(30)"])
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    assert launch.relaunch(["bench", "all"], 2, "gloo", {}) == 130
    err = capsys.readouterr().err
    assert err.count("ccltune: interrupted (SIGINT) while the job was starting: nothing was measured") == 1, err
