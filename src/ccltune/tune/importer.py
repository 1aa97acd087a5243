"""nccl-tests output -> measurement rows (pure: text in, records out).

Supported inputs:

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

The collective comes from ``# Collective test starting: all_reduce_perf`` (or the JSON argv),
else from the file name, else ``--collective``; nRanks from the ``#  Rank N ...`` device lines
(nNodes = distinct host names). ``N/A`` in ``#wrong`` means unchecked; ``#wrong`` > 0 stores the
row with status 'error' so it never feeds a rule. In-place rows get ``in_place=True``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ccltune import collectives
from ccltune.errors import UsageError
from ccltune.store import Measurement
from ccltune.tune.derive import Candidate

_START_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*)$")
_GRAPH_RE = re.compile(r"\bgraph:\s*(\d+)")
_VERSION_RE = re.compile(r"nccl-library=(\d+)")
_FOOTER = "# Avg bus bandwidth"
_TIME_COLS = ("time", "cputime")


@dataclass
class Parsed:
    """One imported file: its rows and what it says about the run."""

    path: str
    collective: str
    n_ranks: int
    n_nodes: int
    rows: list[Measurement]
    gpus: list[str] = field(default_factory=list)  # model name per rank, when listed
    hosts: list[str] = field(default_factory=list)
    nccl_version: str | None = None


def _fail(path: str, line: int | None, why: str) -> UsageError:
    return UsageError(f"{path}:{line}: {why}" if line else f"{path}: {why}")


def _nccl_version(code: int) -> str:
    """22809 -> '2.28.9' (NCCL_VERSION_CODE = major*10000 + minor*100 + patch)."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def _collective(program: str | None, path: str, override: str | None) -> str:
    if override:
        return collectives.get(override, "--collective").name
    if program:
        return collectives.get(program.rsplit("/", 1)[-1], f"{path} header").name
    stem = path.rsplit("/", 1)[-1].lower()
    for c in sorted(collectives.REGISTRY, key=len, reverse=True):  # reduce_scatter before reduce
        if c in stem:
            return c
    raise _fail(path, None, "cannot tell the collective (no 'Collective test starting' line, none in the"
                            " file name); pass --collective")


def _ranks(path: str, ranks: dict[int, tuple[str, str]], nranks: int | None) -> tuple[int, int]:
    if nranks is not None:
        if ranks and len(ranks) != nranks:
            raise _fail(path, None, f"--nranks {nranks} but the file lists {len(ranks)} ranks")
        return nranks, len({h for h, _ in ranks.values()}) or 1
    if not ranks:
        raise _fail(path, None, "no '#  Rank N ...' device lines; pass --nranks")
    return len(ranks), len({h for h, _ in ranks.values()})


def _number(text: str | None) -> float | None:
    """A table cell or JSON value: None for N/A, null or 'nan'."""
    if text is None or str(text).strip().lower() in ("n/a", "nan"):
        return None
    return float(text)


def _row(collective: str, size: int, count: int, dtype: str, redop: str, root: str, n_ranks: int,
         n_nodes: int, cand: Candidate, graph: int, in_place: bool, time_us: float | None,
         algbw: float | None, busbw: float | None, wrong: float | None) -> Measurement:
    status, note = "ok", None
    if time_us is None or time_us <= 0:
        status, note = "error", "time N/A"
    elif wrong:
        status, note = "error", f"#wrong {wrong:g}"
    root_i = int(root)
    return Measurement(
        collective, size, count, dtype, None if redop in ("none", "-") else redop, None if root_i < 0 else root_i,
        in_place, n_ranks, time_us=time_us, algbw_gbps=algbw, busbw_gbps=busbw,
        wrong=None if wrong is None else int(wrong), status=status, note=note, n_nodes=n_nodes,
        algo=cand.algo, proto=cand.proto, channels=cand.channels, config=cand.label, graph=graph,
    )


