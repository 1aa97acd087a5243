"""Every field of a workload file checked on reading (issue 32): the types and ranges of what
:func:`ccltune.workload.model.to_json` writes, each error naming the file and the entry. A number read
here sizes ``replay`` and ``sweep`` (calls, steps, order repeats), so each has a bound (docs/limits.md)."""

from __future__ import annotations

import math
import re
from typing import Any

from ccltune import collectives
from ccltune.datatypes import DTYPES
from ccltune.errors import UsageError
from ccltune.inputs import INT64_MAX, MAX_CALL_BYTES, MAX_CALLS, MAX_COUNT, MAX_RANKS, MAX_WORKLOAD_BYTES, int_in
from ccltune.inputs import refuse_constant as _not_finite

__all__ = ["MAX_WORKLOAD_BYTES", "_check_doc", "_check_entry", "_not_finite"]
# datatypes a workload holds: ccltune's names, torch's fp8 names as the trace reader writes them, NCCL's enum
_DATATYPE = re.compile(r"(?:float8_e[45]m[23](?:fn|fnuz)?|nccl:\d{1,3})")
# the timing fields to_json writes (workload.timing): the job's time per call, its waiting and its transfer
_TIMES = tuple(f"{p}_{q}" for p in ("time_us", "wait_us", "transfer_us")
               for q in ("p10", "median", "p90", "max", "mean", "min", "stdev"))


def _check_entry(d: dict[str, Any], key: Any, calls: int, where: str) -> None:
    """One entry: a known collective and datatype, sizes and counts within a real call, times finite."""
    if key.collective not in collectives.REGISTRY:
        raise UsageError(f"{where}: unknown collective {key.collective[:40]!r} (known: "
                         f"{', '.join(collectives.REGISTRY)})")
    if key.datatype is not None and key.datatype not in DTYPES and not _DATATYPE.fullmatch(key.datatype):
        raise UsageError(f"{where}: unknown datatype {key.datatype[:40]!r} (known: {', '.join(DTYPES)})")
    int_in(key.size_bytes, f"{where}: size_bytes", 0, MAX_CALL_BYTES)
    int_in(key.nranks, f"{where}: nranks", 1, MAX_RANKS)
    int_in(calls, f"{where}: calls", 0, MAX_CALLS)
    if key.count is not None:
        int_in(key.count, f"{where}: count", 0, MAX_COUNT)
    if key.nnodes is not None:
        int_in(key.nnodes, f"{where}: nnodes", 1, key.nranks)
    if "timed_calls" in d:
        # every rank's timed calls (a trace of 4 ranks times 4 x an entry's calls per rank)
        int_in(d["timed_calls"], f"{where}: timed_calls", 1, MAX_CALLS)
    for name in (n for n in _TIMES if n in d):
        value = d.get(name)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and 0 <= value < 1e15):
            raise UsageError(f"{where}: {name} must be a finite number of microseconds >= 0, got {value!r:.40}")
    tuner = d.get("tuner_calls")
    if tuner is not None:
        if not isinstance(tuner, list) or not all(isinstance(v, dict) for v in tuner):
            raise UsageError(f"{where}: tuner_calls must be a list of objects, got {type(tuner).__name__}")
        for j, v in enumerate(tuner):
            int_in(v.get("num_pipe_ops"), f"{where}: tuner_calls[{j}].num_pipe_ops", 0, MAX_CALLS)
            int_in(v.get("reg_buff"), f"{where}: tuner_calls[{j}].reg_buff", -1, 1)
            int_in(v.get("calls"), f"{where}: tuner_calls[{j}].calls", 0, MAX_CALLS)


def _check_doc(doc: dict[str, Any], entries: list[Any], path: str) -> None:
    """The fields around the entries: steps > 0, warnings a list of strings, overflow counts
    within int64, sources a list of objects, each order item [entry, communicator, repeat] with repeat at most that entry's calls."""
    if doc.get("steps") is not None:
        int_in(doc["steps"], f"{path}: steps", 1, MAX_CALLS)
    for name, kind in (("sources", dict), ("warnings", str)):
        value = doc.get(name)
        if value is not None and not (isinstance(value, list) and all(isinstance(x, kind) for x in value)):
            raise UsageError(f"{path}: {name} must be a list of {'objects' if kind is dict else 'strings'}")
    for name in ("overflow_calls", "overflow_bytes"):
        if doc.get(name) is not None:
            int_in(doc[name], f"{path}: {name}", 0, INT64_MAX)
    order = doc.get("order")
    if isinstance(order, list):
        if len(order) > sum(e.calls for e in entries):
            raise UsageError(f"{path}: order has {len(order)} items, more than the {sum(e.calls for e in entries)} "
                             "calls of its entries")
        for j, o in enumerate(order):
            if isinstance(o, list) and len(o) == 3 and isinstance(o[0], int) and 0 <= o[0] < len(entries):
                int_in(o[2], f"{path}: order[{j}] repeat", 1, max(entries[o[0]].calls, 1))
