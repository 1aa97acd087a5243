"""What a launch can reproduce of a workload, and the order replay issues it in (pure).

A launch reproduces an entry when the entry was captured on as many ranks as the launch has
and, where the source says, on as many nodes. Everything else is listed with the reason,
never dropped silently: ``sweep --workload`` and ``replay`` print these lists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ccltune import collectives, datatypes
from ccltune.engines import MIN_PROCESSES
from ccltune.errors import UsageError
from ccltune.workload.model import Entry, Workload

ORDERS = ("captured", "grouped")


@dataclass(frozen=True)
class Skipped:
    index: int          # into Workload.entries
    entry: Entry
    reason: str


def _ranks(n: int) -> str:
    return f"{n} rank{'s' if n != 1 else ''}"


def launch_for(nranks: int, engine: str) -> str:
    """How to launch a replay of entries captured on ``nranks`` ranks, given this ``engine``."""
    if nranks < MIN_PROCESSES.get(engine, 1):
        return (f"--engine nccl --nproc {nranks} on a GPU, as the {engine} engine runs "
                f"{MIN_PROCESSES[engine]} processes or more")
    return f"--nproc {nranks}"


def fit(wl: Workload, world_size: int, n_nodes: int | None, *, tunable_only: bool = False,
        engine: str | None = None) -> tuple[list[int], list[Skipped]]:
    """(indices of the entries this launch reproduces, the others with the reason).

    ``n_nodes`` None: not known yet (before the job starts), not checked. ``tunable_only``: also
    skip what a sweep cannot tune (collectives NCCL passes no tuner, one-rank communicators).
    ``engine``: the launch's engine (None: not checked), which may not run so few processes."""
    keep: list[int] = []
    skipped: list[Skipped] = []
    least = MIN_PROCESSES.get(engine or "", 1)
    for i, e in enumerate(wl.entries):
        k = e.key
        why = None
        if k.collective not in collectives.REGISTRY:
            why = f"ccltune has no collective {k.collective!r}"
        elif k.nranks != world_size:
            why = (f"captured on {_ranks(k.nranks)}, this launch has {world_size}"
                   f" (launch it with {launch_for(k.nranks, engine or 'nccl')})")
        elif world_size < least:
            why = f"captured on {_ranks(k.nranks)}: launch it with {launch_for(k.nranks, engine or 'nccl')}"
        elif k.nnodes is not None and n_nodes is not None and k.nnodes != n_nodes:
            why = f"captured on {k.nnodes} node(s), this launch spans {n_nodes}"
        elif tunable_only and collectives.REGISTRY[k.collective].tuner_func is None:
            why = f"NCCL passes {k.collective} to no tuner: nothing to sweep"
        elif tunable_only and k.nranks < 2:
            why = "NCCL does not consult a tuner with one rank: nothing to sweep"
        if why is None:
            keep.append(i)
        else:
            skipped.append(Skipped(i, e, why))
    return keep, skipped


def job_dtypes(wl: Workload) -> dict[tuple[str, int], Any]:
    """(collective, size_bytes) -> the datatype (``datatypes.DType``) the job issues there: what ``sweep
    --workload`` measures that point in unless -d says otherwise (a reduction's kernel depends on the datatype;
    a job's 4-byte float barrier beside its bfloat16 all_reduces is measured in float). Entries of one size in
    several datatypes (one point: the tuner sees bytes): the one moving the most bytes there. A size whose
    entries name no datatype ccltune has (capture files, Inspector) takes the one the collective moves the most
    bytes in, when it has one."""
    at: dict[tuple[str, int], dict[str, int]] = {}
    by: dict[str, dict[str, int]] = {}
    for e in wl.entries:
        if e.key.datatype in datatypes.DTYPES:
            for got in (at.setdefault((e.key.collective, e.key.size_bytes), {}), by.setdefault(e.key.collective, {})):
                got[e.key.datatype] = got.get(e.key.datatype, 0) + e.bytes_total
    out: dict[tuple[str, int], Any] = {}
    for e in wl.entries:
        bytes_in = at.get((e.key.collective, e.key.size_bytes)) or by.get(e.key.collective)
        if bytes_in:
            out[(e.key.collective, e.key.size_bytes)] = datatypes.DTYPES[max(bytes_in, key=lambda n: (bytes_in[n], n))]
    return out


def job_ops(wl: Workload) -> dict[tuple[str, int], str]:
    """(collective, size_bytes) -> the reduction op the job issues there, for the reducing collectives whose op a
    source gave (NCCL's COLL log): what ``sweep --workload`` measures that point with unless -o says otherwise
    (NCCL's kernel for avg or max is not sum's). Entries of one size in several ops: the one with the most calls."""
    by: dict[tuple[str, int], dict[str, int]] = {}
    for e in wl.entries:
        coll = collectives.REGISTRY.get(e.key.collective)
        if coll is not None and coll.reduces and e.key.op in datatypes.OPS:
            got = by.setdefault((e.key.collective, e.key.size_bytes), {})
            got[e.key.op] = got.get(e.key.op, 0) + e.calls
    return {k: max(d, key=lambda n: (d[n], n)) for k, d in by.items()}


