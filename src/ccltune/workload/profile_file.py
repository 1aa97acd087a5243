"""Read ccltune's profiler files (``libnccl-profiler-ccltune.so``, ``CCLTUNE_PROFILE=DIR``), format
versions 1 and 2 as docs/profiler.md fixes them (and docs/workload.md, "ccltune's profiler files"). Pure
apart from :func:`read` and :func:`read_dir`, which only read bytes.

One file is one communicator of one process (version 2; version 1 has no ``# arms`` line, no
``# sums`` section, no ``arm`` column on the call lines and no ``arms`` count in the dropped line)::

    # ccltune-profile 2
    # host <host> pid <pid> comm <16 hex> rank <r> nranks <n> nnodes <m> abi <k> every <N>
    # timing <source> [reason...]
    # arms tuner (or: # arms none REASON)
    # columns kind op count datatype algo proto nchannels nwarps peer calls timed sum_us p10_us p50_us p90_us max_us
    coll AllReduce 65536 ncclBfloat16 RING LL 24 16 - 4608 4608 48672.000 10.100 10.500 11.200 266512.000
    # sums arm calls timed sum_us no_entry
    arm 0 4608 4608 48672.000 0
    # calls seq entry arm start_ns end_ns
    call 0 0 0 1732661234000000000 1732661234000010500
    # dropped entries <E> calls <C> arms <A>
    # end

A version 1 file reads as arm -1 throughout: every call line's arm is -1 and its one arm sum is
made from the entries (its ``no_entry`` unknown: None).

NCCL's names are turned into ccltune's: ``op`` into the registry name (AllReduce -> all_reduce;
Send and Recv stay ``send`` and ``recv``, one direction each), ``datatype`` into ccltune's spelling
(ncclBfloat16 -> bfloat16). A name this ccltune does not know (a newer NCCL's) is kept as
``nccl:<name>``, never guessed. ``-`` reads as None (the header's ``nranks`` and ``nnodes`` too:
profiler ABI v1-v3 do not give them).

Bounds (a number read from the file never sizes a loop or an allocation without one): at most
:data:`MAX_BYTES` bytes, :data:`MAX_LINES` lines of :data:`MAX_LINE_CHARS` characters,
:data:`MAX_ENTRIES` entries, :data:`MAX_CALL_LINES` call lines; integers of at most 20 digits;
:func:`read_dir` reads at most :data:`MAX_FILES` files. Every error is a :class:`UsageError`
naming ``file:line`` and the value. A file without ``# end`` was cut short (a copy stopped, a
disk filled): :func:`read` refuses it with ``strict=True``, else reads the complete lines and says
so in :attr:`ProfileFile.warnings` (its last line, when it has no newline, is dropped).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ccltune import collectives
from ccltune.datatypes import DTYPES
from ccltune.errors import UsageError
from ccltune.files import read_bytes, shown

MAGIC = "# ccltune-profile "
VERSIONS = (1, 2)
COLUMNS = ("kind op count datatype algo proto nchannels nwarps peer calls timed "
           "sum_us p10_us p50_us p90_us max_us")
CALLS_HEAD = {1: "# calls seq entry start_ns end_ns", 2: "# calls seq entry arm start_ns end_ns"}
SUMS_HEAD = "# sums arm calls timed sum_us no_entry"
ARM_SOURCES = ("tuner", "none")
NO_ARM = -1
NAME = re.compile(r"^ccltune-profile\.[^/]*\.txt$")
TIMING_SOURCES = ("gpu-kernel-channels", "host", "none")

MAX_BYTES = 64 << 20        # a file of 65,536 entries and 1M call lines is ~60 MB
MAX_LINES = 2_000_000
MAX_LINE_CHARS = 1024       # 16 tokens of at most 31 characters and the numbers: ~600
MAX_ENTRIES = 65_536        # the writer's table is fixed and far smaller
MAX_CALL_LINES = 1 << 20    # CCLTUNE_PROFILE_CALLS defaults to 4096
MAX_FILES = 16_384          # one per communicator per rank
MAX_NRANKS = 1 << 20
MAX_CHANNELS = 1024         # NCCL has at most 64 (MAXCHANNELS); room for later releases
MAX_WARPS = 1024
MAX_ARM = (1 << 31) - 1     # a C int from the tuner's arm_of
MAX_ARM_SUMS = 65           # the writer sums arms -1..63

_INT = re.compile(r"^[0-9]{1,20}$")
_ARM = re.compile(r"^(?:-1|[0-9]{1,10})$")
_FLOAT = re.compile(r"^[0-9]{1,20}(?:\.[0-9]{1,12})?$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_TOKEN = re.compile(r"^[!-~]{1,31}$")  # printable ASCII without blanks, at most 31 characters

# NCCL's ncclDatatypeToString names (src/collectives.cc) -> ccltune's spelling
_NCCL_DTYPES = {"ncclInt8": "int8", "ncclUint8": "uint8", "ncclInt32": "int32", "ncclUint32": "uint32",
                "ncclInt64": "int64", "ncclUint64": "uint64", "ncclFloat16": "half", "ncclFloat32": "float",
                "ncclFloat64": "double", "ncclBfloat16": "bfloat16", "ncclFloat8e4m3": "f8e4m3",
                "ncclFloat8e5m2": "f8e5m2"}
assert set(_NCCL_DTYPES.values()) <= set(DTYPES)
# NCCL's ncclFuncToString names -> ccltune's; Send and Recv are one direction each here (the
# profiler sees each half on its own), so they are named send and recv, not sendrecv
_P2P_OPS = {"Send": "send", "Recv": "recv"}


def op_name(nccl: str) -> str:
    """ccltune's name of NCCL's function name ``nccl``; ``nccl:<name>`` when it names none."""
    if nccl in _P2P_OPS:
        return _P2P_OPS[nccl]
    coll = collectives.BY_NCCL_NAME.get(nccl)
    return coll.name if coll is not None else f"nccl:{nccl}"


def datatype_name(nccl: str) -> str:
    """ccltune's spelling of NCCL's datatype name; ``nccl:<name>`` when it names none."""
    return _NCCL_DTYPES.get(nccl, f"nccl:{nccl}")


@dataclass(frozen=True)
class ProfileEntry:
    """One table line: the calls of one (kind, op, count, datatype, algo, proto, nchannels,
    nwarps, peer) key. Times are GPU microseconds per call over the ``timed`` calls (None when
    none was timed); p10/p50/p90 come from the writer's histogram (within 2%), max is exact."""

    kind: str                 # coll | p2p
    op: str                   # ccltune's name (all_reduce, ..., send, recv) or nccl:<name>
    count: int | None         # NCCL's element count
    datatype: str | None      # ccltune's spelling or nccl:<name>
    algo: str | None          # NCCL's: RING, TREE, NVLS, PAT, COLLNET_DIRECT, ...
    proto: str | None         # LL, LL128, SIMPLE
    nchannels: int | None
    nwarps: int | None
    peer: int | None          # p2p: the other rank
    calls: int                # calls seen
    timed: int                # calls timed (every Nth: the header's ``every``)
    sum_us: float | None
    p10_us: float | None
    p50_us: float | None
    p90_us: float | None
    max_us: float | None


