"""``ccltune ab``'s verdicts (pure): each arm's runs against NCCL's default's, through :mod:`ccltune.stats`.

The unit is one run of the user's job (one value per run: docs/ab.md says how the value is read). A
round runs every arm once, in a shuffled order, so an arm's run and default's run of the same round
form a pair: the arm is judged on its paired log ratios to default (``stats.paired``: Wilcoxon
signed-rank, Hodges-Lehmann estimate, Walsh interval), which cancels the drift between rounds. The
ratio is arm / default (1.05 = 5% more time); the shift the same estimate on the raw values, in the
metric's unit. A round where either run failed pairs nothing.

Several arms are one family: Holm's step-down across them (the A/A control included: its verdict is a
claim too) keeps the chance of any false FASTER/SLOWER at the look's alpha; each arm's interval is
stated at the level Holm gives it (``stats.holm_levels``). ``ab --until-confident`` looks after every
round: the look's alpha comes from ``stats.look_level``, so that every look together keeps 95%.

Too few pairs reach no level (6 pairs for 95% with one arm; more under Holm): the interval is then
unbounded and the verdict "no difference", with that said. Verdict (``stats.judge``), with
``min_effect`` e: SLOWER when the interval lies above 1 and the ratio above 1 + e; FASTER below 1 and
under 1 - e; else NO_DIFFERENCE.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccltune import stats
from ccltune.status import ArmStatus as Status  # an arm's verdict: the word this module judges

ALPHA = 1 - stats.LEVEL
METHOD = ("paired by round: " + stats.PAIRED_TEST + "; Holm across arms; --until-confident spends alpha "
          "over its looks (alpha_k = alpha 6 / (pi^2 k^2))")


def min_rounds(judged: int, alpha: float = ALPHA) -> int:
    """The fewest rounds whose pairs can reach a verdict for the first of ``judged`` arms under Holm."""
    return stats.min_pairs(1 - alpha / max(1, judged))


@dataclass(frozen=True)
class ArmVerdict:
    name: str
    status: Status
    runs: int            # runs that gave a value
    failed: int          # runs that failed (kept out of the statistic)
    median: float | None
    effect: stats.Estimate | None
    pairs: tuple[tuple[float, ...], tuple[float, ...]] = field(default=((), ()), repr=False)  # (arm, default)
    control: bool = False  # the A/A arm (default again): the job's own noise
    note: str = ""

    @property
    def shift(self) -> tuple[float, float, float] | None:
        """arm - default in the metric's unit, (estimate, low, high) at the effect's level."""
        if self.effect is None or not self.pairs[0]:
            return None
        return stats.paired_shift(self.pairs[0], self.pairs[1], self.effect.level)

    def to_dict(self) -> dict[str, object]:
        e = self.effect
        out: dict[str, object] = {"arm": self.name, "status": self.status.value, "runs": self.runs,
                                  "failed": self.failed, "median": self.median, "control": self.control,
                                  "note": self.note}
        if e is not None:
            out.update(ratio=e.ratio, ratio_lo=e.low if e.bounded else None,
                       ratio_hi=e.high if e.bounded else None, level=e.level,
                       pairs=e.n, p_value=e.p_value, test=e.test)
        if self.shift is not None:
            out.update(shift=self.shift[0], shift_lo=_json_num(self.shift[1]), shift_hi=_json_num(self.shift[2]))
        return out


def _json_num(v: float) -> float | None:
    return v if math.isfinite(v) else None  # JSON has no infinity: an unbounded end is null


def verdicts(values: Mapping[str, Mapping[int, float]], failures: Mapping[str, int], *, baseline: str = "default",
             controls: Sequence[str] = (), min_effect: float = 0.0, alpha: float = ALPHA) -> list[ArmVerdict]:
    """Every arm's verdict, in the order of ``values`` (arm -> round -> its run's value; ``failures``: arm
    -> failed runs), the arms judged as one family at ``alpha`` (module doc). The baseline arm is BASELINE;
    an arm with no run at all (ab stopped before it ran) is NOT_RUN; an arm whose every run failed, or whose
    baseline's did, is FAILED (nothing to compare)."""
    base = values.get(baseline, {})
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for name, vals in values.items():
        if name != baseline and vals and base:
            common = sorted(set(vals) & set(base))
            pairs[name] = ([vals[r] for r in common], [base[r] for r in common])
    judged = {n: p for n, p in pairs.items() if p[0]}
    estimates = stats.arms_at(judged, alpha)
    out = []
    for name, vals in values.items():
        failed = failures.get(name, 0)
        med = stats.median(vals.values()) if vals else None
        if not vals and not failed:  # stopped (Ctrl-C, --budget) before any run of it: nothing failed
            out.append(ArmVerdict(name, Status.NOT_RUN, 0, 0, None, None, control=name in controls,
                                  note="no run of it finished before ab stopped"))
            continue
        if name == baseline:
            out.append(ArmVerdict(name, Status.BASELINE if vals else Status.FAILED, len(vals), failed, med, None))
            continue
        if not vals or not base:
            why = "every run failed" if not vals else f"every run of {baseline} failed: nothing to compare"
            out.append(ArmVerdict(name, Status.FAILED, len(vals), failed, med, None, control=name in controls,
                                  note=why))
            continue
        e = estimates.get(name)
        if e is None:
            out.append(ArmVerdict(name, Status.NO_DIFFERENCE, len(vals), failed, med, None, control=name in controls,
                                  note=f"no round holds a run of both {name} and {baseline}"))
            continue
        a, b = judged[name]
        note = "" if e.bounded else (f"too few rounds for a {100 * e.level:.4g}% interval ({e.n} pair(s) with "
                                     f"{baseline}; {stats.min_pairs(e.level)} reach it)")
        out.append(ArmVerdict(name, stats.judge(e, min_effect), len(vals), failed, med, e, (tuple(a), tuple(b)),
                              name in controls, note))
    return out


def oriented(values: Mapping[str, Mapping[int, float]], failures: Mapping[str, int], *, higher_better: bool,
             **kw: Any) -> list[ArmVerdict]:
    """:func:`verdicts` of a metric in either direction: a higher-is-better one (tokens/s) is judged as 1 / value,
    so a ratio below 1 is faster either way; the medians stay in the metric's unit and the shift is left out."""
    if not higher_better:
        return verdicts(values, failures, **kw)
    inverse = {a: {r: 1.0 / v for r, v in rs.items()} for a, rs in values.items()}
    return [dataclasses.replace(v, median=stats.median(values[v.name].values()) if values.get(v.name) else None,
                                pairs=((), ())) for v in verdicts(inverse, failures, **kw)]


def all_confident(vs: Sequence[ArmVerdict], min_effect: float) -> bool:
    """Every arm that is judged (not the baseline, not the A/A control, not failed) is decided."""
    judged = [v for v in vs if v.status not in (Status.BASELINE, Status.FAILED) and not v.control]
    return all(v.effect is not None and stats.decided(v.effect, min_effect) for v in judged)
