"""Read a PyTorch profiler Chrome trace (``export_chrome_trace``, ``tensorboard_trace_handler``).
Pure: the decoded JSON document in, one :class:`RankRecord` out.

Events read (torch 2.11 names, as in tests/fixtures/workload):

- ``record_param_comms`` (cat ``cpu_op``), one per collective call, with ``args``:
  ``Collective name`` (allreduce, allgather_into_tensor_coalesced, ...), ``In msg nelems``,
  ``Out msg nelems``, ``dtype`` (Float, BFloat16, ...), ``Group size``,
  ``Process Group Name`` and ``External id``. ``send`` and ``recv`` (one direction each, their
  peer in ``Rank``, and ``Dst Rank``/``Src Rank``) are the two halves of one sendrecv call, paired
  as the COLL log's Send and Recv lines are (:class:`~ccltune.workload.model.Halves`); the pair's
  time is both halves' kernels.
- GPU kernels (cat ``kernel``) named ``ncclDevKernel_*`` (``ncclKernel_*`` before NCCL
  2.19): the collective's GPU time. A kernel belongs to the ``record_param_comms`` whose
  ``External id`` it carries, directly or through the ``correlation`` of the
  ``cuda_runtime``/``cuda_driver`` launch that carries it. With one rank NCCL launches no
  kernel (it copies or does nothing), so a one-GPU trace has counts but no times.
- ``ProfilerStep#N`` annotations: the number of steps the trace holds.
- every other GPU kernel (cat ``kernel``): the compute beside the collectives
  (:mod:`ccltune.workload.compute`), which sizes ``--under-load`` from the job.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ccltune import collectives
from ccltune.datatypes import DTYPES
from ccltune.errors import UsageError
from ccltune.files import printable
from ccltune.inputs import MAX_COUNT, MAX_RANKS
from ccltune.workload import compute
from ccltune.workload.compute import Interval
from ccltune.workload.model import Halves, Key, RankRecord, Timing

# c10d's collective names -> ccltune's registry name
NAMES = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce": "all_reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather", "all_gather": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "allgather_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce",
    "all_to_all": "alltoall", "alltoall": "alltoall", "alltoall_base": "alltoall", "all_to_all_single": "alltoall",
    "gather": "gather", "scatter": "scatter", "send": "sendrecv", "recv": "sendrecv",
}
# torch's ScalarType names as the trace prints them -> ccltune's spelling
DTYPE_NAMES = {"Float": "float", "Half": "half", "BFloat16": "bfloat16", "Double": "double", "Int": "int32",
               "Long": "int64", "Char": "int8", "Byte": "uint8", "Bool": "uint8", "UInt32": "uint32",
               "UInt64": "uint64"}
# c10d's names of sendrecv's two halves: one record_param_comms each
_HALVES = tuple(n for n, c in NAMES.items() if c == "sendrecv")
_FP8 = re.compile(r"Float8_e[45]m[23]")
_KERNEL = re.compile(r"^(?:void )?nccl(?:Dev)?Kernel_")
_STEP = re.compile(r"^ProfilerStep#(\d{1,18})$")  # a longer number is no step of a real job


def is_trace(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)


def _dtype(name: Any, where: str) -> tuple[str, int]:
    if isinstance(name, str) and name in DTYPE_NAMES:
        d = DTYPES[DTYPE_NAMES[name]]
        return d.name, d.size
    if isinstance(name, str) and _FP8.fullmatch(name):
        return name.lower(), 1
    raise UsageError(f"{where}: unknown dtype {name!r} (known: {', '.join(DTYPE_NAMES)})")


def parse(doc: dict[str, Any], path: str) -> tuple[RankRecord, list[str]]:
    """One trace is one rank. Raises when it holds no communication event; a
    communication event it cannot read names the event's index and is skipped."""
    events = doc["traceEvents"]
    warnings: list[str] = []
    comms: list[tuple[int, dict[str, Any]]] = []
    steps: set[int] = set()
    launch_ext: dict[Any, Any] = {}   # correlation -> External id of the launching op
    kernels: list[dict[str, Any]] = []
    nccl_on: dict[Any, list[Interval]] = {}     # GPU -> NCCL kernels' (start, end) us; compute_on: every other kernel
    compute_on: dict[Any, list[Interval]] = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            continue
        name, cat, args = e.get("name"), e.get("cat"), _args(e)
        if name == "record_param_comms":
            comms.append((i, e))
        elif cat in ("cuda_runtime", "cuda_driver") and _id(args.get("correlation")) is not None:
            launch_ext[args["correlation"]] = _id(args.get("External id"))
        elif cat == "kernel" and isinstance(name, str) and _KERNEL.match(name):
            kernels.append(e)
            _interval(e, args, nccl_on)
        elif cat == "kernel":
            _interval(e, args, compute_on)
        elif isinstance(name, str) and (m := _STEP.match(name)):
            steps.add(int(m.group(1)))
    if not comms:
        raise UsageError(f"{path}: a PyTorch profiler trace without communication events (no "
                         "record_param_comms: was the job distributed, and was record_shapes or the "
                         "CPU activity on?)")
    rank_id = _rank(doc, path)
    # in the order the calls began (a trace's events need not be sorted)
    comms.sort(key=lambda ie: (ie[1].get("ts") if isinstance(ie[1].get("ts"), (int, float)) else 0, ie[0]))
    calls, order, timing = _calls(comms, _kernel_us(kernels, launch_ext), path, warnings)
    pids = Counter(e.get("pid") for _, e in comms if isinstance(e.get("pid"), int) and not isinstance(e.get("pid"), bool))
    return RankRecord(path, "torch-trace", rank_id, calls, timing, steps=len(steps) or None, order=order,
                      pid=pids.most_common(1)[0][0] if pids else None,
                      steps_from=f"{path}: {len(steps)} ProfilerStep#N spans" if steps else None,
                      compute=compute.overlap(nccl_on, compute_on)), warnings