@dataclass(frozen=True)
class ArmSum:
    """One arm's calls in one file: ``calls`` seen with the arm in force, ``timed`` of them, their GPU
    time (``sum_us``, host time under ABI v1-v3: see :attr:`ProfileFile.timing`), and ``no_entry``: the
    calls whose key found no room in the writer's table (counted, never timed; None: a version 1 file
    does not say)."""

    arm: int                  # the tuner's arm index; -1: none
    calls: int
    timed: int
    sum_us: float
    no_entry: int | None


@dataclass(frozen=True)
class ProfileFile:
    """One communicator of one process. ``calls``: (seq, entry index, start_ns, end_ns) of the
    first timed calls in issue order, GPU global-timer nanoseconds (comparable between the
    ranks of one node)."""

    path: str
    host: str
    pid: int
    comm: str                 # NCCL's commHash, 16 lower-case hex
    rank: int
    nranks: int | None        # None: not given (profiler ABI v1-v3 does not say)
    nnodes: int | None
    abi: int                  # the profiler ABI version NCCL loaded (1..6)
    every: int                # every Nth call timed
    timing: str               # gpu-kernel-channels | host | none
    entries: tuple[ProfileEntry, ...]
    calls: tuple[tuple[int, int, int, int], ...]
    dropped_entries: int
    dropped_calls: int
    timing_note: str = ""     # the words after the timing source (why no GPU timer)
    complete: bool = True     # False: no '# end' (read with strict=False)
    warnings: tuple[str, ...] = ()
    version: int = 1          # the file format's
    arm_source: str = "none"  # tuner: the tuner's arm share was found; none: every arm is -1
    arm_note: str = ""        # why there are no arms
    arm_sums: tuple[ArmSum, ...] = ()
    call_arms: tuple[int, ...] = ()   # the arm of each of ``calls``, in the same order
    dropped_arms: int = 0     # calls of an arm outside the writer's sums (-1..63): in no ArmSum


