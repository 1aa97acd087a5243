"""``ccltune ab``'s rounds: the user's job run again and again, every arm once per round in a shuffled
order (a seeded RNG; the seed is recorded), each run's value stored as soon as it ends, the verdict
(:mod:`ccltune.ab.judge`) after every round. With ``--until-confident`` every round from
``first_look`` on is a look, tested at ``stats.look_level`` of its number (the final verdict too), so the
looks together keep 95%; without it the one verdict, at the end, is at 95%. Nothing here prints: lines
go to ``say``."""

from __future__ import annotations

import hashlib
import math
import random
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccltune import files, rules, stats
from ccltune.ab import commtime, job, judge
from ccltune.ab import fired as fired_
from ccltune.errors import CcltuneError, UsageError
from ccltune.status import SampleStatus
from ccltune.store import AbSample, Store
from ccltune.workload import profile_file

DEFAULT, CONTROL = "default", "default-2"


@dataclass(frozen=True)
class Arm:
    """What one arm changes in the job's environment: variables, a rule file through ccltune's tuner
    plugin, an NCCL library put first through LD_PRELOAD."""

    name: str
    env: tuple[tuple[str, str], ...] = ()
    rules: str | None = None        # absolute path
    nccl_lib: str | None = None     # absolute path
    unset: tuple[str, ...] = ()     # variables removed from the job's environment

    @property
    def control(self) -> bool:
        return self.name == CONTROL

    def describe(self) -> str:
        if self.name == DEFAULT:
            return "NCCL's default"
        if self.control:
            return "NCCL's default again (A/A control: the job's own noise)"
        parts = [f"{k}={v}" for k, v in self.env] + [f"{k} unset" for k in self.unset]
        parts += [f"rules {self.rules} (ccltune's tuner plugin)"] if self.rules else []
        parts += [f"NCCL library {self.nccl_lib} (LD_PRELOAD)"] if self.nccl_lib else []
        return ", ".join(parts)

    def spec(self) -> dict[str, Any]:
        return {"env": dict(self.env), "unset": list(self.unset), "rules": self.rules, "nccl_lib": self.nccl_lib,
                "control": self.control}

    def environ(self, base: Mapping[str, str], tuner: str | None) -> dict[str, str]:
        env = {k: v for k, v in base.items() if k not in self.unset}
        env.update(self.env)
        if self.rules:
            env.update(NCCL_TUNER_PLUGIN=str(tuner), NCCL_TUNER_CONFIG_FILE=self.rules, CCLTUNE_RULES=self.rules)
        if self.nccl_lib:
            env["LD_PRELOAD"] = ":".join(p for p in (self.nccl_lib, base.get("LD_PRELOAD", "")) if p)
        return env


@dataclass(frozen=True)
class Metric:
    """How a run's value is read (docs/ab.md): 'wall' (s), 'comm' (us, ccltune's profiler files), or
    'regex' (the median of group 1 of every match in its output, after the first ``skip``)."""

    kind: str
    pattern: re.Pattern[str] | None = None
    skip: int = 0
    profiler: str | None = None     # the profiler plugin for 'comm'
    auto: bool = False              # 'comm' chosen because the profiler is built: wall time when no file comes

    @property
    def unit(self) -> str:
        return {"wall": "s", "comm": "us"}.get(self.kind, "")

    def describe(self) -> str:
        if self.kind == "wall":
            return "wall time of each run (s)"
        if self.kind == "comm":
            return "GPU time of the job's collectives in each run, all ranks, from ccltune's profiler plugin (us)"
        skip = f", after the first {self.skip}" if self.skip else ""
        return f"each run's median of the numbers {self.pattern.pattern!r} matched in its output{skip}"  # type: ignore[union-attr]


@dataclass
class Plan:
    argv: list[str]
    arms: list[Arm]                 # DEFAULT first; CONTROL when the A/A control is on
    metric: Metric
    rounds: int                     # at most this many rounds
    seed: int
    min_effect: float = 0.01
    until_confident: bool = False
    budget_s: float | None = None
    tuner: str | None = None        # the tuner plugin, when an arm has rules
    base_env: dict[str, str] = field(default_factory=dict)
    echo: bool = False
    run_timeout_s: float | None = None
    higher_better: bool = False     # the metric is a throughput (tokens/s): judged as 1 / value