def _kernel_us(kernels: list[dict[str, Any]], launch_ext: dict[Any, Any]) -> dict[Any, float]:
    """External id of the launching op -> its NCCL kernels' time (us): a kernel names its op, else the
    runtime call that launched it does (``launch_ext``: correlation -> External id)."""
    kernel_us: dict[Any, float] = {}
    for k in kernels:
        args = _args(k)
        ext = _id(args.get("External id", launch_ext.get(_id(args.get("correlation")))))
        dur = k.get("dur")
        if ext is not None and isinstance(dur, (int, float)) and not isinstance(dur, bool) and 0 <= dur < 1e15:
            kernel_us[ext] = kernel_us.get(ext, 0.0) + float(dur)
    return kernel_us


def _calls(comms: list[tuple[int, dict[str, Any]]], kernel_us: dict[Any, float], path: str, warnings: list[str]
           ) -> tuple[Counter[Key], list[tuple[Key, str]], dict[Key, Timing]]:
    """The calls of the communication events (in order), the order of their keys and process groups, and
    each key's kernel times per call (a sendrecv's two halves one call)."""
    calls: Counter[Key] = Counter()
    order: list[tuple[Key, str]] = []
    halves = Halves[int]()
    call_us: dict[int, tuple[Key, float | None]] = {}   # a call's first event -> its key, its kernels' time
    for i, e in comms:
        where = f"{path}: traceEvents[{i}] (record_param_comms)"
        args = _args(e)
        key = _key(args, where, warnings)
        if key is None:
            continue
        pg, us = str(args.get("Process Group Name", ""))[:200], kernel_us.get(_id(args.get("External id")))
        cname = args["Collective name"]
        call = halves.call_of(pg, key, cname, _HALVES if cname in _HALVES else (), i)
        if call == i:
            calls[key] += 1
            order.append((key, pg))
            call_us[i] = (key, us)
        elif us is not None:  # the second half of a sendrecv: its kernels are the call's too
            first, t = call_us[call]
            call_us[call] = (first, (t or 0.0) + us)
    timing: dict[Key, Timing] = {}
    for key, us in call_us.values():
        if us is not None:
            timing.setdefault(key, Timing()).add(us)
    return calls, order, timing


def _interval(e: dict[str, Any], args: dict[str, Any], into: dict[Any, list[Interval]]) -> None:
    """A GPU kernel's (start, end) in us under its device (``args.device``, else the event's pid, which torch sets
    to the device for GPU rows); a kernel without a finite start and duration is left out."""
    ts, dur = _time_us(e.get("ts")), _time_us(e.get("dur"))
    if ts is not None and dur is not None:
        dev = args.get("device") if isinstance(args.get("device"), int) else _id(e.get("pid"))
        into.setdefault(dev, []).append((ts, ts + dur))


def _time_us(value: Any) -> float | None:
    """A JSON number of microseconds in [0, 1e18), else None."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e18
    return float(value) if ok else None


def _args(event: dict[str, Any]) -> dict[str, Any]:
    """An event's ``args``: an object, else none (a list or string there is not torch's)."""
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _id(value: Any) -> int | str | None:
    """An id (External id, correlation): an integer or string, else None (a list cannot key anything)."""
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _rank(doc: dict[str, Any], path: str) -> str:
    info = doc.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return f"rank {info['rank']} of {path}"
    return path


def _whole(value: Any) -> int:
    """A JSON integer (not a bool, a float or a string), else TypeError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _key(args: dict[str, Any], where: str, warnings: list[str]) -> Key | None:
    cname = args.get("Collective name")
    if not isinstance(cname, str) or cname not in NAMES:
        warnings.append(f"{where}: skipped collective {printable(repr(cname), 60)} (not one ccltune knows: {', '.join(sorted(NAMES))})")
        return None
    coll = collectives.REGISTRY[NAMES[cname]]
    try:
        # integers as the profiler writes them: int() would take 1.5 as 1, True as 1 and "7" as 7 (issue 32's audit)
        n_in, n_out, group = (_whole(args[k]) for k in ("In msg nelems", "Out msg nelems", "Group size"))
    except (KeyError, TypeError, ValueError, OverflowError):
        raise UsageError(f"{where}: needs integer 'In msg nelems', 'Out msg nelems' and 'Group size', got "
                         f"{ {k: args.get(k) for k in ('In msg nelems', 'Out msg nelems', 'Group size')} }") from None
    if not (1 <= group <= MAX_RANKS and 0 <= n_in <= MAX_COUNT and 0 <= n_out <= MAX_COUNT):
        raise UsageError(f"{where}: impossible sizes (In {n_in}, Out {n_out}, Group size {group})")
    dtype, size = _dtype(args.get("dtype"), where)
    # the API's per-rank count, as NCCL's COLL log prints it (see collectives/base.py)
    if coll.name == "all_gather":
        count = n_in
    elif coll.name == "reduce_scatter":
        count = n_out
    elif coll.name == "alltoall":
        count = n_in // group
    else:
        count = n_in
    return Key(coll.name, count * size * (group if coll.per_rank_count else 1), group, dtype, count)