def read(path: str | Path, strict: bool = False) -> ProfileFile:
    """Read one profiler file (bounded: see the module doc). ``strict``: refuse a file without
    ``# end``, else read it with a warning."""
    raw = read_bytes(path, "FILE", limit=MAX_BYTES)
    return parse(raw, str(path), strict)


def names_in(path: str | Path) -> list[Path]:
    """The ``ccltune-profile.*.txt`` files in the folder ``path`` (not its subfolders), by name."""
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"{shown(str(folder))}: not a folder")
    names = []
    for p in folder.iterdir():
        if NAME.match(p.name):
            names.append(p)
            if len(names) > MAX_FILES:
                raise UsageError(f"{shown(str(folder))}: more than {MAX_FILES} profiler files")
    if not names:
        raise UsageError(f"{shown(str(folder))}: no ccltune-profile.*.txt files (was the job run with "
                         "NCCL_PROFILER_PLUGIN=<ccltune plugin path --profiler> and CCLTUNE_PROFILE set to it?)")
    return sorted(names)


def read_dir(path: str | Path, strict: bool = False) -> list[ProfileFile]:
    """Every ``ccltune-profile.*.txt`` in the folder ``path`` (not its subfolders), by name; a second file
    of one rank of one communicator (a copy under another name) is left out (:func:`unique`), and the file
    kept says so in its warnings."""
    kept, left_out = unique([read(p, strict) for p in names_in(path)])
    if left_out:
        kept[0] = replace(kept[0], warnings=kept[0].warnings + (left_out_line(left_out),))
    return kept


def identity(f: ProfileFile) -> tuple[str, int, str, int]:
    """What a profiler file is the record of: one rank (host, pid) of one communicator, whatever its name."""
    return (f.host, f.pid, f.comm, f.rank)


def unique(files: list[ProfileFile]) -> tuple[list[ProfileFile], list[str]]:
    """``files`` less the second and later file of one :func:`identity` (a copy, a folder given twice), and
    what was left out: 'B (rank 1 of communicator C, pid P on H, as A)'."""
    first: dict[tuple[str, int, str, int], str] = {}
    kept: list[ProfileFile] = []
    left_out: list[str] = []
    for f in files:
        who = identity(f)
        if who in first:
            left_out.append(f"{shown(f.path)} (rank {f.rank} of communicator {f.comm}, pid {f.pid} on {f.host}, "
                            f"as {shown(first[who])})")
            continue
        first[who] = f.path
        kept.append(f)
    return kept, left_out


