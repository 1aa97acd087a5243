"""nccl-tests and rccl-tests output -> measurement rows (pure: text in, records out).

Supported inputs (nccl-tests 2.13 to 2.19; rccl-tests from 2022-10, whose lines are listed at
``_RANK_RE``, ``_SHAPE_RE`` and ``_META_RES`` with the source they come from):

- **Text table** (stdout of ``*_perf``): ``#`` header lines, a column header
  ``#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong``
  (out-of-place block, then in-place block; extra per-block columns such as ``#bitdiff`` or
  ``i_min`` and a trailing timestamp are tolerated, the header says where each block starts),
  data rows, and the ``# Avg bus bandwidth`` footer. A file without the footer is truncated.
- **JSON** written by ``-J FILE`` (nccl-tests' writer, ``version`` 3): ``args`` (argv, the
  program name names the collective), ``nccl_version`` (int), ``config`` (``graph``,
  ``devices`` list with ``rank``/``hostname``/``device_info``), ``results`` (objects with
  ``size``, ``count``, ``type``, ``redop``, ``root`` and ``out_of_place``/``in_place`` objects
  holding ``time`` (or ``cpu_time``) µs, ``alg_bw``, ``bus_bw``, ``nwrong`` (null = unchecked)),
  and ``average_bus_bandwidth`` at the end (its absence = truncated).

A text file may hold several runs (``cat all_reduce.txt all_gather.txt``): a run's preamble
(``# nccl-tests version``, ``# Collective test starting``, ``# nThread``, the device list) or column
header after the previous run's table starts the next run, and each run's rows take their facts
(collective, nRanks, graph, NCCL version) from their own header only. rccl-tests' in-place-only table
(``-O 0``: one block) gives in-place rows only. Lines without '#' that RCCL or NCCL print between the
header lines (version banner, log lines) are read for the environment or skipped.

The collective comes from ``# Collective test starting: all_reduce_perf`` (or the JSON argv),
else ``--collective``, else the file name (a file of one run only); ``--collective`` that
contradicts the header is refused. nRanks from the ``#  Rank N ...`` device lines (nNodes =
distinct host names). ``N/A`` in ``#wrong`` means unchecked; ``#wrong`` > 0 stores the row with
status 'error' so it never feeds a rule. A time of ``nan`` (or ``N/A``) is stored the same way,
as unmeasured, and so is a time of 0 on a 0-byte row (rounded). A value nccl-tests never prints
(a negative size or count, a time of ``inf``, below 0 or 0 on a row with bytes, a negative or
infinite bandwidth or #wrong, a root outside the ranks) and, in JSON, a field of the wrong type
refuse the whole file, naming the file and the line or the field's path: nothing is stored.
In-place rows get ``in_place=True``. ccltune's own table explains its N/A cells in note lines
(``#  from 8 B, out-of-place: WAIVED: why``): those cells come back with that status and reason.
In -J JSON an unmeasured block is null, as nccl-tests writes it, and is not imported.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccltune import collectives, datatypes
from ccltune.commconfig import CommConfig
from ccltune.diagnose.parsers import rcclversion
from ccltune.tune import ncclt_infer
from ccltune.errors import UsageError, unknown_name
from ccltune.files import printable
from ccltune.inputs import MAX_CALL_BYTES, MAX_COUNT, MAX_LINE_CHARS, MAX_RANKS
from ccltune.status import RowStatus
from ccltune.store import Measurement

_START_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
# nccl-tests 2.13+: "#  Rank %2d Group %2d Pid %6d on %10s device %2d [bus] %s" (bus "0x%02x" in 2.13,
# "%04x:%02x:%02x" from 2.17); rccl-tests: "#   Rank %2d Pid %6d on %10s device %2d [%s] %s" (no Group).
_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
                      r"\s+\[([^\]]*)\]\s*(.*)$")
# nccl-tests: "# nThread 1 nGpus 8 minBytes ..."; rccl-tests 2022: "# nThread: 1 nGpus: 1 minBytes: ...",
# 2022-10..2024-02: "# nThreads: 1 nGpus: 1 nRanks: 2 minBytes: ..." (nRanks: ranks per GPU, -R)
_SHAPE_RE = re.compile(r"^#\s*nThreads?:?\s+(\d+)\s+nGpus:?\s+(\d+)(?:\s+nRanks:?\s+(\d+))?")
_GRAPH_RE = re.compile(r"\bgraph:\s*(\d+)")
_VERSION_RE = re.compile(r"nccl-library=(\d+)")
_TESTS_VERSION_RE = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_RUN_START_RE = re.compile(r"^#\s*(nccl-tests version\b|Collective test starting:|nThreads?:?\s|Using devices)")
# rccl-tests' own version line (common.cu "rccl-tests: Version %s", from 2024-03); RCCL's version block
# (diagnose.parsers.rcclversion) fills rccl_version, hip_version, rocm_version, hostname, library_path
_TESTS_VERSION_LINE = re.compile(r"^rccl-tests: Version\s+(.+?)\s*$")
# other lines a run's output may hold between its own: NCCL/RCCL log lines, nccl-tests' notices
_NOISE_RE = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b|^Option -|^invalid option|^#|^\S+: Test timeout")
# nccl-tests' NCCLCHECK/CUDACHECK line (common.h: "%s: Test NCCL failure %s:%d '%s / %s'", host, file, line,
# ncclGetErrorString, ncclGetLastError), after a row's preamble when the failure came while timing it, and
# TESTCHECK's trace lines under it (" .. %s pid %d: Test failure %s:%d"): the run stopped there
_FAILURE_RE = re.compile(r"^(?P<head>.*?): Test (?P<lib>NCCL|CUDA) failure (?P<at>\S+) '(?P<msg>.*)'$")
# ccltune's own note under a row whose cells are N/A (output.notes): "#  from 4096 B, out-of-place: WAIVED: why";
# it tells the status and reason of that placement's N/A cells from that size on
_CELL_NOTE_RE = re.compile(r"^#  from (\d+) B, (out-of-place|in-place): (WAIVED|SKIPPED|UNAVAILABLE|ERROR): (.+)$")
_PREAMBLE_WIDTH = 52  # writeBenchmarkLinePreamble: "%12li  %12li  %8s  %6s  %6s", the host name glued after it
_TRACE_RE = re.compile(r"^ \.\. \S+ pid \d+: Test failure ")
_OP_ORDER = ("sum", "prod", "max", "min", "avg", "mulsum")  # nccl-tests' -o all order (common.cu test_opnames)
_FOOTER = "# Avg bus bandwidth"
_TIME_COLS = ("time", "cputime")
_UNMEASURED = ("n/a", "nan")  # what nccl-tests prints for a value it has not got
# what a time, bandwidth ('bw') or #wrong must be, for error messages
_EXPECT = {"time": "a positive number of microseconds", "bw": "a non-negative number",
           "wrong": "a non-negative integer"}
_INT64_MAX = (1 << 63) - 1  # the database's integers
_REDOPS = (*datatypes.OPS, "none", "-")  # nccl-tests' test_opnames, "none" for a collective without one


@dataclass
class Parsed:
    """One nccl-tests run: its rows and what its header says (a text file may hold several runs)."""

    path: str
    collective: str
    n_ranks: int
    n_nodes: int
    rows: list[Measurement]
    gpus: list[str] = field(default_factory=list)  # model name per rank, when listed
    hosts: list[str] = field(default_factory=list)
    nccl_version: str | None = None
    line: int = 1  # where the run starts in its file
    # what else the output says about its environment: tool and tool_version, rccl_version,
    # hip_version, rocm_version, hostname, library_path, devices (rank, host, pid, device, bus_id, name)
    env: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how the file was read (a collective told from the table)


class _Bad(Exception):
    """A cell nccl-tests would never print; the message names it, the caller adds file and line."""


def _fail(path: str, line: int | None, why: str) -> UsageError:
    return UsageError(f"{path}:{line}: {why}" if line else f"{path}: {why}")


def _nccl_version(code: int) -> str:
    """22809 -> '2.28.9' (NCCL_VERSION_CODE = major*10000 + minor*100 + patch)."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def _lookup(name: str, where: str) -> str:
    """A collective's registry name. Offers no 'all': a run measures one collective."""
    if name.strip().lower() != "all":
        try:
            return collectives.get(name, where).name
        except UsageError:
            pass
    raise unknown_name("collective", name, collectives.REGISTRY, where)


