"""nccl-tests' and rccl-tests' text table -> measurement rows (pure: text in, records out); the table's
writer is :mod:`ccltune.ncclt.table`, what both readers share :mod:`ccltune.ncclt.reading`.

The input (nccl-tests 2.13 to 2.19; rccl-tests from 2022-10, whose lines are listed at ``_RANK_RE``,
``_SHAPE_RE`` and ``_TESTS_VERSION_LINE`` with the source they come from): ``#`` header lines, a column header
``#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong``
(out-of-place block, then in-place block; extra per-block columns such as ``#bitdiff`` or
``i_min`` and a trailing timestamp are tolerated, the header says where each block starts),
data rows, and the ``# Avg bus bandwidth`` footer. A file without the footer is truncated.

A file may hold several runs (``cat all_reduce.txt all_gather.txt``): a run's preamble
(``# nccl-tests version``, ``# Collective test starting``, ``# nThread``, the device list) or column
header after the previous run's table starts the next run, and each run's rows take their facts
(collective, nRanks, graph, NCCL version) from their own header only. rccl-tests' in-place-only table
(``-O 0``: one block) gives in-place rows only. Lines without '#' that RCCL or NCCL print between the
header lines (version banner, log lines) are read for the environment or skipped. ccltune's own table
explains its N/A cells in note lines (``#  from 8 B, out-of-place: WAIVED: why``): those cells come back
with that status and reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ccltune import datatypes, ncclline
from ccltune.commconfig import CommConfig
from ccltune.errors import UsageError
from ccltune.inputs import MAX_CALL_BYTES, MAX_COUNT, MAX_LINE_CHARS
from ccltune.ncclt import infer, reading
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
# (ncclline.version_fact) fills rccl_version, hip_version, rocm_version, hostname, library_path
_TESTS_VERSION_LINE = re.compile(r"^rccl-tests: Version\s+(.+?)\s*$")
# other lines a run's output may hold between its own: NCCL/RCCL log lines, nccl-tests' notices
_NOISE_RE = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b|^Option -|^invalid option|^#|^\S+: Test timeout")
# nccl-tests' NCCLCHECK/CUDACHECK line (common.h: "%s: Test NCCL failure %s:%d '%s / %s'", host, file, line,
# ncclGetErrorString, ncclGetLastError), after a row's preamble when the failure came while timing it, and
# TESTCHECK's trace lines under it (" .. %s pid %d: Test failure %s:%d"): the run stopped there
_FAILURE_RE = re.compile(r"^(?P<head>.*?): Test (?P<lib>NCCL|CUDA) failure (?P<at>\S+) '(?P<msg>.*)'$")
# ccltune's own note under a row whose cells are N/A (table.notes): "#  from 4096 B, out-of-place: WAIVED: why";
# it tells the status and reason of that placement's N/A cells from that size on
_CELL_NOTE_RE = re.compile(r"^#  from (\d+) B, (out-of-place|in-place): (WAIVED|SKIPPED|UNAVAILABLE|ERROR): (.+)$")
_PREAMBLE_WIDTH = 52  # writeBenchmarkLinePreamble: "%12li  %12li  %8s  %6s  %6s", the host name glued after it
_TRACE_RE = re.compile(r"^ \.\. \S+ pid \d+: Test failure ")
_OP_ORDER = ("sum", "prod", "max", "min", "avg", "mulsum")  # nccl-tests' -o all order (common.cu test_opnames)
_FOOTER = "# Avg bus bandwidth"
_TIME_COLS = ("time", "cputime")


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
            combos = [(reading.int_cell(pre[0], "size"), reading.int_cell(pre[1], "count"), pre[2], pre[3],
                       reading.int_cell(pre[4], "root", -1, n_ranks - 1))]
        elif before:
            combos = _next_combination(before)
        else:
            raise reading.Bad("a failure before any row: nothing tells which combination failed")
    except reading.Bad as exc:
        raise reading.fail(path, lineno, str(exc)) from None
    rows = [reading.row(coll, size, count, dtype, op, root, n_ranks, n_nodes, cand, graph, in_place, None, None, None, None)
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
            raise reading.Bad("a failure after the last datatype: nothing tells which combination failed")
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
               nranks: int | None = None) -> list[reading.Parsed]:
    """Parse nccl-tests' text output: one reading.Parsed per run in the file, in order (one, unless runs were
    concatenated). Raises UsageError naming ``path:line`` on bad content; nothing is returned then."""
    runs = _split_runs(text)
    return [_parse_run(lines, path, candidate, collective, nranks, len(runs) > 1) for lines in runs]


def _meta(line: str, env: dict[str, Any]) -> bool:
    """Store what an rccl-tests/RCCL line without '#' says (first value wins); False if it says nothing."""
    if m := _TESTS_VERSION_LINE.search(line):
        env.setdefault("rccl_tests_version", m.group(1))
        return True
    if found := ncclline.version_fact(line):
        env.setdefault(*found)
        return True
    return False


def _header_line(line: str, lineno: int, path: str, shape: reading.Shape, env: dict[str, Any]) -> list[int] | None:
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
        raise reading.fail(path, lineno, "unrecognised column header (expected size count type redop root,"
                           " then time algbw busbw #wrong twice)")
    return blocks


@dataclass
class _Comments:
    """What a run's '#' lines say: the program that printed it, the table's column blocks, -G, NCCL's
    version, whether the footer came, and the notes on cells ccltune wrote."""

    program: str | None = None
    program_line: int = 0
    blocks: list[int] | None = None  # column index where each (time, algbw, busbw, #wrong) block starts
    graph: int = 0
    version: str | None = None
    footer: bool = False
    cell_notes: list[tuple[int, bool, str, str]] = field(default_factory=list)  # (from size, in place, status, reason)

    def read(self, line: str, lineno: int, path: str, shape: reading.Shape, env: dict[str, Any]) -> None:
        if m := _CELL_NOTE_RE.match(line):
            self.cell_notes.append((int(m.group(1)), m.group(2) == "in-place", m.group(3).lower(), m.group(4)))
        if m := _START_RE.match(line):
            self.program, self.program_line = m.group(1), lineno
        elif line.startswith(_FOOTER):
            self.footer = True
        if (cols := _header_line(line, lineno, path, shape, env)) is not None:
            self.blocks = cols
        if g := _GRAPH_RE.search(line):
            self.graph = 1 if int(g.group(1)) > 0 else 0
        if (v := _VERSION_RE.search(line)) and int(v.group(1)):  # 0: no NCCL (ccltune's gloo engine)
            self.version = reading.nccl_version(int(v.group(1)))


def _parse_run(lines: list[tuple[int, str]], path: str, candidate: CommConfig, collective: str | None,
               nranks: int | None, several: bool) -> reading.Parsed:
    """One run's lines (see ``_split_runs``). ``several``: the file holds more runs, so errors about
    the whole run name its first line, and the file name does not tell the collective."""
    first = lines[0][0] if lines else 1
    at = first if several else None
    shape = reading.Shape()
    env: dict[str, Any] = {}
    head = _Comments()
    table: list[tuple[int, list[str] | re.Match[str]]] = []  # a row's cells, or a failure line between rows
    notes: list[str] = []  # what the user should know of how the file was read
    for lineno, line in lines:
        if line.startswith("#"):
            head.read(line, lineno, path, shape, env)
            continue
        if m := _FAILURE_RE.match(line):
            table.append((lineno, m))  # a failure between the rows, in order
            continue
        if _TRACE_RE.match(line) or _meta(line, env) or head.footer or _NOISE_RE.search(line):
            continue  # after the footer: ncclGetLastError's line
        if line.strip() in ("...", "…", "[...]"):  # output pasted into a doc or ticket with lines left out
            notes.append(f"line {lineno}: '{line.strip()}' skipped (lines were left out of this output here)")
            if head.blocks is None:  # among the header's lines: rank lines may be what was left out
                shape.elided = True
            continue
        if head.blocks is None:
            raise reading.fail(path, lineno, "data before the column header ('#  size  count  type ...')")
        cells = line.split()
        if len(cells) < (ncols := head.blocks[-1] + 4):
            raise reading.fail(path, lineno, f"expected {ncols} columns, got {len(cells)} (truncated line?)")
        table.append((lineno, cells))
    blocks, program = head.blocks, head.program
    if blocks is None:
        raise reading.fail(path, at, "no nccl-tests column header ('#  size  count  type ...'): not nccl-tests output?"
                           + (" (a run that stopped before its table?)" if several else ""))
    if not table:
        raise reading.fail(path, at, "no result rows")
    failed = any(isinstance(cells, re.Match) for _, cells in table)
    if not head.footer and not failed:  # a run that failed stops without its footer, as nccl-tests does
        raise reading.fail(path, table[-1][0], f"truncated: no '{_FOOTER}' footer after the last row")
    said_at = head.program_line if program else at  # where the collective is (or should be) said
    n_ranks, n_nodes = reading.ranks_of(path, at, shape, nranks)
    try:
        coll = reading.collective_of(program, "the header", f"{path}:{said_at}" if said_at else path, collective,
                                     None if several else path)
    except UsageError as exc:
        if program or collective:
            raise
        coll = infer.collective(table, blocks, n_ranks, str(exc), notes)
    if shape.elided and nranks is None:
        _check_cut_ranks(path, at, shape, coll, n_ranks, infer.bus_ratio(table, blocks), notes)
    reading.mark_groups(shape, env)
    if "tool" not in env:
        env["tool"] = "rccl-tests" if any(k.startswith("rccl") for k in env) else "nccl-tests"
    rows = _rows(table, blocks, path, coll, n_ranks, n_nodes, candidate, head.graph)
    _explain(rows, head.cell_notes)
    hosts = {h for h, _, _ in shape.ranks.values()} | ({env["hostname"]} if "hostname" in env else set())
    return reading.Parsed(path, coll, n_ranks, n_nodes, rows, [g for _, (_, _, g) in sorted(shape.ranks.items()) if g],
                          sorted(hosts), head.version, first, env, notes)


def _rows(table: list[tuple[int, list[str] | re.Match[str]]], blocks: list[int], path: str, coll: str, n_ranks: int,
          n_nodes: int, candidate: CommConfig, graph: int) -> list[Measurement]:
    """The run's rows: each table row's placements (one block: in-place only), a failure line's error rows."""
    places = (True,) if len(blocks) == 1 else (False, True)
    rows: list[Measurement] = []
    for lineno, entry in table:
        if isinstance(entry, re.Match):
            rows += _failure_rows(entry, rows, path, lineno, coll, n_ranks, n_nodes, candidate, graph, places)
            continue
        cells = entry
        try:
            size = reading.int_cell(cells[0], "size", 0, MAX_CALL_BYTES)
            count = reading.int_cell(cells[1], "count", 0, MAX_COUNT)
            reading.name_cell(cells[2], "type", datatypes.DTYPES)
            reading.name_cell(cells[3], "redop", reading.REDOPS)
            root = reading.int_cell(cells[4], "root", -1, n_ranks - 1)
            for b, in_place in zip(blocks, places):
                place = "in-place" if in_place else "out-of-place"
                t, alg, bus, wrong = (reading.number_cell(c, f"{place} {name}", kind, size) for c, name, kind in
                                      zip(cells[b:b + 4], ("time", "algbw", "busbw", "#wrong"),
                                          ("time", "bw", "bw", "wrong")))
                rows.append(reading.row(coll, size, count, cells[2], cells[3], root, n_ranks, n_nodes, candidate,
                                        graph, in_place, t, alg, bus, wrong))
        except reading.Bad as exc:
            raise reading.fail(path, lineno, str(exc)) from None
    return rows


