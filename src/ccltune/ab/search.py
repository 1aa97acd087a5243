"""``ccltune search``: the job's own best rules, found and proven inside the job (docs/ab.md "ccltune search").

The candidates (:mod:`ccltune.ab.candidates`) are in-run arms: each run of the job judges every arm still in
the race against NCCL's default, paired by round (:mod:`ccltune.ab.inrun`). A run holds only so many blocks, and
each candidate needs a block per round for as many rounds as Holm's correction over the candidates needs
(:func:`capacity`): the first run takes the heaviest groups' candidates that fit, the later ones what the first
run's blocks hold. Successive halving: after each run the better half (by the in-job ratio) goes on to the next
run, until ``finalists`` are left or the runs are spent; a last run confirms them with Holm's correction over
the finalists. A finalist judged FASTER there is a winner (one per group: the fastest); the rule file holds the
winners with their in-job ratio and interval. Two or more winners were each judged alone: one more run judges
them together, as the file holds them; not faster together, only the best one is kept (:func:`_together`).

NCCL_CTA_POLICY and NCCL_MAX_CTAS act at a communicator's init, so they cannot switch inside a run: they are
whole-run arms (:data:`WHOLE_RUN`, where the job's NCCL has them), judged by ab's rounds and joined to the answer
(:func:`conclude`). With no winner, the answer is how close NCCL's default is to the best candidate: the best
one's interval says by how much at most it could be faster. Nothing here prints: lines go to ``say``."""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccltune import environment, rules
from ccltune.ab import inrun, judge
from ccltune.ab.armsfile import InRunArm
from ccltune.ab.candidates import Candidate
from ccltune.ab.inrun_judge import AA, ArmJudgement
from ccltune.ab.rounds import CONTROL, DEFAULT, Arm, values_by_arm
from ccltune.status import ArmStatus
from ccltune.store import AbSample

# Whole-run arms: (variable, value, the first NCCL that has it, what it asks). NCCL's src/nccl.h.in:
# NCCL_CTA_POLICY_DEFAULT 0, NCCL_CTA_POLICY_EFFICIENCY 1 (2.27), NCCL_CTA_POLICY_ZERO 2 (2.28); NCCL_MAX_CTAS came
# with ncclConfig_t's maxCTAs (2.17).
WHOLE_RUN: tuple[tuple[str, str, tuple[int, int, int], str], ...] = (
    ("NCCL_CTA_POLICY", "1", (2, 27, 0), "NCCL_CTA_POLICY_EFFICIENCY: the fewest CTAs that keep decent performance"),
    ("NCCL_CTA_POLICY", "2", (2, 28, 0), "NCCL_CTA_POLICY_ZERO: zero CTAs wherever NCCL can"),
    ("NCCL_MAX_CTAS", "8", (2, 17, 0), "at most 8 CTAs (channels) per NCCL kernel"),
    ("NCCL_MAX_CTAS", "16", (2, 17, 0), "at most 16 CTAs (channels) per NCCL kernel"),
)
PERIOD_STEPS = 3   # steps before the plugin can know the period (it needs three repeats): no block yet
TOGETHER = "together"   # the arm of the winners' rules in one file (the file the user deploys)


@dataclass
class Stage:
    run: int                     # 1-based; the last is the confirmation
    arms: list[str]
    judged: list[ArmJudgement]
    notes: list[str] = field(default_factory=list)
    confirm: bool = False
    nccl_version: tuple[int, int, int] | None = None
    result: inrun.InRunResult | None = None   # the run itself: its blocks, for the database
    together: bool = False       # the run of the winners together, after the confirmation


