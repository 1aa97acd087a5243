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
MAX_ARMS = 64            # arms of one run (the plugin's table holds as many)
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

    def text(self) -> str:
        lines = [MAGIC, f"seed={self.seed}", f"warmup_blocks={self.warmup_blocks}",
                 f"block_periods={self.block_periods}", f"period={'auto' if self.period is None else self.period}",
                 f"max_blocks={self.max_blocks}", f"log={self.log}"]
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
           "arms", "calls"}


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
