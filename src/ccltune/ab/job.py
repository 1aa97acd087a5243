"""Running the user's own job once (``ccltune ab``): its command in its own process group with an
arm's environment, its output read line by line for the metric, its whole process group ended when
ccltune stops.

The job runs in a new session (``start_new_session``), so a Ctrl-C at the terminal reaches ccltune
only; ccltune then ends the job: SIGTERM to the process group and to every descendant found in /proc
(a process that left the group with setsid is still a descendant), SIGKILL after ``guard.GRACE_S``.
Each run goes through ``guard``, which ends the job the same way when ccltune itself dies (kill -9).
"""

from __future__ import annotations

import collections
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccltune import profiler_plugin
from ccltune.ab import guard
from ccltune.errors import EngineUnavailable

TAIL_LINES = 12        # lines of the job's output kept for a failed run's report
MAX_LINE_BYTES = 1 << 16   # a longer line is read in pieces (the metric regex sees each piece)
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


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def run_once(argv: Sequence[str], env: Mapping[str, str], pattern: re.Pattern[str] | None = None, *,
             echo: bool = False, timeout_s: float | None = None) -> JobRun:
    """Run ``argv`` once with ``env``. A KeyboardInterrupt (Ctrl-C, or a stop signal turned into one)
    ends the job's process group and is raised again after it is gone."""
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
    timer = threading.Timer(timeout_s, guard.end_group, (proc,)) if timeout_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        assert proc.stdout is not None
        for raw in iter(lambda: proc.stdout.readline(MAX_LINE_BYTES), b""):  # type: ignore[union-attr]
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail.append(line)
            if echo:
                print(f"  | {line}", flush=True)
            if pattern is not None and len(values) < MAX_SAMPLES:
                values.extend(v for v in (_number(m.group(1)) for m in pattern.finditer(line)) if v is not None)
        proc.wait()
    except BaseException:
        guard.end_group(proc)
        raise
    finally:
        if timer is not None:
            timer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    wall_s = time.monotonic() - start
    rc = proc.returncode
    reason = ""
    if timeout_s is not None and wall_s >= timeout_s and rc != 0:
        reason = f"ran past --run-timeout {timeout_s:g} s: ended"
    elif rc != 0:
        reason = f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}"
    return JobRun(rc, wall_s, values, reason, list(tail))
