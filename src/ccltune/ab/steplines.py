"""The job's own step lines under in-run arms (docs/ab.md "In-run arms"): its output read as it arrives,
each line stamped with CLOCK_REALTIME on arrival (the clock the tuner plugin stamps its blocks with), the
numbers ``--metric`` matches kept with their stamps.

A pipe makes a child's stdout block-buffered: its lines then arrive in bursts, many in one read, and
their stamps say when the buffer was flushed, not when each step ended. The job gets PYTHONUNBUFFERED=1
(a Python job's print flushes each line); a job in another language needs ``stdbuf -oL`` or a pty. The
reader counts the step lines each read brings: ``buffered`` says when most came in bursts."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ccltune.ab import guard as jobguard

TAIL_LINES = 12
READ_BYTES = 1 << 16
MAX_LINE_BYTES = 1 << 16   # a longer line is cut there
MAX_STEPS = 1 << 20        # step lines kept from one run
BURST_LINES = 3            # a read that brings more step lines than this is a burst
_THOUSANDS = re.compile(r"[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?\Z")
# units whose bigger value is better: --better auto infers 'higher' when --metric names one of these
HIGHER_UNITS = re.compile(r"tps|tok(en)?s?/s|tok(en)?s?_per_s|samples?/s|seq(uence)?s?/s|it/s|img/s|images?/s|"
                          r"throughput|mfu|tflops", re.IGNORECASE)


def number(text: str) -> float | None:
    """A matched number: '95.81', '1e3', or with thousands separators as torchtitan prints tokens/s
    ('12,345', '1,234.5'); None when it is not a finite number."""
    t = text.strip()
    if _THOUSANDS.match(t):
        t = t.replace(",", "")
    try:
        v = float(t)
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


@dataclass(frozen=True)
class StepLine:
    t_ns: int          # CLOCK_REALTIME when its line arrived
    value: float


@dataclass
class JobOutput:
    exit_code: int | None
    wall_s: float
    start_ns: int
    end_ns: int                     # CLOCK_REALTIME when the output ended
    reason: str = ""                # why the run failed; '' when it exited 0
    steps: list[StepLine] = field(default_factory=list)
    burst_steps: int = 0            # step lines that came in a read bringing more than BURST_LINES
    largest_burst: int = 0
    tail: list[str] = field(default_factory=list)
    nccl_version: tuple[int, int, int] | None = None   # from NCCL's 'NCCL version X.Y.Z' line, when printed

    @property
    def buffered(self) -> bool:
        """Most step lines came in bursts: the job's stdout is block-buffered."""
        return len(self.steps) >= 2 * BURST_LINES and self.burst_steps > len(self.steps) / 2


def run(argv: Sequence[str], env: Mapping[str, str], pattern: re.Pattern[str], *, echo: bool = False,
        timeout_s: float | None = None) -> JobOutput:
    """Run ``argv`` once with ``env`` through ab's guard (``jobguard``), stamping each step line. A
    KeyboardInterrupt ends the job's process group and is raised again after it is gone."""
    start_ns, start = time.time_ns(), time.monotonic()
    guarded, guard_env = jobguard.command(os.getpid(), list(argv), {**env, "PYTHONUNBUFFERED": "1"})
    try:
        proc = subprocess.Popen(guarded, env=guard_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return JobOutput(None, 0.0, start_ns, start_ns, f"could not start {sys.executable!r}: {exc.strerror}")
    out = JobOutput(None, 0.0, start_ns, start_ns)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    timer = threading.Timer(timeout_s, jobguard.end_group, (proc,)) if timeout_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    assert proc.stdout is not None
    fd, pending = proc.stdout.fileno(), b""
    try:
        while True:
            chunk = os.read(fd, READ_BYTES)
            now = time.time_ns()
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            if len(pending) > MAX_LINE_BYTES:
                lines.append(pending[:MAX_LINE_BYTES])
                pending = b""
            got = 0
            for raw in lines:
                line = raw[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r")
                tail.append(line)
                if echo:
                    print(f"  | {line}", flush=True)
                got += _match(out, pattern, line, now)
            if got > BURST_LINES:
                out.burst_steps += got
            out.largest_burst = max(out.largest_burst, got)
        if pending:
            tail.append(pending.decode("utf-8", "replace"))
            _match(out, pattern, pending.decode("utf-8", "replace"), time.time_ns())
        proc.wait()
    except BaseException:
        jobguard.end_group(proc)
        raise
    finally:
        if timer is not None:
            timer.cancel()
        proc.stdout.close()
    out.end_ns, out.wall_s, out.exit_code, out.tail = time.time_ns(), time.monotonic() - start, proc.returncode, list(tail)
    rc = proc.returncode
    if timeout_s is not None and out.wall_s >= timeout_s and rc != 0:
        out.reason = f"ran past --run-timeout {timeout_s:g} s: ended"
    elif rc != 0:
        out.reason = f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}"
    return out


NCCL_VERSION = re.compile(r"NCCL version ([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,4})")


def _match(out: JobOutput, pattern: re.Pattern[str], line: str, t_ns: int) -> int:
    if out.nccl_version is None and "NCCL version" in line:
        found = NCCL_VERSION.search(line)
        out.nccl_version = (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None
    got = 0
    for m in pattern.finditer(line):
        v = number(m.group(1))
        if v is not None and len(out.steps) < MAX_STEPS:
            out.steps.append(StepLine(t_ns, v))
            got += 1
    return got


def direction(metric: str, better: str) -> tuple[bool, str]:
    """(higher is better, the header's words for it) of ``--metric`` REGEX and ``--better``."""
    if better != "auto":
        return better == "higher", f"{better} is better (--better {better})"
    m = HIGHER_UNITS.search(metric)
    if m:
        return True, f"higher is better (inferred from {m.group(0)!r} in --metric; --better lower says otherwise)"
    return False, "lower is better (a time; --better higher for a throughput such as tokens/s)"
