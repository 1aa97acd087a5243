"""NCCL Inspector's JSON output (NCCL's ``plugins/profiler/inspector``, ``NCCL_INSPECTOR_ENABLE=1``) as
workload records (pure: text in, records out).

The format, from its source (inspector_json.cc ``inspectorCommInfoDumpColl``/``DumpP2p``,
``inspectorCompletedColl``/``P2p``, json.cc; NCCL commit 5067397c, format ``v4.0``): one file per
process, ``<hostname>-pid<pid>.log``, one compact JSON object per line and per completed call::

    {"header":{"id":"0x7f8c496ae9f661","comm_name":"unknown","rank":2,"n_ranks":8,"nnodes":1},
     "metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":
     "nccl_profiler_interface","dump_timestamp_us":1748030377748202,"hostname":"h","pid":1639453},
     "coll_perf":{"coll":"AllReduce","coll_sn":1407,"coll_msg_size_bytes":17179869184,
     "coll_exec_time_us":61974,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":277.210914,
     "coll_busbw_gbs":485.119099}}

(``p2p_perf`` with ``p2p``, ``p2p_sn``, ``p2p_peer``, ``p2p_msg_size_bytes``, ``p2p_exec_time_us``,
... for Send/Recv with ``NCCL_INSPECTOR_ENABLE_P2P=1``; ``event_trace_sn``/``event_trace_ts`` added
with ``NCCL_INSPECTOR_DUMP_VERBOSE=1``, not read). ``msg_size_bytes`` is the datatype's size times
NCCL's count (per rank for AllGather and ReduceScatter): ccltune's size is that times the ranks for
those. Inspector gives no datatype, count, algorithm or protocol; times are whole microseconds.

Bounds: lines of at most :data:`MAX_LINE_CHARS`, at most :data:`MAX_LINES` lines; a line that is
not one call's object is skipped with a warning naming ``file:line`` (a process killed mid-write
leaves its last line cut), one that says another format version stops the import.
"""

from __future__ import annotations

import json
from typing import Any

from ccltune import collectives
from ccltune.errors import UsageError
from ccltune.workload import steps as find_steps
from ccltune.workload.model import Halves, Key, RankRecord
from ccltune.workload.timing import Timing

VERSIONS = ("v4.0",)
MAX_LINE_CHARS = 1 << 16
MAX_LINES = 50_000_000
MAX_WARNINGS = 20


def is_inspector(text: str) -> bool:
    """The first line is one of Inspector's objects (its metadata names the format version)."""
    first = text.lstrip()[:4096].split("\n", 1)[0]
    return first.startswith('{"header":') and '"inspector_output_format_version"' in first


def parse(text: str, path: str) -> tuple[list[RankRecord], list[str]]:
    """One record per (host, pid) in the file (one, as Inspector writes them)."""
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        raise UsageError(f"{path}: more than {MAX_LINES} lines")
    recs: dict[tuple[str, int], RankRecord] = {}
    warnings: list[str] = []
    skipped = 0
    halves = Halves[tuple[int]]()
    sources: set[str] = set()
    for no, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        try:
            got = _call(line, path, no)
        except ValueError as exc:
            skipped += 1
            if skipped <= MAX_WARNINGS:
                warnings.append(f"{path}:{no}: skipped: {exc}")
            continue
        host, pid, comm, key, func, us, source = got
        rec = recs.setdefault((host, pid), RankRecord(path, "inspector", f"{host}:{pid}", host=host, pid=pid))
        sources.add(source)
        call = halves.call_of(comm, key, func, ("Send", "Recv") if func in ("Send", "Recv") else (), (no,))
        if call == (no,):
            rec.calls[key] += 1
            rec.order.append((key, comm))
        if key.collective != "sendrecv":  # each half timed alone: no time for the pair
            rec.timing.setdefault(key, Timing()).add(float(us))
    if skipped > MAX_WARNINGS:
        warnings.append(f"{path}: {skipped - MAX_WARNINGS} more lines skipped")
    if sources - {"kernel_gpu"}:
        warnings.append(f"{path}: Inspector timed some calls with {', '.join(sorted(sources - {'kernel_gpu'}))} "
                        "(not the GPU kernels): those times include launch and queueing")
    for r in recs.values():
        if (got_steps := find_steps.find(r.order)) is not None:
            r.steps, r.steps_from = got_steps[0], f"{path}: {got_steps[1]}"
    return list(recs.values()), warnings


def _field(d: Any, name: str, kind: type, where: str) -> Any:
    v = d.get(name) if isinstance(d, dict) else None
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ValueError(f"{where}.{name} is {v!r}, expected {kind.__name__}")
    return v


def _call(line: str, path: str, no: int) -> tuple[str, int, str, Key, str, int, str]:
    if len(line) > MAX_LINE_CHARS:
        raise ValueError(f"a line of {len(line)} characters (at most {MAX_LINE_CHARS})")
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a JSON object ({exc.msg}): cut short?") from None
    except (ValueError, RecursionError) as exc:  # an integer of 4,300+ digits; nesting past the parser's guard
        raise ValueError(f"not one of Inspector's objects ({type(exc).__name__})") from None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    version = meta.get("inspector_output_format_version") if isinstance(meta, dict) else None
    if version is not None and version not in VERSIONS:
        raise UsageError(f"{path}:{no}: Inspector output format {version!r}, ccltune reads {', '.join(VERSIONS)}")
    head = doc.get("header")
    nranks = _field(head, "n_ranks", int, "header")
    nnodes = _field(head, "nnodes", int, "header")
    comm = _field(head, "id", str, "header")
    host = _field(meta, "hostname", str, "metadata")
    pid = _field(meta, "pid", int, "metadata")
    if not 1 <= nranks <= 1 << 20 or not 1 <= nnodes <= nranks:
        raise ValueError(f"header: impossible n_ranks {nranks} / nnodes {nnodes}")
    kind = "coll" if "coll_perf" in doc else "p2p" if "p2p_perf" in doc else None
    if kind is None:
        raise ValueError("neither coll_perf nor p2p_perf")
    perf = doc[f"{kind}_perf"]
    func = _field(perf, kind, str, f"{kind}_perf")
    size = _field(perf, f"{kind}_msg_size_bytes", int, f"{kind}_perf")
    us = _field(perf, f"{kind}_exec_time_us", int, f"{kind}_perf")
    source = perf.get(f"{kind}_timing_source", "unknown") if isinstance(perf, dict) else "unknown"
    coll = collectives.BY_NCCL_NAME.get(func)
    if coll is None:
        raise ValueError(f"{func!r} is not a collective ccltune knows ({', '.join(collectives.BY_NCCL_NAME)})")
    if size < 0 or us < 0:
        raise ValueError(f"negative size {size} or time {us}")
    key = Key(coll.name, size * (nranks if coll.per_rank_count else 1), nranks, nnodes=nnodes)
    return host, pid, comm, key, func, us, str(source)
