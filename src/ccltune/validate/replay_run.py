"""The run of ``ccltune replay``, inside the shared :class:`~ccltune.measure.session.Session`: the
workload's sequence timed per arm (:mod:`ccltune.measure.replay`), judged by
:mod:`ccltune.validate.replay`; rank 0 stores the verdict and its plain rows in the run's summary."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ccltune import datatypes, engines
from ccltune.commconfig import CommConfig
from ccltune.measure import replay as measure_replay
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import Loaded
from ccltune.measure.session import Session, plugin_options
from ccltune.validate import replay as replay_plan
from ccltune.workload import plan as workload_plan
from ccltune.workload.model import Workload


@dataclass
class ReplayPlan:
    workload: Workload
    rules_path: str | None
    order: str
    reps: int
    under_load: int | None = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReplayResult:
    verdict: replay_plan.ReplayVerdict | None = None
    rounds: dict[str, list[float]] = field(default_factory=dict)
    skipped: list[workload_plan.Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load: dict[str, Any] | None = None


def waived_reason(engine_name: str, world_size: int, rules_path: str | None) -> str | None:
    """Why only NCCL's default is replayed, or None when both arms are."""
    if world_size == 1:
        return "NCCL does no tuning with one rank (it consults no tuner): only NCCL's default was replayed"
    if not engines.kind(engine_name).own_comm:
        return f"the {engine_name} engine has no tuner plugin: only the library's default was replayed"
    if not rules_path:
        return "no --rules given: only NCCL's default was replayed"
    return None


def _arms(engine_name: str, rules_path: str | None, waived: str | None) -> dict[str, Any]:
    if not engines.kind(engine_name).own_comm:
        return {"default": lambda c: None}
    arms = {"default": lambda c: CommConfig(instance=c)}
    if waived is None:
        path = os.path.abspath(rules_path or "")
        arms["rules"] = lambda c: CommConfig(rules_file=path, instance=c)
    return arms


def run(plan: ReplayPlan, session: Session, engine_opts: Any) -> ReplayResult:
    res = ReplayResult()
    wl = plan.workload
    with session as s:
        opts = plugin_options(engine_opts, tempfile.mkdtemp(prefix="ccltune-replay-")) \
            if engines.kind(s.engine_name).own_comm else engine_opts
        engine = s.start_engine(opts)
        ctx = s.joined
        keep, res.skipped = workload_plan.fit(wl, ctx.world_size, ctx.n_nodes, engine=s.engine_name)
        seq, note = workload_plan.sequence(wl, keep, plan.order)
        res.notes += [note] if note else []
        waived = waived_reason(s.engine_name, ctx.world_size, plan.rules_path)
        arms = _arms(s.engine_name, plan.rules_path, waived)
        s.summary = lambda: _summary(res)
        with s.running(lambda: "replay interrupted; nothing judged"):
            items, notes = measure_replay.prepare(engine, [e.key for e in wl.entries], seq)
            res.notes += notes
            if not items:  # nothing to replay (the reasons are in skipped and notes): no run is stored
                return res
            _begin(s, plan)
            with Loaded(engine, plan.under_load) as load:
                res.rounds = measure_replay.rounds(engine, items, arms, plan.reps, session.timeout_s) if items else {}
                per_entry = measure_replay.entry_rows(engine, items, arms, _entry_settings(plan, session.timeout_s))
            res.load = load.result
            for got in per_entry.values():
                s.add_measurements(got)
            if s.is_root and res.rounds:
                steps = wl.steps
                rounds = {a: replay_plan.per_step(t, steps) for a, t in res.rounds.items()}
                res.rounds = rounds
                res.verdict = replay_plan.verdict(rounds, steps, replay_plan.entry_times(wl, per_entry), waived,
                                                  replay_plan.library_of(s.engine_name, engine.info()))
    return res


def _begin(s: Session, plan: ReplayPlan) -> None:
    """Rank 0: the run in the database, with its environment and rule file."""
    env = s.environment() if s.is_root else {}
    if plan.under_load:
        env["under_load"] = plan.under_load
    if s.begin(plan.args, env) is not None and plan.rules_path:
        with open(plan.rules_path, encoding="utf-8") as fh:
            s.add_artifact("rules", fh.read())


def _entry_settings(plan: ReplayPlan, timeout_s: float) -> measure_sweep.SweepSettings:
    """How each entry is timed alone: eagerly, as the job issues it, ``--iters`` interleaved rounds of
    about a millisecond per arm (the datatype is the entry's own)."""
    return measure_sweep.SweepSettings(dtype=datatypes.dtype("float"), op="sum", reps=plan.reps, graph=False,
                                       target_us=1000.0, max_iters=100, warmup=2, timeout_s=timeout_s)


def _summary(res: ReplayResult) -> dict[str, Any]:
    if res.verdict is None:
        return {"replayed": 0, "skipped": len(res.skipped)}
    return {**res.verdict.to_dict(res.rounds), "under_load": res.load,
            "skipped": [{"entry": k.index, "reason": k.reason} for k in res.skipped], "notes": res.notes}