@dataclass
class SearchResult:
    tried: int                   # in-run candidates judged
    stages: list[Stage] = field(default_factory=list)
    winners: list[tuple[Candidate, ArmJudgement]] = field(default_factory=list)
    whole: list[judge.ArmVerdict] = field(default_factory=list)   # the whole-run arms' verdicts (control included)
    whole_note: str = ""         # which whole-run arms ran, or why none
    whole_winners: list[judge.ArmVerdict] = field(default_factory=list)   # per variable the fastest FASTER
    best: str | None = None      # the best candidate of all by ratio (in-run finalist or whole-run arm)
    within_pct: float | None = None   # no winner: the most the best candidate could be faster, at its level
    wall_s: float = 0.0          # the whole search, start-up to the last run's end
    together: ArmJudgement | None = None   # two or more winners: their rules together, one more run
    together_note: str = ""      # the winners together were not faster: only the best alone is kept

    @property
    def whole_judged(self) -> list[judge.ArmVerdict]:
        return [v for v in self.whole if not v.control and v.status is not ArmStatus.BASELINE]

    @property
    def cost(self) -> str:
        """What the search cost, in the job's runs and wall time."""
        whole = sum(v.runs + v.failed for v in self.whole)
        m, sec = divmod(round(self.wall_s), 60)
        return (f"{len(self.stages)} in-run run(s)" + (f" and {whole} whole run(s)" if whole else "")
                + f" of the job, {m} min {sec} s")


def _ratio(j: ArmJudgement) -> float:
    return j.estimate.ratio if j.estimate is not None else math.inf


def blocks_needed(candidates: int, warmup_blocks: int) -> int:
    """The blocks a run needs to judge ``candidates`` in-run arms: the warm-up blocks, then, for default, its A/A
    twin and the candidates, the warm-up round and the rounds that reach 95% under Holm over the candidates."""
    return warmup_blocks + (candidates + 2) * (1 + judge.min_rounds(candidates))


def capacity(blocks: int, warmup_blocks: int, most: int) -> int:
    """The most candidates (at most ``most``) that a run of ``blocks`` judged-or-warm-up blocks can judge."""
    n = 0
    while n < most and blocks_needed(n + 1, warmup_blocks) <= blocks:
        n += 1
    return n