def _collective(program: str | None, source: str, where: str, override: str | None, by_name: str | None) -> str:
    """The run's collective: the program that ``source`` (the header, at ``where``) names, else
    ``--collective``, else the file name ``by_name`` (None when the file holds several runs).
    ``--collective`` must agree with a header that names a known collective."""
    forced = _lookup(override, "--collective") if override else None
    if program:
        try:
            named = _lookup(program.rsplit("/", 1)[-1], f"{where} ({source})")
        except UsageError:
            if forced:  # a program ccltune does not know (a renamed binary): --collective says
                return forced
            raise
        if forced and forced != named:
            raise UsageError(f"{where}: --collective {override}, but {source} says {program}")
        return named
    if forced:
        return forced
    if by_name:
        stem = by_name.rsplit("/", 1)[-1].lower()
        for c in sorted(collectives.REGISTRY, key=len, reverse=True):  # reduce_scatter before reduce
            if c in stem:
                return c
        raise UsageError(f"{where}: cannot tell the collective (no 'Collective test starting' line, none in the"
                         " file name); pass --collective")
    raise UsageError(f"{where}: no 'Collective test starting' line, and the file holds several runs, so its name"
                     " cannot tell the collective; pass --collective")


@dataclass
class _Shape:
    """What a run's header says about its ranks: the ``#  Rank`` lines (rank -> (host, pid, model)),
    the ``nThread``/``nGpus`` (and rccl-tests' ``nRanks``) line, and whether lines were elided
    (nccl-tests cuts one process's device list at 2048 bytes and ends it with '...'); rccl-tests
    2022-10..2024-02 prints ``nRanks``, its ranks per GPU."""

    ranks: dict[int, tuple[str, int, str]] = field(default_factory=dict)
    threads: int | None = None
    gpus: int | None = None
    per_gpu: int | None = None
    elided: bool = False
    colors: dict[int, int] = field(default_factory=dict)  # rank -> its 'Group' (NCCL_TESTS_SPLIT's color)
    where: dict[int, str] = field(default_factory=dict)  # rank -> where its line is ('f:12', 'f: "config..."')
    shape_at: str = ""  # where the nThread line is

    def group_ranks(self) -> list[int] | None:
        """The ranks of the lowest rank's group when the ranks were split into several groups
        (NCCL_TESTS_SPLIT: the rows' sizes and busbw are that group's); None when not split, or when
        the device list was cut (its groups cannot be counted)."""
        if len(set(self.colors.values())) < 2 or self.elided:
            return None
        first = self.colors[min(self.colors)]
        return [r for r, c in sorted(self.colors.items()) if c == first]

    def implied(self) -> int:
        """The ranks: the N rank lines listed (ranks 0..N-1, :func:`_check_ranks`); when the list was
        cut ('...'), nThread x nGpus (x rccl-tests' ranks per GPU) x processes (one process per
        distinct host and Pid), never fewer than listed. No rank number read sizes anything."""
        if not self.elided:
            return len(self.ranks)
        procs = len({(h, pid) for h, pid, _ in self.ranks.values()})
        per_proc = (self.threads or 1) * (self.gpus or 1) * (self.per_gpu or 1)
        return max(len(self.ranks), per_proc * procs)


