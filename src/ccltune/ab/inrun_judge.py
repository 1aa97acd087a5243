"""In-run arms' verdict (pure): each arm's blocks against NCCL's default's, paired within rounds.

Every round holds each arm once, in a shuffled order, within seconds: the arm's block of round r is paired with
default's block of round r, so a drift over the run (a warming GPU, a growing data loader queue) cancels in the
pair. Per arm: ``stats.paired`` on the rounds where both blocks were judged (the metric oriented so that lower is
better: 1 / value when higher is better), the A/A twin (``aa``) judged the same way as the control; Holm's
correction across the other arms keeps the family-wise error at 5%: an arm whose interval excludes 1 but whose
test does not survive the correction is 'no difference', and says so."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ccltune import stats
from ccltune.ab.blocks import BlockValue
from ccltune.status import ArmStatus

ALPHA = 0.05
AA = "default-2"     # the A/A twin: NCCL's default again, named as ab names it (ab.rounds.CONTROL)


@dataclass(frozen=True)
class ArmJudgement:
    name: str
    status: ArmStatus
    blocks: int                    # judged blocks of this arm
    median: float | None           # of its blocks' values, in the metric's unit
    estimate: stats.Estimate | None
    control: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        e = self.estimate
        out: dict[str, object] = {"arm": self.name, "status": self.status.value, "blocks": self.blocks,
                                  "median": self.median, "control": self.control, "note": self.note}
        if e is not None:
            out.update(ratio=e.ratio, ratio_lo=_finite(e.low), ratio_hi=_finite(e.high), level=e.level, pairs=e.n,
                       p_value=e.p_value, test=e.test)
        return out


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def by_round(values: Sequence[BlockValue]) -> dict[int, dict[int, float]]:
    """round -> arm -> its block's value."""
    out: dict[int, dict[int, float]] = {}
    for v in values:
        out.setdefault(v.span.round, {})[v.span.arm] = v.value
    return out


def paired_by_round(values: Sequence[BlockValue], names: Sequence[str], *, higher_better: bool = False
                    ) -> dict[str, stats.Estimate]:
    """Each arm's ratio to arm 0 (``names[0]``), its block of round r paired with arm 0's block of round r
    (``stats.paired`` at 95%, no correction); an arm without such a pair is left out."""
    rounds = by_round(values)
    orient = (lambda v: 1.0 / v) if higher_better else (lambda v: v)
    estimates: dict[str, stats.Estimate] = {}
    for i, name in enumerate(names[1:], 1):
        pairs = [(orient(r[i]), orient(r[0])) for _, r in sorted(rounds.items()) if i in r and 0 in r]
        if pairs:
            estimates[name] = stats.paired([a for a, _ in pairs], [b for _, b in pairs])
    return estimates


def judge(values: Sequence[BlockValue], names: Sequence[str], *, higher_better: bool, min_effect: float,
          alpha: float = ALPHA) -> list[ArmJudgement]:
    """Every arm's judgement, arm 0 (``names[0]``, NCCL's default) first (module doc)."""
    per_arm = {i: [v.value for v in values if v.span.arm == i] for i in range(len(names))}
    estimates = paired_by_round(values, names, higher_better=higher_better)
    judged = {n: e.p_value for n, e in estimates.items() if n != AA}
    rejects = stats.holm(judged, alpha) if judged else {}
    out = [ArmJudgement(names[0], ArmStatus.BASELINE if per_arm[0] else ArmStatus.FAILED, len(per_arm[0]),
                        stats.median(per_arm[0]) if per_arm[0] else None, None)]
    for i, name in enumerate(names[1:], 1):
        vals = per_arm[i]
        med = stats.median(vals) if vals else None
        e = estimates.get(name)
        if e is None:
            out.append(ArmJudgement(name, ArmStatus.FAILED, len(vals), med, None, name == AA,
                                    "no round holds a judged block of this arm and of default"))
            continue
        word, note = stats.judge(e, min_effect), ""
        if not (math.isfinite(e.low) and math.isfinite(e.high)):
            note = f"too few rounds for a {100 * stats.LEVEL:.0f}% interval ({e.n} pairs of blocks)"
        if word is not ArmStatus.NO_DIFFERENCE and name != AA and not rejects.get(name, False):
            word, note = ArmStatus.NO_DIFFERENCE, (f"p = {e.p_value:.3g} does not survive Holm's correction over "
                                                   f"{len(judged)} arms")
        out.append(ArmJudgement(name, word, len(vals), med, e, name == AA, note))
    return out


def lines(judged: Sequence[ArmJudgement], unit: str, higher_better: bool) -> list[str]:
    """The verdict table, as ``ab``'s: one line per arm, the ratio with its interval."""
    out = [f"# {'arm':<24} {'blocks':>6} {'median':>11}  {'ratio':>7} {'95% interval':>18} {'p':>8}  verdict"]
    for j in judged:
        med = "-" if j.median is None else f"{j.median:.5g}"
        e = j.estimate
        if e is None:
            cols = f"{'-':>7} {'-':>18} {'-':>8}"
        else:
            iv = "[unbounded]" if not (math.isfinite(e.low) and math.isfinite(e.high)) else f"[{e.low:.4f}, {e.high:.4f}]"
            cols = f"{e.ratio:7.4f} {iv:>18} {e.p_value:8.3g}"
        word = j.status.value.upper() if j.status in (ArmStatus.SLOWER, ArmStatus.FASTER) else j.status.value
        if j.control:
            word += " (A/A control" + ("" if e is None else ": the job's noise is inside the interval"
                                       if j.status is ArmStatus.NO_DIFFERENCE else
                                       ": default differs from itself, the job drifts within a round") + ")"
        out.append(f"  {j.name:<24} {j.blocks:>6} {med:>11}  {cols}  {word}" + (f"  ({j.note})" if j.note else ""))
    way = "1 / the metric (higher is better)" if higher_better else "the metric (lower is better)"
    out.append(f"# ratio = arm / default of {way}, paired by round (< 1: faster); median in the metric's unit"
               + (f" {unit}" if unit else ""))
    return out