@dataclass
class Failure:
    arm: str
    round: int
    reason: str
    exit_code: int | None
    tail: list[str]


@dataclass
class RoundsResult:
    samples: list[AbSample] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    verdicts: list[judge.ArmVerdict] = field(default_factory=list)
    rounds_done: int = 0
    interrupted: bool = False
    stop_reason: str = ""
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    fired: dict[str, fired_.Tally] = field(default_factory=dict)  # rules arm -> its calls per rule (profiler files)


def profiler_loaded(env: Mapping[str, str]) -> bool:
    """Whether ``env`` loads ccltune's profiler plugin (NCCL_PROFILER_PLUGIN names its library)."""
    from ccltune.profiler_plugin import LIBRARY_NAME

    return Path(env.get("NCCL_PROFILER_PLUGIN", "")).name == LIBRARY_NAME


def order(arms: Sequence[Arm], rng: random.Random, first_round: bool) -> list[Arm]:
    """One round's order: shuffled; in the first round default runs first, so a metric that never
    matches is found after one run."""
    out = list(arms)
    rng.shuffle(out)
    if first_round:
        out.sort(key=lambda a: a.name != DEFAULT)
    return out


def _value(plan: Plan, res: job.JobRun, profile: Path | None) -> tuple[float | None, str]:
    if res.reason:
        return None, res.reason
    m = plan.metric
    if m.kind == "wall":
        return (res.wall_s, "") if res.wall_s > 0 else (None, "ran for no measurable time")
    if m.kind == "comm":
        return commtime.comm_time_us(profile) if profile is not None else (None, "no profile folder")
    kept = res.matches[m.skip:]
    if not kept:
        what = f"{len(res.matches)} match(es), all skipped by --skip {m.skip}" if res.matches else "no match"
        return None, f"the metric {m.pattern.pattern!r} found {what} in the output"  # type: ignore[union-attr]
    med = stats.median(kept)
    return (med, "") if med > 0 and math.isfinite(med) else (None, f"the metric's median is {med:g}, not > 0")


