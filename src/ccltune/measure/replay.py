"""Timing a workload's replayed sequence, arm against arm (the measuring core of ``ccltune replay``).

A *round* issues the whole sequence (``workload.plan.sequence``: entries in captured or grouped
order, each with its calls and its captured communicator) eagerly, as the job issues them, on one
arm's communicators; the round's time is taken on the host clock between the ranks lining up
(``engine.start_together``) and the stream's sync, and averaged over the ranks. Arms are timed in
turn in every round, the order rotating from round to round, as ``measure.sweep`` does for
validate's arms, so drift falls on every arm alike. One untimed round per arm comes first (it
makes the communicators and their connections).

The run's lifecycle (joining, the engine, the database, signals, teardown) is not here: the
caller measures inside its session.

The breakdown per entry (:func:`entry_rows`) times each replayed entry alone, arm against arm, as
``validate`` times its arms (``measure.sweep.measure_size``: interleaved rounds of one call count per
arm), eagerly, on each arm's communicator of the entry's first captured communicator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ccltune import collectives, datatypes
from ccltune.engines.base import Point, Watchdog
from ccltune.errors import UsageError
from ccltune.measure import buffers
from ccltune.measure import point as measure_point
from ccltune.measure import sweep as measure_sweep
from ccltune.store import Measurement


@dataclass
class Item:
    """One run of the sequence: ``calls`` calls of one entry on captured communicator ``comm``."""

    entry: int
    comm: int
    calls: int
    point: Point
    bufs: Any


def prepare(engine: Any, keys: Sequence[Any], seq: Sequence[tuple[int, int, int]], op: str = "sum",
            fallback_dtype: str = "float") -> tuple[list[Item], list[str]]:
    """``keys``: the workload's entry keys (``workload.model.Key``: collective, size_bytes, datatype),
    indexed by ``seq``'s entry numbers. Items with their buffers (one allocation per entry, shared by every arm), and notes on the
    entries whose datatype this ccltune cannot issue (replayed as ``fallback_dtype``) or that the
    engine waives (not replayed)."""
    ctx = engine.ctx
    notes: list[str] = []
    points: dict[int, tuple[Point, Any] | None] = {}
    items: list[Item] = []
    for i, comm, n in seq:
        if i not in points:
            points[i] = found = _point(engine, keys[i], op, fallback_dtype, notes)
            if found is not None:
                pt, bufs = found
                buffers.fill(engine.torch, bufs, pt.coll, ctx.rank, ctx.world_size, pt.op)
        got = points[i]
        if got is not None:
            items.append(Item(i, comm, n, *got))
    return items, notes


def _point(engine: Any, k: Any, op: str, fallback: str, notes: list[str]) -> tuple[Point, Any] | None:
    coll = collectives.REGISTRY[k.collective]
    try:
        dt = datatypes.dtype(k.datatype or fallback)
    except UsageError:
        notes.append(f"{k.collective} {k.size_bytes} B: datatype {k.datatype} replayed as {fallback}")
        dt = datatypes.dtype(fallback)
    lay = coll.layout(k.size_bytes, dt.size, engine.ctx.world_size, engine.ctx.rank)
    pt = Point(coll, lay, dt, op, 0, False, 1, 0, 0, None)
    job_op = getattr(k, "op", None)
    if coll.reduces and job_op and job_op != op:  # the job's own op (its COLL log's): another kernel than sum's
        inplace = replace(pt, in_place=lay.inplace_offsets is not None)
        why = engine.waive_reason(replace(inplace, op=job_op)) if not engine.waive_reason(inplace) else None
        if why is None:
            pt = replace(pt, op=job_op)
        else:
            notes.append(f"{k.collective} {k.size_bytes} B: the job reduces with {job_op}, replayed with {op} ({why})")
    if engine.waive_reason(pt) and lay.inplace_offsets is not None:
        pt = replace(pt, in_place=True)  # an API that is in-place only (torch, gloo)
    why = engine.waive_reason(pt)
    if why:
        notes.append(f"{k.collective} {k.size_bytes} B: not replayed ({why})")
        return None
    bufs, skipped = measure_point.allocate(engine, pt)
    if skipped is not None:
        notes.append(f"{k.collective} {k.size_bytes} B: not replayed ({skipped.note})")
        return None
    return pt, bufs


def _round(engine: Any, items: Sequence[Item], config: Callable[[int], Any]) -> float:
    """Seconds of one round on this rank."""
    engine.start_together(config(items[0].comm) if items else None)
    with engine.stream_context():
        t0 = time.perf_counter()
        for it in items:
            pt = replace(it.point, config=config(it.comm))
            for _ in range(it.calls):
                engine.launch(pt, it.bufs)
        engine.sync()
        return time.perf_counter() - t0


def rounds(engine: Any, items: Sequence[Item], arms: dict[str, Callable[[int], Any]], reps: int,
           timeout_s: float) -> dict[str, list[float]]:
    """Seconds per round per arm, averaged over the ranks (``reps`` rounds each, after one untimed)."""
    ctx = engine.ctx
    names = list(arms)
    out: dict[str, list[float]] = {a: [] for a in names}
    with Watchdog(engine, timeout_s * (reps + 1) * max(1, len(names)), "replay") as dog, \
            measure_point.peer_errors(ctx, "replay", dog):
        for a in names:
            _round(engine, items, arms[a])
        for rep in range(reps):
            k = rep % len(names)
            order = names[k:] + names[:k]
            local = [_round(engine, items, arms[a]) for a in order]
            for a, t in zip(order, ctx.allreduce_floats(local, "sum", "replay time exchange")):
                out[a].append(t / ctx.world_size)
    return out


def entry_rows(engine: Any, items: Sequence[Item], arms: dict[str, Callable[[int], Any]],
               settings: measure_sweep.SweepSettings) -> dict[int, list[Measurement]]:
    """Per replayed entry (in order of first use), its rows per arm labelled ``config=<arm>``:
    ``settings.reps`` rounds of one call count for every arm, in the entry's own datatype and op."""
    first: dict[int, Item] = {}
    for it in items:
        first.setdefault(it.entry, it)
    names = list(arms)
    out: dict[int, list[Measurement]] = {}
    for i, it in first.items():
        configs = [arms[a](it.comm) for a in names]
        out[i] = measure_sweep.measure_size(engine, it.point.coll, it.point.lay.size_bytes, configs,
                                            [dict(config=a) for a in names],
                                            replace(settings, dtype=it.point.dt, op=it.point.op))
    return out
