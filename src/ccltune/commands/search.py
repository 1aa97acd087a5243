"""``ccltune search --workload W.json --metric REGEX -- COMMAND...``: the job's best rules, found and proven
inside the job with in-run arms (docs/ab.md "ccltune search"; the search: :mod:`ccltune.ab.search`, the
candidates: :mod:`ccltune.ab.candidates`)."""

from __future__ import annotations

import dataclasses
import shlex
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ccltune import files, rules
from ccltune.ab import candidates
from ccltune.ab.rounds import Arm
from ccltune.commands import ab_inrun
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option, to_argv
from ccltune.commands.results import Outcome
from ccltune.errors import UsageError
from ccltune.measure.session import terminate_as_interrupt
from ccltune.store import DEFAULT_DB, Store
from ccltune.workload import model

if TYPE_CHECKING:
    from ccltune.ab import inrun, search

CTA_VERSION = (2, 27, 0)      # NCCL_CTA_POLICY and NCCL_MAX_CTAS as whole-run arms from this NCCL on
WHOLE_RUN_ARMS = ("NCCL_CTA_POLICY=1", "NCCL_MAX_CTAS=16")   # 1: NCCL_CTA_POLICY_EFFICIENCY


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """``ccltune search``'s options (``ccltune search --help``); ``command`` is the user's job."""

    command: tuple[str, ...] = option((), positional=True, help="your job")
    workload: str | None = option(None, flag="--workload", help="the job's collectives (required)")
    sweep_rules: str | None = option(None, flag="--sweep-rules",
                                     help="the rules ccltune tune derived from the idle sweep: per group, its rule is a candidate")
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
    period: str = option("auto", flag="--period", help="tuner calls per step per communicator")
    min_effect: float = option(1.0, flag="--min-effect",
                               help="effects smaller than this many percent are 'no difference'")
    seed: int | None = option(None, flag="--seed", help="the schedule's seed (default: random)")
    run_timeout: float | None = option(None, flag="--run-timeout", help="end a run after S seconds")
    echo: bool = option(False, flag="--echo", help="show the job's output as it runs")
    db: str = option(DEFAULT_DB, flag="--db", help="results database (default: %(default)s)")

    def to_argv(self) -> list[str]:
        return [*to_argv(dataclasses.replace(self, command=()), "search"), "--", *self.command]


def _checked(o: SearchOptions) -> tuple[model.Workload, rules.RuleSet | None]:
    if not o.command:
        raise UsageError("no command to search for: give your job after --, e.g. ccltune search --workload w.json "
                         "--metric 'step +[0-9]+ +([0-9.]+) ms' -- torchrun --nproc-per-node 4 train.py")
    if not o.workload:
        raise UsageError("--workload W.json is required: the job's collectives (ccltune workload import)")
    for flag, v, lo in (("--runs", o.runs, 0), ("--finalists", o.finalists, 1), ("--max-groups", o.max_groups, 1)):
        if not lo <= v <= 64:
            raise UsageError(f"{flag} must be an integer in {lo}..64, got {v}")
    wl = model.load(o.workload)
    sweep = None
    if o.sweep_rules:
        sweep = rules.load(o.sweep_rules, "--sweep-rules")
        if sweep.diagnostics:
            raise UsageError(f"--sweep-rules {o.sweep_rules}: {len(sweep.diagnostics)} rejected line(s), the first: "
                             f"{sweep.diagnostics[0]}")
    return wl, sweep


