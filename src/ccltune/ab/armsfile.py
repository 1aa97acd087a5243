"""In-run arms' two files (docs/ab.md "In-run arms"; the contract shared with the tuner plugin's C):
the arms file ccltune writes (``CCLTUNE_ARMS``) and the arm logs the plugin writes, one per
communicator per process, at finalize or exit (``ccltune-arms.<host>.<pid>.<commId>.<seq>.txt``).

Reading is bounded (STYLE 18): a log of at most ``MAX_LOG_BYTES``, ``MAX_BLOCKS`` block lines, ``MAX_ARMS``
arms; a bad line is an error naming the file and the line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ccltune.errors import DataError
from ccltune.files import write_text
from ccltune.inputs import INT64_MAX, MAX_LINE_CHARS, read_input_text

MAGIC = "# ccltune-arms 1"
LOG_GLOB = "ccltune-arms.*.txt"
MAX_LOG_BYTES = 64 << 20
MAX_BLOCKS = 1 << 20     # block lines of one log
MAX_ARMS = 32            # arms of one run (the tuner plugin's CCLT_ARMS_MAX)
# What the tuner plugin's arms-file parser accepts (plugin/src/arms.h; tests/plugin/test_arms.py reads them back
# from there): a file outside these is refused by the plugin, which then runs NCCL's default and writes no log
MAX_BLOCKS_FILE = 100_000    # CCLT_ARMS_MAX_BLOCKS: max_blocks
MAX_WARMUP = 100_000         # CCLT_ARMS_MAX_WARMUP: warmup_blocks
MAX_BLOCK_PERIODS = 100_000  # CCLT_ARMS_MAX_BLOCK_PERIODS: block_periods
MAX_PERIOD = 1 << 24         # CCLT_ARMS_MAX_PERIOD: period
MAX_LOGS = 1 << 16       # logs read from one folder: one per communicator per process
ARM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
_UINT = re.compile(r"[0-9]{1,20}\Z")


@dataclass(frozen=True)
class InRunArm:
    """One in-run arm: a rule file (absolute path), or None for a twin of NCCL's default (arm 0, the A/A)."""

    name: str
    rules: str | None = None


@dataclass(frozen=True)
class ArmsFile:
    """What ``CCLTUNE_ARMS`` names: the schedule's parameters and the arms, arm 0 NCCL's default."""

    seed: int
    warmup_blocks: int
    block_periods: int
    max_blocks: int
    log: str
    arms: tuple[InRunArm, ...]
    period: int | None = None     # tuner calls per step per communicator; None: found by the plugin
    step_calls: int | None = None  # period found by the plugin: raised to its multiple nearest to this (the
                                   # workload's calls per step; a decode loop's calls repeat every call)
    nranks: int | None = None      # arms only on communicators of this many ranks (the others: NCCL's default)

    def check(self) -> None:
        """A ValueError naming the field when the plugin would refuse this file (its limits above)."""
        for what, v, lo, hi in (("seed", self.seed, 0, (1 << 64) - 1), ("warmup_blocks", self.warmup_blocks, 0, MAX_WARMUP),
                                ("block_periods", self.block_periods, 1, MAX_BLOCK_PERIODS),
                                ("max_blocks", self.max_blocks, 0, MAX_BLOCKS_FILE),
                                ("period", 1 if self.period is None else self.period, 1, MAX_PERIOD),
                                ("step_calls", self.step_calls or 0, 0, MAX_PERIOD),
                                ("nranks", self.nranks or 1, 1, MAX_PERIOD),
                                ("arms", len(self.arms), 1, MAX_ARMS)):
            if not lo <= v <= hi:
                raise ValueError(f"the arms file's {what} must be {lo}..{hi} (the tuner plugin's limit), got {v}")
        bad = [a.name for a in self.arms if not ARM_NAME.match(a.name)]
        if bad or len({a.name for a in self.arms}) != len(self.arms):
            raise ValueError(f"arm names must be unique, of [A-Za-z0-9_.-], at most 64: {[a.name for a in self.arms]}")
        if self.arms[0].rules is not None:
            raise ValueError(f"arm 0 ({self.arms[0].name}) is NCCL's default: it takes no rule file")

    def text(self) -> str:
        self.check()
        lines = [MAGIC, f"seed={self.seed}", f"warmup_blocks={self.warmup_blocks}",
                 f"block_periods={self.block_periods}", f"period={'auto' if self.period is None else self.period}",
                 f"max_blocks={self.max_blocks}", f"log={self.log}"]
        if self.period is None and self.step_calls:
            lines.append(f"step_calls={self.step_calls}")
        if self.nranks:
            lines.append(f"nranks={self.nranks}")
        lines += [f"arm={a.name}" + (f" rules={a.rules}" if a.rules else "") for a in self.arms]
        return "\n".join(lines) + "\n"

    def write(self, path: str | Path) -> None:
        write_text(path, self.text(), flag="the arms file")