_RATIO_RANKS = 4096  # the rank counts a ratio is tried at, to name them in the error (a bounded loop)


def _check_cut_ranks(path: str, at: int | None, shape: reading.Shape, coll: str, n_ranks: int, ratio: float | None,
                     notes: list[str]) -> None:
    """A rank list cut short ('...') counts its ranks from the header (nThread x nGpus x processes); the rows'
    busbw/algbw, the collective's bus factor at the true rank count, must agree, else the file contradicts
    itself and is refused, naming both (issue 38: 2 rank lines shown, nGpus 8, a ratio of 8 ranks)."""
    if ratio is None or infer.fits(coll, n_ranks, ratio):
        notes.append(f"the rank list is cut: {n_ranks} ranks from the header (nThread x nGpus x processes)"
                     + (f", as busbw/algbw {ratio:.3f} says for {coll}" if ratio is not None else ""))
        return
    if infer.fits(coll, 1, ratio) and infer.fits(coll, 2, ratio) and infer.fits(coll, 3, ratio):
        return  # a constant bus factor (broadcast, reduce, sendrecv): the ratio says nothing of the ranks
    fit = [n for n in infer.ranks_of_ratio(coll, ratio, min(reading.MAX_RANKS, _RATIO_RANKS)) if n >= len(shape.ranks)]
    if not fit:  # the rank lines shown outnumber what the ratio says: it is not evidence, the header stands
        notes.append(f"the rank list is cut: {n_ranks} ranks from the header (nThread x nGpus x processes); busbw/algbw "
                     f"{ratio:.3f} fits no {coll} of {len(shape.ranks)} ranks or more")
        return
    said = " or ".join(map(str, fit[:3])) + (" or more" if len(fit) > 3 else "")
    raise reading.fail(path, at, f"the rank list is cut ('...', {len(shape.ranks)} rank lines shown) and the file "
                       f"contradicts itself: its header (nThread x nGpus x processes, {shape.shape_at or 'no nThread line'}) "
                       f"says {n_ranks} ranks, its busbw/algbw {ratio:.3f} says {said} for {coll}; pass --nranks")


def _explain(rows: list[Measurement], notes: list[tuple[int, bool, str, str]]) -> None:
    """N/A cells that ccltune's note lines explain take the note's status and reason (the last note of
    their placement from a size at or below theirs); a cell no note explains stays 'error', 'time N/A'."""
    for m in rows:
        if m.time_us is not None or m.note != "time N/A":
            continue
        said = [n for n in notes if n[1] == m.in_place and n[0] <= m.size_bytes]
        if said:
            m.status, m.note = RowStatus(said[-1][2]), said[-1][3]
