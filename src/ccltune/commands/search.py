"""``ccltune search --workload W.json --metric REGEX -- COMMAND...``: the job's best rules, found and proven
inside the job with in-run arms (docs/ab.md "ccltune search"; the search: :mod:`ccltune.ab.search`, the
candidates: :mod:`ccltune.ab.candidates`)."""

from __future__ import annotations

import dataclasses
import shlex
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ccltune import files, rules
from ccltune.ab import candidates, judge
from ccltune.ab.rounds import Arm
from ccltune.commands import ab_inrun
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option, to_argv
from ccltune.commands.results import Outcome
from ccltune.errors import RuleFileError, UsageError
from ccltune.measure.session import terminate_as_interrupt
from ccltune.status import RunStatus
from ccltune.store import DEFAULT_DB, Store
from ccltune.workload import model

if TYPE_CHECKING:
    from ccltune.ab import inrun, search

@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """``ccltune search``'s options (``ccltune search --help``); ``command`` is the user's job."""

    command: tuple[str, ...] = option((), positional=True, help="your job")
    workload: str | None = option(None, flag="--workload", help="the job's collectives (required)")
    sweep_rules: str | None = option(None, flag="--sweep-rules",
                                     help="the rules ccltune tune derived from the idle sweep: per group, its rule is a candidate")
    sweep_db: str | None = option(None, flag="--sweep-db",
                                  help="the results database of ccltune sweep --workload: per group, the rule ccltune tune "
                                       "--workload derives from its sweep runs is a candidate (instead of --sweep-rules)")
    steps: int | None = option(None, flag="--steps",
                               help="the steps one run of the job makes (default: the workload's); bounds the candidates "
                                    "of the first run to those its blocks can judge")
    metric: str = option("", flag="--metric",
                         help="group 1 of every match in the job's step lines is a step's value (required)")
    better: str = option("auto", flag="--better", choices=("auto", "lower", "higher"),
                         help="the metric's direction; auto: higher when REGEX names a throughput (tps, tokens/s, ...)")
    out: str | None = option(None, flag="--out", help="write the winners' rule file here")
    runs: int = option(3, flag="--runs", help="runs of successive halving before the confirmation run")
    finalists: int = option(2, flag="--finalists", help="candidates left for the confirmation run")
    max_groups: int = option(4, flag="--max-groups",
                             help="the heaviest (collective, size group)s of the workload to tune")
    block_steps: int = option(5, flag="--block-steps", help="steps per block")
    warmup_blocks: int = option(2, flag="--warmup-blocks",
                                help="blocks on default before the schedule (then a warm-up round)")
    period: str = option("auto", flag="--period", help="tuner calls per step per communicator; auto: the period "
                         "the plugin finds, raised to whole steps by the workload's calls a step")
    min_effect: float = option(1.0, flag="--min-effect",
                               help="effects smaller than this many percent are 'no difference'")
    seed: int | None = option(None, flag="--seed", help="the schedule's seed (default: random)")
    run_timeout: float | None = option(None, flag="--run-timeout", help="end a run after S seconds")
    no_whole_run: bool = option(False, flag="--no-whole-run",
                                help="skip the whole-run arms NCCL_CTA_POLICY and NCCL_MAX_CTAS")
    whole_run_rounds: int | None = option(None, flag="--whole-run-rounds",
                                          help="rounds of the whole-run arms (default: the fewest that can reach 95%% "
                                               "under Holm for them)")
    echo: bool = option(False, flag="--echo", help="show the job's output as it runs")
    db: str = option(DEFAULT_DB, flag="--db", help="results database (default: %(default)s)")

    def to_argv(self) -> list[str]:
        return [*to_argv(dataclasses.replace(self, command=()), "search"), "--", *self.command]


