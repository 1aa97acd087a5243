"""``ccltune search``: the job's own best rules, found and proven inside the job (docs/ab.md "ccltune search").

The candidates (:mod:`ccltune.ab.candidates`) are in-run arms: each run of the job judges every arm still in
the race against NCCL's default, paired by round (:mod:`ccltune.ab.inrun`). Successive halving: after each run
the better half (by the in-job ratio) goes on to the next run, until ``finalists`` are left or the runs are
spent; a last run confirms them with Holm's correction over the finalists. A finalist judged FASTER there is a
winner (one per group: the fastest); the rule file holds the winners with their in-job ratio and interval.
With none, the answer is how close NCCL's default is to the best candidate: the best finalist's interval says
by how much at most it could be faster. Nothing here prints: lines go to ``say``."""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccltune import environment, rules
from ccltune.ab import inrun
from ccltune.ab.armsfile import InRunArm
from ccltune.ab.candidates import Candidate
from ccltune.ab.inrun_judge import AA, ArmJudgement
from ccltune.status import ArmStatus


@dataclass
class Stage:
    run: int                     # 1-based; the last is the confirmation
    arms: list[str]
    judged: list[ArmJudgement]
    notes: list[str] = field(default_factory=list)
    confirm: bool = False
    nccl_version: tuple[int, int, int] | None = None
    result: inrun.InRunResult | None = None   # the run itself: its blocks, for the database


@dataclass
class SearchResult:
    tried: int
    stages: list[Stage] = field(default_factory=list)
    winners: list[tuple[Candidate, ArmJudgement]] = field(default_factory=list)
    best: tuple[Candidate, ArmJudgement] | None = None
    within_pct: float | None = None   # no winner: the most the best candidate could be faster, at 95%


def _ratio(j: ArmJudgement) -> float:
    return j.estimate.ratio if j.estimate is not None else math.inf


def search(base: inrun.InRunPlan, cands: Sequence[Candidate], folder: Path, *, runs: int, finalists: int,
           say: Callable[[str], None], store: Callable[[inrun.InRunPlan, inrun.InRunResult, bool], None]) -> SearchResult:
    """Successive halving over in-run runs, then the confirmation run (module doc). ``base``: the job, the
    metric and the schedule; its arms are replaced by default, its A/A twin and the candidates in the race.
    ``store`` keeps each run (the database), as it ends."""
    by_name = {c.name: c for c in cands}
    for c in cands:
        (folder / f"{c.name}.conf").write_text(f"# ccltune search candidate ({c.source}): {c.group.label}\n"
                                               f"{c.rule.to_line()}\n")
    out = SearchResult(len(cands))
    race = [c.name for c in cands]
    rnd = 0
    while True:
        rnd += 1
        confirm = len(race) <= finalists or rnd > runs
        arms = (InRunArm("default"), InRunArm(AA), *(InRunArm(n, str(folder / f"{n}.conf")) for n in race))
        say(f"# search run {rnd}{' (confirmation)' if confirm else ''}: {len(race)} candidate(s): {', '.join(race)}")
        plan = dataclasses.replace(base, arms=arms, seed=base.seed + rnd)
        got = inrun.run(plan, say)
        store(plan, got, confirm)
        stage = Stage(rnd, race, got.judged, got.notes, confirm, got.job.nccl_version, got)
        out.stages.append(stage)
        judged = {j.name: j for j in got.judged if j.name in by_name}
        for n in race:
            j = judged[n]
            say(f"#   {n}: ratio {_ratio(j):.4f}" + (f" [{j.estimate.low:.4f}, {j.estimate.high:.4f}]"
                                                     if j.estimate else "") + f" {j.status.value}")
        if confirm:
            break
        race = sorted(race, key=lambda n: _ratio(judged[n]))[:max(finalists, math.ceil(len(race) / 2))]
    last = {j.name: j for j in out.stages[-1].judged if j.name in by_name}
    fastest: dict[str, tuple[Candidate, ArmJudgement]] = {}
    for n, j in sorted(last.items(), key=lambda kv: _ratio(kv[1])):
        c = by_name[n]
        if j.status is ArmStatus.FASTER:
            fastest.setdefault(c.group.label, (c, j))
    out.winners = list(fastest.values())
    if last:
        n, j = min(last.items(), key=lambda kv: _ratio(kv[1]))
        out.best = (by_name[n], j)
        if not out.winners and j.estimate is not None:
            out.within_pct = max(0.0, 100 * (1 - j.estimate.low)) if math.isfinite(j.estimate.low) else None
    return out


def rule_file(result: SearchResult, *, argv: Sequence[str], workload: str) -> str:
    """The winners' rule file: a header naming search, the job and the date; each rule with its in-job ratio."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [f"# ccltune {environment.__version__} search, {date}: the rules that made the job faster inside it",
            f"# job: {' '.join(argv)}", f"# workload: {workload}; {result.tried} candidate(s) tried over "
            f"{len(result.stages)} run(s), the last the confirmation (Holm over its finalists)"]
    body: list[str] = []
    for c, j in result.winners:
        e = j.estimate
        assert e is not None
        body.append(f"# {c.group.label} ({c.source}; NCCL ran {c.group.nccl_ran}): in-job ratio {e.ratio:.4f} "
                    f"[{e.low:.4f}, {e.high:.4f}] at {100 * e.level:.0f}%, {e.n} paired rounds, p = {e.p_value:.3g}")
        body.append(c.rule.to_line())
    if not body:
        head.append("# no candidate was faster: NCCL decides everywhere")
    return rules.format_rules([], head) + "\n".join(body) + ("\n" if body else "")


def summary_line(result: SearchResult) -> str:
    if result.winners:
        return (f"# search: {len(result.winners)} rule(s) made the job faster, of {result.tried} candidate(s) tried")
    if result.within_pct is None:
        return (f"# search: no candidate was faster, of {result.tried} tried; the runs were too short to bound how "
                "close NCCL's default is (more steps, or fewer candidates)")
    return (f"# search: NCCL's default is within {result.within_pct:.1f}% of the best of the {result.tried} "
            f"candidates tried (the best, {result.best[0].name if result.best else '-'}, could be at most that much "
            "faster at 95%)")