def sweep_points(wl: Workload, world_size: int, n_nodes: int | None, dtype: Any,
                 only: Iterable[str] | None = None, dtypes: dict[tuple[str, int], Any] | None = None
                 ) -> tuple[dict[str, list[int]], list[Skipped]]:
    """What ``sweep --workload`` measures: collective -> the sizes (bytes, ascending) of the entries this
    launch can tune (:func:`fit` with ``tunable_only``), and every other entry with the reason.

    A sweep times one datatype (``dtype``, a ``datatypes.DType``): a size that is not a whole number of
    its elements on every rank would be stored under another size, which ``tune --workload`` would
    not find, so it is listed with the datatype that measures it. ``only``: the collectives asked
    for (None: all). ``dtypes``: (collective, size_bytes) -> the datatype that point is swept in instead
    (:func:`job_dtypes`)."""
    keep, skipped = fit(wl, world_size, n_nodes, tunable_only=True)
    wanted = None if only is None else set(only)
    points: dict[str, set[int]] = {}
    for i in keep:
        e = wl.entries[i]
        k = e.key
        dt = (dtypes or {}).get((k.collective, k.size_bytes), dtype)
        stored = collectives.REGISTRY[k.collective].layout(k.size_bytes, dt.size, world_size, 0).size_bytes
        if wanted is not None and k.collective not in wanted:
            skipped.append(Skipped(i, e, f"{k.collective} is not among the collectives asked for"))
        elif stored != k.size_bytes:
            skipped.append(Skipped(i, e, f"{k.size_bytes} B does not divide into {dt.name} elements on "
                                         f"{world_size} ranks (the sweep would measure {stored} B): sweep it "
                                         f"with -d {_whole_type(k.datatype)}"))
        else:
            points.setdefault(k.collective, set()).add(k.size_bytes)
    skipped.sort(key=lambda s: s.index)
    return {c: sorted(v) for c, v in points.items()}, skipped


def _whole_type(datatype: str | None) -> str:
    """The datatype to sweep an entry with: its own when ccltune has it, else int8 (any byte count)."""
    try:
        return datatypes.dtype(datatype).name if datatype else "int8"
    except UsageError:
        return "int8"


def sequence(wl: Workload, keep: Iterable[int], order: str = "captured") -> tuple[list[tuple[int, int, int]], str | None]:
    """One replay round: (entry index, communicator index, calls) in issue order, and a note when
    the captured order was asked for but the workload has none (capture files keep no order).

    ``captured``: the workload's ``order`` (one rank's calls), without the entries not kept.
    ``grouped``: each (entry, communicator) once with all its calls, in order of first use (by
    share of bytes when the workload has no order). Without an order every entry is on
    communicator 0 and issued ``calls`` times."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    kept = set(keep)
    note = None
    if wl.order:
        runs = [(i, c, n) for i, c, n in wl.order if i in kept]
    else:
        runs = [(i, 0, wl.entries[i].calls) for i in sorted(kept) if wl.entries[i].calls]
        if order == "captured":
            note = "the workload keeps no issue order (capture files count calls only): replayed grouped"
    if order == "grouped" or not wl.order:
        total: dict[tuple[int, int], int] = {}
        for i, c, n in runs:
            total[(i, c)] = total.get((i, c), 0) + n
        return [(i, c, n) for (i, c), n in total.items()], note
    merged: list[tuple[int, int, int]] = []
    for i, c, n in runs:  # dropping entries may bring two runs of one entry together
        if merged and merged[-1][:2] == (i, c):
            merged[-1] = (i, c, merged[-1][2] + n)
        else:
            merged.append((i, c, n))
    return merged, note


def nothing_to_replay(wl: Workload, world_size: int, engine: str) -> str:
    """Why a launch replays nothing, and the launches that would (one per captured rank count)."""
    counts = sorted({e.key.nranks for e in wl.entries})
    ways = "; ".join(f"{_ranks(n)}: {launch_for(n, engine)}" for n in counts)
    return (f"nothing this launch (the {engine} engine, {world_size} process{'es' if world_size != 1 else ''}) "
            f"can replay (the reasons above); the workload's entries were captured on {ways}")


def communicators(seq: Iterable[tuple[int, int, int]]) -> list[int]:
    """The captured communicators a round uses, in order of first use."""
    return list(dict.fromkeys(c for _, c, _ in seq))