def _checked(o: SearchOptions) -> model.Workload:
    if not o.command:
        raise UsageError("no command to search for: give your job after --, e.g. ccltune search --workload w.json "
                         "--metric 'step +[0-9]+ +([0-9.]+) ms' -- torchrun --nproc-per-node 4 train.py")
    if not o.workload:
        raise UsageError("--workload W.json is required: the job's collectives (ccltune workload import)")
    for flag, v, lo in (("--runs", o.runs, 0), ("--finalists", o.finalists, 1), ("--max-groups", o.max_groups, 1)):
        if not lo <= v <= 64:
            raise UsageError(f"{flag} must be an integer in {lo}..64, got {v}")
    if o.steps is not None and not 1 <= o.steps <= 1 << 30:
        raise UsageError(f"--steps must be an integer in 1..{1 << 30}, got {o.steps}")
    if o.whole_run_rounds is not None and not 1 <= o.whole_run_rounds <= 50:
        raise UsageError(f"--whole-run-rounds must be an integer in 1..50, got {o.whole_run_rounds}")
    if o.sweep_rules and o.sweep_db:
        raise UsageError("--sweep-rules and --sweep-db both give the idle sweep's best: give one")
    return model.load(o.workload)


def _sweep(o: SearchOptions) -> tuple[rules.RuleSet | None, str]:
    """The idle sweep's best as a rule set (``--sweep-rules``, or tune's derivation from ``--sweep-db``'s sweep runs
    judged by the workload, as ``ccltune tune --workload`` writes it) and where it came from, in words."""
    if o.sweep_rules:
        try:
            sweep = rules.load(o.sweep_rules, "--sweep-rules")
        except RuleFileError as exc:   # a file the user names that cannot be read: their mistake (exit 2)
            raise UsageError(str(exc)) from None
        if sweep.diagnostics:
            raise UsageError(f"--sweep-rules {o.sweep_rules}: {len(sweep.diagnostics)} rejected line(s), the first: "
                             f"{sweep.diagnostics[0]}")
        return sweep, f"the idle sweep's best: --sweep-rules {o.sweep_rules} ({len(sweep.rules)} rule(s))"
    if not o.sweep_db:
        return None, "no idle sweep (--sweep-db or --sweep-rules): SM-budget candidates only"
    from ccltune.commands import tune

    if not Path(o.sweep_db).is_file():
        raise UsageError(f"--sweep-db {o.sweep_db}: no such file (the database of ccltune sweep --workload)")
    with Store(o.sweep_db, create=False) as st:
        load = tune.sweep_load(st)
        d = tune.derivation(tune.TuneOptions(out="", db=o.sweep_db, workload=o.workload, under_load=load), st)
    got = d.rules
    where = f"runs {', '.join(str(r.id) for r in d.runs)} of --sweep-db {o.sweep_db}" + (
        f", swept under load (matrix {load})" if load is not None else "")
    return rules.RuleSet(got, path=o.sweep_db), (f"the idle sweep's best: {len(got)} rule(s) ccltune tune --workload "
                                                 f"derives from {where}")


def _first_run(o: SearchOptions, wl: model.Workload, cands: list[candidates.Candidate]
               ) -> tuple[list[candidates.Candidate], str]:
    """The candidates the first run can judge (search.capacity: the heaviest groups' first), and the words."""
    from ccltune.ab import search

    steps = o.steps or wl.steps
    if not steps:
        return cands, ("the job's steps are unknown (the workload does not say; --steps N): the first run holds all "
                       f"{len(cands)} candidate(s), later runs what the first run's blocks hold")
    blocks = search.blocks_of_steps(steps, o.block_steps)
    fit = search.capacity(blocks, o.warmup_blocks, len(cands))
    src = "--steps" if o.steps else "the workload's steps"
    if fit == 0:
        need = search.blocks_needed(1, o.warmup_blocks)
        raise UsageError(f"a run of {steps} steps ({src}) holds about {blocks} blocks of {o.block_steps} steps; one "
                         f"candidate needs {need} ({o.warmup_blocks} warm-up, then default, its A/A twin and the "
                         f"candidate for {1 + judge.min_rounds(1)} rounds, the first a warm-up): run the job for at least "
                         f"{(need + 1) * o.block_steps + search.PERIOD_STEPS} steps (--steps), or lower --block-steps")
    said = (f"a run of {steps} steps ({src}) holds about {blocks} blocks of {o.block_steps} steps: it can judge "
            f"{fit} candidate(s) ({search.blocks_needed(fit, o.warmup_blocks)} blocks)")
    if fit >= len(cands):
        return cands, said
    kept, left = cands[:fit], cands[fit:]
    return kept, (f"{said}; the heaviest groups' first {fit} kept, {len(left)} left out: "
                  + ", ".join(f"{c.name} ({c.group.label})" for c in left))