def _check_ranks(path: str, line: int | None, shape: _Shape) -> None:
    """Rank lines name the ranks 0..N-1 of the N listed (any of 0..n-1 of a cut list); at most MAX_RANKS."""
    n = shape.implied()
    if n > MAX_RANKS:
        raise UsageError(f"{shape.shape_at or path}: {n} ranks (nThread x nGpus x processes, the rank list cut): "
                         f"more than the {MAX_RANKS} ccltune reads")
    if bad := [r for r in sorted(shape.ranks) if r >= n]:
        raise UsageError(f"{shape.where[bad[0]]}: rank {bad[0]}, but the file lists {len(shape.ranks)} rank lines"
                         f"{' (cut)' if shape.elided else ''}: ranks are 0..{n - 1}")


def _ranks(path: str, line: int | None, shape: _Shape, nranks: int | None) -> tuple[int, int]:
    _check_ranks(path, line, shape)
    hosts = len({h for h, _, _ in shape.ranks.values()})
    if nranks is not None:
        if shape.ranks and shape.implied() != nranks:
            raise _fail(path, line, f"--nranks {nranks} but the file lists {shape.implied()} ranks")
        return nranks, hosts or 1
    if not shape.ranks:
        raise _fail(path, line, "no '#  Rank N ...' device lines; pass --nranks")
    if (group := shape.group_ranks()) is not None:  # parallel groups: a row is rank 0's group's
        return len(group), len({shape.ranks[r][0] for r in group if r in shape.ranks}) or 1
    return shape.implied(), hosts or 1


def _mark_groups(shape: _Shape, env: dict[str, Any]) -> None:
    """Split runs (NCCL_TESTS_SPLIT): every rank's color in the environment, as ``ccltune bench`` stores it."""
    if shape.group_ranks() is not None:
        colors = [shape.colors[r] for r in sorted(shape.colors)]
        env["groups"] = {"colors": colors, "count": len(set(colors))}


def _possible(value: float | None, kind: str, size: int) -> bool:
    """Whether nccl-tests could print ``value`` as a time, bandwidth ('bw') or #wrong of a row of
    ``size`` bytes. None (unmeasured) always could."""
    if value is None:
        return True
    if not math.isfinite(value) or value < 0:
        return False
    if kind == "time":
        return value > 0 or size == 0  # only an empty transfer can round to 0.00 us
    return kind != "wrong" or (value == int(value) and value <= _INT64_MAX)


