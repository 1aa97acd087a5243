"""The A/B run of ``ccltune validate``: NCCL's default against the plugin with a rule file, timed
side by side at every size (``measure.sweep``), optionally with the sweep's best candidate as a third
arm; rank 0 judges, and the sizes that fail are measured again."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccltune import collectives, environment, rules
from ccltune.commconfig import BASELINE, CommConfig
from ccltune.errors import DataError, UsageError
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import Loaded
from ccltune.measure.session import Session, plugin_options
from ccltune.status import RunStatus, Verdict
from ccltune.validate import capture as validate_capture
from ccltune.validate import verdict as ab_verdict


@dataclass
class ABPlan:
    """What to validate (checked by the caller)."""

    rules_path: str
    collectives: list[Any]
    sizes: list[int]
    settings: measure_sweep.SweepSettings
    hard_limit_pct: float = 2.0
    retest: int = 1
    best_from: str | None = None      # a sweep database: its best candidate as a third arm
    under_load: int | None = None     # --under-load M: a MatrixLoad runs while the sizes are measured
    args: dict[str, Any] = field(default_factory=dict)  # recorded with the run


@dataclass
class ABResult:
    """Rank 0's judgement (``verdict`` None on the other ranks)."""

    rows: list[Any] = field(default_factory=list)
    verdict: Any = None
    capture: Any = None
    summary: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    unjudged: DataError | None = None  # nothing comparable was measured
    load: dict[str, Any] | None = None  # --under-load: what the load achieved


def run(plan: ABPlan, session: Session, engine_opts: Any, require_plugin: Callable[[], None]) -> ABResult:
    """Measure and judge ``plan`` in ``session`` (entered here)."""
    t_start = time.perf_counter()
    res = ABResult()
    settings = plan.settings
    with session as s:
        opts = plugin_options(engine_opts, tempfile.mkdtemp(prefix="ccltune-validate-"))
        if not opts.plugin_path:
            require_plugin()
        engine = s.start_engine(opts)
        settings.clock.add("start-up", time.perf_counter() - t_start)  # rendezvous, CUDA, NCCL library
        s.clock = settings.clock
        configs = [BASELINE, CommConfig(rules_file=os.path.abspath(plan.rules_path))]
        labels = [dict(config="default"), dict(config="rules")]
        env = s.environment() if s.is_root else {}
        gpu = (env.get("gpus") or [{}])[0].get("name") if s.is_root else None
        ctx = s.joined
        arms = best_arms(plan.best_from, ctx, gpu)
        # in one order on every rank (a set's order is not: string hashes differ between processes), as
        # the warm-up calls them in turn on every rank
        arm_configs = sorted(set(arms.values()), key=CommConfig.sort_key)
        if s.begin(plan.args, env) is not None:
            s.add_artifact("rules", open(plan.rules_path, encoding="utf-8").read())

        def judge(got: list[Any]) -> Any:
            return ab_verdict.verdict(got, hard_slowdown=plan.hard_limit_pct / 100,
                                      covered=coverage(plan.rules_path, gpu))

        def measure(coll: Any, size: int, note: str | None = None) -> list[Any]:
            if s.is_root:
                print(f"validate: {coll.name} {size} B{' (' + note + ')' if note else ''}", file=sys.stderr, flush=True)
            stored = coll.layout(size, settings.dtype.size, ctx.world_size, ctx.rank).size_bytes
            best = arms.get((coll.name, ctx.world_size, ctx.n_nodes, stored))
            extra = ([best], [validate_capture.arm_label(best)]) if best is not None else ([], [])
            got = measure_sweep.measure_size(engine, coll, size, configs + extra[0], labels + extra[1], settings)
            for m in got:
                m.note = m.note or note
            res.rows.extend(got)
            s.add_measurements(got)
            return got

        s.summary = lambda: _summary(s, res, arms, t_start, settings)
        with s.running(lambda: f"validate interrupted; {len(res.rows)} rows kept in {s.db}"):
            with Loaded(engine, plan.under_load) as load:
                for coll in plan.collectives:
                    if s.is_root:
                        print(f"validate: {coll.name} {min(plan.sizes)} B (warm-up, not stored)", file=sys.stderr,
                              flush=True)
                    measure_sweep.warm_collective(engine, coll, min(plan.sizes), configs + arm_configs,
                                                  settings)
                    for size in plan.sizes:
                        measure(coll, size)
                if s.store is not None:
                    try:
                        res.verdict = judge(res.rows)
                    except DataError as exc:  # nothing comparable was measured: said after the teardown
                        res.unjudged = exc
                _retest(plan, s, res, judge, measure)
            res.load = load.result
    return res


