"""Side-by-side timing of several communicator configurations at one size.

Used by ``ccltune sweep`` (NCCL's default against forced candidates) and ``ccltune
validate`` (default against tuned rules). For one (collective, size):

1. one set of buffers (out-of-place), filled with exact inputs;
2. per configuration: the first call (NCCL may refuse a forced candidate: recorded as
   unavailable, agreed by all ranks), a correctness check, warm-up and a one-call estimate;
   then per configuration one CUDA graph of ``n`` calls, the same ``n`` for all of them
   (:func:`calls_per_replay`);
3. ``reps`` rounds; in each, every configuration's graph is replayed in turn (the order
   rotates every round), timed on the host clock between a barrier and a stream sync,
   so drift and thermal effects fall on all configurations alike.

Callers measure each collective's first size once through :func:`warm_collective` first and
keep nothing from it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ccltune.collectives import Collective
from ccltune.datatypes import DType
from ccltune.engines.base import Point, Watchdog
from ccltune.measure import buffers, point
from ccltune.status import RowStatus
from ccltune.store import Measurement


@dataclass
class Clock:
    """Where a sweep's (or validate's) wall time goes, by phase (seconds, this rank's host clock).

    Phases of :func:`measure_size`: ``allocation``, ``fill`` (the exact inputs, once a size),
    ``first call`` (a configuration's first call at a size; the first one makes its communicator),
    ``check`` (poison the output, call, compare), ``estimate`` (warm-up calls and the one-call
    estimate), ``capture`` (the CUDA graph of the timed calls), ``timed`` (the replays, with their
    barriers and the exchange of times). Callers add their own (``warm-up``, ``planning``,
    ``start-up``, ``teardown``) and sub-phases timed elsewhere (:meth:`add`, e.g. communicator
    inits). ``counts`` are how often each phase ran."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    parts: dict[str, str] = field(default_factory=dict)  # sub-phase -> the phase whose time includes it

    def add(self, phase: str, seconds: float, count: int = 1, part_of: str | None = None) -> None:
        """Time measured elsewhere (e.g. the engine's communicator inits, inside ``first call``)."""
        self.seconds[phase] += seconds
        self.counts[phase] += count
        if part_of:
            self.parts[phase] = part_of

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0
            self.counts[phase] += 1

    def summary(self) -> dict[str, dict[str, Any]]:
        return {k: {"seconds": round(v, 3), "count": self.counts[k], **({"part_of": self.parts[k]} if k in self.parts else {})}
                for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])}

    def line(self, total_s: float | None = None) -> str:
        """``12.3 s: timed 5.1 s (1400), capture 3.2 s (280), ...``: seconds and how often, a
        sub-phase in brackets after its phase; with a total, ``other`` is what no phase covers
        (start-up, the store, progress)."""
        top = sorted((k for k in self.seconds if k not in self.parts), key=lambda k: -self.seconds[k])
        out = []
        for k in top:
            subs = [f"{j} {self.seconds[j]:.1f} s ({self.counts[j]})" for j, of in self.parts.items() if of == k]
            out.append(f"{k} {self.seconds[k]:.1f} s ({self.counts[k]})" + (f" [{', '.join(subs)}]" if subs else ""))
        out += [f"{j} {self.seconds[j]:.1f} s ({self.counts[j]})" for j, of in self.parts.items() if of not in self.seconds]
        if total_s is None:
            return ", ".join(out)
        rest = total_s - sum(self.seconds[k] for k in top)
        return f"{total_s:.1f} s: " + ", ".join(out + [f"other {max(0.0, rest):.1f} s"])


def close_timed(engine: Any, clock: Clock) -> None:
    """Close ``engine`` under ``teardown``, after adding its communicator inits and aborts (inside
    other phases) to ``clock``."""
    for what, (secs, count) in getattr(engine, "comm_time", {}).items():
        if count:
            clock.add(f"communicator {what}", secs, count, part_of="first call and warm-up")
    with clock("teardown"):
        engine.close()


@dataclass
class SweepSettings:
    dtype: DType
    op: str
    reps: int
    graph: bool
    target_us: float       # how long one timed replay should last (sets iters per size)
    max_iters: int
    warmup: int
    timeout_s: float
    check: bool = True
    clock: Clock = field(default_factory=Clock)