def _int_cell(cell: str, what: str, low: int = 0, high: int = _INT64_MAX) -> int:
    """A size, count or root cell: an integer in low..high."""
    try:
        value: int | None = int(cell)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        expect = f"-1 or a rank in 0..{high}" if low == -1 else "a non-negative integer"
        raise _Bad(f"bad {what} {cell!r}: must be {expect}")
    return value


def _name_cell(cell: str, what: str, names: Any) -> None:
    """A type or redop cell: only what nccl-tests prints (a formula or escape never reaches a database)."""
    if cell not in names:
        raise _Bad(f"bad {what} {printable(cell, 40)!r}: must be one of nccl-tests' {what}s ({', '.join(names)})")


def _number_cell(cell: str, what: str, kind: str, size: int) -> float | None:
    """A time, bandwidth or #wrong cell: None for N/A or nan (printf may write '-nan')."""
    if cell.lower().lstrip("+-") in _UNMEASURED:
        return None
    try:
        value: float | None = float(cell)
    except ValueError:
        value = None
    if kind == "time" and value == 0:
        # the table's 0.00 (%.2f): under 5 ns a call, e.g. one rank's in-place call in a CUDA graph,
        # which NCCL turns into nothing (fixtures/nccl-tests/*inplace_zero.txt); kept as "time 0"
        return value
    if value is None or not _possible(value, kind, size):
        raise _Bad(f"bad {what} {cell!r}: must be {_EXPECT[kind]}")
    return value


def _row(collective: str, size: int, count: int, dtype: str, redop: str, root: int, n_ranks: int,
         n_nodes: int, cand: CommConfig, graph: int, in_place: bool, time_us: float | None,
         algbw: float | None, busbw: float | None, wrong: float | None) -> Measurement:
    status, note = RowStatus.OK, None
    if time_us is None:
        status, note = RowStatus.ERROR, "time N/A"
    elif time_us <= 0:  # an empty transfer, rounded
        status, note = RowStatus.ERROR, "time 0"
    elif wrong:
        status, note = RowStatus.ERROR, f"#wrong {wrong:g}"
    return Measurement(
        collective, size, count, dtype, None if redop in ("none", "-") else redop, None if root < 0 else root,
        in_place, n_ranks, time_us=time_us, algbw_gbps=algbw, busbw_gbps=busbw,
        wrong=None if wrong is None else int(wrong), status=status, note=note, n_nodes=n_nodes,
        algo=cand.algo, proto=cand.proto, channels=cand.channels, config=cand.label, graph=graph,
    )


def _failure_rows(m: re.Match, before: list[Measurement], path: str, lineno: int, coll: str, n_ranks: int,
                  n_nodes: int, cand: CommConfig, graph: int, places: tuple[bool, ...]) -> list[Measurement]:
    """An NCCL or CUDA failure line: error rows (both placements) for the combination that failed, named
    by the row preamble printed before it, else the one nccl-tests runs after the last row's (-o all: the
    next op; after mulsum, or without -o all, the next datatype of -d all at the same sizes). The note
    names the library, nccl-tests' source line and the message."""
    msg, last = m.group("msg").rsplit(" / ", 1) if " / " in m.group("msg") else (m.group("msg"), "")
    note = f"{m.group('lib')} failure at {m.group('at')}: {msg}" + (f": {last}" if last else "")
    head = m.group("head")
    pre = head[:_PREAMBLE_WIDTH].split() if len(head) > _PREAMBLE_WIDTH else []
    try:
        if len(pre) == 5:
            combos = [(_int_cell(pre[0], "size"), _int_cell(pre[1], "count"), pre[2], pre[3],
                       _int_cell(pre[4], "root", -1, n_ranks - 1))]
        elif before:
            combos = _next_combination(before)
        else:
            raise _Bad("a failure before any row: nothing tells which combination failed")
    except _Bad as exc:
        raise _fail(path, lineno, str(exc)) from None
    rows = [_row(coll, size, count, dtype, op, root, n_ranks, n_nodes, cand, graph, in_place, None, None, None, None)
            for size, count, dtype, op, root in combos for in_place in places]
    for r in rows:
        r.note = note
    return rows