def parse_text(text: str, path: str, *, candidate: Candidate = Candidate(), collective: str | None = None,
               nranks: int | None = None) -> Parsed:
    """Parse nccl-tests' text output. Raises UsageError naming ``path:line`` on bad content."""
    program = None
    ranks: dict[int, tuple[str, str]] = {}
    graph, version = 0, None
    blocks: list[int] | None = None  # column index where each (time, algbw, busbw, #wrong) block starts
    ncols = 0
    table: list[tuple[int, list[str]]] = []
    footer = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("#"):
            if m := _START_RE.match(line):
                program = m.group(1)
            elif m := _RANK_RE.match(line):
                ranks[int(m.group(1))] = (m.group(2), m.group(3).strip())
            elif line.startswith(_FOOTER):
                footer = True
            cols = line[1:].split()
            if cols[:2] == ["size", "count"]:
                blocks = [i for i, c in enumerate(cols) if c in _TIME_COLS]
                if len(blocks) != 2 or any(cols[b + 1:b + 4] != ["algbw", "busbw", "#wrong"] for b in blocks):
                    raise _fail(path, lineno, "unrecognised column header (expected size count type redop root,"
                                              " then time algbw busbw #wrong twice)")
                ncols = blocks[1] + 4
            if g := _GRAPH_RE.search(line):
                graph = 1 if int(g.group(1)) > 0 else 0
            if v := _VERSION_RE.search(line):
                version = _nccl_version(int(v.group(1)))
            continue
        if blocks is None:
            raise _fail(path, lineno, "data before the column header ('#  size  count  type ...')")
        cells = line.split()
        if len(cells) < ncols:
            raise _fail(path, lineno, f"expected {ncols} columns, got {len(cells)} (truncated line?)")
        table.append((lineno, cells))
    if blocks is None:
        raise _fail(path, None, "no nccl-tests column header ('#  size  count  type ...'): not nccl-tests output?")
    if not table:
        raise _fail(path, None, "no result rows")
    if not footer:
        raise _fail(path, table[-1][0], f"truncated: no '{_FOOTER}' footer after the last row")
    coll = _collective(program, path, collective)
    n_ranks, n_nodes = _ranks(path, ranks, nranks)
    rows = []
    for lineno, cells in table:
        try:
            size, count = int(cells[0]), int(cells[1])
            for b, in_place in zip(blocks, (False, True)):
                t, alg, bus, wrong = (_number(c) for c in cells[b:b + 4])
                rows.append(_row(coll, size, count, cells[2], cells[3], cells[4], n_ranks, n_nodes, candidate,
                                 graph, in_place, t, alg, bus, wrong))
        except ValueError as exc:
            raise _fail(path, lineno, f"bad number: {exc}") from None
    return Parsed(path, coll, n_ranks, n_nodes, rows, [g for _, (_, g) in sorted(ranks.items())],
                  sorted({h for h, _ in ranks.values()}), version)


def parse_json(text: str, path: str, *, candidate: Candidate = Candidate(), collective: str | None = None,
               nranks: int | None = None) -> Parsed:
    """Parse nccl-tests' ``-J`` JSON. Raises UsageError naming ``path`` (and line) on bad content."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, exc.lineno, f"not valid JSON ({exc.msg}); a truncated -J file?") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise _fail(path, None, "not nccl-tests -J output (no 'results' list)")
    if "average_bus_bandwidth" not in doc:
        raise _fail(path, None, "truncated: no 'average_bus_bandwidth' after the results")
    args = doc.get("args") or []
    cfg = doc.get("config") or {}
    ranks = {int(d["rank"]): (str(d.get("hostname")), str(d.get("device_info", "")).strip())
             for d in cfg.get("devices") or [] if isinstance(d, dict) and "rank" in d}
    coll = _collective(args[0] if args else None, path, collective)
    n_ranks, n_nodes = _ranks(path, ranks, nranks)
    graph = 1 if int(cfg.get("graph") or 0) > 0 else 0
    rows = []
    for i, res in enumerate(doc["results"]):
        try:
            for key, in_place in (("out_of_place", False), ("in_place", True)):
                blk = res.get(key)
                if blk is None:
                    continue
                t = _number(blk.get("time", blk.get("cpu_time")))
                rows.append(_row(coll, int(res["size"]), int(res["count"]), str(res["type"]), str(res["redop"]),
                                 str(res["root"]).strip(), n_ranks, n_nodes, candidate, graph, in_place, t,
                                 _number(blk.get("alg_bw")), _number(blk.get("bus_bw")), _number(blk.get("nwrong"))))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _fail(path, None, f"results[{i}]: bad or missing field ({exc!r})") from None
    if not rows:
        raise _fail(path, None, "no result rows")
    version = doc.get("nccl_version")
    return Parsed(path, coll, n_ranks, n_nodes, rows, [g for _, (_, g) in sorted(ranks.items())],
                  sorted({h for h, _ in ranks.values()}), _nccl_version(version) if isinstance(version, int) else None)


def parse(text: str, path: str, **kw: Any) -> Parsed:
    """Text or JSON, by content (JSON starts with '{')."""
    return (parse_json if text.lstrip().startswith("{") else parse_text)(text, path, **kw)


def number_reps(parsed: list[Parsed]) -> None:
    """Give repeated (collective, size, placement, config) points rep 0, 1, 2... across files."""
    seen: dict[tuple[Any, ...], int] = {}
    for p in parsed:
        for m in p.rows:
            key = (m.collective, m.size_bytes, m.in_place, m.config, m.n_ranks)
            m.rep = seen.get(key, 0)
            seen[key] = m.rep + 1
