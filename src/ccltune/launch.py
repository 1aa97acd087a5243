"""Starting a job for ``--nproc`` and ending it, whatever happens to it.

The parent (``ccltune bench --nproc N``) starts torchrun in a session of its own, so the job is one
unit apart from the terminal. Stopping the parent stops the job: SIGINT, SIGTERM and SIGHUP are
passed on (as SIGTERM, after a stop file tells the workers it is a stop and not a peer's death);
the workers store their rows and finish the run within ``GRACE_S``, and whatever of the job is
still alive then is killed. A worker dies with its launcher (PR_SET_PDEATHSIG on Linux); kill -9 of
the parent makes torchrun do the parent's part (``_on_parent_gone``): the same stop, within the
same GRACE_S, then it leaves. Every run ends complete, interrupted or
failed: when rank 0 could not finish it (killed, stopped, hung), the parent does. A worker whose
check failed hands its exit code over (``hand_over``) instead of exiting non-zero, so torchrun
prints no report of its own; a rank that died is said in ccltune's words only, exit code 3.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccltune import dist, environment
from ccltune.errors import UsageError
from ccltune.processes import alive, descendants, die_with_parent, process_start
from ccltune.status import RunStatus

OUTCOME_ENV = "CCLTUNE_OUTCOME_FILE"   # a worker's failed check writes its exit code here (hand_over)
RUN_ENV = "CCLTUNE_RUN_FILE"           # rank 0 writes '<db>\n<run id>' of the run it began (note_run)
STOP_ENV = "CCLTUNE_STOP_FILE"         # exists once the parent was told to stop (stop_requested)
PARENT_ENV = "CCLTUNE_PARENT_PID"      # the parent's pid: torchrun dies with it
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 3.0     # after a stop: the workers' time to store their rows and finish the run, then SIGKILL
SHUTDOWN_S = 2    # torchrun's own grace after a worker failed, before it kills the others (its default: 30)
_WORKDIR_PREFIX = "ccltune-job-"   # the job's files (relaunch): removed by whoever ends the job


@dataclass
class Caller:
    """A job started for a caller in Python (``ccltune.api``) rather than a terminal. The job's
    output is copied, line by line, to ``stdout`` and ``stderr`` (text streams; ``stdout`` None
    drops the table), so it shows where the caller reads (a notebook's cell). ``relaunch`` fills in
    ``run_id`` (the run rank 0 began, when it began one), ``errors`` (the job's error messages) and
    ``last_words`` (its last line on stderr, for a job that died without an error message)."""

    stdout: Any = None
    stderr: Any = None
    here: bool = True  # False: a job even for one process of an engine without GPU (see runs_here)
    run_id: int | None = None
    errors: list[str] = field(default_factory=list)
    last_words: str = ""


ERROR_PREFIX = "ccltune: error: "   # how the CLI starts an error message (cli.main)
CPU_NPROC = 2   # processes of a job on an engine without GPU (gloo) when --nproc is not given (no GPU to count)


def job_size(nproc: int | None, gpu: bool, gpu_count: Callable[[], int]) -> int:
    """How many processes the job will have: the launcher's world size (``nproc`` must then be None or
    equal); else ``nproc`` (``--nproc``: one process per GPU, so at most the GPUs visible, except on
    an engine without GPU); else one per GPU visible (``CPU_NPROC`` on an engine without GPU).
    ``gpu``: whether the engine runs on GPUs (``engines.kind(name).gpu``); ``gpu_count``: the GPUs a
    process started here would see."""
    info = dist.launch_info()
    if info.launcher != "single":
        if nproc is not None and nproc != info.world_size:  # the launcher started the processes, not ccltune
            who = "RANK/WORLD_SIZE" if info.launcher == "env" else info.launcher
            raise UsageError(f"--nproc {nproc} under {who}, whose job has {info.world_size} process"
                             f"{'es' * (info.world_size != 1)}: the launcher starts them, so leave out --nproc "
                             f"or have it start {nproc}")
        return info.world_size
    if nproc is not None:
        if nproc < 1:
            raise UsageError(f"--nproc must be >= 1, got {nproc}")
        if gpu and nproc > (n := gpu_count()):  # NCCL refuses two ranks on one GPU
            raise UsageError(f"--nproc {nproc}: one process per GPU, and {n} GPUs are visible here")
        return nproc
    return gpu_count() if gpu else CPU_NPROC


def runs_here(nproc: int, gpu: bool, caller: Caller | None) -> bool:
    """Whether a job of ``nproc`` processes runs in this process instead of under torchrun (``relaunch``).

    From a terminal, a job of one process does. A call from Python (``ccltune.api``: ``caller``) runs in a job of
    its own even on one process, so that the caller's process never opens a GPU library or signal handlers it
    keeps; only one process of an engine without GPU (``gpu`` False: gloo), which joins no process group, runs
    there (in the main thread, where signals can be caught), unless ``caller.here`` is False (a command whose
    output in this process the caller could not take: it runs as a job and prints only through ``caller``)."""
    if nproc != 1:
        return False
    if caller is None:
        return True
    return caller.here and not gpu and threading.current_thread() is threading.main_thread()


def relaunch(argv: list[str], nproc: int, engine: str, env: dict[str, str], caller: Caller | None = None) -> int:
    """Run ``ccltune ARGV --engine ENGINE`` as ``nproc`` processes under torchrun (``--nproc`` and
    ``--engine`` dropped from ``argv``: the parent resolved both once), with ``env`` added to this
    process's environment. Returns the job's exit code (130 when it was stopped). ``caller``: the
    job's output goes to its streams, and it learns the job's run and error messages."""
    workdir = tempfile.mkdtemp(prefix=_WORKDIR_PREFIX)
    files = {name: os.path.join(workdir, name.lower()) for name in (OUTCOME_ENV, RUN_ENV, STOP_ENV)}
    env = {**os.environ, **env, **files, PARENT_ENV: str(os.getpid()),
           environment.USER_VARIABLES_ENV: environment.parent_names()}  # what the user set, not torchrun
    env.setdefault("OMP_NUM_THREADS", "1")
    try:
        job = _Job(torchrun_argv(nproc, worker_argv(argv, engine)), env, files[STOP_ENV], caller)
        rc = job.run()
        if caller is not None:
            caller.run_id = _run_of(files[RUN_ENV])
        stopped = job.stopped_by is not None
        _finish_left_running(files[RUN_ENV], RunStatus.INTERRUPTED if stopped else RunStatus.FAILED,
                             f"stopped by {job.stopped_by}" if stopped else f"a rank died or hung (exit code {rc})")
        if stopped and rc != 0:
            if _run_of(files[RUN_ENV]) is None:  # else rank 0 said how many rows its run kept
                print(f"ccltune: interrupted ({job.stopped_by}) while the job was starting: nothing was measured "
                      "or stored", file=sys.stderr, flush=True)
            return 130
        return outcome_code(files[OUTCOME_ENV], rc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class _Job:
    """torchrun and its workers, in a session of their own; stopped as one."""

    def __init__(self, cmd: list[str], env: dict[str, str], stop_file: str, caller: Caller | None = None):
        self.stop_file = stop_file
        self.stopped_by: str | None = None
        self.stop_at: float | None = None
        self.known: dict[int, int | None] = {}   # every process of the job seen so far -> its start time
        pipe = None if caller is None else subprocess.PIPE
        self.proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=pipe, stderr=pipe)
        self.copies = [] if caller is None else [
            _copy_lines(self.proc.stdout, caller.stdout, None),
            _copy_lines(self.proc.stderr, caller.stderr, caller)]

    def run(self) -> int:
        """Wait for the job; a stop signal meanwhile stops it, within GRACE_S. Returns its exit status."""
        old = {}
        with contextlib.suppress(ValueError):  # not the main thread: the job is stopped by its caller
            old = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            while True:
                self._look()
                try:
                    return _exit_code(self.proc.wait(timeout=0.2))
                except subprocess.TimeoutExpired:
                    pass
                if self.stop_at is not None and time.monotonic() > self.stop_at + GRACE_S:
                    self._kill()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self._kill()  # nothing of the job outlives it (a worker stuck in a blocking call)
            for t in self.copies:
                t.join(timeout=GRACE_S)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.stopped_by is not None:  # a second Ctrl-C: no more grace
            self.stop_at = time.monotonic() - GRACE_S
            return
        self.stopped_by = signal.Signals(signum).name
        self.stop_at = time.monotonic()
        with contextlib.suppress(OSError):
            open(self.stop_file, "w").close()  # before the signal: the workers read it as a stop
        self._look()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)  # torchrun passes it on to every worker

    def _look(self) -> None:
        for pid in descendants(self.proc.pid):
            self.known.setdefault(pid, process_start(pid))

    def _kill(self) -> None:
        self._look()
        _kill_alive(self.known)
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()


def _kill_alive(known: dict[int, int | None]) -> None:
    """SIGKILL to each process of ``known`` (pid -> start time) that still runs: the same process, not a later one
    given its pid."""
    for pid, start in known.items():
        if alive(pid, start):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _copy_lines(source: Any, sink: Any, caller: Caller | None) -> threading.Thread:
    """Copy a pipe of the job to ``sink`` (None: drop it) line by line, keeping the CLI's error
    messages and the last line in ``caller``; in a thread, so that neither pipe fills and stops the job."""
    def pump() -> None:
        for raw in iter(source.readline, b""):
            line = raw.decode(errors="replace")
            if caller is not None and line.strip():
                caller.last_words = line.strip()
                if line.startswith(ERROR_PREFIX):
                    caller.errors.append(line[len(ERROR_PREFIX):].rstrip("\n"))
            if sink is not None:
                with contextlib.suppress(Exception):  # a sink closed meanwhile: the job goes on
                    sink.write(line)
                    sink.flush()
        source.close()
    t = threading.Thread(target=pump, name="ccltune-job-output", daemon=True)
    t.start()
    return t


def _run_of(run_file: str) -> int | None:
    """The run id rank 0 wrote to ``run_file`` (note_run), or None when it began none."""
    try:
        with open(run_file, encoding="utf-8") as fh:
            return int(fh.read().split("\n")[1])
    except (OSError, ValueError, IndexError):
        return None


def _finish_left_running(run_file: str, status: str, why: str) -> None:
    """The run rank 0 began, finished here when it was left running (rank 0 killed, stopped or hung)."""
    try:
        with open(run_file, encoding="utf-8") as fh:
            db, run_id = fh.read().split("\n")[:2]
    except (OSError, ValueError):
        return
    from ccltune.store import Store

    try:
        with Store(db, create=False) as st:
            rows = st.finish_if_running(int(run_id), status, {"error": f"finished by the launcher: {why}"})
    except Exception:  # noqa: BLE001 - the database went; nothing more to finish
        return
    if rows is not None:
        print(f"ccltune: run {run_id} {status}; {rows} rows kept in {db}", file=sys.stderr)


# -- the workers' side ---------------------------------------------------------------------------
def stop_requested() -> bool:
    """Whether the parent of this worker was told to stop (so a peer gone now is a stop, not a death)."""
    path = os.environ.get(STOP_ENV)
    return bool(path and os.path.exists(path))


def note_run(db: str, run_id: int) -> None:
    """Rank 0: tell the parent which run to finish if this process cannot."""
    path = os.environ.get(RUN_ENV)
    if path:
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as fh:
            fh.write(f"{os.path.abspath(db)}\n{run_id}\n")


def job_processes() -> dict[str, Any]:
    """What a run records to be judged later: this host, and the start time of each process of the
    job (this one, its launcher, the ccltune parent) by pid."""
    pids = {os.getpid()}
    if "TORCHELASTIC_RUN_ID" in os.environ:
        pids.add(os.getppid())
    if os.environ.get(PARENT_ENV, "").isdigit():
        pids.add(int(os.environ[PARENT_ENV]))
    return {"host": socket.gethostname(), "pids": {str(p): process_start(p) for p in sorted(pids)}}


def started_by_parent() -> bool:
    """Whether this process is a worker of a job that ``relaunch`` started (its parent has said what
    the command knew before the job started)."""
    return os.environ.get(PARENT_ENV, "").isdigit()


def leave_after_peer_loss(code: int) -> None:
    """A torchrun worker whose run ended with a peer's loss (its one line printed, its rows and run stored):
    exit now with ``code``. The interpreter's own teardown would destroy the gloo process group, whose threads
    can wait on the dead peer for seconds, past torchrun's SHUTDOWN_S: torchrun then SIGKILLs this process and
    the launcher, taking its exit as a silent death, prints a second account of what this one already said."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return
    import atexit

    atexit._run_exitfuncs()  # ccltune's own (temp copies of piped inputs), as a normal exit would
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def hand_over(code: int) -> int:
    """The exit code for a worker whose check failed: 0 after writing ``code`` for relaunch() to
    return, when relaunch() started this worker; else ``code`` itself."""
    path = os.environ.get(OUTCOME_ENV)
    if not path:
        return code
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(str(code))
    except OSError:
        return code
    return 0


def outcome_code(path: str, rc: int) -> int:
    """The job's exit code: torchrun's, or, when every worker exited 0, the code a worker handed over."""
    if rc != 0:
        return rc
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return rc
    return int(text) if text.isdigit() else rc


# -- torchrun ----------------------------------------------------------------------------------------
def _exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def worker_argv(argv: list[str], engine: str) -> list[str]:
    """A worker's arguments: the user's, without --nproc and --engine, and the engine resolved once."""
    return _drop_option(_drop_option(argv, "--nproc"), "--engine") + ["--engine", engine]


def _drop_option(argv: list[str], name: str) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            out.append(a)
    return out


def torchrun_argv(nproc: int, module_args: list[str]) -> list[str]:
    """``python -m ccltune.launch --standalone --nproc-per-node N -m ccltune ARGS``: torchrun."""
    return [sys.executable, "-m", "ccltune.launch", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "ccltune", *module_args]


def _torchrun(argv: list[str]) -> int:
    """torchrun, quiet: the workers say what happened in ccltune's words; torchrun's warnings,
    failure report ("Root Cause") and traceback would only repeat it. A rank that died is exit code 3."""
    if os.environ.get(PARENT_ENV, "").isdigit():
        _keep_parent_gone_signal()
        signal.signal(PARENT_GONE_SIGNAL, _on_parent_gone)
        die_with_parent(int(os.environ[PARENT_ENV]), PARENT_GONE_SIGNAL)
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main

    for name in ["torch.distributed", *logging.root.manager.loggerDict]:  # this process's loggers only
        if name.startswith("torch.distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    _bound_shutdown()
    try:
        main(argv)
    except ChildFailedError as exc:
        return _failure_code(exc)
    except SignalException as exc:
        return 128 + int(exc.sigval)
    return 0


PARENT_GONE_SIGNAL = signal.SIGUSR2   # torchrun's word from the kernel that the ccltune parent died


def _keep_parent_gone_signal() -> None:
    """torchrun forwards the signals named in TORCHELASTIC_SIGNALS_TO_HANDLE to the workers; the one
    that says the parent died is this launcher's own, never forwarded."""
    key = "TORCHELASTIC_SIGNALS_TO_HANDLE"
    if key in os.environ:
        names = [n.strip() for n in os.environ[key].split(",")]
        os.environ[key] = ",".join(n for n in names if n and n != PARENT_GONE_SIGNAL.name)


def _on_parent_gone(signum: int, frame: Any) -> None:
    """The ccltune process that started this job died without a word (kill -9, the OOM killer): do what
    it would have done on a stop, at once and without torchrun's own teardown, which can take seconds
    on a loaded machine. The workers are told it is a stop (the stop file), get SIGTERM and GRACE_S to
    store their rows and finish the run; whatever is left then is killed, the run is finished here if
    rank 0 could not, the job's files go, and this process leaves (exit 130)."""
    stop = os.environ.get(STOP_ENV)
    if stop:
        with contextlib.suppress(OSError):
            open(stop, "w").close()  # before the signal: the workers read it as a stop, not a peer's death
    known = {pid: process_start(pid) for pid in descendants(os.getpid())}
    for pid in known:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(alive(pid, start) for pid, start in known.items()):
        time.sleep(0.05)
    _kill_alive({**known, **{p: process_start(p) for p in descendants(os.getpid())}})
    run_file = os.environ.get(RUN_ENV)
    if run_file:
        _finish_left_running(run_file, RunStatus.INTERRUPTED, "stopped: the ccltune process that started "
                             "the job was killed")
    if stop and os.path.basename(os.path.dirname(stop)).startswith(_WORKDIR_PREFIX):
        shutil.rmtree(os.path.dirname(stop), ignore_errors=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(130)


def _bound_shutdown() -> None:
    """torchrun waits 30 s for the other workers to end after one failed (or was stopped) before it
    kills them; a stopped (SIGSTOP) or hung worker would hold the job that long. Cap it at SHUTDOWN_S."""
    try:
        from torch.distributed.elastic.multiprocessing import api
    except ImportError:
        return
    close = getattr(api.PContext, "close", None)
    if close is None or getattr(close, "_ccltune", False):
        return

    def bounded(self: Any, death_sig: Any = None, timeout: int = 30) -> None:
        with contextlib.suppress(Exception):   # the workers still alive now are stopped, not the cause
            _STOPPED.update(pid for pid in self.pids().values() if alive(pid))
        close(self, death_sig, min(timeout, SHUTDOWN_S))
    # torch's method replaced at run time: set as attributes, which is what they are here
    setattr(bounded, "_ccltune", True)
    setattr(api.PContext, "close", bounded)


def _failure_code(exc: Any) -> int:
    """The job's exit code when workers failed: theirs when each that ended of itself (not stopped by
    torchrun because another had failed: ``_causes``) exited with one of ccltune's codes (a message was
    printed), else 3, said here for ranks that died without a word (killed, crashed). A worker still
    tearing down when another exits with an error is killed by torchrun (SIGTERM): that is what
    followed, and the job's code stays the error's, however the two processes' timing fell."""
    from ccltune.errors import EXIT_CODES, DistError

    failures = exc.failures
    causes = _causes(failures, _STOPPED)
    if {f.exitcode for f in causes.values()} <= set(EXIT_CODES) - {0}:
        return min(causes.items(), key=lambda rf: (getattr(rf[1], "timestamp", 0), rf[0]))[1].exitcode
    codes = {f.exitcode for f in failures.values()}
    if not codes & set(EXIT_CODES):  # no worker said anything
        for line in failure_lines(failures, socket.gethostname(), _STOPPED):
            print(line, file=sys.stderr)
    return DistError.exit_code


def failure_lines(failures: dict[int, Any], host: str, stopped: set[int]) -> list[str]:
    """What to say of workers that ended without a word: the ones that ended first (killed, crashed)
    as errors; the ones torchrun then stopped because of them (still running when it began to stop
    the job, and killed when they did not end within SHUTDOWN_S, for example waiting inside a
    collective for the dead rank) after them, as what followed, not as causes."""
    def how(f: Any) -> str:
        if f.exitcode < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-f.exitcode).name}"
        return f"exited with code {f.exitcode}"

    causes = _causes(failures, stopped)
    lines = [f"{ERROR_PREFIX}rank {r} on host {host} (pid {f.pid}) {how(f)}" for r, f in sorted(causes.items())]
    for r, f in sorted(failures.items()):
        if r not in causes:
            line = f"ccltune: rank {r} on host {host} (pid {f.pid}) was then stopped by the launcher"
            if f.exitcode == -signal.SIGKILL:
                line += f", killed when it did not end within {SHUTDOWN_S} s (waiting for the rank that ended)"
            lines.append(line)
    return lines


def _causes(failures: dict[int, Any], stopped: set[int]) -> dict[int, Any]:
    """The failed workers that ended of themselves: those torchrun did not stop (all, when it says none)."""
    return {r: f for r, f in failures.items() if f.pid not in stopped} or failures


_STOPPED: set[int] = set()   # pids of workers still running when torchrun began to stop the job


if __name__ == "__main__":
    sys.exit(_torchrun(sys.argv[1:]))
