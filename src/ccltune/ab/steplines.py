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
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ccltune.ab import guard, output

TAIL_LINES = 12
MAX_STEPS = 1 << 20        # step lines kept from one run
BURST_LINES = 3            # a read that brings more step lines than this is a burst
# units whose bigger value is better: --better auto infers 'higher' when --metric names one of these
HIGHER_UNITS = re.compile(r"tps|tok(en)?s?/s|tok(en)?s?_per_s|samples?/s|seq(uence)?s?/s|it/s|img/s|images?/s|"
                          r"throughput|mfu|tflops", re.IGNORECASE)


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
    """Run ``argv`` once with ``env`` through ab's guard, stamping each step line: until the job's top process
    exits (the guard ends what it left running) or ``timeout_s`` has passed (the job's group ended then), its
    output read as whole ab reads it (``output.reads``), the metric matched with a time bound per line
    (``output.BoundedRegex``). A KeyboardInterrupt ends the job's process group and is raised again after it is
    gone."""
    start_ns, start = time.time_ns(), time.monotonic()
    guarded, guard_env = guard.command(os.getpid(), list(argv), {**env, "PYTHONUNBUFFERED": "1"})
    try:
        proc = subprocess.Popen(guarded, env=guard_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return JobOutput(None, 0.0, start_ns, start_ns, f"could not start {sys.executable!r}: {exc.strerror}")
    out = JobOutput(None, 0.0, start_ns, start_ns)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    assert proc.stdout is not None
    matcher = output.BoundedRegex(pattern)
    timed_out = False
    try:
        for lines in output.reads(proc.stdout.fileno(), proc, start + timeout_s if timeout_s else None):
            now = time.time_ns()
            if lines is None:  # --run-timeout: end it; what it still writes is read until the guard is gone
                timed_out = True
                guard.end_group(proc)
                continue
            got = 0
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
                tail.append(line)
                if echo:
                    print(f"  | {line}", flush=True)
                got += _match(out, matcher, line, now)
            if got > BURST_LINES:
                out.burst_steps += got
            out.largest_burst = max(out.largest_burst, got)
        proc.wait()
    except BaseException:
        guard.end_group(proc)
        raise
    finally:
        matcher.close()
        proc.stdout.close()
    out.end_ns, out.wall_s, out.exit_code, out.tail = time.time_ns(), time.monotonic() - start, proc.returncode, list(tail)
    rc = proc.returncode
    if timed_out:
        out.reason = f"ran past --run-timeout {timeout_s:g} s: ended"
    elif rc != 0:
        out.reason = f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}"
    return out


NCCL_VERSION = re.compile(r"NCCL version ([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,4})")


def _match(out: JobOutput, matcher: output.BoundedRegex, line: str, t_ns: int) -> int:
    if out.nccl_version is None and "NCCL version" in line:
        found = NCCL_VERSION.search(line)
        out.nccl_version = (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None
    got = 0
    for text in matcher.groups(line):
        v = output.number(text)
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