def run_search(o: SearchOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> Outcome:
    """Check everything, then search (module doc); write ``--out`` with the winners (or no rule)."""
    from ccltune.ab import search

    check_outputs(o)
    wl, sweep = _checked(o)
    groups = candidates.groups(wl, o.max_groups)
    sm, why = candidates.overlap_note(wl)
    cands = candidates.candidates(groups, sweep, sm)
    if not cands:
        raise UsageError(f"--workload {o.workload}: no candidate: " + (
            "none of its collectives is one NCCL hands to a tuner" if not groups else why))
    like_ab = types.SimpleNamespace(prune=None, until_confident=False, rounds=None, budget=None, skip=0,
                                    max_blocks=None, **{f: getattr(o, f) for f in (
                                        "metric", "better", "block_steps", "warmup_blocks", "period", "run_timeout",
                                        "min_effect", "seed", "echo")})
    plan, words, removed = ab_inrun.plan_of(like_ab, list(o.command), [Arm("default"), Arm("default-2")])
    if "NCCL_DEBUG" not in plan.base_env:  # NCCL then prints its version line only: the whole-run arms need it
        plan = dataclasses.replace(plan, base_env={**plan.base_env, "NCCL_DEBUG": "VERSION"})
    console.say(f"# ccltune search: {shlex.join(o.command)}")
    console.say(f"# workload {o.workload}: {len(groups)} group(s): " + "; ".join(
        f"{g.label} (NCCL ran {g.nccl_ran})" for g in groups))
    console.say(f"# {why}")
    console.say(f"# {len(cands)} candidate(s); metric {o.metric!r}, {words}; successive halving over at most "
                f"{o.runs} run(s), then a confirmation run of at most {o.finalists} finalist(s)")
    run_ids: list[int] = []

    def keep(p: inrun.InRunPlan, got: inrun.InRunResult, confirm: bool) -> None:
        with Store(o.db) as st:
            rid = st.begin_run("ab", command="ccltune " + shlex.join(command_line or o.to_argv()),
                               env={"command": shlex.join(o.command), "search": True},
                               args={"search": True, "confirm": confirm, "seed": p.seed})
            st.add_ab_arms(rid, {a.name: {"rules": a.rules, "in_run": True, "arm_index": i}
                                        for i, a in enumerate(p.arms)})
            ab_inrun.store_blocks(st, rid, p, got, words)
        run_ids.append(rid)

    with tempfile.TemporaryDirectory(prefix="ccltune-search-") as tmp, terminate_as_interrupt():
        result = search.search(plan, cands, Path(tmp), runs=o.runs, finalists=o.finalists, say=console.say,
                               store=keep)
    for stage in result.stages[-1:]:
        for n in stage.notes:
            console.say(f"# note: {n}")
    console.say(search.summary_line(result))
    for c, j in result.winners:
        assert j.estimate is not None
        console.say(f"#   kept {c.rule.to_line()}  ({c.group.label}: in-job ratio {j.estimate.ratio:.4f} "
                    f"[{j.estimate.low:.4f}, {j.estimate.high:.4f}])")
    if o.out:
        files.write_text(o.out, search.rule_file(result, argv=o.command, workload=o.workload or ""), flag="--out")
        console.say(f"# wrote {o.out}: {len(result.winners)} rule(s)")
    console.say(whole_run_note(result, o))
    console.say(f"# stored: ab runs {', '.join(map(str, run_ids))} in {o.db}")
    return Outcome(o.db, run_ids[-1] if run_ids else None)


def whole_run_note(result: search.SearchResult, o: SearchOptions) -> str:
    """NCCL_CTA_POLICY and NCCL_MAX_CTAS change a communicator at its init: whole-run arms, where NCCL has them."""
    seen = [v for s in result.stages for v in [getattr(s, "nccl_version", None)] if v]
    version = seen[0] if seen else None
    if version is None:
        return ("# whole-run arms NCCL_CTA_POLICY, NCCL_MAX_CTAS: not proposed: the job printed no 'NCCL version' line "
                "(ccltune sets NCCL_DEBUG=VERSION unless NCCL_DEBUG is set), so NCCL's version is unknown")
    text = ".".join(map(str, version))
    if version < CTA_VERSION:
        return f"# whole-run arms NCCL_CTA_POLICY, NCCL_MAX_CTAS: NCCL {text} is older than 2.27: not tried"
    env = " ".join(f"--env {e}" for e in WHOLE_RUN_ARMS)
    return (f"# NCCL {text} has NCCL_CTA_POLICY and NCCL_MAX_CTAS, which act at a communicator's init: judge them as "
            f"whole-run arms: ccltune ab {env} --metric {shlex.quote(o.metric)} -- {shlex.join(o.command)}")


__all__ = ["SearchOptions", "run_search"]
