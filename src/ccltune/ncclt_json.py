"""nccl-tests' ``-J`` JSON (schema version 3, as nccl-tests 2.19.6 src/util.cu writes it: jsonOutputInit,
writeDeviceReport, writeBenchmarkLine*, writeResultFooter, writeErrors, jsonOutputFinalize), built
from ccltune's records. Pure: records in, a JSON-ready dict out; ``cli.bench`` writes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ccltune import output
from ccltune.store import Measurement

SCHEMA_VERSION = 3


def _number(value: float | None) -> float | str:
    """jsonDouble: NaN as the string "nan"."""
    return "nan" if value is None or value != value else value


def _block(m: Measurement, cputime: bool) -> dict[str, Any] | None:
    if m.status != "ok" or m.time_us is None:
        return None  # writeBenchMarkLineNullBody: a block not measured is null
    return {"cpu_time" if cputime else "time": _number(m.time_us), "alg_bw": _number(m.algbw_gbps),
            "bus_bw": _number(m.busbw_gbps), "nwrong": None if m.wrong is None else float(m.wrong)}


def document(h: output.Header, pairs: Sequence[tuple[Measurement | None, Measurement]], *, argv: Sequence[str],
             environ: Sequence[str], start_time: str, end_time: str, iters: int, min_bw: float | None = None,
             cputime: bool = False, errors: Sequence[str] = ()) -> dict[str, Any]:
    """One run of one collective: ``pairs`` are its (out-of-place, in-place) rows in order."""
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
    for oop, ip in pairs:
        m = oop or ip
        results.append({"size": m.size_bytes, "count": m.count, "type": m.dtype, "redop": m.op or "none",
                        "root": "%6i" % (m.root if m.root is not None else -1),
                        "out_of_place": _block(oop, cputime) if oop is not None else None,
                        "in_place": _block(ip, cputime), "actual_iterations": iters, "experiment_name": ""})
    rows = [m for pair in pairs for m in pair if m is not None]
    wrong = sum(m.wrong or 0 for m in rows if m.status == "ok")
    avg = output.avg_busbw(rows)
    ok = output.min_bw_ok(avg, min_bw)
    return {"version": SCHEMA_VERSION, "start_time": start_time, "args": list(argv), "env": list(environ),
            "nccl_version": h.nccl_code, "config": config, "results": results,
            "out_of_bounds": {"count": wrong, "okay": wrong == 0},
            "average_bus_bandwidth": {"bandwidth": _number(avg), "okay": "unchecked" if ok is None else ok},
            "errors": list(errors), "end_time": end_time}
