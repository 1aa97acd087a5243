"""``ccltune ab --in-run``: the ``--rules`` arms judged inside ONE run of the job (docs/ab.md "In-run arms";
the run and the analysis: :mod:`ccltune.ab.inrun`). The options are ``commands.ab.AbOptions``; its checks of
the arms run first (``commands.ab.arms``), these add the in-run ones."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
from collections.abc import Sequence
from typing import Any

from ccltune import environment, files
from ccltune.ab import inrun, inrun_judge
from ccltune.ab import job as jobrun
from ccltune.ab.armsfile import ARM_NAME, MAX_ARMS, MAX_BLOCKS_FILE, MAX_PERIOD, InRunArm
from ccltune.ab.steplines import direction
from ccltune.commands import launching
from ccltune.commands.common import Console
from ccltune.commands.results import Outcome
from ccltune.errors import CheckFailed, Interrupted, UsageError
from ccltune.measure.session import terminate_as_interrupt
from ccltune.status import ArmStatus, RunStatus, SampleStatus
from ccltune.store import AbSample, Store
from ccltune.workload import model, quantities

NO_LIMIT = MAX_BLOCKS_FILE  # --max-blocks left out: as many blocks as the plugin takes (100,000)


def _name(stem: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)[:64] or "rules"
    return name if ARM_NAME.match(name) else "rules"


def in_run_arms(all_arms: Sequence[Any]) -> tuple[InRunArm, ...]:
    """The in-run arms of ab's checked arms (default first, its A/A twin when on, then the rule files)."""
    whole = [a.name for a in all_arms if a.env or a.unset or a.nccl_lib]
    if whole:
        raise UsageError(f"--in-run switches rule files inside one run; {', '.join(whole)} change the job's "
                         "environment or its NCCL, which a run cannot change midway: judge them with ccltune ab "
                         "without --in-run (whole runs)")
    out, seen = [], set()
    for a in all_arms:
        name = _name(a.name)
        while name in seen:
            name += "_"
        seen.add(name)
        out.append(InRunArm(name, a.rules))
    if len(out) > MAX_ARMS:
        raise UsageError(f"--in-run takes at most {MAX_ARMS} arms, got {len(out)}")
    return tuple(out)


def _period(o: Any) -> tuple[int | None, int | None, int | None]:
    """(--period as an integer or None for auto, the workload's calls per step or None, the communicator size the
    arms are limited to or None): --period N wins; with auto and --workload the plugin's period becomes the
    multiple of the calls' own period nearest to the workload's step (a decode loop whose calls are all one key
    repeats every call). A workload whose tuned calls go to communicators of several sizes (tensor- and
    data-parallel groups) limits the arms to its busiest communicator's size: communicators called at different
    rates switch apart, and then no block has time common to all."""
    if o.period != "auto":
        if not re.fullmatch(r"[0-9]{1,9}", o.period) or int(o.period) < 1:
            raise UsageError(f"--period must be auto or an integer >= 1 (tuner calls per step), got {o.period!r}")
        return int(o.period), None, None
    if not getattr(o, "workload", None):
        return None, None, None
    wl = model.load(o.workload)
    got = quantities.busiest_communicator(wl)
    if got is None:
        raise UsageError(f"--workload {o.workload}: " + ("its steps are unknown (import it with --steps N)" if not wl.steps
                         else "none of its collectives is one NCCL hands to a tuner") +
                         ", so it gives no calls per step; give --period N (tuner calls per step) instead")
    n, ranks, sizes = got
    if n > MAX_PERIOD:
        raise UsageError(f"--workload {o.workload}: {n} calls a step ({sum(e.calls for e in wl.entries)} calls over "
                         f"{wl.steps} step(s)) is more than the tuner plugin's {MAX_PERIOD}; give --period N")
    return None, n, ranks if sizes > 1 else None