Refused = dict[Any, tuple[str, int]]  # configuration -> (NCCL's message, the size it was refused at)


def iters_for(est_us: float, s: SweepSettings) -> int:
    """Calls per timed replay: enough that one replay lasts about ``target_us``."""
    return max(1, min(s.max_iters, round(s.target_us / max(est_us, 1e-3))))


def calls_per_replay(estimates_us: Iterable[float], s: SweepSettings) -> int:
    """One call count for every configuration at a size: the fastest estimate's (see measure_size)."""
    est = list(estimates_us)
    return iters_for(min(est), s) if est else 1


KEEP_MAX_BYTES = 64 << 20  # BufferCache keeps sizes up to this (the larger ones would crowd a small GPU)


class BufferCache(dict):
    """Buffers kept between visits of one collective's sizes (``ccltune sweep --mode model``
    measures a size again in later rounds): an allocation from ncclMemAlloc is slow
    (docs/performance.md, "where a sweep's time goes").
    Keyed by (collective, size in bytes, in place); sizes above KEEP_MAX_BYTES are not kept. Clear
    it when the collective changes (its buffers are not used again)."""


def op_waived(engine: Any, coll: Collective, size: int, s: SweepSettings, op: str) -> str | None:
    """Why ``engine`` cannot run ``coll`` at ``size`` with ``op`` when it can with ``s.op`` (gloo has no avg), else None."""
    lay = coll.layout(size, s.dtype.size, engine.ctx.world_size, engine.ctx.rank)
    base = Point(coll, lay, s.dtype, s.op, 0, lay.inplace_offsets is not None, 1, 0, 0, None)
    if engine.waive_reason(base):
        return None
    return engine.waive_reason(replace(base, op=op))


def measure_size(engine: Any, coll: Collective, size: int, configs: Sequence[Any], labels: Sequence[dict[str, Any]],
                 s: SweepSettings, refused: Refused | None = None, keep: BufferCache | None = None) -> list[Measurement]:
    """Rows for every configuration at ``size`` (``reps`` rows each when measured).

    ``refused`` (config -> (NCCL's message, size refused at)), kept by the caller for one collective: a configuration NCCL
    refused at one size is recorded 'unavailable' at the others without being tried again.
    NCCL refuses a forced algorithm/protocol for a whole collective (no enabled cell), and each
    try costs a communicator: it is aborted after a refusal and would be made again (about a
    second on one node). A collective that raises on the way (a peer killed) is a DistError naming who went."""
    with point.peer_errors(engine.ctx, f"{coll.name} at {size} B"):
        return _measure_size(engine, coll, size, configs, labels, s, refused, keep)


