"""Helpers for the distributed tier: `ccltune bench` run for real on the gloo engine, as
subprocesses started with --nproc (torchrun), and the worker processes found through /proc.

Every process a test starts is killed by id at teardown, workers included (torchrun puts
each worker in its own session, so a process-group kill would miss them)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ccltune.processes import descendants
from ccltune.store import Store

ROW_FIELDS = ("collective", "size_bytes", "count", "dtype", "op", "root", "in_place", "time_us", "algbw_gbps",
              "busbw_gbps", "wrong")


def checked(record: dict) -> bool:
    """Whether a measured record's result was checked: all but in-place sendrecv (timed, #wrong N/A, as
    nccl-tests: Collective.checks_in_place)."""
    from ccltune import collectives

    return not record["in_place"] or collectives.get(record["collective"]).checks_in_place


def bench_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "ccltune", "bench", *args]


def _rank_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    ranks = [int(kv[5:]) for kv in env if kv.startswith(b"RANK=")]
    return ranks[0] if ranks else None


def worker(pid: int, rank: int, timeout: float = 30.0) -> int:
    """The pid of the worker of ``rank`` below the process ``pid`` (torchrun's child)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in descendants(pid) if _rank_of(p) == rank]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no worker with RANK={rank} below pid {pid} after {timeout:g}s")


def describe(pids: list[int]) -> list[str]:
    """Each process as a failure message names it: its pid, its rank (a worker) or its command, and its state."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            out.append(f"{pid} (gone)")
            continue
        rank = _rank_of(pid)
        out.append(f"{pid} ({f'rank {rank}' if rank is not None else cmd}, state {state})")
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def count_rows(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM measurements").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def wait_rows(db: Path, n: int, proc: subprocess.Popen, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = count_rows(db)
        if got >= n:
            return got
        assert proc.poll() is None, f"bench ended (rc {proc.returncode}) before {n} rows were stored"
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} rows in {db} after {timeout:g}s")


def only_run(db: Path):
    with Store(db, create=False) as st:
        runs = st.runs()
        assert len(runs) == 1, runs
        return runs[0], st.measurements(runs[0].id)


class Launcher:
    """Starts bench runs in the background and ends them, and their workers, by pid."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.seen: set[int] = set()

    def start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(bench_cmd(*args), cwd=self.tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(proc)
        return proc

    def note(self, proc: subprocess.Popen) -> list[int]:
        """Remember the processes below ``proc`` so teardown can end them by id."""
        pids = descendants(proc.pid)
        self.seen.update(pids)
        return pids

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.note(proc)
        for pid in sorted(self.seen, reverse=True):
            if alive(pid):
                for sig in (signal.SIGKILL, signal.SIGCONT):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture
def launcher(tmp_path):
    lau = Launcher(tmp_path)
    yield lau
    lau.cleanup()


@dataclass
class Ran:
    """One command line of a shared job: rank 0's exit code, stdout and stderr; ``folder``: its own;
    ``stderr_all``: every rank's stderr, rank 0's first (what a launch's stderr holds, in some order)."""

    rc: int
    stdout: str
    stderr: str
    folder: Path
    stderr_all: str
    rcs: list[int]   # every rank's exit code


def _cli_many(nproc: int, runs: list[dict], out: Path, cwd: Path) -> subprocess.Popen:
    script = Path(__file__).with_name("cli_many.py")
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                             str(script), str(out), *(json.dumps(run) for run in runs)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _finish(proc: subprocess.Popen, timeout: float, what: str) -> tuple[str, str]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in sorted(descendants(proc.pid), reverse=True):   # the workers too, by id
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"{what} did not end within {timeout:g}s: {stdout[-2000:]}{stderr[-3000:]}") from None
    assert proc.returncode == 0, f"{what}: {stdout[-2000:]}{stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr[-3000:]
    return stdout, stderr


def _read_run(out: Path, i: int, nproc: int, folder: Path) -> Ran:
    """Run ``i`` of a cli_many job; no rank printed a traceback, and where rank 0 exited 0 every rank did
    (a failed check is rank 0's to report: its exit code alone, as ``launch.hand_over`` passes it on)."""
    rcs = [int((out / f"{i}.{r}.rc").read_text()) for r in range(nproc)]
    errs = [(out / f"{i}.{r}.err").read_text() for r in range(nproc)]
    assert rcs[0] != 0 or not any(rcs), f"run {i}: the ranks exited {rcs}: {errs}"
    assert not any("Traceback" in e for e in errs), errs
    return Ran(rcs[0], (out / f"{i}.0.out").read_text(), errs[0], folder, "".join(errs), rcs)


class SharedJobs:
    """The command lines that test modules of this tier declare in ``SHARED_RUNS``, run in one torchrun
    job per process count (cli_many.py), started once per session in the background: a launch costs
    torch's import in torchrun and in each worker, seconds of CPU on 2 cores, and the lines only need
    a gloo job of N processes, not one of their own (what the launch itself does, from ``ccltune
    --nproc``, is tested by the runs that still launch their own).

    ``SHARED_RUNS`` maps a name to ``(nproc, build)``, ``(nproc, build, env)`` or ``(nproc, build, env,
    headroom_bytes)``: ``build(folder)`` writes what the run reads into its own empty folder and returns
    its command line (a list), or a Python file to run (a Path: cli_many's "script"); ``env`` is added
    to the environment for that run only; ``headroom_bytes`` limits its address space (cli_many's
    "as_headroom_bytes"). A test reads its run with ``get(module, name)``."""

    def __init__(self, modules: list, tmp: Path) -> None:
        self.runs: dict[tuple[str, str], tuple[int, int, Path]] = {}   # (module, name) -> (nproc, index, folder)
        lines: dict[int, list[dict]] = {}
        for module in modules:
            for name, (nproc, build, *more) in module.SHARED_RUNS.items():
                folder = tmp / f"{module.__name__}-{name}"
                folder.mkdir()
                self.runs[(module.__name__, name)] = (nproc, len(lines.setdefault(nproc, [])), folder)
                what = build(folder)
                line = {"script": str(what)} if isinstance(what, Path) else {"argv": what}
                line["env"] = more[0] if more else {}
                if len(more) > 1:
                    line["as_headroom_bytes"] = more[1]
                lines[nproc].append(line)
        self.lines, self.tmp = lines, tmp
        self.out = {n: tmp / f"out-{n}" for n in lines}
        self.procs: dict[int, subprocess.Popen] = {}
        self.done: dict[int, bool] = {}

    def start(self) -> None:
        """Start the jobs (once): in the background, while other tests run."""
        for nproc, job in self.lines.items():
            if nproc not in self.procs:
                self.out[nproc].mkdir()
                self.procs[nproc] = _cli_many(nproc, job, self.out[nproc], self.tmp)

    def get(self, module: str, name: str, timeout: float = 600) -> Ran:
        nproc, i, folder = self.runs[(module, name)]
        self.start()
        if nproc not in self.done:
            self.done[nproc] = False
            _finish(self.procs[nproc], timeout, f"the shared job of {nproc} processes")
            self.done[nproc] = True
        assert self.done[nproc], f"the shared job of {nproc} processes failed (see the first test that read it)"
        return _read_run(self.out[nproc], i, nproc, folder)

    def cleanup(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                for pid in sorted(descendants(proc.pid), reverse=True):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                proc.kill()
                proc.communicate()


@pytest.fixture
def run_bench(tmp_path):
    """Run bench to the end; returns (CompletedProcess, db path, json path)."""
    def run(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, Path, Path]:
        db, js = tmp_path / "t.db", tmp_path / "t.json"
        proc = subprocess.run(bench_cmd(*args, "--db", str(db), "--json", str(js)), cwd=tmp_path,
                              capture_output=True, text=True, timeout=timeout)
        return proc, db, js
    return run


def background_fixture(bodies: dict, at_once: int = 3):
    """A module fixture that runs this module's selected tests' bodies at once, each in its own thread
    and with its own Launcher and folder, from the module's first test on; each test then waits for
    its own body and sees its own failure. Most of a launch is waiting (torch's import on one core,
    --timeout running out), so jobs overlap well even on 2 cores; no assertion changes.

    ``bodies`` maps a test's name (with its parameter id) to ``(function, *args)``; the function is
    called as ``function(launcher, folder, *args)``, in the order of ``bodies`` (put the ones that wait
    longest first), ``at_once`` at a time: more would only share the 2 cores' torch imports and make
    every job slower. A test reads its outcome with ``ran(background, request)``."""
    from concurrent.futures import ThreadPoolExecutor

    @pytest.fixture(scope="module")
    def background(request, tmp_path_factory):
        selected = {item.name for item in request.session.items if item.module is request.module}
        wanted = [name for name in bodies if name in selected]
        launchers, futures = [], {}
        pool = ThreadPoolExecutor(at_once)
        try:
            for name in wanted:
                lau = Launcher(tmp_path_factory.mktemp("bg"))
                launchers.append(lau)
                fn, *args = bodies[name]
                futures[name] = pool.submit(fn, lau, lau.tmp_path, *args)
            yield futures
        finally:
            for fut in futures.values():
                try:
                    fut.result(timeout=180)   # every body's waits are bounded; this only orders teardown
                except Exception:  # noqa: BLE001 - its test reported it
                    pass
            for lau in launchers:
                lau.cleanup()
            pool.shutdown(wait=True)
    return background


def ran(background, request) -> None:
    """Wait for this test's body (started by background_fixture) and raise what it raised."""
    background[request.node.name].result(timeout=300)