def plan_of(o: Any, cmd: list[str], all_arms: Sequence[Any]) -> tuple[inrun.InRunPlan, str, list[str]]:
    """The in-run plan of ab's options, checked before anything runs; its direction's words and the
    variables removed from the job's environment."""
    for flag, bad in (("--prune", o.prune), ("--until-confident", o.until_confident), ("--rounds", o.rounds),
                      ("--budget", o.budget), ("--skip", o.skip)):
        if bad:
            raise UsageError(f"{flag} is for whole runs; with --in-run the rounds are blocks inside the one run "
                             "(--block-steps, --warmup-blocks, --max-blocks) and warm-up is by blocks")
    pattern = _pattern(o.metric)
    for flag, v, lo in (("--block-steps", o.block_steps, 2), ("--warmup-blocks", o.warmup_blocks, 0),
                        ("--max-blocks", o.max_blocks if o.max_blocks is not None else NO_LIMIT, 1)):
        if not lo <= v <= NO_LIMIT:
            raise UsageError(f"{flag} must be an integer in {lo}..{NO_LIMIT}, got {v}")
    period, step_calls, only = _period(o)
    if o.run_timeout is not None:
        launching.check_timeout(o.run_timeout, "--run-timeout")
    if not 0 <= o.min_effect < 100:
        raise UsageError(f"--min-effect must be in [0, 100) percent, got {o.min_effect:g}")
    gpu = o.metric == GPU_METRIC
    higher, words = (False, "lower is better (the GPU step period, from ccltune's profiler plugin's timestamps)") \
        if gpu else direction(o.metric, o.better)
    if gpu and o.better == "higher":
        raise UsageError("--metric gpu is a time (the GPU step period): lower is better; leave --better out")
    arms = in_run_arms(all_arms)
    from ccltune import tuner_plugin

    try:
        tuner = str(tuner_plugin.library_path())
    except Exception as exc:  # noqa: BLE001 - EngineUnavailable, with how to build it
        raise UsageError(f"--in-run needs the ccltune tuner plugin: {exc}") from None
    prof = jobrun.profiler_path()
    if gpu and prof is None:
        raise UsageError("--metric gpu needs ccltune's profiler plugin (libnccl-profiler-ccltune.so), not built here: "
                         "build it (make -C profiler, or pip install .) or give --metric REGEX for the job's step lines")
    base, removed = jobrun.base_env(os.environ)
    seed = o.seed if o.seed is not None else random.SystemRandom().randrange(1 << 31)
    plan = inrun.InRunPlan(cmd, arms, pattern, higher, seed, o.warmup_blocks, o.block_steps,
                      o.max_blocks if o.max_blocks is not None else NO_LIMIT, period, step_calls, only, tuner,
                      str(prof) if prof else None, base, o.echo, o.run_timeout, o.min_effect / 100, gpu)
    return plan, words, removed


GPU_METRIC = "gpu"   # --metric gpu: the GPU step period of each block, from the profiler plugin's files


def _pattern(metric: str) -> re.Pattern[str]:
    """The step lines' REGEX of --metric (a pattern that matches nothing for --metric gpu), checked."""
    if metric in ("auto", "wall", "comm"):
        raise UsageError("--in-run needs --metric REGEX: the job's step lines (e.g. 'step +[0-9]+ +([0-9.]+) ms', or "
                         "torchtitan's 'tps: ([0-9,]+)'), read as they arrive; or --metric gpu: the GPU step period "
                         "from ccltune's profiler plugin, which needs nothing from the job")
    if metric == GPU_METRIC:
        return re.compile(r"(?!)()")
    try:
        pattern = re.compile(metric)
    except re.error as exc:
        raise UsageError(f"--metric {metric!r} is not a regular expression: {exc}") from None
    if pattern.groups < 1:
        raise UsageError(f"--metric {metric!r} has no group: put ( ) around the number, e.g. 'step time ([0-9.]+) ms'")
    return pattern


def header(plan: inrun.InRunPlan, words: str, removed: Sequence[str]) -> list[str]:
    out = [f"# ccltune ab --in-run: {shlex.join(plan.argv)}",
           f"# {len(plan.arms)} arms switched inside one run in blocks of {plan.block_steps} steps, "
           f"{plan.warmup_blocks} warm-up block(s) then a warm-up round, shuffled order per round (seed {plan.seed})",
           ("# metric: each block's GPU step period (ms): the same call of consecutive steps on each rank's GPU, from "
            f"ccltune's profiler plugin, nothing from the job; {words}" if plan.gpu_metric else
            f"# metric: the numbers {plan.pattern.pattern!r} matches in the job's step lines, stamped on arrival; "
            f"{words}"),
           "# statistic: per arm, its block against default's in each round, paired (stats.paired); Holm across "
           "arms; the A/A twin is the control"]
    out += [f"#   arm {a.name}: " + (f"rules {a.rules}" if a.rules else "NCCL's default" if i == 0 else
                                     "NCCL's default again (A/A control)") for i, a in enumerate(plan.arms)]
    if removed:
        out.append(f"# note: {', '.join(removed)} removed from the job's environment, so 'default' is NCCL's own choice")
    return out