def _measure_size(engine: Any, coll: Collective, size: int, configs: Sequence[Any], labels: Sequence[dict[str, Any]],
                  s: SweepSettings, refused: Refused | None, keep: BufferCache | None) -> list[Measurement]:
    ctx = engine.ctx
    lay = coll.layout(size, s.dtype.size, ctx.world_size, ctx.rank)
    base = Point(coll, lay, s.dtype, s.op, 0, False, 1, s.warmup, 1 if s.graph and engine.supports_graph else 0, None)
    if engine.waive_reason(base) and lay.inplace_offsets is not None:
        base = replace(base, in_place=True)  # an API that is in-place only (torch, gloo)
    rows: list[Measurement] = []

    def row(i: int, status: str, *, time_us: float | None = None, wrong: int | None = None,
            note: str | None = None, rep: int = 0) -> Measurement:
        return point.measurement(base, ctx.world_size, ctx.n_nodes, status, time_us=time_us, wrong=wrong, note=note,
                             op=s.op if coll.reduces else None, graph=1 if s.graph else 0, rep=rep, **labels[i])

    reason = engine.waive_reason(base)
    if reason:
        return [row(i, RowStatus.WAIVED, note=reason) for i in range(len(configs))]
    clock = s.clock
    bufs, skipped = _filled_buffers(engine, base, s, keep)
    if bufs is None:
        return [row(i, RowStatus.SKIPPED, note=skipped) for i in range(len(configs))]
    what = f"{coll.name} at {lay.size_bytes} B"
    # every configuration is checked against the same expected output: computed once (up to one piece)
    expected: dict[int, Any] | None = {} if bufs.recv.numel() <= buffers.CHUNK else None
    wrong: dict[int, int] = {}
    est: dict[int, float] = {}
    for i, cfg in enumerate(configs):
        refusal = _refusal(refused, cfg, coll.name, lay.size_bytes)
        if refusal is not None:
            rows.append(row(i, RowStatus.UNAVAILABLE, note=refusal))
            continue
        pt = replace(base, config=cfg)
        with clock("first call"):
            out = point.first_call(engine, pt, bufs, s.timeout_s, on_stream=True, park=True)
        if out is not None:
            rows.append(row(i, out.status, note=out.note))
            if refused is not None and out.status == RowStatus.UNAVAILABLE:
                refused[cfg] = (out.note or "refused", lay.size_bytes)
            continue
        with Watchdog(engine, s.timeout_s, what):
            with clock("check"):
                if s.check:
                    wrong[i] = _check(engine, pt, bufs, lay, s, expected)
            with clock("estimate"):
                est[i] = _estimate(engine, pt, bufs, s)
    graphs = _capture_all(engine, base, configs, bufs, s, est, what)
    order = sorted(graphs)
    with Watchdog(engine, s.timeout_s * max(1, s.reps), what), clock("timed"):
        times = _timed_rounds(engine, graphs, configs, s.reps)
    wrong_all = ctx.allreduce_floats([float(wrong.get(i, 0)) for i in order], "sum", "check exchange")
    for i, w in zip(order, wrong_all):
        for rep, t in enumerate(times[i]):
            rows.append(row(i, RowStatus.OK, time_us=t * 1e6, wrong=int(w) if s.check else None, rep=rep))
    graphs.clear()
    return rows


def _capture_all(engine: Any, base: Point, configs: Sequence[Any], bufs: Any, s: SweepSettings,
                 est: dict[int, float], what: str) -> dict[int, tuple[Any, int]]:
    """Each estimated configuration's replay, all of one call count."""
    if est:  # ranks must agree on the call count: each configuration's slowest rank's estimate, in one exchange
        with s.clock("estimate"):
            est = dict(zip(est, engine.ctx.allreduce_floats(list(est.values()), "max", "iteration count")))
    # One call count for every configuration, from the fastest estimate: each replay's fixed cost
    # (barrier, graph launch, sync) is then spread over the same number of calls, so it cannot make
    # one configuration look slower than another. A count per configuration from its own one-call
    # estimate had given a configuration whose estimate caught a stall a few calls per replay where
    # the others had many, and made it look slower (docs/performance.md, "one call count per size").
    n = calls_per_replay(est.values(), s)
    graphs: dict[int, tuple[Any, int]] = {}
    for i in est:
        with Watchdog(engine, s.timeout_s, what), s.clock("capture"):
            graphs[i] = _capture(engine, replace(base, config=configs[i]), bufs, s, n)
    return graphs


def _filled_buffers(engine: Any, base: Point, s: SweepSettings, keep: BufferCache | None) -> tuple[Any, str | None]:
    """The size's buffers, filled with exact inputs once for every configuration (a first call needs them only
    to be there), kept across sweeps up to KEEP_MAX_BYTES; (None, why) when they cannot be allocated."""
    ctx, coll, lay = engine.ctx, base.coll, base.lay
    key = (coll.name, lay.size_bytes, base.in_place)
    bufs = keep.get(key) if keep is not None else None
    if bufs is None:
        with s.clock("allocation"):
            bufs, skipped = point.allocate(engine, base)
        if skipped is not None:
            return None, skipped.note
        assert bufs is not None
        if keep is not None and lay.size_bytes <= KEEP_MAX_BYTES:
            keep[key] = bufs
    if base.in_place or not bufs.filled:
        with s.clock("fill"):
            buffers.fill(engine.torch, bufs, coll, ctx.rank, ctx.world_size, s.op)
        bufs.filled = True
    return bufs, None


def _refusal(refused: Refused | None, cfg: Any, collective: str, size_bytes: int) -> str | None:
    """The note of ``cfg``'s UNAVAILABLE row when NCCL refused it (or its algorithm/protocol pair: no channel
    count makes that available) earlier in the sweep; None to try it."""
    if refused is None:
        return None
    pair = _pair(cfg)
    if cfg not in refused and pair in refused:
        note, at = refused[pair]
        refused[cfg] = (f"{note} (the {pair.label} pair)", at)
    if cfg not in refused:
        return None
    note, at = refused[cfg]
    # at the size it was refused at (the warm-up's size), the row says NCCL's own message
    return note if at == size_bytes else f"{note} (refused at {at} B; not tried again for {collective})"


