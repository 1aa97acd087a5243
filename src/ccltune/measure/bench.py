"""The bench loop: every collective, every size, out-of-place then in-place, on every rank.

Rank 0 hands each finished row to ``on_row`` (the CLI prints and stores it at once).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ccltune.collectives import Collective
from ccltune.collectives.base import Layout
from ccltune.datatypes import DType
from ccltune.engines.base import Engine, Point
from ccltune.measure import point
from ccltune.measure.buffers import Buffers
from ccltune.ncclt.table import memory_line
from ccltune.periter import IterStats
from ccltune.status import RowStatus
from ccltune.store import Measurement

# point: ``warmup`` untimed calls at each size before it is timed. series: before a collective's
# first size is timed, ``warmup`` untimed out-of-place calls at every size from the smallest to
# -e, doubling (nccl-tests 2.19's TimeTest), then the per-size ones as in point.
# nccl-tests: nccl-tests' own procedure (TimeTest, BenchTime): the series warm-up and no per-size
# one (each size's first call is its only untimed one), and with -G the graph's first launch timed
# with the others (its first launch uploads the graph; ccltune otherwise launches it once untimed)
# and the checked call issued through a graph of its own.
WARMUP_MODES = ("point", "series", "nccl-tests")
SERIES_MODES = ("series", "nccl-tests")  # the modes that warm up over the whole series first


@dataclass
class BenchPlan:
    collectives: list[Collective]
    sizes: list[int]
    dtype: DType
    op: str
    root: int
    iters: int
    warmup: int
    graph: int
    check: int  # -c: checks after each point's timed calls (0: none; N: N times, as nccl-tests)
    average: str
    timeout_s: float
    config: Any = None                       # engine configuration (None: NCCL's default)
    config_label: str = "default"
    algo: str | None = None
    proto: str | None = None
    channels: int | None = None
    placements: tuple[bool, ...] = (False, True)
    warm_first: bool = True  # measure the run's first point once, unrecorded, before the loop
    warmup_mode: str = "point"  # 'series': nccl-tests' warm-up over the whole series first (WARMUP_MODES)
    extra: dict[str, Any] = field(default_factory=dict)
    # -d all, -o all, -r all (nccl-tests' loops inside one run): every datatype, op, root; -N: cycles
    dtypes: list[DType] = field(default_factory=list)   # empty: ``dtype`` only
    ops: list[str] = field(default_factory=list)        # empty: ``op`` only
    all_roots: bool = False
    cycles: int = 1  # -N; 0: until interrupted
    # nccl-tests' schedule and reports: -m, -z, -I/-K, -u, -C (see engines.base.Point)
    agg: int = 1
    blocking: int = 0
    per_iter: bool = False
    per_iter_skip: int = 0
    unalign: int = 0
    cputime: bool = False
    memory: bool = False  # -M: measure what MemoryReport holds
    # -e: nccl-tests allocates its buffers at this many bytes and steps each size's calls through
    # them (steps = -e // size), also where the last size is smaller (-b 8 -e 1M -f 32 ends at 256 KB)
    max_bytes: int = 0


@dataclass
class MemoryReport:
    """-M 1: nccl-tests' 'GPU memory usage' figures, in bytes, each the largest over the ranks, from
    the GPU's free memory: the communicator's creation (Initialization), the run's buffers
    (User-Allocated), and what free memory each collective's loop took (Collective)."""

    init: int = 0
    user: int = 0
    collective: dict[str, int] = field(default_factory=dict)

    def line(self, collective: str) -> str:
        return memory_line(self.init, self.user, self.collective.get(collective, 0))


def _free_max(engine: Engine, *free: int) -> list[int]:
    return [int(v) for v in engine.ctx.allreduce_floats([float(f) for f in free], "max", "GPU memory usage")]


@dataclass
class Row(Measurement):
    """A bench row: a stored measurement, plus what nccl-tests prints beside it (-C: rank 0's CPU
    time per call; -I: the per-iteration statistics), which the database keeps in ``extra``."""

    cpu_time_us: float | None = None
    iter_stats: IterStats | None = None

    def to_record(self) -> dict[str, Any]:
        """As every stored row: the measurement's fields, -C and -I in ``extra``."""
        return {f.name: getattr(self, f.name) for f in fields(Measurement)}