def run_in_run(o: Any, cmd: list[str], all_arms: Sequence[Any], console: Console, argv: list[str]) -> Outcome:
    """Check, run the job once with the arms, judge, store (kind ``ab``, its blocks as ``ab_samples``)."""
    plan, words, removed = plan_of(o, cmd, all_arms)
    store = Store(o.db)
    env = {"host": environment.socket.gethostname(), "ccltune_version": environment.__version__,
           "variables": environment.comm_env(), "command": shlex.join(plan.argv)}
    run_id = store.begin_run("ab", command="ccltune " + shlex.join(argv), env=env,
                             args={**launching.args_record(o), "seed": plan.seed})
    store.add_ab_arms(run_id, {a.name: {"rules": a.rules, "in_run": True, "arm_index": i,
                                               "control": a.name == inrun_judge.AA}
                                      for i, a in enumerate(plan.arms)})
    for line in header(plan, words, removed):
        console.say(line)
    try:
        with terminate_as_interrupt():
            got = inrun.run(plan, console.say)
    except KeyboardInterrupt:
        store.finish_run(run_id, RunStatus.INTERRUPTED, {"in_run": True, "seed": plan.seed})
        store.close()
        console.warn("ccltune: interrupted: the one run of the job did not finish, nothing to judge")
        return Outcome(o.db, run_id, Interrupted.exit_code)
    except Exception as exc:
        store.finish_run(run_id, RunStatus.FAILED, {"in_run": True, "seed": plan.seed, "error": str(exc)[:2000]})
        store.close()
        raise
    summary = store_blocks(store, run_id, plan, got, words)
    store.close()
    gpu = got.gpu_period.lines() if got.gpu_period is not None else []
    for line in [*inrun_judge.lines(got.judged, "", plan.higher_better), *gpu, *[f"# note: {n}" for n in got.notes]]:
        console.say(line)
    if o.json:
        doc = {**summary, "run_id": run_id, "command": plan.argv,
               "blocks": [{"block": v.span.index, "round": v.span.round, "arm": plan.names[v.span.arm],
                           "value": v.value, "steps": v.steps} for v in got.blocks.values]}
        files.write_text(o.json, json.dumps(doc, indent=1, default=str), flag="--json")
    bad = [j for j in got.judged if not j.control and j.status in (ArmStatus.SLOWER, ArmStatus.FAILED)]
    if bad:
        failed = CheckFailed("ab --in-run: " + "; ".join(f"{j.name} {j.status.value}" for j in bad))
        failed.run_id = run_id
        raise failed
    return Outcome(o.db, run_id)


def store_blocks(store: Store, run_id: int, plan: inrun.InRunPlan, got: inrun.InRunResult, words: str) -> dict[str, Any]:
    """Each judged block as an ``ab_samples`` row (round from 1, its place in the round, its value), and the
    run's summary; returns the summary."""
    for v in got.blocks.values:
        s = v.span
        wall = (s.end_ns - s.start_ns) / 1e9 if s.end_ns is not None else 0.0
        store.add_ab_sample(run_id, AbSample(plan.names[s.arm], s.round + 1, s.place, v.value, "",
                                             SampleStatus.OK, got.job.exit_code, wall, v.steps,
                                             f"in-run block {s.index}"))
    summary = {"in_run": True, "seed": plan.seed, "metric": GPU_METRIC if plan.gpu_metric else plan.pattern.pattern,
               "direction": words,
               "rounds": len({v.span.round for v in got.blocks.values}), "blocks_logged": len(got.blocks.spans),
               "steps": len(got.job.steps), "steps_dropped": got.blocks.dropped_steps, "graphs": got.blocks.graphs,
               "arms": [j.to_dict() for j in got.judged], "notes": got.notes,
               **({"gpu_period": got.gpu_period.to_dict()} if got.gpu_period is not None else {})}
    store.finish_run(run_id, RunStatus.COMPLETE, summary)
    return summary