def _next_combination(before: list[Measurement]) -> list[tuple[int, int, str, str, int]]:
    """The (size, count, type, op, root) rows of the combination nccl-tests runs after the last one."""
    last = before[-1]
    same = [r for r in before if (r.dtype, r.op) == (last.dtype, last.op) and not r.in_place]
    ops_seen = [r.op for r in before if r.dtype == last.dtype]
    op, dtype = last.op, last.dtype
    if op in _OP_ORDER and len(set(ops_seen)) > 1 and op != _OP_ORDER[-1]:
        op = _OP_ORDER[_OP_ORDER.index(op) + 1]
    else:
        names = [d.name for d in datatypes.dtypes("all")]
        if dtype not in names or dtype == names[-1]:
            raise _Bad("a failure after the last datatype: nothing tells which combination failed")
        dtype = names[names.index(dtype) + 1]
        op = _OP_ORDER[0] if len(set(ops_seen)) > 1 else op
    scale = datatypes.dtype(last.dtype).size / datatypes.dtype(dtype).size
    return [(r.size_bytes, int(r.count * scale), dtype, op or "none", -1 if r.root is None else r.root) for r in same]


def _is_columns(line: str) -> bool:
    return line.startswith("#") and line[1:].split()[:2] == ["size", "count"]


def _split_runs(text: str) -> list[list[tuple[int, str]]]:
    """The non-blank lines (number, text), one list per run: after a run's column header, a
    preamble line, a device line or another column header starts the next run."""
    runs: list[list[tuple[int, str]]] = [[]]
    table = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw[:MAX_LINE_CHARS].rstrip()  # no nccl-tests line is longer: a regex reads at most this much
        if not line.strip():
            continue
        if table and line.startswith("#") and (_RUN_START_RE.match(line) or _RANK_RE.match(line)
                                               or _is_columns(line)):
            runs.append([])
            table = False
        table = table or _is_columns(line)
        runs[-1].append((lineno, line))
    return runs


def parse_text(text: str, path: str, *, candidate: CommConfig = CommConfig(), collective: str | None = None,
               nranks: int | None = None) -> list[Parsed]:
    """Parse nccl-tests' text output: one Parsed per run in the file, in order (one, unless runs were
    concatenated). Raises UsageError naming ``path:line`` on bad content; nothing is returned then."""
    runs = _split_runs(text)
    return [_parse_run(lines, path, candidate, collective, nranks, len(runs) > 1) for lines in runs]


def _meta(line: str, env: dict[str, Any]) -> bool:
    """Store what an rccl-tests/RCCL line without '#' says (first value wins); False if it says nothing."""
    if m := _TESTS_VERSION_LINE.search(line):
        env.setdefault("rccl_tests_version", m.group(1))
        return True
    if found := rcclversion.fact(line):
        env.setdefault(*found)
        return True
    return False


def _header_line(line: str, lineno: int, path: str, shape: _Shape, env: dict[str, Any]) -> list[int] | None:
    """Read one '#' line into ``shape`` and ``env``; the column header returns where each
    (time, algbw, busbw, #wrong) block starts (one block: rccl-tests' in-place-only table)."""
    if m := _RANK_RE.match(line):
        rank, group, pid, host, dev, bus, model = m.groups()
        shape.colors[int(rank)] = int(group or 0)
        model = model.strip()
        if model.endswith("..."):  # the cut line itself: its model is incomplete
            shape.elided, model = True, model[:-3].rstrip()
        shape.ranks[int(rank)] = (host, int(pid), model)
        shape.where[int(rank)] = f"{path}:{lineno}"
        if "Group" not in line:  # rccl-tests prints no Group field
            env["tool"] = "rccl-tests"
        env.setdefault("devices", []).append({"rank": int(rank), "host": host, "pid": int(pid),
                                              "device": int(dev), "bus_id": bus, "name": model})
    elif line.rstrip().endswith("..."):
        shape.elided = True
    elif m := _SHAPE_RE.match(line):
        shape.threads, shape.gpus, shape.shape_at = int(m.group(1)), int(m.group(2)), f"{path}:{lineno}"
        shape.per_gpu = int(m.group(3)) if m.group(3) else None
    elif m := _TESTS_VERSION_RE.match(line):
        env.setdefault("tool_version", m.group(1))
    if not _is_columns(line):
        return None
    cols = line[1:].split()
    blocks = [i for i, c in enumerate(cols) if c in _TIME_COLS]
    if not 1 <= len(blocks) <= 2 or any(cols[b + 1:b + 4] != ["algbw", "busbw", "#wrong"] for b in blocks):
        raise _fail(path, lineno, "unrecognised column header (expected size count type redop root,"
                                  " then time algbw busbw #wrong twice)")
    return blocks


