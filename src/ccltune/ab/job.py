"""Running the user's own job once (``ccltune ab``): its command in its own process group with an
arm's environment, its output read line by line for the metric, its whole process group ended when
ccltune stops.

The job runs in a new session (``start_new_session``), so a Ctrl-C at the terminal reaches ccltune
only; ccltune then ends the job: SIGTERM to the process group and to every descendant found in /proc
(a process that left the group with setsid is still a descendant), SIGKILL after ``guard.GRACE_S``.
Each run goes through ``guard``, which ends the job the same way when ccltune itself dies (kill -9).

A run ends when the job's top process exits: the guard then ends what the job left running (``sleep 20 &``),
and the output is read to the pipe's end, output.DRAIN_S at most. ``--run-timeout`` bounds the whole run.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccltune import profiler_plugin
from ccltune.ab import guard, output
from ccltune.errors import EngineUnavailable

TAIL_LINES = 12        # lines of the job's output kept for a failed run's report
MAX_SAMPLES = 1 << 20  # metric matches kept per run (a job printing more is still judged on these)

# variables that would make NCCL's "default" something else: removed for every arm (docs/ab.md)
TUNER_VARS = ("NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE", "CCLTUNE_RULES")


@dataclass
class JobRun:
    """One run: its exit code (None: it did not start), seconds it ran, every number the metric
    pattern matched (group 1, in order), its last lines; ``reason`` says why it failed ('' when it
    exited 0)."""

    exit_code: int | None
    wall_s: float
    matches: list[float] = field(default_factory=list)
    reason: str = ""
    tail: list[str] = field(default_factory=list)


def profiler_path() -> Path | None:
    """ccltune's NCCL profiler plugin when it is built (``ccltune plugin path --profiler``), else None."""
    try:
        return profiler_plugin.library_path()
    except EngineUnavailable:
        return None


def base_env(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Every arm's starting environment: the caller's, without the tuner variables (so 'default' is NCCL's
    own choice). Returns it and the names removed."""
    removed = [k for k in TUNER_VARS if k in environ]
    return {k: v for k, v in environ.items() if k not in TUNER_VARS}, removed


def _lines(groups: Iterator[list[bytes] | None]) -> Iterator[bytes | None]:
    for g in groups:
        yield from ([None] if g is None else g)


def run_once(argv: Sequence[str], env: Mapping[str, str], pattern: re.Pattern[str] | None = None, *,
             echo: bool = False, timeout_s: float | None = None) -> JobRun:
    """Run ``argv`` once with ``env``: until its top process exits (the guard ends what it left running), or
    for ``timeout_s`` seconds at most, the whole run (its process group ended then: a failed run). A
    KeyboardInterrupt (Ctrl-C, or a stop signal turned into one) ends the job's process group and is raised
    again after it is gone."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    values: list[float] = []
    start = time.monotonic()
    if shutil.which(argv[0], path=env.get("PATH", os.defpath)) is None:
        return JobRun(None, 0.0, reason=f"could not start {argv[0]!r}: not found, or not an executable file")
    guarded, guard_env = guard.command(os.getpid(), list(argv), dict(env))
    try:
        proc = subprocess.Popen(guarded, env=guard_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return JobRun(None, 0.0, reason=f"could not start {sys.executable!r}: {exc.strerror}")
    assert proc.stdout is not None
    timed_out = False
    matcher = output.BoundedRegex(pattern) if pattern is not None else None
    try:
        for raw in _lines(output.reads(proc.stdout.fileno(), proc, start + timeout_s if timeout_s else None)):
            if raw is None:  # --run-timeout: end it; what it still writes is read until the guard is gone
                timed_out = True
                guard.end_group(proc)
                continue
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail.append(line)
            if echo:
                print(f"  | {line}", flush=True)
            if matcher is not None and len(values) < MAX_SAMPLES:
                values.extend(v for v in map(output.number, matcher.groups(line)) if v is not None)
        proc.wait()
    except BaseException:
        guard.end_group(proc)
        raise
    finally:
        if matcher is not None:
            matcher.close()
        proc.stdout.close()
    wall_s = time.monotonic() - start
    rc = proc.returncode
    reason = ""
    if timed_out:
        reason = f"ran past --run-timeout {timeout_s:g} s: ended"
    elif rc != 0:
        reason = f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}"
    return JobRun(rc, wall_s, values, reason, list(tail))
