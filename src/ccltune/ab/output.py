"""A job's output under ``ccltune ab``, whole runs and in-run arms alike: its lines as each read brings them,
until the job's top process (ab's guard) has exited and the pipe is drained, bounded in line length and in time;
the numbers a metric matches (``12,345`` as torchtitan prints tokens/s reads as 12345); and the user's ``--metric``
pattern matched in a worker with a time bound per line (``BoundedRegex``)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator

from ccltune.errors import UsageError
from ccltune.files import printable

MAX_LINE_BYTES = 1 << 16   # a longer line is read in pieces (the metric regex sees each piece)
POLL_S = 0.1          # how often the reader looks whether the job's top process (its guard) has exited
DRAIN_S = 1.0         # after the guard exits, its output is read for this long at most (to the pipe's end)
_THOUSANDS = re.compile(r"[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?\Z")


def number(text: str | None) -> float | None:
    """A matched number: '95.81', '1e3', or with thousands separators as torchtitan prints tokens/s
    ('12,345', '1,234.5'); None when it is not a finite number (or there is no text)."""
    if text is None:
        return None
    t = text.strip()
    if _THOUSANDS.match(t):
        t = t.replace(",", "")
    try:
        v = float(t)
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


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



def reads(fd: int, proc: subprocess.Popen[bytes], deadline: float | None) -> Iterator[list[bytes] | None]:
    """The lines each read of the job's output brings (pieces of at most MAX_LINE_BYTES), from ``fd`` until the
    guard ``proc`` has exited and the pipe is drained; None once when ``deadline`` (time.monotonic) passes first.
    A writer left past the guard's exit (the guard ends the job's leftovers, so only one that escaped it) delays
    the end by DRAIN_S at most: the run is over when the job's top process is."""
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
        got = []
        while b"\n" in buf or len(buf) >= MAX_LINE_BYTES:
            cut = buf.find(b"\n")
            cut = MAX_LINE_BYTES if cut < 0 or cut >= MAX_LINE_BYTES else cut + 1
            got.append(buf[:cut])
            buf = buf[cut:]
        if got:
            yield got
    if buf:
        yield [buf]