class _Rounds:
    def __init__(self, plan: Plan, store: Store, run_id: int, say: Callable[[str], None]):
        self.plan, self.store, self.run_id, self.say = plan, store, run_id, say
        self.out = RoundsResult()
        self.checked = False   # the first default run has shown the metric works
        # the profiler's files of each run: the metric (comm), or the user's environment loads ccltune's profiler
        self.own_profiler = plan.metric.kind != "comm" and profiler_loaded(plan.base_env)
        self.tmp = Path(tempfile.mkdtemp(prefix="ccltune-ab-")) if plan.metric.kind == "comm" or self.own_profiler \
            else None
        self.rulesets: dict[str, rules.RuleSet] = {}
        # each rules arm's file as it is now, stored with the run (content and sha256): a job that rewrites it
        # mid-run would make the arm's runs measure different rules, unnoticed (issue 41)
        self.rule_sha: dict[str, str] = {}
        for arm in plan.arms:
            if arm.rules:
                text = files.read_text(arm.rules, f"arm {arm.name}'s --rules")
                self.rule_sha[arm.name] = hashlib.sha256(text.encode()).hexdigest()
                store.add_artifact(run_id, f"rules {arm.name}", text)
                store.add_artifact(run_id, f"rules {arm.name} sha256", self.rule_sha[arm.name])

    def _same_rules(self, arm: Arm, when: str) -> None:
        """Refuse to go on when ``arm``'s rule file is not what it was when ab started."""
        if not arm.rules:
            return
        text = files.read_text(arm.rules, f"arm {arm.name}'s --rules")
        now = hashlib.sha256(text.encode()).hexdigest()
        if now != self.rule_sha[arm.name]:
            raise UsageError(f"arm {arm.name}'s rule file {files.shown(arm.rules)} changed {when} (sha256 "
                             f"{self.rule_sha[arm.name][:16]}... at the start, {now[:16]}... now): the job or "
                             "another program rewrote it, so the arm's runs would not measure one rule file. "
                             f"Stopped; its content at the start is stored with run {self.run_id} "
                             f"(artifact 'rules {arm.name}')")

    def one(self, arm: Arm, rnd: int, slot: int) -> None:
        plan = self.plan
        self._same_rules(arm, f"before round {rnd}")
        env = arm.environ(plan.base_env, plan.tuner)
        profile = None
        if self.tmp is not None:
            profile = self.tmp / f"r{rnd}-{slot}"  # not the arm's name: --env NCCL_TOPO_FILE=/a/path is one
            profile.mkdir()
            env.update(CCLTUNE_PROFILE=str(profile))
            if plan.metric.kind == "comm":
                env.update(NCCL_PROFILER_PLUGIN=str(plan.metric.profiler))
        res = job.run_once(plan.argv, env, plan.metric.pattern, echo=plan.echo, timeout_s=plan.run_timeout_s)
        self._same_rules(arm, f"during its run of round {rnd}")
        value, why = _value(plan, res, profile if plan.metric.kind == "comm" else None)
        if arm.rules and profile is not None and not res.reason:
            self._tally(arm, profile)
        bad = None
        if arm.name == DEFAULT and not self.checked:
            value, why, bad = self._check_metric(res, value, why)
        unit = plan.metric.unit
        s = AbSample(arm.name, rnd, slot, value, unit, SampleStatus.OK if value is not None else SampleStatus.FAILED,
                            res.exit_code, res.wall_s, len(res.matches), why)
        self.store.add_ab_sample(self.run_id, s)
        self.out.samples.append(s)
        if bad is not None:
            raise bad
        if value is None:
            f = Failure(arm.name, rnd, why, res.exit_code, res.tail)
            self.out.failures.append(f)
            self.say(f"# run failed: arm {arm.name}, round {rnd}: {why}; its last lines:")
            for line in res.tail[-6:]:
                self.say(f"#   | {line}")

    def _tally(self, arm: Arm, profile: Path) -> None:
        """The run's calls per rule of the arm's file (ab.fired), added to the arm's tally; a run whose
        profiler files cannot be read adds nothing (its metric says why when it is comm)."""
        try:
            rs = self.rulesets.get(arm.name) or self.rulesets.setdefault(arm.name, rules.load(arm.rules or ""))
            got = fired_.tally(rs, profile_file.read_dir(profile, strict=True))
        except (CcltuneError, OSError):  # a file cut short, none written, the rule file gone: no record of this run
            return
        self.out.fired.setdefault(arm.name, fired_.Tally()).merge(got)

    def _check_metric(self, res: job.JobRun, value: float | None, why: str
                      ) -> tuple[float | None, str, UsageError | None]:
        """The first run of default: a metric that reads nothing from a run that exited 0 is bad input
        (the regex never matches), or, for the profiler chosen on its own, wall time instead."""
        m = self.plan.metric
        if res.reason or value is not None:
            self.checked = value is not None
            return value, why, None
        self.checked = True
        if m.kind == "comm" and m.auto:
            self.plan.metric = Metric("wall")
            note = f"the profiler plugin wrote nothing ({why}): the metric is wall time instead"
            self.out.notes.append(note)
            self.say(f"# note: {note}")
            return res.wall_s, "", None
        tail = "\n".join(f"  | {line}" for line in res.tail)
        return None, why, UsageError(f"{why} of the first run of the default arm (exit code 0): check --metric; "
                                     f"the job's last lines:\n{tail}")

    def verdicts(self) -> list[judge.ArmVerdict]:
        names = [a.name for a in self.plan.arms]
        values, failed = values_by_arm(self.out.samples, names)
        return judge.oriented(values, failed, higher_better=self.plan.higher_better, controls=[CONTROL],
                              min_effect=self.plan.min_effect, alpha=alpha_after(self.plan, self.out.rounds_done))