def _parse_run(lines: list[tuple[int, str]], path: str, candidate: CommConfig, collective: str | None,
               nranks: int | None, several: bool) -> Parsed:
    """One run's lines (see ``_split_runs``). ``several``: the file holds more runs, so errors about
    the whole run name its first line, and the file name does not tell the collective."""
    first = lines[0][0] if lines else 1
    at = first if several else None
    program, program_line = None, 0
    shape, env = _Shape(), {}
    graph, version = 0, None
    blocks: list[int] | None = None  # column index where each (time, algbw, busbw, #wrong) block starts
    ncols = 0
    table: list[tuple[int, list[str]]] = []
    footer = False
    cell_notes: list[tuple[int, bool, str, str]] = []  # (from size, in place, status, reason)
    notes: list[str] = []  # what the user should know of how the file was read
    for lineno, line in lines:
        if line.startswith("#"):
            if m := _CELL_NOTE_RE.match(line):
                cell_notes.append((int(m.group(1)), m.group(2) == "in-place", m.group(3).lower(), m.group(4)))
            if m := _START_RE.match(line):
                program, program_line = m.group(1), lineno
            elif line.startswith(_FOOTER):
                footer = True
            if (cols := _header_line(line, lineno, path, shape, env)) is not None:
                blocks = cols
                ncols = blocks[-1] + 4
            if g := _GRAPH_RE.search(line):
                graph = 1 if int(g.group(1)) > 0 else 0
            if (v := _VERSION_RE.search(line)) and int(v.group(1)):  # 0: no NCCL (ccltune's gloo engine)
                version = _nccl_version(int(v.group(1)))
            continue
        if m := _FAILURE_RE.match(line):
            table.append((lineno, m))  # type: ignore[arg-type] - a failure between the rows, in order
            continue
        if _TRACE_RE.match(line) or _meta(line, env) or footer or _NOISE_RE.search(line):
            continue  # after the footer: ncclGetLastError's line
        if line.strip() in ("...", "…", "[...]"):  # output pasted into a doc or ticket with lines left out
            notes.append(f"line {lineno}: '{line.strip()}' skipped (lines were left out of this output here)")
            continue
        if blocks is None:
            raise _fail(path, lineno, "data before the column header ('#  size  count  type ...')")
        cells = line.split()
        if len(cells) < ncols:
            raise _fail(path, lineno, f"expected {ncols} columns, got {len(cells)} (truncated line?)")
        table.append((lineno, cells))
    if blocks is None:
        raise _fail(path, at, "no nccl-tests column header ('#  size  count  type ...'): not nccl-tests output?"
                              + (" (a run that stopped before its table?)" if several else ""))
    if not table:
        raise _fail(path, at, "no result rows")
    failed = any(isinstance(cells, re.Match) for _, cells in table)
    if not footer and not failed:  # a run that failed stops without its footer, as nccl-tests does
        raise _fail(path, table[-1][0], f"truncated: no '{_FOOTER}' footer after the last row")
    line = program_line if program else at  # where the collective is (or should be) said
    n_ranks, n_nodes = _ranks(path, at, shape, nranks)
    try:
        coll = _collective(program, "the header", f"{path}:{line}" if line else path, collective,
                           None if several else path)
    except UsageError as exc:
        if program or collective:
            raise
        coll = ncclt_infer.collective(table, blocks, n_ranks, str(exc), notes)
    _mark_groups(shape, env)
    if "tool" not in env:
        env["tool"] = "rccl-tests" if any(k.startswith("rccl") for k in env) else "nccl-tests"
    places = (True,) if len(blocks) == 1 else (False, True)
    rows = []
    for lineno, cells in table:
        if isinstance(cells, re.Match):
            rows += _failure_rows(cells, rows, path, lineno, coll, n_ranks, n_nodes, candidate, graph, places)
            continue
        try:
            size, count = _int_cell(cells[0], "size", 0, MAX_CALL_BYTES), _int_cell(cells[1], "count", 0, MAX_COUNT)
            _name_cell(cells[2], "type", datatypes.DTYPES)
            _name_cell(cells[3], "redop", _REDOPS)
            root = _int_cell(cells[4], "root", -1, n_ranks - 1)
            for b, in_place in zip(blocks, places):
                place = "in-place" if in_place else "out-of-place"
                t, alg, bus, wrong = (_number_cell(c, f"{place} {name}", kind, size) for c, name, kind in
                                      zip(cells[b:b + 4], ("time", "algbw", "busbw", "#wrong"),
                                          ("time", "bw", "bw", "wrong")))
                rows.append(_row(coll, size, count, cells[2], cells[3], root, n_ranks, n_nodes, candidate,
                                 graph, in_place, t, alg, bus, wrong))
        except _Bad as exc:
            raise _fail(path, lineno, str(exc)) from None
    _explain(rows, cell_notes)
    hosts = {h for h, _, _ in shape.ranks.values()} | ({env["hostname"]} if "hostname" in env else set())
    return Parsed(path, coll, n_ranks, n_nodes, rows, [g for _, (_, _, g) in sorted(shape.ranks.items()) if g],
                  sorted(hosts), version, first, env, notes)