LEFT_OUT = "left out, the same data given twice"


def left_out_line(left_out: list[str]) -> str:
    """The one line that says which inputs were the same data given twice, and left out."""
    return f"{LEFT_OUT}: {'; '.join(left_out)}"


def parse(raw: bytes, path: str, strict: bool = False) -> ProfileFile:
    """Parse a profiler file's bytes; ``path`` names it in errors."""
    if len(raw) > MAX_BYTES:
        raise UsageError(f"{path}: {len(raw)} bytes, more than a profiler file holds ({MAX_BYTES})")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: byte 0x{raw[exc.start]:02x} is not ASCII (not a profiler file, "
                         "or a damaged one)") from None
    lines = text.split("\n")
    if len(lines) > MAX_LINES + 1:
        raise UsageError(f"{path}: more than {MAX_LINES} lines")
    return _Parser(path, lines, text.endswith("\n"), strict).run()


class _Parser:
    """The file's sections in order: magic, header, timing, columns, entries, calls, dropped, end."""

    def __init__(self, path: str, lines: list[str], newline_end: bool, strict: bool) -> None:
        self.path, self.lines, self.newline_end, self.strict = path, lines, newline_end, strict
        self.no = 0
        self.version = 1
        self.head: dict[str, str] = {}
        self.timing, self.timing_note = "", ""
        self.arm_source, self.arm_note = "none", "format version 1 has no arms"
        self.entries: list[ProfileEntry] = []
        self.sums: list[ArmSum] = []
        self.calls: list[tuple[int, int, int, int]] = []
        self.call_arms: list[int] = []
        self.calls_per_entry: list[int] = []
        self.dropped: tuple[int, int, int] | None = None

    def fail(self, why: str) -> UsageError:
        return UsageError(f"{self.path}:{self.no}: {why}")

    def run(self) -> ProfileFile:
        lines, ended, warnings = self._lines_to_read()
        # 0 magic, 1 header, 2 timing, 3 arms (v2), 35 columns, 4 entries, 45 sums (v2), 5 calls, 6 dropped seen, 7 end
        stage = 0
        for self.no, line in enumerate(lines, start=1):
            line = line.rstrip("\r")
            if len(line) > MAX_LINE_CHARS:
                raise self.fail(f"a line of {len(line)} characters (at most {MAX_LINE_CHARS})")
            if stage == 7:
                if line.strip():
                    raise self.fail("text after '# end'")
                continue
            if stage == 0:
                self.version = self._magic(line)
                stage = 1
                continue
            if line.strip():
                stage = self._line(stage, line)
        if stage < 4 or stage == 35:
            self.no = len(lines)
            raise self.fail("the header is incomplete (magic, host, timing, arms and columns lines expected)")
        if ended and self.dropped is None:
            raise UsageError(f"{self.path}: no '# dropped entries E calls C' line before '# end'")
        return self._file(ended, warnings)

    def _lines_to_read(self) -> tuple[list[str], bool, list[str]]:
        """(the lines, whether '# end' is among them, warnings): a file cut short is refused when strict,
        else read up to its last whole line, and said so."""
        lines = self.lines
        if lines and lines[-1] == "":
            lines = lines[:-1]
        warnings: list[str] = []
        ended = any(line.rstrip("\r") == "# end" for line in lines)
        if not ended:
            if self.strict:
                self.no = len(lines)
                raise self.fail("the file ends without '# end': cut short (the job or a copy stopped mid-write)")
            last = ""
            if lines and not self.newline_end:
                last = f"; its last line, {len(lines)}, has no newline and was dropped"
                lines = lines[:-1]
            warnings.append(f"{self.path}: the file ends without '# end' (cut short): read its first "
                            f"{len(lines)} line(s){last}; entries or calls after them are missing")
        return lines, ended, warnings

    def _line(self, stage: int, line: str) -> int:
        """A line after the magic, not blank: what it says kept; the stage after it."""
        if stage in (1, 2, 3, 35):
            return self._head_line(stage, line)
        if line == "# end":
            return 7
        if line.startswith("# dropped"):
            if stage == 6:
                raise self.fail("a second '# dropped' line")
            self.dropped = self._dropped(line)
            return 6
        if line == SUMS_HEAD and self.version >= 2:
            if stage != 4:
                raise self.fail("'# sums' out of place (after the calls or '# dropped')")
            return 45
        if line == CALLS_HEAD[self.version]:
            if stage != (45 if self.version >= 2 else 4):
                raise self.fail("'# calls' out of place (before '# sums', after the calls or '# dropped')")
            return 5
        if not line.startswith("#"):  # a comment the writer added (the histogram's error, ...) is skipped
            self._body_line(stage, line)
        return stage

    def _head_line(self, stage: int, line: str) -> int:
        """The header's lines after the magic: host, timing, arms (v2), columns; the stage after it."""
        if stage == 1:
            self.head = self._header(line)
            return 2
        if stage == 2:
            parts = line.split()
            if parts[:2] != ["#", "timing"] or len(parts) < 3 or parts[2] not in TIMING_SOURCES:
                raise self.fail(f"expected '# timing <{'|'.join(TIMING_SOURCES)}> [reason]', got {line[:80]!r}")
            self.timing, self.timing_note = parts[2], " ".join(parts[3:])
            return 3 if self.version >= 2 else 35
        if stage == 3:
            parts = line.split()
            if parts[:2] != ["#", "arms"] or len(parts) < 3 or parts[2] not in ARM_SOURCES:
                raise self.fail(f"expected '# arms <{'|'.join(ARM_SOURCES)}> [reason]', got {line[:80]!r}")
            self.arm_source, self.arm_note = parts[2], " ".join(parts[3:])
            return 35
        if line.split() != ["#", "columns", *COLUMNS.split()]:
            raise self.fail(f"expected '# columns {COLUMNS}', got {line[:80]!r}")
        return 4

    def _body_line(self, stage: int, line: str) -> None:
        """An entry, an arm's sum or a call line, as the stage says."""
        if stage == 4:
            if len(self.entries) >= MAX_ENTRIES:
                raise self.fail(f"more than {MAX_ENTRIES} entries")
            nranks = self.head["nranks"]
            self.entries.append(self._entry(line, None if nranks == "-" else int(nranks)))
            self.calls_per_entry.append(0)
        elif stage == 45:
            if len(self.sums) >= MAX_ARM_SUMS:
                raise self.fail(f"more than {MAX_ARM_SUMS} arm sums")
            arm_sum = self._arm_sum(line)
            if any(a.arm == arm_sum.arm for a in self.sums):
                raise self.fail(f"a second sum of arm {arm_sum.arm}")
            self.sums.append(arm_sum)
        elif stage == 5:
            if len(self.calls) >= MAX_CALL_LINES:
                raise self.fail(f"more than {MAX_CALL_LINES} call lines")
            call, arm = self._call(line, self.entries)
            self.calls_per_entry[call[1]] += 1
            if self.calls_per_entry[call[1]] > self.entries[call[1]].timed:
                raise self.fail(f"more call lines for entry {call[1]} than its {self.entries[call[1]].timed} "
                                "timed calls")
            self.calls.append(call)
            self.call_arms.append(arm)
        else:
            raise self.fail(f"a line after '# dropped' that is not '# end': {line[:80]!r}")

    def _file(self, ended: bool, warnings: list[str]) -> ProfileFile:
        head, entries, sums = self.head, self.entries, self.sums
        if self.version == 1:  # no arms: arm -1 throughout, its sum from the entries
            timed = [e for e in entries if e.timed and e.sum_us is not None]
            sums = [ArmSum(NO_ARM, sum(e.calls for e in entries), sum(e.timed for e in timed),
                           sum(e.sum_us or 0.0 for e in timed), None)] if entries else []  # timed: each has one
        known = {k: None if head[k] == "-" else int(head[k]) for k in ("nranks", "nnodes")}
        dropped_entries, dropped_calls, dropped_arms = self.dropped or (0, 0, 0)
        return ProfileFile(self.path, head["host"], int(head["pid"]), head["comm"], int(head["rank"]),
                           known["nranks"], known["nnodes"], int(head["abi"]), int(head["every"]),
                           self.timing, tuple(entries), tuple(self.calls), dropped_entries, dropped_calls,
                           timing_note=self.timing_note, complete=ended, warnings=tuple(warnings),
                           version=self.version, arm_source=self.arm_source, arm_note=self.arm_note,
                           arm_sums=tuple(sums), call_arms=tuple(self.call_arms), dropped_arms=dropped_arms)

    def _magic(self, line: str) -> int:
        v = line[len(MAGIC):] if line.startswith(MAGIC) else None
        if v is None:
            raise self.fail(f"not a ccltune profiler file (first line is not '{MAGIC}<version>')")
        if not v.isdigit() or int(v) not in VERSIONS:
            raise self.fail(f"profiler file format version {v[:20]!r}, this ccltune reads "
                            f"{', '.join(map(str, VERSIONS))}")
        return int(v)

    def _int(self, text: str, what: str, lo: int = 0, hi: int = (1 << 64) - 1) -> int:
        if not _INT.match(text) or not lo <= int(text) <= hi:
            raise self.fail(f"{what} {text[:40]!r} is not an integer in [{lo}, {hi}]")
        return int(text)

    def _opt_int(self, text: str, what: str, lo: int = 0, hi: int = (1 << 64) - 1) -> int | None:
        return None if text == "-" else self._int(text, what, lo, hi)

    def _us(self, text: str, what: str) -> float | None:
        if text == "-":
            return None
        if not _FLOAT.match(text) or not math.isfinite(float(text)):
            raise self.fail(f"{what} {text[:40]!r} is not a non-negative decimal number of microseconds")
        return float(text)

    def _name(self, text: str, what: str) -> str | None:
        if text == "-":
            return None
        if not _TOKEN.match(text):
            raise self.fail(f"{what} {text[:40]!r} is not a name of at most 31 printable characters")
        return text

    def _header(self, line: str) -> dict[str, str]:
        keys = ("host", "pid", "comm", "rank", "nranks", "nnodes", "abi", "every")
        parts = line.split()
        if len(parts) != 1 + 2 * len(keys) or parts[0] != "#" or tuple(parts[1::2]) != keys:
            raise self.fail(f"expected '# {' '.join(k + ' <' + k + '>' for k in keys)}', got {line[:120]!r}")
        head = dict(zip(keys, parts[2::2]))
        self._name(head["host"], "host")
        self._int(head["pid"], "pid", 0, 1 << 32)
        if not _HEX16.match(head["comm"]):
            raise self.fail(f"comm {head['comm'][:40]!r} is not 16 lower-case hex digits")
        n = self._opt_int(head["nranks"], "nranks", 1, MAX_NRANKS)   # '-': the ABI does not say (v1-v3)
        self._int(head["rank"], "rank", 0, (n or MAX_NRANKS) - 1)
        self._opt_int(head["nnodes"], "nnodes", 1, n or MAX_NRANKS)
        self._int(head["abi"], "abi", 1, 99)
        self._int(head["every"], "every", 1, 1 << 32)
        return head

    def _entry(self, line: str, nranks: int | None) -> ProfileEntry:
        t = line.split()
        if len(t) != 16:
            raise self.fail(f"an entry line has 16 fields ({COLUMNS}), this one {len(t)}: {line[:120]!r}")
        if t[0] not in ("coll", "p2p"):
            raise self.fail(f"kind {t[0][:40]!r} is not coll or p2p")
        op = self._name(t[1], "op")
        if op is None:
            raise self.fail("op is '-'")
        dt = self._name(t[3], "datatype")
        calls = self._int(t[9], "calls")
        timed = self._int(t[10], "timed", 0, calls)
        times = [self._us(x, w) for x, w in zip(t[11:16], ("sum_us", "p10_us", "p50_us", "p90_us", "max_us"))]
        if timed == 0 and any(x is not None for x in times):
            raise self.fail("times given for an entry with no timed call")
        if timed and any(x is None for x in times):
            raise self.fail(f"{timed} timed calls but a time is '-'")
        if timed and not times[1] <= times[2] <= times[3]:  # type: ignore[operator]
            raise self.fail(f"percentiles out of order: p10 {t[12]} p50 {t[13]} p90 {t[14]}")
        return ProfileEntry(t[0], op_name(op), self._opt_int(t[2], "count"), None if dt is None else datatype_name(dt),
                            self._name(t[4], "algo"), self._name(t[5], "proto"),
                            self._opt_int(t[6], "nchannels", 0, MAX_CHANNELS), self._opt_int(t[7], "nwarps", 0, MAX_WARPS),
                            self._opt_int(t[8], "peer", 0, (nranks or MAX_NRANKS) - 1), calls, timed, *times)

    def _arm(self, text: str) -> int:
        if not _ARM.match(text) or int(text) > MAX_ARM:
            raise self.fail(f"arm {text[:40]!r} is not -1 or an integer in [0, {MAX_ARM}]")
        return int(text)

    def _arm_sum(self, line: str) -> ArmSum:
        t = line.split()
        if len(t) != 6 or t[0] != "arm":
            raise self.fail(f"expected 'arm <arm> <calls> <timed> <sum_us> <no_entry>', got {line[:120]!r}")
        arm = self._arm(t[1])
        if arm >= MAX_ARM_SUMS - 1:
            raise self.fail(f"a sum of arm {arm}: the writer sums arms -1..{MAX_ARM_SUMS - 2}")
        calls = self._int(t[2], "calls")
        timed = self._int(t[3], "timed", 0, calls)
        sum_us = self._us(t[4], "sum_us")
        if sum_us is None:
            raise self.fail("sum_us is '-'")
        return ArmSum(arm, calls, timed, sum_us, self._int(t[5], "no_entry", 0, calls - timed))

    def _call(self, line: str, entries: list[ProfileEntry]) -> tuple[tuple[int, int, int, int], int]:
        t = line.split()
        fields = "<seq> <entry> <start_ns> <end_ns>" if self.version == 1 else "<seq> <entry> <arm> <start_ns> <end_ns>"
        if len(t) != len(fields.split()) + 1 or t[0] != "call":
            raise self.fail(f"expected 'call {fields}', got {line[:120]!r}")
        seq = self._int(t[1], "seq")
        if not entries:
            raise self.fail("a call line, but the file has no entries")
        entry = self._int(t[2], "entry", 0, len(entries) - 1)
        arm = NO_ARM if self.version == 1 else self._arm(t[3])
        start, end = self._int(t[-2], "start_ns"), self._int(t[-1], "end_ns")
        if end < start:
            raise self.fail(f"end_ns {end} before start_ns {start}")
        return (seq, entry, start, end), arm

    def _dropped(self, line: str) -> tuple[int, int, int]:
        t = line.split()
        want = ["#", "dropped", "entries", "", "calls", ""] + (["arms", ""] if self.version >= 2 else [])
        if len(t) != len(want) or any(w and w != x for w, x in zip(want, t)):
            raise self.fail(f"expected '# dropped entries <E> calls <C>{' arms <A>' if self.version >= 2 else ''}', "
                            f"got {line[:80]!r}")
        arms = self._int(t[7], "dropped arms") if self.version >= 2 else 0
        return self._int(t[3], "dropped entries"), self._int(t[5], "dropped calls"), arms