def values_by_arm(rows: list[AbSample], names: list[str]) -> tuple[dict[str, dict[int, float]], dict[str, int]]:
    """(arm -> round -> the value of its good run, arm -> its failed runs), every arm of ``names`` present."""
    values: dict[str, dict[int, float]] = {n: {} for n in names}
    failed: dict[str, int] = {n: 0 for n in names}
    for s in rows:
        if s.status == SampleStatus.OK and s.value is not None:
            values.setdefault(s.arm, {})[s.round] = s.value
        else:
            failed[s.arm] = failed.get(s.arm, 0) + 1
    return values, failed


def first_look(plan: Plan) -> int:
    """The first round ``--until-confident`` looks at: the first whose pairs can reach 95% under Holm
    across the judged arms (every arm but default); earlier rounds cannot decide, so they spend nothing."""
    return max(2, judge.min_rounds(len(plan.arms) - 1))


def alpha_after(plan: Plan, rounds_done: int) -> float:
    """The alpha of the verdict after ``rounds_done`` rounds: 5% for a fixed number of rounds (one look,
    at the end); under ``--until-confident`` the alpha spent on that look (``stats.look_level``)."""
    if not plan.until_confident:
        return judge.ALPHA
    look = max(1, rounds_done - first_look(plan) + 1)
    return 1 - stats.look_level(look, judge.ALPHA)


def run(plan: Plan, store: Store, run_id: int, say: Callable[[str], None]) -> RoundsResult:
    """Every round of ``plan``, stored under ``run_id``. A KeyboardInterrupt ends the round under way:
    the runs finished so far are kept and judged (``RoundsResult.interrupted``)."""
    r = _Rounds(plan, store, run_id, say)
    rng = random.Random(plan.seed)
    start = time.monotonic()
    try:
        for rnd in range(1, plan.rounds + 1):
            for slot, arm in enumerate(order(plan.arms, rng, rnd == 1)):
                r.one(arm, rnd, slot)
            r.out.rounds_done = rnd
            r.out.verdicts = r.verdicts()
            elapsed = time.monotonic() - start
            if _stop(plan, r.out, rnd, elapsed, say):
                break
    except KeyboardInterrupt:
        r.out.interrupted = True
        r.out.stop_reason = f"interrupted in round {r.out.rounds_done + 1}: every finished run is kept"
    finally:
        if r.tmp is not None:
            import shutil

            shutil.rmtree(r.tmp, ignore_errors=True)
    r.out.verdicts = r.verdicts()
    r.out.wall_s = time.monotonic() - start
    return r.out


def _stop(plan: Plan, out: RoundsResult, rnd: int, elapsed: float, say: Callable[[str], None]) -> bool:
    """After round ``rnd``: say where it stands, and whether to stop (confident, or the budget spent)."""
    per_round = elapsed / rnd
    left_rounds = plan.rounds - rnd
    left_s = per_round * left_rounds
    if plan.budget_s is not None:
        left_s = min(left_s, max(0.0, plan.budget_s - elapsed))
    shown = ", ".join(f"{v.name} {_fmt(v.median)}" for v in out.verdicts)
    say(f"# round {rnd}/{plan.rounds} done in {elapsed:.0f} s ({shown}{' ' + plan.metric.unit if plan.metric.unit else ''}); "
        f"about {_duration(left_s)} left")
    if plan.until_confident and rnd >= first_look(plan) and judge.all_confident(out.verdicts, plan.min_effect):
        out.stop_reason = (f"every arm's interval is decided (it excludes 1, or lies inside the --min-effect band) "
                           f"at look {rnd - first_look(plan) + 1}, level "
                           f"{100 * (1 - alpha_after(plan, rnd)):.4g}%")
        return True
    if plan.budget_s is not None and elapsed + per_round > plan.budget_s and rnd < plan.rounds:
        out.stop_reason = f"the --budget of {plan.budget_s:g} s would be spent by another round"
        return True
    return False


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"