def extra_of(cpu_time_us: float | None, stats: IterStats | None) -> dict[str, Any] | None:
    """A row's ``extra``: -C's ``cpu_time_us``; -I's ``per_iter``: the statistics the table prints and
    every iteration's time (the slowest process's, as nccl-tests reduces them), -K's skipped ones included."""
    out: dict[str, Any] = {}
    if cpu_time_us is not None:
        out["cpu_time_us"] = cpu_time_us
    if stats is not None:
        out["per_iter"] = {k: getattr(stats, k) for k in ("min_us", "max_us", "avg_us", "p50_us", "p95_us",
                                                          "p99_us", "stdev_us", "cv_pct", "skipped")}
        out["per_iter"]["times_us"] = list(stats.times_us)
    return out or None


def variants(plan: BenchPlan, coll: Collective, nranks: int) -> list[BenchPlan]:
    """One plan per (datatype, op, root) of a collective, in nccl-tests' order (datatypes, then ops,
    then roots); ops only for a collective that takes one, roots only for a rooted one."""
    dts = plan.dtypes or [plan.dtype]
    ops = (plan.ops or [plan.op]) if coll.op_column else [plan.op]
    roots = list(range(nranks)) if plan.all_roots and coll.rooted else [plan.root]
    return [replace(plan, dtype=d, op=o, root=r) for d in dts for o in ops for r in roots]


def to_measurement(pt: Point, out: point.PointResult, nranks: int, n_nodes: int, plan: BenchPlan,
                   rep: int = 0) -> Row:
    m = point.measurement(pt, nranks, n_nodes, out.status, note=out.note,
                          time_us=out.time_us if out.status == RowStatus.OK else None, wrong=out.wrong, row_type=Row,
                          algo=plan.algo, proto=plan.proto, channels=plan.channels, config=plan.config_label, rep=rep)
    if out.status == RowStatus.OK and out.time_us is not None:
        m.cpu_time_us, m.iter_stats = out.cpu_time_us, out.iter_stats
        m.extra = extra_of(out.cpu_time_us, out.iter_stats)
    return m


def layout(coll: Collective, size: int, elem: int, ctx: Any) -> Layout:
    """bench's layout of ``coll`` at ``size`` bytes: for the group's size and rank (NCCL_TESTS_SPLIT), each
    rank's block aligned as nccl-tests aligns it (``Collective.ncclt_size``)."""
    return coll.layout(coll.ncclt_size(size, elem, ctx.comm_size), elem, ctx.comm_size, ctx.comm_rank)


def point_at(engine: Engine, plan: BenchPlan, coll: Collective, size: int, in_place: bool) -> Point:
    """The plan's point for ``coll`` at ``size`` bytes, in place or not, laid out for this rank."""
    ctx = engine.ctx
    lay = layout(coll, size, plan.dtype.size, ctx)
    root = plan.root if coll.rooted else 0
    ncclt = plan.warmup_mode == "nccl-tests"  # nccl-tests' procedure: its warm-up is the series' (warm_series)
    return Point(coll, lay, plan.dtype, plan.op, root, in_place, plan.iters, 0 if ncclt else plan.warmup,
                 plan.graph, plan.config, ncclt=ncclt, agg=plan.agg,
                 blocking=plan.blocking, per_iter=plan.per_iter, unalign=plan.unalign)


def warm_series(engine: Engine, plan: BenchPlan, coll: Collective) -> None:
    """nccl-tests' warm-up: ``plan.warmup`` eager out-of-place calls at each size from the smallest
    to -e (or the largest size, where larger), doubling, unrecorded, all on one pair of buffers of the largest size (as
    nccl-tests warms up on its own buffers; a pair per size would allocate, and with ncclMemAlloc
    register, every size twice). Where that pair does not fit, or a size fails, the warm-up is
    left out; the points themselves report why."""
    if not plan.sizes or plan.warmup < 1:
        return
    # from -b to -e, as nccl-tests' loop runs to maxbytes also where the last size is smaller
    size, top = plan.sizes[0], max(plan.sizes[-1], plan.max_bytes)
    big = point_at(engine, plan, coll, top, False)
    if engine.waive_reason(big) is not None:
        return
    bufs, _skipped = point.allocate(engine, big)
    if bufs is None:
        return
    while size <= top:
        pt = point_at(engine, plan, coll, size, False)
        view = Buffers(bufs.send[: pt.lay.send_elems], bufs.recv[: pt.lay.recv_elems], bufs.keep)
        try:
            if not point.warm(engine, pt, view, plan.warmup, plan.timeout_s):
                return
        finally:
            engine.release(pt, view)
        size = max(size * 2, size + 1)