def blocks_of_steps(steps: int, block_steps: int) -> int:
    """The blocks a run of ``steps`` steps holds, about: none before the plugin knows the period
    (``PERIOD_STEPS``), and the run's last block is never judged (its end is unknown)."""
    return max(0, (steps - PERIOD_STEPS) // block_steps - 1)


def search(base: inrun.InRunPlan, cands: Sequence[Candidate], folder: Path, *, runs: int, finalists: int,
           say: Callable[[str], None], store: Callable[[inrun.InRunPlan, inrun.InRunResult, bool], None]) -> SearchResult:
    """Successive halving over in-run runs, then the confirmation run (module doc). ``base``: the job, the
    metric and the schedule; its arms are replaced by default, its A/A twin and the candidates in the race.
    ``store`` keeps each run (the database), as it ends. After each run, the race is cut to what the run's
    blocks can judge (:func:`capacity`), the best by ratio kept."""
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
        logged = len(got.blocks.spans)
        fit = capacity(max(0, logged - 1), base.warmup_blocks, len(race))
        if fit < len(race):
            say(f"#   run {rnd} held {logged} blocks: a run can judge {fit} candidate(s); left out: "
                f"{', '.join(race[max(1, fit):])}")
            race = race[:max(1, fit)]
    last = {j.name: j for j in out.stages[-1].judged if j.name in by_name}
    fastest: dict[str, tuple[Candidate, ArmJudgement]] = {}
    for n, j in sorted(last.items(), key=lambda kv: _ratio(kv[1])):
        c = by_name[n]
        if j.status is ArmStatus.FASTER:
            fastest.setdefault(c.group.label, (c, j))
    out.winners = list(fastest.values())
    if len(out.winners) > 1:
        _together(out, base, folder, rnd + 1, say, store)
    return out


def _together(out: SearchResult, base: inrun.InRunPlan, folder: Path, rnd: int, say: Callable[[str], None],
              store: Callable[[inrun.InRunPlan, inrun.InRunResult, bool], None]) -> None:
    """The winners were confirmed one at a time; the file holds them together: one more run judges that file.
    Not faster together: only the best winner alone is kept, and the answer says why."""
    path = folder / f"{TOGETHER}.conf"
    path.write_text("# ccltune search: the winners together\n" + "".join(f"{c.rule.to_line()}\n" for c, _ in out.winners))
    say(f"# search run {rnd} (the {len(out.winners)} winners together, the rule file as written)")
    plan = dataclasses.replace(base, arms=(InRunArm("default"), InRunArm(AA), InRunArm(TOGETHER, str(path))),
                               seed=base.seed + rnd)
    got = inrun.run(plan, say)
    store(plan, got, True)
    out.stages.append(Stage(rnd, [TOGETHER], got.judged, got.notes, True, got.job.nccl_version, got, together=True))
    j = out.together = next(j for j in got.judged if j.name == TOGETHER)
    say(f"#   {TOGETHER}: ratio {_ratio(j):.4f}" + (f" [{j.estimate.low:.4f}, {j.estimate.high:.4f}]"
                                                    if j.estimate else "") + f" {j.status.value}")
    if j.status is not ArmStatus.FASTER:
        c, best = min(out.winners, key=lambda w: _ratio(w[1]))
        out.together_note = (f"the {len(out.winners)} winners together: ratio {_ratio(j):.4f}, {j.status.value}, not "
                             f"proven faster together: only the best alone is kept ({c.name}, {_ratio(best):.4f})")
        out.winners = [(c, best)]


def whole_run_arms(version: tuple[int, int, int] | None) -> tuple[list[Arm], str]:
    """The whole-run arms the job's NCCL has (:data:`WHOLE_RUN`), and the words saying which and why not."""
    if version is None:
        return [], ("NCCL's version is unknown (the job printed no 'NCCL version' line; ccltune sets "
                    "NCCL_DEBUG=VERSION unless NCCL_DEBUG is set): whole-run arms NCCL_CTA_POLICY, NCCL_MAX_CTAS skipped")
    text = ".".join(map(str, version))
    have = [(k, v, words) for k, v, since, words in WHOLE_RUN if version >= since]
    lacks = [f"{k}={v} (NCCL {'.'.join(map(str, since[:2]))})" for k, v, since, _ in WHOLE_RUN if version < since]
    arms = [Arm(f"{k}={v}", env=((k, v),)) for k, v, _ in have]
    said = f"NCCL {text}: whole-run arms " + (", ".join(f"{k}={v} ({w})" for k, v, w in have) or "none")
    return arms, said + (f"; not in this NCCL: {', '.join(lacks)}" if lacks else "")


def judge_whole(samples: Sequence[AbSample], names: Sequence[str], *, higher_better: bool,
                min_effect: float) -> list[judge.ArmVerdict]:
    """The whole-run arms' verdicts from ab's rounds (paired by round, Holm across the arms, the A/A control
    included as ab does), the metric oriented so lower is better (1 / value when higher is better; the median
    stays in the metric's unit, the shift is left out)."""
    values, failed = values_by_arm(list(samples), list(names))
    return judge.oriented(values, failed, higher_better=higher_better, baseline=DEFAULT, controls=[CONTROL],
                          min_effect=min_effect)


def conclude(result: SearchResult) -> None:
    """The answer over every candidate (module doc): the whole-run winners (per variable the fastest FASTER) and,
    with no winner at all, how close NCCL's default is to the best candidate: the best in-run finalist and the
    best whole-run arm by ratio, X = the larger of what each could be faster at its interval's level."""
    fastest: dict[str, judge.ArmVerdict] = {}
    for v in sorted(result.whole_judged, key=lambda v: v.effect.ratio if v.effect else math.inf):
        if v.status is ArmStatus.FASTER:
            fastest.setdefault(v.name.partition("=")[0], v)
    result.whole_winners = list(fastest.values())
    bests: list[tuple[str, float, float]] = []   # name, ratio, low
    races = [s for s in result.stages if not s.together]
    if races:
        last = [j for j in races[-1].judged if j.estimate is not None and j.name not in ("default", AA)]
        if last:
            j = min(last, key=_ratio)
            assert j.estimate is not None
            bests.append((j.name, j.estimate.ratio, j.estimate.low))
    whole = [v for v in result.whole_judged if v.effect is not None]
    if whole:
        v = min(whole, key=lambda v: v.effect.ratio if v.effect else math.inf)
        assert v.effect is not None
        bests.append((v.name, v.effect.ratio, v.effect.low))
    if not bests:
        return
    result.best = min(bests, key=lambda b: b[1])[0]
    if not result.winners and not result.whole_winners and all(math.isfinite(b[2]) and b[2] > 0 for b in bests):
        result.within_pct = max(max(0.0, 100 * (1 - b[2])) for b in bests)


def tried(result: SearchResult) -> int:
    """K of the answer: the in-run candidates and the whole-run arms judged."""
    return result.tried + len(result.whole_judged)


def env_lines(result: SearchResult) -> list[str]:
    """The whole-run winners as comment lines (a rule file cannot carry an environment variable)."""
    out = []
    for v in result.whole_winners:
        e = v.effect
        assert e is not None
        out.append(f"# set {v.name} in the job's environment (a whole-run arm: a rule file cannot carry it): ratio "
                   f"{e.ratio:.4f} [{e.low:.4f}, {e.high:.4f}] at {100 * e.level:.4g}%, {e.n} paired runs, "
                   f"p = {e.p_value:.3g}")
    if len(out) > 1:
        out.append("# these were judged one at a time, not together: check them together with ccltune ab --arm "
                   + " ".join(f"both:env:{v.name}" for v in result.whole_winners) + " -- <the job>")
    return out


def rule_file(result: SearchResult, *, argv: Sequence[str], workload: str) -> str:
    """The winners' rule file: a header naming search, the job and the date; each rule with its in-job ratio; the
    whole-run winners as comment lines with the setting to use."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [f"# ccltune {environment.__version__} search, {date}: the rules that made the job faster inside it",
            f"# job: {' '.join(argv)}", f"# workload: {workload}; {result.tried} candidate(s) tried over "
            f"{len(result.stages)} run(s), the last the confirmation (Holm over its finalists)",
            f"# cost: {result.cost}"]
    if result.whole_note:
        head.append(f"# {result.whole_note}")
    t = result.together
    if t is not None and t.estimate is not None and not result.together_note:
        head.append(f"# the {len(result.winners)} rules together: in-job ratio {t.estimate.ratio:.4f} "
                    f"[{t.estimate.low:.4f}, {t.estimate.high:.4f}] at {100 * t.estimate.level:.0f}%, {t.estimate.n} "
                    "paired rounds (one more run of the job, this file as written)")
    if result.together_note:
        head.append(f"# {result.together_note}")
    head += env_lines(result)
    body: list[str] = []
    for c, j in result.winners:
        e = j.estimate
        assert e is not None
        body.append(f"# {c.group.label} ({c.source}; NCCL ran {c.group.nccl_ran}): in-job ratio {e.ratio:.4f} "
                    f"[{e.low:.4f}, {e.high:.4f}] at {100 * e.level:.0f}%, {e.n} paired rounds, p = {e.p_value:.3g}")
        body.append(c.rule.to_line())
    if not body:
        head.append("# no rule candidate was faster: NCCL decides everywhere")
    return rules.format_rules([], head) + "\n".join(body) + ("\n" if body else "")


def summary_line(result: SearchResult) -> str:
    k = tried(result)
    if result.winners or result.whole_winners:
        parts = ([f"{len(result.winners)} rule(s)"] if result.winners else []) + (
            [f"{len(result.whole_winners)} whole-run setting(s) ({', '.join(v.name for v in result.whole_winners)})"]
            if result.whole_winners else [])
        return f"# search: {' and '.join(parts)} made the job faster, of {k} candidate(s) tried"
    if result.within_pct is None:
        return (f"# search: no candidate was faster, of {k} tried; the runs were too short to bound how "
                "close NCCL's default is (more steps, more --whole-run-rounds, or fewer candidates)")
    return (f"# search: NCCL's default is within {result.within_pct:.1f}% of the best of the {k} "
            f"candidates tried (the best, {result.best or '-'}, could be at most that much faster at 95%)")
