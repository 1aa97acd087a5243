"""A whole sweep: every collective, size and candidate, exhaustive or model-guided, resumable.

``measure.sweep`` times the candidates at one size; this walks the sizes. Exhaustive mode visits
every size once; model mode (``tune.planner``) starts from a few anchor sizes and refines where the
model says the best candidate may change, rank 0 planning each round and broadcasting the plan.
A resumed run skips the points already stored (the same on every rank: rank 0 reads them).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccltune import engines
from ccltune.commconfig import CommConfig
from ccltune.engines import library
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import Loaded
from ccltune.measure.session import Session, plugin_options
from ccltune.status import RowStatus, RunStatus
from ccltune.tune.derive import tunable
from ccltune.workload import plan as workload_plan


@dataclass
class SweepPlan:
    """What to sweep (checked by the caller)."""

    collectives: list[Any]
    sizes: list[int]
    candidates: list[CommConfig]
    settings: measure_sweep.SweepSettings
    mode: str = "exhaustive"          # or "model"
    resume: int | None = None         # the run to continue
    args: dict[str, Any] = field(default_factory=dict)  # recorded with the run
    # --workload: its points replace collectives x sizes (``collectives`` then only restricts them)
    workload: Any = None
    points: dict[str, list[int]] | None = None   # collective name -> sizes, set from the workload in run()
    dtypes: dict[tuple[str, int], Any] | None = None  # --workload without -d: (collective, size) -> the job's datatype
    ops: dict[tuple[str, int], str] | None = None  # --workload without -o: (collective, size) -> the job's op
    under_load: int | None = None     # --under-load M: a MatrixLoad runs while the sizes are measured
    # rank 0, --resume: raises when the stored run is not this sweep (world size given)
    check_resume: Callable[[Any, int], None] = lambda run, world_size: None
    # rank 0, before anything is measured: candidates this process cannot measure (library.deferred)
    on_deferred: Callable[[library.Deferred], None] = lambda deferred: None


@dataclass
class SweepResult:
    run_id: int | None = None
    rows: int = 0                     # measured by this launch
    kept: int = 0                     # --resume: rows the run already held (rank 0)
    timed: int = 0
    untimed: Counter = field(default_factory=Counter)  # why points were not timed -> how many
    wall_s: float = 0.0
    status: str = RunStatus.FAILED
    skipped: list[Any] = field(default_factory=list)  # --workload: entries not swept (workload.plan.Skipped)
    load: dict[str, Any] | None = None                # --under-load: what the load achieved
    deferred: library.Deferred | None = None          # candidates recorded unavailable: a run of their own
    op_notes: dict[tuple[str, int], str] = field(default_factory=dict)  # points not measured in the job's op, why


class Progress:
    """What the sweep says as it goes (rank 0); the CLI draws it."""

    def step(self, what: str, advance: int = 1) -> None: ...

    def close(self) -> None: ...


def run(plan: SweepPlan, session: Session, engine_opts: Any,
        progress: Callable[[bool, int], Progress] = lambda root, total: Progress()) -> SweepResult:
    """Measure ``plan`` in ``session`` (entered here). The result's status is the run's."""
    t_start = time.perf_counter()
    res = SweepResult()
    settings = plan.settings
    with session as s:
        workdir = tempfile.mkdtemp(prefix="ccltune-sweep-")
        engine = s.start_engine(plugin_options(engine_opts, workdir) if engines.kind(s.engine_name).own_comm else engine_opts)
        settings.clock.add("start-up", time.perf_counter() - t_start)  # rendezvous, CUDA, NCCL library
        s.clock = settings.clock
        res.deferred = fit_candidates(plan, getattr(engine, "facts", None), s.is_root)
        if plan.workload is not None:
            _fit_workload(plan, s.ctx, res)
        done = _open_run(s, plan)
        res.run_id = s.run_id
        if s.store is not None and plan.resume is not None:
            res.kept = s.store.count_measurements(plan.resume)
        bar = progress(s.is_root, sum(len(_sizes(plan, c)) for c in plan.collectives))

        def kept() -> int:
            """The run's rows as stored: a stop (a rank killed, Ctrl-C) between storing a size's rows and
            counting them must not make the summary undercount what the database holds."""
            if s.store is not None and s.run_id is not None:
                return s.store.count_measurements(s.run_id)
            return res.kept + res.rows

        def summary() -> dict[str, Any]:
            bar.close()
            res.wall_s = time.perf_counter() - t_start
            return {"rows": kept(), "mode": plan.mode, "virtual_nodes": s.virtual_nodes,
                    "wall_s": round(res.wall_s, 3), "time": settings.clock.summary(),
                    **({"under_load": res.load} if plan.under_load else {}),
                    **({"workload_points": plan.points, "workload_skipped": [
                        {"entry": k.index, "reason": k.reason} for k in res.skipped]}
                       if plan.workload is not None else {})}
        s.summary = summary
        with s.running(lambda: f"sweep interrupted; {kept()} rows kept in {s.db}; resume with --resume {s.run_id}"):
            with Loaded(engine, plan.under_load) as load:
                for coll in plan.collectives:
                    _sweep_collective(s, plan, coll, done, res, bar)
            res.load = load.result
    res.status = s.status
    return res


def fit_candidates(plan: SweepPlan, facts: library.LibraryFacts | None, is_root: bool) -> library.Deferred | None:
    """The plan's candidates checked against the loaded library (an algorithm it cannot run is a usage error),
    and those this process cannot measure (RCCL's LL128 after NCCL's default), announced on rank 0 before
    anything is measured; they stay in the plan and are recorded unavailable with the reason."""
    plan.candidates = library.sweep_candidates(facts, plan.candidates)
    found = library.deferred(facts, plan.candidates)
    if found is not None and is_root:
        plan.on_deferred(found)
    return found


def _fit_workload(plan: SweepPlan, ctx: Any, res: SweepResult) -> None:
    """The workload's points this launch can tune (the same on every rank: a pure function of the file
    and the launch), the others into ``res.skipped``."""
    plan.points, res.skipped = workload_plan.sweep_points(plan.workload, ctx.world_size, ctx.n_nodes,
                                                          plan.settings.dtype, [c.name for c in plan.collectives],
                                                          plan.dtypes)
    plan.collectives = [c for c in plan.collectives if c.name in plan.points]


def _sizes(plan: SweepPlan, coll: Any) -> list[int]:
    return plan.points[coll.name] if plan.points is not None else plan.sizes


def _open_run(s: Session, plan: SweepPlan) -> set[tuple[str, int, str]]:
    """A new sweep run, or the one named by --resume; the points it already has, on every rank."""
    done: set[tuple[str, int, str]] = set()
    if s.store is not None:
        if plan.resume is not None:
            plan.check_resume(s.store.run(plan.resume), s.joined.world_size)
            for m in s.store.measurements(plan.resume):
                done.add((m.collective, m.size_bytes, m.config))
            s.resume(plan.resume)
        else:
            s.begin(plan.args, s.environment())
    # every rank must skip the same points: rank 0 read them from the database
    blob = json.dumps(sorted(done)).encode() if s.is_root else None
    return {tuple(x) for x in json.loads(s.joined.broadcast_bytes(blob, "points already measured"))}


def requested_sizes(coll: Any, sizes: list[int], dtype_size: Callable[[int], int], ctx: Any) -> dict[int, int]:
    """Stored size -> the size asked for: the model plans in the sizes the rows are stored under
    (the layout may round them; ``dtype_size``: the element size a size is measured in)."""
    requested: dict[int, int] = {}
    for size in sizes:
        requested.setdefault(coll.layout(size, dtype_size(size), ctx.world_size, ctx.rank).size_bytes, size)
    return requested


def _sweep_collective(s: Session, plan: SweepPlan, coll: Any,
                      done: set[tuple[str, int, str]], res: SweepResult, bar: Progress) -> None:
    from ccltune.tune import planner

    ctx, engine, cands, sizes = s.joined, s.engine, plan.candidates, _sizes(plan, coll)
    store, run_id = s.store, s.run_id
    rows_so_far = [m for m in (store.measurements(run_id, collective=coll.name) if store else [])]
    # NCCL refuses a forced candidate per collective, not per size; per datatype and op, as a point's may differ
    refused: dict[tuple[str, str], measure_sweep.Refused] = {}
    keep = measure_sweep.BufferCache() if plan.mode == "model" else None  # sizes are visited again in later rounds
    requested = requested_sizes(coll, sizes, lambda size: _job_dtype(plan, coll, size).dtype.size, ctx)
    todo = ({requested[s]: c for s, c in planner.plan_initial(requested).items()} if plan.mode == "model"
            else {s: None for s in sizes})
    if any((coll.name, s, c.label) not in done for s in requested for c in cands):
        bar.step(f"{coll.name} {min(sizes)} B (warm-up, not stored)", advance=0)
        first = _job_op(plan, engine, coll, min(sizes), _job_dtype(plan, coll, min(sizes)), None)
        measure_sweep.warm_collective(engine, coll, min(sizes), cands, first,
                                      refused.setdefault((first.dtype.name, first.op), {}))
    while todo:
        for size, want in todo.items():
            chosen = [c for c in cands if want is None or c in want]
            settings = _job_op(plan, engine, coll, size, _job_dtype(plan, coll, size), res)
            stored = coll.layout(size, settings.dtype.size, ctx.world_size, ctx.rank).size_bytes
            chosen = [c for c in chosen if (coll.name, stored, c.label) not in done and tunable(stored, c)]
            bar.step(f"{coll.name} {size} B")
            if not chosen:
                continue
            labels = [dict(algo=c.algo, proto=c.proto, channels=c.channels, config=c.label) for c in chosen]
            rows = measure_sweep.measure_size(engine, coll, size, chosen, labels, settings,
                                              refused.setdefault((settings.dtype.name, settings.op), {}), keep)
            if store is not None:
                s.add_measurements(rows)
                rows_so_far.extend(rows)
            res.rows += len(rows)
            res.timed += sum(1 for r in rows if r.status == RowStatus.OK)
            res.untimed.update(f"{r.status} ({r.note})" if r.note else r.status for r in rows if r.status != RowStatus.OK)
        if plan.mode != "model":
            break
        todo = _next_round(ctx, plan.settings, rows_so_far, requested, cands)
    if keep is not None:
        keep.clear()


def _job_dtype(plan: SweepPlan, coll: Any, size: int) -> measure_sweep.SweepSettings:
    """The settings one point is measured with: in the datatype the job issues at that size (``plan.dtypes``,
    --workload without -d), as a reduction's kernel depends on it; else the sweep's -d."""
    dtype = (plan.dtypes or {}).get((coll.name, size))
    return plan.settings if dtype is None else dataclasses.replace(plan.settings, dtype=dtype)


def _job_op(plan: SweepPlan, engine: Any, coll: Any, size: int, settings: measure_sweep.SweepSettings,
            res: SweepResult | None) -> measure_sweep.SweepSettings:
    """The settings one workload point is measured with: in the job's reduction op (``plan.ops``), as NCCL runs
    another kernel for avg or max than for sum; an engine that cannot run that op measures -o instead, and the
    result says so (``res.op_notes``; None: the warm-up, which says nothing)."""
    op = (plan.ops or {}).get((coll.name, size))
    if op is None or op == settings.op or not coll.reduces:
        return settings
    why = measure_sweep.op_waived(engine, coll, size, settings, op)
    if why is not None:
        if res is not None:
            res.op_notes[(coll.name, size)] = f"the job reduces with {op}, measured with {settings.op}: {why}"
        return settings
    return dataclasses.replace(settings, op=op)


def _next_round(ctx: Any, settings: measure_sweep.SweepSettings, rows_so_far: list[Any], requested: dict[int, int],
                cands: list[CommConfig]) -> dict[int, list[CommConfig] | None]:
    """Model mode: every rank must plan the same next step: rank 0 plans, the others follow."""
    from ccltune.tune import planner

    with settings.clock("planning"):
        plan = planner.plan_refine(rows_so_far, list(requested)) if ctx.is_root else None
        blob = json.dumps({str(s): (None if c is None else [x.label for x in c])
                           for s, c in plan.items()}).encode() if plan is not None else None
        decoded = json.loads(ctx.broadcast_bytes(blob, "sweep plan"))
    by_label = {c.label: c for c in cands}
    return {requested[int(s)]: (None if v is None else [by_label[x] for x in v if x in by_label])
            for s, v in decoded.items()}