def _timed_rounds(engine: Any, graphs: dict[int, tuple[Any, int]], configs: Sequence[Any],
                  reps: int) -> dict[int, list[float]]:
    """Each configuration's seconds per call in each of ``reps`` rounds, the mean over the ranks. Round r starts
    at the r-th configuration (rotated), so none is always timed first."""
    ctx = engine.ctx
    order = sorted(graphs)
    times: dict[int, list[float]] = {i: [] for i in order}
    for rep in range(reps):
        k = rep % max(len(order), 1)
        rotated = order[k:] + order[:k]
        local = [_replay(engine, graphs[i], configs[i]) for i in rotated]
        combined = ctx.allreduce_floats(local, "sum", "time exchange")
        for i, t in zip(rotated, combined):
            times[i].append(t / ctx.world_size)
    return times


def _pair(cfg: Any) -> Any:
    """The configuration that forces ``cfg``'s algorithm/protocol pair with NCCL's channel count (None when
    ``cfg`` forces no pair or no channel count)."""
    if getattr(cfg, "channels", None) and (getattr(cfg, "algo", None) or getattr(cfg, "proto", None)):
        return replace(cfg, channels=None)
    return None


def warm_collective(engine: Any, coll: Collective, size: int, configs: Sequence[Any], s: SweepSettings,
                    refused: Refused | None = None) -> None:
    """Measure ``size`` once for every configuration and keep nothing: the first size a communicator
    runs a collective at pays one-time costs (the algorithm's connections, kernel loading, the first
    graph launches): without this throwaway the first size's spreads were far wider and the default
    differed from its own twin there (docs/performance.md, "one call count per size").
    Its time goes to ``s.clock`` as one ``warm-up`` phase, not into the phases of the stored sizes."""
    labels = [dict(algo=None, proto=None, channels=None, config="warm-up") for _ in configs]
    with s.clock("warm-up"):
        measure_size(engine, coll, size, configs, labels, replace(s, clock=Clock()), refused)


def _check(engine: Any, pt: Point, bufs: buffers.Buffers, lay: Any, s: SweepSettings,
           expected: dict[int, Any] | None = None) -> int:
    ctx = engine.ctx
    engine.sync()
    if pt.in_place:
        buffers.fill(engine.torch, bufs, pt.coll, ctx.rank, ctx.world_size, pt.op)
    else:  # the input, written once per size, is never written by an out-of-place call: poison the output only
        bufs.recv.fill_(buffers.POISON)
    with engine.stream_context():
        engine.launch(pt, bufs)
    engine.sync()
    return buffers.count_wrong(engine.torch, bufs, pt.coll, lay, s.dtype, ctx.rank, ctx.world_size, pt.op, 0, expected)


def _estimate(engine: Any, pt: Point, bufs: buffers.Buffers, s: SweepSettings) -> float:
    """Warm-up calls, then one call timed on the host clock (µs), on this rank."""
    with engine.stream_context():
        engine.issue(pt, bufs, s.warmup, step=False)
        engine.sync()
        t0 = time.perf_counter()
        engine.launch(pt, bufs)
        engine.sync()
        return (time.perf_counter() - t0) * 1e6


def _capture(engine: Any, pt: Point, bufs: buffers.Buffers, s: SweepSettings, n: int) -> tuple[Any, int]:
    """(graph or None, calls per replay): ``n`` calls in one replay."""
    with engine.stream_context():
        if not (s.graph and engine.supports_graph):  # eager: the nccl engine issues the n calls from C
            return (engine.series(pt, bufs, n, step=False), n)
        graph = engine.capture(pt, bufs, n, step=False)
        graph.replay()
        engine.sync()
        return (graph.replay, n)


def _replay(engine: Any, entry: tuple[Any, int], config: Any) -> float:
    run, n = entry
    engine.start_together(config)
    with engine.stream_context():
        t0 = time.perf_counter()
        run()
        engine.sync()
        return (time.perf_counter() - t0) / n
