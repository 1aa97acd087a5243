"""Measure one point on every rank, and agree on its outcome.

Every rank takes the same decisions in the same order (waive, out of memory, NCCL
refusal), exchanging a flag over the host group before any GPU wait, so one rank's
failure never leaves the others waiting on a collective that will not come.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ccltune.engines.base import Engine, Point, Watchdog, close_graph
from ccltune.errors import DistError
from ccltune.measure import buffers
from ccltune.periter import IterStats, compute, slowest_process
from ccltune.status import RowStatus
from ccltune.store import Measurement

AVERAGES = ("avg", "min", "max", "rank0")


@dataclass
class PointResult:
    """One point measured (or not): its row status, time and wrong count, and why not."""

    status: str                  # ok, waived, skipped, unavailable, error
    time_us: float | None = None
    wrong: int | None = None
    note: str | None = None
    cpu_time_us: float | None = None       # -C 1: rank 0's host time per call (nccl-tests prints its main thread's)
    iter_stats: IterStats | None = None    # -I 1: per-iteration statistics over every process


def measurement(pt: Point, n_ranks: int, n_nodes: int, status: str, *, time_us: float | None = None,
                wrong: int | None = None, note: str | None = None, row_type: type[Measurement] = Measurement,
                **fields: Any) -> Any:
    """A row of ``pt`` (a ``row_type``); with a time (µs), its algbw (size / time) and busbw (algbw x the
    collective's bus factor). ``fields``: the rest of the row (configuration labels, rep), or overrides."""
    coll, lay = pt.coll, pt.lay
    row: dict[str, Any] = dict(
        collective=coll.name, size_bytes=lay.size_bytes, count=lay.count, dtype=pt.dt.name,
        op=pt.op if coll.op_column else None, root=pt.root if coll.rooted else None, in_place=pt.in_place,
        n_ranks=n_ranks, n_nodes=n_nodes, status=status, note=note, graph=pt.graph)
    m = row_type(**{**row, **fields})
    if time_us is not None:
        m.time_us = time_us
        m.algbw_gbps = lay.size_bytes / time_us / 1e3 if time_us > 0 else 0.0
        m.busbw_gbps = m.algbw_gbps * coll.bus_factor(n_ranks)
        m.wrong = wrong
    return m


@contextmanager
def peer_errors(ctx: Any, what: str, dog: Watchdog | None = None) -> Iterator[None]:
    """A measurement whose collective raises (gloo's 'Connection reset by peer' when another rank was
    killed, a wait the watchdog aborted) ends in a DistError naming the ranks that stopped answering
    (``ctx.peer_failure``'s roll call), or this rank and the first line: one line, never the library's
    traceback. bench, sweep and replay measure inside it."""
    try:
        yield
    except DistError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the library raises, the roll call says who went
        raise ctx.peer_failure(what, "timed out" if dog is not None and dog.fired else str(exc)) from None


def is_oom(message: str) -> bool:
    text = message.lower()
    return "out of memory" in text or "allocate memory" in text


def first_line(exc: BaseException) -> str:
    """An exception's first line, for a row's note (its type's name when it has no message)."""
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def agree(engine: Engine, failed: bool, what: str) -> bool:
    """True if any rank failed."""
    return engine.ctx.allreduce_floats([1.0 if failed else 0.0], "max", what)[0] > 0


def agree_memory(engine: Engine, error: str | None, what: str) -> bool:
    """True if any rank ran out of memory (``error`` holds this rank's message, None if fine).

    Raises DistError when any rank failed with something else: a CUDA or NCCL fault (an illegal
    address, a sticky launch failure) is not a size that does not fit, and every later call on that
    GPU fails too, so the run stops there (rows so far are kept) instead of calling every size
    skipped.
    """
    ctx = engine.ctx
    fault_here = error is not None and not is_oom(error)
    failed, fault = ctx.allreduce_floats([1.0 if error is not None else 0.0, 1.0 if fault_here else 0.0], "max", what)
    if fault:
        if fault_here and not ctx.is_root:  # only rank 0 prints: the others say theirs on stderr
            print(f"ccltune: rank {ctx.rank}: {what} failed: {error}", file=sys.stderr, flush=True)
        where = f": {error}" if fault_here else " on another rank (see its stderr)"
        raise DistError(f"{what} failed with a GPU fault, not a lack of memory{where}; stopping the run")
    return failed > 0


def _combine(engine: Engine, seconds: float, average: str) -> float:
    ctx = engine.ctx
    if average == "rank0":
        return ctx.allreduce_floats([seconds if ctx.is_root else 0.0], "sum", "time exchange")[0]
    if average == "avg":
        return ctx.allreduce_floats([seconds], "sum", "time exchange")[0] / ctx.world_size
    return ctx.allreduce_floats([seconds], average, "time exchange")[0]


def allocate(engine: Engine, pt: Point) -> tuple[buffers.Buffers | None, PointResult | None]:
    """The point's buffers, or (None, a 'skipped' outcome) when any rank ran out of memory."""
    bufs, err = None, None
    try:
        bufs = buffers.make(engine.torch, pt.lay, pt.dt, pt.in_place, engine.device, engine.alloc(pt), pt.unalign)
        engine.arrange(pt, bufs)
    except (RuntimeError, MemoryError) as exc:  # torch.cuda.OutOfMemoryError is a RuntimeError
        err = first_line(exc)
    if agree(engine, err is not None, "allocation"):  # whatever the allocator says, the size did not fit
        return None, PointResult(RowStatus.SKIPPED, note=f"out of memory{': ' + err if err else ' on another rank'}")
    return bufs, None


def first_call(engine: Engine, pt: Point, bufs: buffers.Buffers, timeout_s: float, *, prepare: bool = False,
               on_stream: bool = False, park: bool = False) -> PointResult | None:
    """``pt``'s first call on every rank, agreed before anyone waits on it: None when it ran on every
    rank; else the outcome every rank records: 'skipped' when a rank ran out of memory, 'unavailable'
    when NCCL refused a forced configuration (no algorithm/protocol for that collective) or another
    rank failed. ``prepare``: the engine's per-buffer set-up first; ``on_stream``: the call on the
    engine's stream. A refused configuration's communicator is aborted where the call was enqueued
    (those ranks must not wait on it); with ``park``, set aside where NCCL refused it (nothing was
    enqueued on it: see the nccl engine's ``park_comm``)."""
    err = None
    with Watchdog(engine, timeout_s, f"{pt.coll.name} at {pt.lay.size_bytes} B"):
        try:
            if prepare:
                engine.prepare(pt, bufs)
            if on_stream:
                with engine.stream_context():
                    engine.launch(pt, bufs)
            else:
                engine.launch(pt, bufs)
        except Exception as exc:  # noqa: BLE001 - NcclError, torch errors: reported as a row
            err = first_line(exc)
    if not agree(engine, err is not None, "first call"):
        return None
    if pt.config is not None:
        if park and err is not None:
            engine.park_comm(pt.config)
        else:
            engine.drop_comm(pt.config, abort=True)
    if err and is_oom(err):
        return PointResult(RowStatus.SKIPPED, note=f"out of memory: {err}")
    return PointResult(RowStatus.UNAVAILABLE, note=err or "refused on another rank")


def warm(engine: Engine, pt: Point, bufs: buffers.Buffers, calls: int, timeout_s: float) -> bool:
    """``calls`` untimed calls of ``pt`` on ``bufs``; False (on every rank) when any rank failed."""
    err = None
    with Watchdog(engine, timeout_s, f"warm-up {pt.coll.name} at {pt.lay.size_bytes} B"):
        try:
            engine.prepare(pt, bufs)
            with engine.stream_context():  # the stream engine.sync() waits for: the buffers outlive the calls
                engine.issue(pt, bufs, calls, step=False)
            engine.sync()
        except Exception as exc:  # noqa: BLE001 - the point itself reports the failure
            err = str(exc) or type(exc).__name__
    if agree(engine, err is not None, "warm-up"):
        if pt.config is not None:
            engine.drop_comm(pt.config, abort=True)
        return False
    return True


# One rank in place: NCCL returns without moving a byte (an empty CUDA graph under -G), so a time
# would be launch overhead and its "bandwidth" a meaningless millions of GB/s. Out of place it copies.
ONE_RANK_IN_PLACE = "one rank in place: the collective has nothing to move, so no bandwidth to measure"
IN_PLACE_UNCHECKED = ("in place the send and receive buffers are one, written while being read: timed, not "
                      "checked (nccl-tests prints #wrong N/A too)")


def waive_reason(engine: Engine, pt: Point) -> str | None:
    """Why ``pt`` is not measured here (None: it is), the same on every rank."""
    if pt.in_place and pt.lay.inplace_offsets is None:
        return "no in-place form"
    if pt.in_place and engine.ctx.min_comm_size == 1:
        return ONE_RANK_IN_PLACE
    return engine.waive_reason(pt)


def _iter_stats(engine: Engine, iter_seconds: list[float], skip: int) -> IterStats:
    """-I: every process's per-iteration times (one row each, as nccl-tests gathers one per process),
    iteration i's time the slowest process's, summarised after ``skip`` iterations."""
    ctx, n = engine.ctx, len(iter_seconds)
    mine = [0.0] * (n * ctx.world_size)
    mine[ctx.rank * n:(ctx.rank + 1) * n] = [t * 1e6 for t in iter_seconds]
    both = ctx.allreduce_floats(mine, "sum", "per-iteration times") if ctx.world_size > 1 else mine
    rows = [both[r * n:(r + 1) * n] for r in range(ctx.world_size)]
    return compute(slowest_process(rows), skip, rows if len(rows) > 1 else ())


def measure(engine: Engine, pt: Point, *, check: int, average: str, timeout_s: float, cputime: bool = False,
            per_iter_skip: int = 0) -> PointResult:
    reason = waive_reason(engine, pt)
    if reason:
        return PointResult(RowStatus.WAIVED, note=reason)
    bufs, skipped = allocate(engine, pt)
    if skipped is not None:
        return skipped
    assert bufs is not None
    try:
        return _measure(engine, pt, bufs, check=check, average=average, timeout_s=timeout_s, cputime=cputime,
                        per_iter_skip=per_iter_skip)
    finally:
        engine.release(pt, bufs)
        del bufs


def _check(engine: Engine, pt: Point, bufs: buffers.Buffers) -> tuple[float, float]:
    """One check: fill, one call, count this rank's wrong elements; (wrong, 1.0 if unchecked)."""
    torch, ctx = engine.torch, engine.ctx
    # The fill, the checked call and the wait on one stream: the graph below replays on the engine's
    # stream, and a fill left on another stream raced it (4 x H200 -G 10 --warmup-mode nccl-tests: in-place
    # all_reduce of 128 MB and 512 MB read half-written inputs; docs/performance.md, 2026-11-28)
    with engine.stream_context():
        buffers.fill(torch, bufs, pt.coll, ctx.comm_rank, ctx.comm_size, pt.op)
        if pt.ncclt and pt.graph and engine.supports_graph and pt.lay.count > 0:
            # nccl-tests' procedure under -G: the checked call is captured into a graph of its own and launched
            graph = engine.capture(pt, bufs, 1, step=False)
            graph.replay()
            engine.sync()
            close_graph(graph)
        else:
            engine.launch(pt, bufs)
        engine.sync()
    try:  # local work only: a rank that runs out of memory here leaves nobody waiting
        wrong = buffers.count_wrong(torch, bufs, pt.coll, pt.lay, pt.dt, ctx.comm_rank, ctx.comm_size, pt.op,
                                    pt.root)
        return float(wrong), 0.0
    except (RuntimeError, MemoryError) as exc:
        if not is_oom(str(exc)):
            raise
        return 0.0, 1.0


def _measure(engine: Engine, pt: Point, bufs: buffers.Buffers, *, check: int, average: str,
             timeout_s: float, cputime: bool, per_iter_skip: int) -> PointResult:
    torch, ctx = engine.torch, engine.ctx
    oom = None
    try:
        buffers.fill(torch, bufs, pt.coll, ctx.comm_rank, ctx.comm_size, pt.op)
    except (RuntimeError, MemoryError) as exc:  # the local int64 temporaries
        oom = first_line(exc)
        oom = "out of memory" if isinstance(exc, MemoryError) and not is_oom(oom) else oom
    if agree_memory(engine, oom, "filling the input"):
        return PointResult(RowStatus.SKIPPED, note=f"out of memory filling the input{': ' + oom if oom else ' on another rank'}")
    # the first call: NCCL may refuse a forced configuration here; agree before waiting
    refused = first_call(engine, pt, bufs, timeout_s, prepare=True)
    if refused is not None:
        return refused
    what = f"{pt.coll.name} at {pt.lay.size_bytes} B"
    with Watchdog(engine, timeout_s, what) as dog, peer_errors(ctx, what, dog):
        engine.sync()
        timing = engine.time_point(pt, bufs)
        wrong, unchecked = 0.0, 0.0
        checks = 0 if pt.in_place and not pt.coll.checks_in_place else int(check)
        for _ in range(checks):  # -c N: N checks, up to the first that finds wrong values (nccl-tests)
            wrong, unchecked = _check(engine, pt, bufs)
            if int(check) > 1 and ctx.allreduce_floats([wrong + unchecked], "sum", "check pass")[0]:
                break
    if dog.fired:
        raise ctx.peer_failure(what, "timed out")
    t = _combine(engine, timing.seconds, average)
    wrong_all, unchecked_all = ctx.allreduce_floats([wrong, unchecked], "sum", "check exchange")
    out = PointResult(RowStatus.OK, time_us=t * 1e6, wrong=int(wrong_all))
    if cputime:
        out.cpu_time_us = 1e6 * _combine(engine, timing.cpu_seconds or 0.0, "rank0")
    if timing.iter_seconds is not None:
        out.iter_stats = _iter_stats(engine, timing.iter_seconds, per_iter_skip)
    if not check:  # -c 0: unknown, not "0 wrong" (nccl-tests prints N/A)
        out.wrong = None
    elif not checks:
        out.wrong, out.note = None, IN_PLACE_UNCHECKED
    elif unchecked_all:
        out.wrong, out.note = None, "result not checked: out of memory while checking"
    return out