def _retest(plan: ABPlan, s: Session, res: ABResult, judge: Callable[[list[Any]], Any],
            measure: Callable[..., list[Any]]) -> None:
    by_name = {c.name: c for c in plan.collectives}
    for attempt in range(1, plan.retest + 1):
        # rank 0 judges; every rank measures what it names again
        failing = ([[v.collective, v.size_bytes] for v in res.verdict.sizes if v.status == Verdict.FAIL]
                   if res.verdict is not None else None)
        failing = json.loads(s.joined.broadcast_bytes(json.dumps(failing).encode() if s.is_root else None,
                                                   "sizes to measure again"))
        if not failing:
            break
        again = [m for name, size in failing for m in measure(by_name[name], size, f"retest {attempt}")]
        if res.verdict is not None:
            res.verdict = ab_verdict.retested(res.verdict, judge(again))


def _summary(s: Session, res: ABResult, arms: dict[Any, Any], t_start: float,
             settings: measure_sweep.SweepSettings) -> dict[str, Any]:
    """The run's summary once the engine is down: the verdict (and capture), or the rows kept."""
    res.wall_s = time.perf_counter() - t_start
    if res.verdict is None or s.status != RunStatus.COMPLETE:
        return {"rows": len(res.rows)}
    res.summary = res.verdict.to_dict()
    res.capture = validate_capture.capture(res.rows) if arms else None
    if res.capture is not None:
        res.summary["capture"] = res.capture.to_dict()
    res.summary.update(wall_s=round(res.wall_s, 3), time=settings.clock.summary(),
                       **({"under_load": res.load} if res.load else {}))
    return res.summary


def best_arms(best_from: str | None, ctx: Any, gpu: str | None) -> dict[Any, Any]:
    """The third arm's candidate per (collective, n_ranks, n_nodes, size), the same on every rank:
    rank 0 reads --best-from and sends what it found (an error there stops every rank)."""
    if not best_from:
        return {}
    blob = None
    if ctx.is_root:
        try:
            found = validate_capture.arms_from_db(best_from, ctx.world_size, ctx.n_nodes, gpu)
            blob = json.dumps({"arms": [[*k, c.algo, c.proto, c.channels] for k, c in found.items()]})
        except (UsageError, DataError) as exc:
            blob = json.dumps({"error": str(exc), "usage": isinstance(exc, UsageError)})
    got = json.loads(ctx.broadcast_bytes(blob.encode() if blob is not None else None, "best arms"))
    if "error" in got:
        raise (UsageError if got["usage"] else DataError)(got["error"])
    return {(coll, int(n), int(nn), int(size)): CommConfig(algo, proto, ch)
            for coll, n, nn, size, algo, proto, ch in got["arms"]}


def coverage(path: str, gpu: str | None) -> Any:
    """covered(collective, n_ranks, n_nodes, size) by the rules in ``path``, as the plugin
    would see it on this machine (graph-captured calls report regBuff=1; AMD partition modes as the plugin
    reads them)."""
    ruleset = rules.load(path)
    modes = environment.amd_partitions()
    facts = rules.PlatformFacts(gpu=gpu, partition=modes["compute_partition"], nps=modes["memory_partition"])

    def covered(collective: str, n_ranks: int, n_nodes: int, size: int) -> bool:
        q = rules.Query(collectives.PLUGIN_NAMES.get(collective, collective), size, n_ranks, n_nodes, reg_buff=1, platform=facts)
        return rules.match(ruleset, q).rule is not None
    return covered