def _explain(rows: list[Measurement], notes: list[tuple[int, bool, str, str]]) -> None:
    """N/A cells that ccltune's note lines explain take the note's status and reason (the last note of
    their placement from a size at or below theirs); a cell no note explains stays 'error', 'time N/A'."""
    for m in rows:
        if m.time_us is not None or m.note != "time N/A":
            continue
        said = [n for n in notes if n[1] == m.in_place and n[0] <= m.size_bytes]
        if said:
            m.status, m.note = said[-1][2], said[-1][3]


# --- -J JSON: every field read is checked, an error names the file and the field's path ---


def _show(value: Any) -> str:
    """A JSON value as the file spells it, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Json:
    """Checked reads from one -J document: a missing field or a value of the wrong type raises
    UsageError naming the file and the field's path (``config.devices[0].rank``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, expect: str, value: Any) -> UsageError:
        return UsageError(f'{self.path}: "{field}" must be {expect}, got {_show(value)}')

    def get(self, obj: dict[str, Any], key: str, at: str, expect: str, ok: Callable[[Any], bool],
            required: bool = False) -> Any:
        """``obj[key]`` (``at`` is obj's path) when ``ok`` says it is ``expect``; None when absent
        (or null) and not ``required``."""
        field = f"{at}.{key}" if at else key
        if key not in obj or (obj[key] is None and not required):
            if required:
                raise UsageError(f'{self.path}: "{field}" is missing')
            return None
        if not ok(obj[key]):
            raise self.fail(field, expect, obj[key])
        return obj[key]

    def integer(self, obj: dict[str, Any], key: str, at: str, required: bool = False,
                low: int | None = None, high: int = _INT64_MAX) -> int | None:
        """An integer (``low`` or more: the database's 64-bit range)."""
        value = self.get(obj, key, at, "an integer", _is_int, required)
        if value is not None and low is not None and not low <= value <= high:
            raise self.fail(f"{at}.{key}" if at else key, "a non-negative integer" + (f" up to {high}" if value > high
                                                                     else ""), value)
        return value

    def number(self, obj: dict[str, Any], key: str, at: str, kind: str, size: int,
               required: bool = False) -> float | None:
        """A time, bandwidth ('bw') or #wrong of a ``size``-byte row: None for null, and for a time
        or bandwidth of "nan" (how nccl-tests writes NaN)."""
        field = f"{at}.{key}"
        if key not in obj:
            if required:
                raise UsageError(f'{self.path}: "{field}" is missing')
            return None
        value = obj[key]
        if kind != "wrong" and (isinstance(value, str) and value.lower() == "nan"
                                or isinstance(value, float) and math.isnan(value)):
            return None
        if value is None:
            return None
        try:
            number = float(value) if _is_number(value) else None
        except OverflowError:  # an integer beyond any float
            number = None
        if number is None or not _possible(number, kind, size):
            raise self.fail(field, _EXPECT[kind] + (" or null" if kind == "wrong" else ', "nan" or null'), value)
        return number