def _inrun_plan(o: SearchOptions) -> tuple[inrun.InRunPlan, str]:
    """ab --in-run's plan of the search's options (two default arms: each run's candidates replace them)
    with NCCL's version line on, and its direction's words."""
    like_ab = types.SimpleNamespace(prune=None, until_confident=False, rounds=None, budget=None, skip=0,
                                    max_blocks=None, **{f: getattr(o, f) for f in (
                                        "metric", "better", "block_steps", "warmup_blocks", "period", "run_timeout",
                                        "min_effect", "seed", "echo", "workload")})
    plan, words, _ = ab_inrun.plan_of(like_ab, list(o.command), [Arm("default"), Arm("default-2")])
    if "NCCL_DEBUG" not in plan.base_env:  # NCCL then prints its version line only: the whole-run arms need it
        plan = dataclasses.replace(plan, base_env={**plan.base_env, "NCCL_DEBUG": "VERSION"})
    return plan, words


def run_search(o: SearchOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> Outcome:
    """Check everything, then search (module doc); write ``--out`` with the winners (or no rule)."""
    from ccltune.ab import search

    check_outputs(o)
    wl = _checked(o)
    sweep, sweep_words = _sweep(o)
    plan, words = _inrun_plan(o)
    if plan.nranks:   # arms only on the busiest communicator's size: candidates only for its collectives
        wl = dataclasses.replace(wl, entries=[e for e in wl.entries if e.key.nranks == plan.nranks], order=[])
    groups = candidates.groups(wl, o.max_groups)
    sm, why = candidates.overlap_note(wl)
    cands = candidates.candidates(groups, sweep, sm)
    if not cands:
        raise UsageError(f"--workload {o.workload}: no candidate: " + (
            ("its collectives run on one-rank communicators, where NCCL consults no tuner (a one-GPU job): rules "
             "change nothing there" if wl.entries and all(e.key.nranks == 1 for e in wl.entries) else
             "none of its collectives is one NCCL hands to a tuner, every step") if not groups else why))
    first, bound = _first_run(o, wl, cands)
    console.say(f"# ccltune search: {shlex.join(o.command)}")
    if plan.nranks:
        console.say(f"# the workload's tuned calls go to communicators of several sizes: the arms (and the candidates) "
                    f"are for its busiest, of {plan.nranks} ranks; the others run NCCL's default")
    console.say(f"# workload {o.workload}: {len(groups)} group(s): " + "; ".join(
        f"{g.label} (NCCL ran {g.nccl_ran})" for g in groups))
    console.say(f"# {why}")
    console.say(f"# {sweep_words}")
    console.say(f"# {len(cands)} candidate(s); metric {o.metric!r}, {words}; successive halving over at most "
                f"{o.runs} run(s), then a confirmation run of at most {o.finalists} finalist(s)")
    console.say(f"# {bound}")
    run_ids: list[int] = []
    argv = "ccltune " + shlex.join(command_line or o.to_argv())

    def keep(p: inrun.InRunPlan, got: inrun.InRunResult, confirm: bool) -> None:
        with Store(o.db) as st:
            rid = st.begin_run("ab", command=argv, env={"command": shlex.join(o.command), "search": True},
                               args={"search": True, "confirm": confirm, "seed": p.seed})
            st.add_ab_arms(rid, {a.name: {"rules": a.rules, "in_run": True, "arm_index": i}
                                        for i, a in enumerate(p.arms)})
            ab_inrun.store_blocks(st, rid, p, got, words)
        run_ids.append(rid)

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ccltune-search-") as tmp, terminate_as_interrupt():
        result = search.search(plan, first, Path(tmp), runs=o.runs, finalists=o.finalists, say=console.say,
                               store=keep)
        _whole_runs(o, plan, result, argv, console, run_ids)
    result.wall_s = time.monotonic() - t0
    search.conclude(result)
    _answer(o, result, console)
    console.say(f"# stored: ab runs {', '.join(map(str, run_ids))} in {o.db}")
    return Outcome(o.db, run_ids[-1] if run_ids else None)


def _answer(o: SearchOptions, result: search.SearchResult, console: Console) -> None:
    """The search's answer: the last run's notes, the summary, its cost, what it kept, and ``--out`` written."""
    from ccltune.ab import search

    for stage in result.stages[-1:]:
        for n in stage.notes:
            console.say(f"# note: {n}")
    console.say(search.summary_line(result))
    console.say(f"# cost: {result.cost}")
    for c, j in result.winners:
        assert j.estimate is not None
        console.say(f"#   kept {c.rule.to_line()}  ({c.group.label}: in-job ratio {j.estimate.ratio:.4f} "
                    f"[{j.estimate.low:.4f}, {j.estimate.high:.4f}])")
    t = result.together
    if result.together_note:
        console.say(f"# {result.together_note}")
    elif t is not None and t.estimate is not None:
        console.say(f"#   the {len(result.winners)} kept rules together: in-job ratio {t.estimate.ratio:.4f} "
                    f"[{t.estimate.low:.4f}, {t.estimate.high:.4f}]")
    for line in search.env_lines(result):
        console.say(f"#   kept: {line[2:]}")
    if o.out:
        files.write_text(o.out, search.rule_file(result, argv=o.command, workload=o.workload or ""), flag="--out")
        console.say(f"# wrote {o.out}: {len(result.winners)} rule(s)"
                    + (f" and {len(result.whole_winners)} setting(s) as comment lines" if result.whole_winners else ""))


def _whole_runs(o: SearchOptions, plan: inrun.InRunPlan, result: search.SearchResult, argv: str, console: Console,
                run_ids: list[int]) -> None:
    """NCCL_CTA_POLICY and NCCL_MAX_CTAS change a communicator at its init: whole-run arms through ab's rounds
    (paired by round, Holm), where the job's NCCL has them (``search.whole_run_arms``); their verdicts go into
    ``result``."""
    from ccltune.ab import rounds, search
    from ccltune.commands import ab

    if o.no_whole_run or plan.gpu_metric:
        result.whole_note = ("whole-run arms NCCL_CTA_POLICY, NCCL_MAX_CTAS: skipped ("
                             + ("--no-whole-run)" if o.no_whole_run else "--metric gpu is a block's GPU step period, "
                                "judged inside one run; whole runs need the job's step lines: --metric REGEX)"))
        console.say(f"# {result.whole_note}")
        return
    version = next((s.nccl_version for s in result.stages if s.nccl_version), None)
    arms, said = search.whole_run_arms(version)
    result.whole_note = said
    console.say(f"# {said}")
    if not arms:
        return
    all_arms = [rounds.Arm(rounds.DEFAULT), rounds.Arm(rounds.CONTROL), *arms]
    n = o.whole_run_rounds or judge.min_rounds(len(all_arms) - 1)
    metric = rounds.Metric("regex", plan.pattern, plan.warmup_blocks * plan.block_steps)
    wplan = rounds.Plan(list(o.command), all_arms, metric, n, plan.seed, plan.min_effect, base_env=dict(plan.base_env),
                        echo=o.echo, run_timeout_s=o.run_timeout)
    console.say(f"# whole runs: {len(all_arms)} arms (default, its A/A twin, {', '.join(a.name for a in arms)}) x {n} "
                f"round(s), shuffled per round (seed {plan.seed}); each run's value: the median of its step lines after "
                f"the first {metric.skip}")
    with Store(o.db) as st:
        rid = st.begin_run("ab", command=argv, env={"command": shlex.join(o.command), "search": True},
                           args={"search": True, "whole_run": True, "seed": plan.seed, "rounds": n})
        run_ids.append(rid)
        st.add_ab_arms(rid, {a.name: a.spec() for a in all_arms})
        try:
            out = rounds.run(wplan, st, rid, console.say)
        except BaseException as exc:
            st.finish_run(rid, RunStatus.FAILED, {"search": True, "whole_run": True, "error": str(exc)[:2000]})
            raise
        out.verdicts = search.judge_whole(out.samples, [a.name for a in all_arms], higher_better=plan.higher_better,
                                          min_effect=plan.min_effect)
        st.finish_run(rid, RunStatus.INTERRUPTED if out.interrupted else RunStatus.COMPLETE,
                      {"search": True, "whole_run": True, "seed": plan.seed, "rounds": out.rounds_done,
                       "metric": plan.pattern.pattern, "higher_better": plan.higher_better,
                       "arms": [v.to_dict() for v in out.verdicts]})
    for line in ab.render(out, ""):
        console.say(line)
    if out.interrupted:
        raise KeyboardInterrupt
    result.whole = out.verdicts


__all__ = ["SearchOptions", "run_search"]