def run(engine: Engine, plan: BenchPlan,
        on_start: Callable[[Collective], None] = lambda c: None,
        on_row: Callable[[Measurement, Measurement], None] = lambda a, b: None,
        on_end: Callable[[Collective, list[Measurement]], None] = lambda c, rows: None,
        memory: MemoryReport | None = None) -> list[Measurement]:
    """Every collective of ``plan``; with ``memory`` (-M), its figures are filled in before each
    ``on_end``."""
    ctx = engine.ctx
    everything: list[Measurement] = []
    if memory is not None:
        before = engine.free_memory()
        engine.connect(plan.config)  # the communicator, as nccl-tests creates it before its buffers
        made = engine.free_memory()
    # the largest buffer any point of the run needs, or -e where larger (an engine allocating once per
    # run sizes it here, as nccl-tests allocates -e bytes)
    engine.reserve(max([dt.size * (max(lay.send_elems, lay.recv_elems) + plan.unalign)
                        for coll in plan.collectives for size in plan.sizes for dt in plan.dtypes or [plan.dtype]
                        for lay in [layout(coll, size, dt.size, ctx)]]
                       + [plan.max_bytes + plan.unalign * plan.dtype.size if plan.sizes else 0], default=0))
    if memory is not None:
        memory.init, memory.user = _free_max(engine, before - made, made - engine.free_memory())
    if plan.collectives and plan.sizes and plan.warm_first:
        # The run's very first point pays one-time costs (lazy kernel loading, the first graph
        # instantiation, GPU clocks leaving idle; docs/performance.md, "Against nccl-tests").
        # nccl-tests warms up before its size loop; this measures that point once unrecorded.
        first = point_at(engine, plan, plan.collectives[0], plan.sizes[0], plan.placements[0])
        point.measure(engine, first, check=False, average=plan.average, timeout_s=plan.timeout_s)
    for coll in plan.collectives:
        on_start(coll)
        free = engine.free_memory() if memory is not None else 0
        rows: list[Measurement] = []
        for var in variants(plan, coll, ctx.min_comm_size):  # -r all: every group has these roots
            if var.warmup_mode in SERIES_MODES:
                warm_series(engine, var, coll)
            for _cycle in itertools.count() if var.cycles == 0 else range(var.cycles):  # -N (0: until stopped)
                rows.extend(_sizes(engine, var, coll, on_row))
        everything.extend(rows)
        if memory is not None:
            memory.collective[coll.name] = _free_max(engine, free - engine.free_memory())[0]
        on_end(coll, rows)
    return everything


def _sizes(engine: Engine, plan: BenchPlan, coll: Collective,
           on_row: Callable[[Measurement, Measurement], None]) -> list[Measurement]:
    """Every size of one (datatype, op, root): out-of-place then in-place."""
    ctx = engine.ctx
    rows: list[Measurement] = []
    for size in plan.sizes:
        pair = []
        for in_place in (False, True):
            pt = point_at(engine, plan, coll, size, in_place)
            if in_place in plan.placements:
                out = point.measure(engine, pt, check=plan.check, average=plan.average, timeout_s=plan.timeout_s,
                                    cputime=plan.cputime, per_iter_skip=plan.per_iter_skip)
            else:
                out = point.PointResult(RowStatus.WAIVED, note="placement not requested")
            pair.append(to_measurement(pt, out, ctx.comm_size, ctx.comm_nodes, plan))
        rows.extend(pair)
        on_row(pair[0], pair[1])
    return rows
