"""Running the user's own job once (``ccltune ab``): its command in its own process group with an
arm's environment, its output read line by line for the metric, its whole process group ended when
ccltune stops.

The job runs in a new session (``start_new_session``), so a Ctrl-C at the terminal reaches ccltune
only; ccltune then ends the job: SIGTERM to the process group and to every descendant found in /proc
(a process that left the group with setsid is still a descendant), SIGKILL after ``guard.GRACE_S``.
Each run goes through ``guard``, which ends the job the same way when ccltune itself dies (kill -9).

A run ends when the job's top process exits: the guard then ends what the job left running (``sleep 20 &``),
and the output is read to the pipe's end, DRAIN_S at most. ``--run-timeout`` bounds the whole run.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccltune import profiler_plugin
from ccltune.ab import guard, steplines
from ccltune.errors import EngineUnavailable, UsageError
from ccltune.files import printable

TAIL_LINES = 12        # lines of the job's output kept for a failed run's report
MAX_LINE_BYTES = 1 << 16   # a longer line is read in pieces (the metric regex sees each piece)
MAX_SAMPLES = 1 << 20  # metric matches kept per run (a job printing more is still judged on these)
POLL_S = 0.1          # how often the reader looks whether the job's top process (its guard) has exited
DRAIN_S = 1.0         # after the guard exits, its output is read for this long at most (to the pipe's end)

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


MATCH_S = 5.0  # the most one line of the job's output may take the user's --metric REGEX (seconds)
# Python's re cannot be interrupted and holds the interpreter while it backtracks: '(a+)+$' or '(.*)*x' on
# one line of 60 characters runs for hours. The user's pattern runs in a worker process instead, one line at
# a time, and a line it cannot finish in MATCH_S ends the worker and the run with an error naming the line.
_WORKER = """import json, re, sys
p = re.compile(sys.argv[1], int(sys.argv[2]))
for text in sys.stdin:
    line = json.loads(text)
    sys.stdout.write(json.dumps([m.group(1) for m in p.finditer(line)]) + "\\n")
    sys.stdout.flush()
"""


class BoundedRegex:
    """The user's ``--metric`` pattern, matched in a worker process (``python -I``, the standard library
    only) with :data:`MATCH_S` per line; :meth:`close` ends the worker."""

    def __init__(self, pattern: re.Pattern[str]):
        self.pattern = pattern
        self.proc: subprocess.Popen[str] | None = None

    def groups(self, line: str) -> list[str | None]:
        """Group 1 of every match in ``line``; a UsageError when the match takes more than MATCH_S."""
        import select

        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-I", "-c", _WORKER, self.pattern.pattern,
                                          str(int(self.pattern.flags))], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, encoding="utf-8")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(line) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], MATCH_S)
        answer = self.proc.stdout.readline() if ready else ""
        if not answer:
            self.close()
            raise UsageError(f"--metric {printable(self.pattern.pattern, 60)!r} took more than {MATCH_S:g} s on one "
                             f"line of the job's output ({printable(line, 60)!r}, {len(line)} characters): the "
                             "pattern backtracks without bound (a repeat inside a repeat, '(a+)+' or '(.*)*'); "
                             "write it without the nested repeat")
        got = json.loads(answer)
        return [g if isinstance(g, str) else None for g in got]

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self.proc = None


def _number(text: str | None) -> float | None:
    """A matched number, read as the in-run step lines are (``12,345`` as torchtitan prints tokens/s is 12345)."""
    return None if text is None else steplines.number(text)


def _lines(fd: int, proc: subprocess.Popen[bytes], deadline: float | None) -> Iterator[bytes | None]:
    """The job's output lines (pieces of at most MAX_LINE_BYTES), read from ``fd`` until the guard ``proc``
    has exited and the pipe is drained; None once when ``deadline`` (time.monotonic) passes first. A writer
    left past the guard's exit (the guard ends the job's leftovers, so only one that escaped it) delays the
    end by DRAIN_S at most: the run is over when the job's top process is."""
    buf = b""
    drain_until: float | None = None
    timed_out = False
    while True:
        now = time.monotonic()
        if drain_until is None and proc.poll() is not None:
            drain_until = now + DRAIN_S
        if drain_until is not None and now >= drain_until:
            break
        if deadline is not None and not timed_out and now >= deadline:
            timed_out = True
            yield None
            continue
        limits = [POLL_S] + [x - now for x in (drain_until, None if timed_out else deadline) if x is not None]
        ready, _, _ = select.select([fd], [], [], max(0.0, min(limits)))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf or len(buf) >= MAX_LINE_BYTES:
            cut = buf.find(b"\n")
            cut = MAX_LINE_BYTES if cut < 0 or cut >= MAX_LINE_BYTES else cut + 1
            yield buf[:cut]
            buf = buf[cut:]
    if buf:
        yield buf


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
    matcher = BoundedRegex(pattern) if pattern is not None else None
    try:
        for raw in _lines(proc.stdout.fileno(), proc, start + timeout_s if timeout_s else None):
            if raw is None:  # --run-timeout: end it; what it still writes is read until the guard is gone
                timed_out = True
                guard.end_group(proc)
                continue
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail.append(line)
            if echo:
                print(f"  | {line}", flush=True)
            if matcher is not None and len(values) < MAX_SAMPLES:
                values.extend(v for v in map(_number, matcher.groups(line)) if v is not None)
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