@dataclass(frozen=True)
class LoggedBlock:
    index: int
    arm: int
    first_call: int
    t_ns: int          # CLOCK_REALTIME when the block's first call was tuned


@dataclass
class ArmLog:
    """One communicator of one process (the header's fields; ``period`` None: never found)."""

    path: str
    host: str = ""
    pid: int = 0
    comm_id: str = "unknown"
    comm_seq: int = 0
    nranks: int = 0
    seed: int = 0
    period: int | None = None
    period_found_at: int | None = None
    block_calls: int = 0
    sequence_period: int | None = None  # period=auto: the calls' own period (``period`` is a multiple of it)
    step_calls: int = 0                 # the arms file's step_calls (0: not given)
    arms: tuple[str, ...] = ()
    calls: int = 0
    blocks: list[LoggedBlock] = field(default_factory=list)

    @property
    def communicator(self) -> str:
        """Logs of one communicator (every rank's) share this; an unknown id is its own."""
        return self.comm_id if self.comm_id != "unknown" else f"{self.host}:{self.pid}:{self.comm_seq}"


def _uint(text: str, where: str, what: str, high: int = INT64_MAX) -> int:
    if not _UINT.match(text) or int(text) > high:
        raise DataError(f"{where}: {what} must be an integer in 0..{high}, got {text[:40]!r}")
    return int(text)


_HEADER = {"host", "pid", "comm_id", "comm_seq", "nranks", "seed", "period", "period_found_at", "block_calls",
           "sequence_period", "step_calls", "arms", "calls"}


def parse_log(text: str, path: str) -> ArmLog:
    """One arm log's text (module doc); a DataError names ``path`` and the line of anything wrong."""
    log = ArmLog(path)
    lines = text.split("\n")
    if not lines or lines[0].strip() != MAGIC:
        raise DataError(f"{path}: not an arm log of ccltune's tuner plugin (its first line is not {MAGIC!r})")
    ended = False
    for no, raw in enumerate(lines[1:], 2):
        line = raw[:MAX_LINE_CHARS].strip()
        where = f"{path}:{no}"
        if not line:
            continue
        if line == "# end":
            ended = True
            break
        if line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        if eq and key in _HEADER:
            _header(log, key, value, where)
            continue
        parts = line.split(",")
        if len(parts) != 4:
            raise DataError(f"{where}: expected 'block,arm,first_call,t_ns' or a KEY=VALUE header, got {line[:80]!r}")
        if len(log.blocks) >= MAX_BLOCKS:
            raise DataError(f"{where}: more than {MAX_BLOCKS} blocks in one log")
        b = LoggedBlock(*(_uint(p, where, n) for p, n in zip(parts, ("block", "arm", "first_call", "t_ns"))))
        if log.arms and b.arm >= len(log.arms):
            raise DataError(f"{where}: block {b.index} names arm {b.arm}, but the log has {len(log.arms)} arms")
        if log.blocks and b.index != log.blocks[-1].index + 1:
            raise DataError(f"{where}: block {b.index} follows block {log.blocks[-1].index}")
        log.blocks.append(b)
    if not ended:
        raise DataError(f"{path}: no '# end' line: the file is cut short")
    return log


def _header(log: ArmLog, key: str, value: str, where: str) -> None:
    if key == "host":
        log.host = value[:256]
    elif key == "comm_id":
        if value != "unknown" and not re.fullmatch(r"0x[0-9a-fA-F]{16}", value):
            raise DataError(f"{where}: comm_id must be 0x and 16 hex digits or 'unknown', got {value[:40]!r}")
        log.comm_id = value.lower()
    elif key == "arms":
        names = tuple(value.split(","))
        if len(names) > MAX_ARMS or not all(ARM_NAME.match(n) for n in names):
            raise DataError(f"{where}: arms must be at most {MAX_ARMS} names of [A-Za-z0-9_.-], got {value[:80]!r}")
        log.arms = names
    elif key in ("period", "period_found_at", "block_calls") and value == "none":  # no period found
        setattr(log, key, 0 if key == "block_calls" else None)
    elif key in ("period", "period_found_at"):
        setattr(log, key, None if value == "none" else _uint(value, where, key))
    else:
        setattr(log, key, _uint(value, where, key, (1 << 64) - 1 if key == "seed" else INT64_MAX))


def read_logs(folder: str | Path) -> list[ArmLog]:
    """Every arm log in ``folder``, in name order."""
    paths = sorted(Path(folder).glob(LOG_GLOB))
    if len(paths) > MAX_LOGS:
        raise DataError(f"{folder}: more than {MAX_LOGS} arm logs")
    return [parse_log(read_input_text(str(p), "an arm log", limit=MAX_LOG_BYTES), str(p)) for p in paths]
