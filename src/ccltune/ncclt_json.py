"""nccl-tests' ``-J`` JSON (schema version 3, as nccl-tests 2.19.6 src/util.cu writes it: jsonOutputInit,
writeDeviceReport, writeBenchmarkLine*, writeResultFooter, writeErrors, jsonOutputFinalize), built
from ccltune's records. Pure: records in, a JSON-ready dict out, and ``dumps``, which writes it
byte for byte as nccl-tests' own writer does (compact, doubles as ``%lf``, booleans as the strings
"true"/"false", '/' escaped): dashboards that read nccl-tests' files with their own code get the
same bytes. ``cli.bench`` writes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ccltune import output
from ccltune.periter import IterStats
from ccltune.status import RowStatus
from ccltune.store import Measurement

SCHEMA_VERSION = 3


def _number(value: float | None) -> float | str:
    """jsonDouble: NaN as the string "nan"."""
    return "nan" if value is None or value != value else value


def _block(m: Measurement, cputime: bool) -> dict[str, Any] | None:
    if m.status != RowStatus.OK or m.time_us is None:
        return None  # writeBenchMarkLineNullBody: a block not measured is null
    return {"cpu_time" if cputime else "time": _number(m.time_us), "alg_bw": _number(m.algbw_gbps),
            "bus_bw": _number(m.busbw_gbps), "nwrong": None if m.wrong is None else float(m.wrong)}


def _iter_block(s: IterStats) -> dict[str, Any]:
    """writePerIterReport's JSON: the summary, every iteration, and per process when several."""
    out: dict[str, Any] = {"skipped_iterations": s.skipped, "min_us": s.min_us, "max_us": s.max_us,
                           "avg_us": s.avg_us, "p50_us": s.p50_us, "p95_us": s.p95_us, "p99_us": s.p99_us,
                           "stdev_us": s.stdev_us, "cv_pct": s.cv_pct, "times_us": [float(t) for t in s.times_us]}
    if len(s.per_process_us) > 1:
        out["per_process_max_times_us"] = [[float(t) for t in r] for r in s.per_process_us]
    return out


PerIter = tuple[IterStats | None, IterStats | None]  # (out-of-place, in-place) statistics of one row


def document(h: output.Header, pairs: Sequence[tuple[Measurement | None, Measurement]], *, argv: Sequence[str],
             environ: Sequence[str], start_time: str, end_time: str, iters: int, min_bw: float | None = None,
             cputime: bool = False, errors: Sequence[str] = ("",),
             per_iter: Sequence[PerIter] | None = None) -> dict[str, Any]:
    """One run of one collective: ``pairs`` are its (out-of-place, in-place) rows in order; with
    -I, ``per_iter`` holds each pair's statistics. ``errors``: ncclGetLastError's text ('' when none,
    as nccl-tests writes it)."""
    config: dict[str, Any] = {"nthreads": h.threads, "ngpus": h.gpus, "minimum_bytes": h.min_bytes,
                              "maximum_bytes": h.max_bytes}
    config.update({"step_factor": h.step_factor} if h.step_factor > 1 else {"step_bytes": h.step_bytes})
    config.update({"warmup_iters": h.warmup, "iterations": h.iters, "aggregated_iterations": h.agg_iters,
                   "validation": h.check, "graph": h.graph, "blocking_collectives": bool(h.blocking),
                   "per_iter_timing": h.per_iter, "per_iter_skip": h.per_iter_skip,
                   "parallel_init": h.parallel_init,
                   "devices": [{"rank": d.rank, "group": d.group, "pid": d.pid, "hostname": d.host,
                                "device": d.device, "device_hex": d.bus_id, "device_info": d.name}
                               for d in h.devices]})
    results = []
    for k, (oop, ip) in enumerate(pairs):
        m = oop or ip
        res: dict[str, Any] = {"size": m.size_bytes, "count": m.count, "type": m.dtype, "redop": m.op or "none",
                               "root": "%6i" % (m.root if m.root is not None else -1),
                               "out_of_place": _block(oop, cputime) if oop is not None else None}
        stats = per_iter[k] if per_iter is not None else (None, None)
        if stats[0] is not None and oop is not None:
            res["out_of_place_per_iter"] = _iter_block(stats[0])
        res["in_place"] = _block(ip, cputime)
        if stats[1] is not None:
            res["in_place_per_iter"] = _iter_block(stats[1])
        results.append({**res, "actual_iterations": iters, "experiment_name": ""})
    rows = [m for pair in pairs for m in pair if m is not None]
    wrong = sum(m.wrong or 0 for m in rows if m.status == RowStatus.OK)
    avg = output.avg_busbw(rows)
    ok = output.min_bw_ok(avg, min_bw)
    return {"version": SCHEMA_VERSION, "start_time": start_time, "args": list(argv), "env": list(environ),
            "nccl_version": h.nccl_code, "config": config, "results": results,
            "out_of_bounds": {"count": int(wrong), "okay": wrong == 0},
            "average_bus_bandwidth": {"bandwidth": _number(float(avg)), "okay": "unchecked" if ok is None else ok},
            "errors": list(errors), "end_time": end_time}


_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\t": "\\t", "\n": "\\n"}
_STR_MAX = 2047  # jsonStr's buffer (2048 bytes with its terminator)


def _string(text: str) -> str:
    """sanitizeJson: escape " \\ / tab newline; the string ends at any other control or non-ASCII
    character, and at the buffer's end, as nccl-tests' writer cuts it."""
    out: list[str] = []
    used = 0
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is None and not 0x1F < ord(ch) < 0x7F:
            break
        piece = esc or ch
        if used + len(piece) > _STR_MAX:
            break
        out.append(piece)
        used += len(piece)
    return '"' + "".join(out) + '"'


def dumps(value: Any) -> str:
    """``value`` as nccl-tests' JSON writer prints it (util.cu jsonInt/jsonDouble/jsonStr/jsonBool)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return '"true"' if value else '"false"'
    if isinstance(value, int):
        return "%d" % value
    if isinstance(value, float):
        return '"nan"' if value != value else "%f" % value
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    return "[" + ",".join(dumps(v) for v in value) + "]"