def parse_json(text: str, path: str, *, candidate: CommConfig = CommConfig(), collective: str | None = None,
               nranks: int | None = None) -> Parsed:
    """Parse nccl-tests' ``-J`` JSON (one run). Raises UsageError naming ``path`` (and line, or the
    field's path) on bad content."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = "several -J files joined? import each file" if exc.msg == "Extra data" else "a truncated -J file?"
        raise _fail(path, exc.lineno, f"not valid JSON ({exc.msg}); {hint}") from None
    except RecursionError:
        raise _fail(path, None, "not nccl-tests -J output (nested too deeply)") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise _fail(path, None, f"not nccl-tests -J output ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise _fail(path, None, "not nccl-tests -J output (no 'results' list)")
    if "average_bus_bandwidth" not in doc:
        raise _fail(path, None, "truncated: no 'average_bus_bandwidth' after the results")
    js = _Json(path)
    args = js.get(doc, "args", "", "a list of strings", lambda v: isinstance(v, list)) or []
    program = args[0] if args else None  # only the program name is read
    if program is not None and not isinstance(program, str):
        raise js.fail("args[0]", "a string", program)
    cfg = js.get(doc, "config", "", "an object", lambda v: isinstance(v, dict)) or {}
    graph = 1 if (js.integer(cfg, "graph", "config") or 0) > 0 else 0
    shape, env = _Shape(threads=js.integer(cfg, "nthreads", "config"), gpus=js.integer(cfg, "ngpus", "config")), {}
    for i, dev in enumerate(js.get(cfg, "devices", "config", "a list", lambda v: isinstance(v, list)) or []):
        at = f"config.devices[{i}]"
        if not isinstance(dev, dict):
            raise js.fail(at, "an object", dev)
        rank = js.integer(dev, "rank", at, required=True, low=0)
        host = js.get(dev, "hostname", at, "a string", lambda v: isinstance(v, str), required=True)
        info = (js.get(dev, "device_info", at, "a string", lambda v: isinstance(v, str)) or "").strip()
        pid = js.integer(dev, "pid", at) or 0
        shape.ranks[rank] = (host, pid, info)
        shape.where[rank] = f'{path}: "{at}.rank"'
        shape.colors[rank] = js.integer(dev, "group", at) or 0
        env.setdefault("devices", []).append({"rank": rank, "host": host, "pid": pid,
                                              "device": js.integer(dev, "device", at),
                                              "bus_id": js.get(dev, "device_hex", at, "a string",
                                                               lambda v: isinstance(v, str)),
                                              "name": info})
    version = js.integer(doc, "nccl_version", "", low=0) or None
    coll = _collective(program, '"args[0]"', path, collective, path)
    n_ranks, n_nodes = _ranks(path, None, shape, nranks)
    _mark_groups(shape, env)
    env["tool"] = "nccl-tests"
    rows = []
    for i, res in enumerate(doc["results"]):
        at = f"results[{i}]"
        if not isinstance(res, dict):
            raise js.fail(at, "an object", res)
        size = js.integer(res, "size", at, required=True, low=0, high=MAX_CALL_BYTES)
        count = js.integer(res, "count", at, required=True, low=0, high=MAX_COUNT)
        dtype = js.get(res, "type", at, "a string", lambda v: isinstance(v, str), required=True)
        redop = js.get(res, "redop", at, "a string", lambda v: isinstance(v, str), required=True)
        for key, value, names in (("type", dtype, datatypes.DTYPES), ("redop", redop, _REDOPS)):
            if value not in names:  # only what nccl-tests prints: no formula or escape reaches a database
                raise js.fail(f"{at}.{key}", f"one of nccl-tests' {key}s ({', '.join(names)})", value)
        root = _json_root(js, res, at, n_ranks)
        for key, in_place in (("out_of_place", False), ("in_place", True)):
            blk = js.get(res, key, at, "an object or null", lambda v: isinstance(v, dict))
            if blk is None:
                continue
            where = f"{at}.{key}"
            tkey = "cpu_time" if "time" not in blk and "cpu_time" in blk else "time"  # -C: CPU time
            t = js.number(blk, tkey, where, "time", size, required=True)
            alg, bus = js.number(blk, "alg_bw", where, "bw", size), js.number(blk, "bus_bw", where, "bw", size)
            rows.append(_row(coll, size, count, dtype, redop, root, n_ranks, n_nodes, candidate, graph, in_place,
                             t, alg, bus, js.number(blk, "nwrong", where, "wrong", size)))
    if not rows:
        raise _fail(path, None, "no result rows")
    return Parsed(path, coll, n_ranks, n_nodes, rows, [g for _, (_, _, g) in sorted(shape.ranks.items()) if g],
                  sorted({h for h, _, _ in shape.ranks.values()}),
                  None if version is None else _nccl_version(version), 1, env)


def _json_root(js: _Json, res: dict[str, Any], at: str, n_ranks: int) -> int:
    """``root``: nccl-tests writes it as a string ("    -1"); an integer is taken too."""
    value = js.get(res, "root", at, "", lambda v: True, required=True)
    root = value if _is_int(value) else None
    if isinstance(value, str):
        try:
            root = int(value)  # int() skips the padding
        except ValueError:
            pass
    if root is None or not -1 <= root < n_ranks:
        raise js.fail(f"{at}.root", f"-1 or a rank in 0..{n_ranks - 1}", value)
    return root


def parse(text: str, path: str, **kw: Any) -> list[Parsed]:
    """Text or JSON, by content (JSON starts with '{'): the runs in the file, in order."""
    if text.lstrip().startswith("{"):
        return [parse_json(text, path, **kw)]
    return parse_text(text, path, **kw)


def number_reps(parsed: list[Parsed]) -> None:
    """Give repeated (collective, size, placement, config) points rep 0, 1, 2... across runs and files."""
    seen: dict[tuple[Any, ...], int] = {}
    for p in parsed:
        for m in p.rows:
            key = (m.collective, m.size_bytes, m.in_place, m.config, m.n_ranks)
            m.rep = seen.get(key, 0)
            seen[key] = m.rep + 1
