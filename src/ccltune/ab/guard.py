"""The user's job under ``ccltune ab``, guarded so that it never outlives ccltune.

``python -m ccltune.ab.guard PPID COMMAND...`` runs COMMAND as its child, in a session of its
own, passes its output through and exits as it exited. ccltune starts every run of a job through it
(``ab.job.run_once``). When the ccltune process ``PPID`` dies without a word (kill -9, the OOM killer),
the kernel tells this process (PR_SET_PDEATHSIG) and it ends the whole job as ccltune would have:
SIGTERM to the job's process group and to every descendant (one that left the group with setsid too),
SIGKILL to what is left after ``GRACE_S``. A stop sent to this process (SIGTERM, SIGHUP, SIGINT)
ends the job the same way. Without the guard, a job whose launcher ignores a closed pipe (torchrun
with its workers, a shell script's children) ran on under PID 1.

A run ends when the job's top process exits. What it left running (``sleep 20 & exit 0``, a daemon in a
session of its own) is the job's: the guard is their subreaper (PR_SET_CHILD_SUBREAPER: an orphan of the job
becomes its child, not PID 1's), so it finds them among its descendants and ends them the same way before it
exits. They would otherwise hold the output pipe open, and ccltune would wait for them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any

from ccltune import processes

PARENT_GONE = signal.SIGUSR2   # the kernel's word that ccltune died (never forwarded: the job has its own session)
STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
POLL_S = 0.05
GRACE_S = 3.0          # after SIGTERM, the job's time to exit before SIGKILL


# The job's, not the guard's own interpreter: an arm's other NCCL library (--nccl-lib), and an arm's
# PYTHONPATH (the guard finds ccltune where this process found it).
HELD = ("LD_PRELOAD", "PYTHONPATH")
HELD_PREFIX = "CCLTUNE_JOBGUARD_"


def command(ppid: int, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``argv`` with ``env`` guarded, for the ccltune process
    ``ppid``. The job gets ``env`` exactly; the variables of HELD are carried past the guard's interpreter."""
    held = {HELD_PREFIX + k: v for k, v in env.items() if k in HELD}
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where ccltune is
    return ([sys.executable, "-m", "ccltune.ab.guard", str(ppid), *argv],
            {**{k: v for k, v in env.items() if k not in HELD}, **held, "PYTHONPATH": here})


def job_env(guard_env: dict[str, str]) -> dict[str, str]:
    """The job's environment, from the guard's (``command``): ``env`` as it was given."""
    env = {k: v for k, v in guard_env.items() if k not in HELD and not k.startswith(HELD_PREFIX)}
    env.update({k[len(HELD_PREFIX):]: v for k, v in guard_env.items() if k.startswith(HELD_PREFIX)})
    return env


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the job's process group and its descendants, SIGKILL to what is left after GRACE_S."""
    targets = set(processes.descendants(proc.pid))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in targets | set(processes.descendants(proc.pid)):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if sig == signal.SIGTERM:
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                continue
            if not any(processes.alive(p) for p in targets):
                return
    proc.wait()


def end_job(child: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the job's process group and to every process below the guard (the job, and the orphans it
    left, given to the guard as their subreaper), SIGKILL to what is left after GRACE_S. Returns how many
    processes besides ``child`` were running."""
    me = os.getpid()
    targets = {p for p in processes.descendants(me) if processes.alive(p)}
    others = len(targets - {child.pid})
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)
        targets |= set(processes.descendants(me))
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + GRACE_S
            while time.monotonic() < deadline and any(processes.alive(p) for p in targets):
                time.sleep(POLL_S)
            if not any(processes.alive(p) for p in targets):
                break
    child.wait()
    return others


def main(args: list[str]) -> int:
    if len(args) < 2 or not args[0].isdigit():
        print("usage: python -m ccltune.ab.guard PPID COMMAND...", file=sys.stderr)
        return 2
    stopped: list[int] = []

    def stop(signum: int, frame: Any) -> None:  # the loop below ends the job: no wait inside a handler
        for s in (PARENT_GONE, *STOPS):
            signal.signal(s, signal.SIG_IGN)
        stopped.append(signum)

    for s in (PARENT_GONE, *STOPS):
        signal.signal(s, stop)
    processes.die_with_parent(int(args[0]), PARENT_GONE)
    processes.become_subreaper()
    try:
        child = subprocess.Popen(args[1:], env=job_env(dict(os.environ)), start_new_session=True)
    except OSError as exc:
        print(f"ccltune: could not start {args[1]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    while True:
        try:
            child.wait(timeout=POLL_S)  # with a timeout it holds no lock while it waits: a stop may come
            break
        except subprocess.TimeoutExpired:
            pass
        if stopped:
            end_job(child)
            return 128 + stopped[0]
    rc = child.returncode
    if end_job(child):  # before this process exits: the leftovers hold its output pipe open
        print("ccltune: the job's top process exited; what it left running was ended", file=sys.stderr, flush=True)
    if rc < 0:  # killed by a signal: end the same way, so ccltune sees what the job saw
        sys.stdout.flush()
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's disposition cannot change, and need not
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
        return 128 - rc  # a signal whose default is to be ignored
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
