"""``ccltune ab``'s statistics (pure): each arm's runs against NCCL's default's runs.

The unit is one run of the user's job (one value per run: docs/ab.md says how the value is read);
runs of one arm are independent draws, interleaved with the other arms' in shuffled blocks.

Effect: the **Hodges-Lehmann** estimate, the median of every pairwise difference between an arm's
runs and default's. On log values it is a ratio (arm / default: 1.05 = 5% more time), on the raw
values an absolute shift (in the metric's unit). Interval: the **Moses** distribution-free 95%
interval of that estimate, read from the sorted pairwise differences at the ranks given by the
Mann-Whitney U distribution (exact for up to ``EXACT_PAIRS`` pairs, its normal approximation
above). No bootstrap: nothing random enters the verdict, and the interval assumes only that the
arm's distribution is default's shifted (on the log scale for the ratio).

An interval needs enough runs: with m and n runs, the smallest two-sided level the U distribution
reaches is 2 / C(m+n, m); below 95% (m = n = 3 reaches only 90%) the interval is unbounded and the
verdict is "no difference" with that said.

Verdict (times: lower is better), with ``min_effect`` e (a fraction, the band of "too small to
matter"): SLOWER when the ratio's interval lies above 1 and the ratio above 1 + e; FASTER when it
lies below 1 and the ratio below 1 - e; else NO_DIFFERENCE. An arm is *confident* (``ab
--until-confident`` stops when every arm is) when its interval excludes 1 or lies inside
[1 - e, 1 + e].
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ccltune.status import ArmStatus as Status  # an arm's verdict: the word this module judges

LEVEL = 0.95
EXACT_PAIRS = 900    # m x n up to this: the exact U distribution (Gaussian binomial coefficients)
MIN_RUNS = 4         # per arm, for a 95% interval when both arms have the same count (1 / C(8, 4) < 0.025)
METHOD = ("Hodges-Lehmann estimate over runs, 95% Moses interval "
          "(Mann-Whitney U, distribution-free; no bootstrap)")


@dataclass(frozen=True)
class Effect:
    """One arm against default. ``ratio``: arm / default (Hodges-Lehmann on logs), its interval
    ``ratio_lo``..``ratio_hi`` (0 and inf when the runs are too few); ``shift``: arm - default in the
    metric's unit, with ``shift_lo``..``shift_hi``."""

    ratio: float
    ratio_lo: float
    ratio_hi: float
    shift: float
    shift_lo: float
    shift_hi: float
    n_arm: int
    n_default: int

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.ratio_hi) and self.ratio_lo > 0


def _gauss_binomial(m: int, n: int) -> list[int]:
    """Counts of U = 0..m*n over all C(m+n, m) orderings of two samples without ties: the
    coefficients of the Gaussian binomial [m+n choose m](q), built by the recurrence
    f(m, n) = f(m, n-1) + q^n f(m-1, n) one row at a time (exact integers)."""
    # rows[j] = coefficients for (i, j) while i grows
    prev = [[1] for _ in range(n + 1)]  # i = 0: only U = 0
    for i in range(1, m + 1):
        cur: list[list[int]] = [[1]]  # j = 0: only U = 0
        for j in range(1, n + 1):
            a, b = cur[j - 1], prev[j]
            out = [0] * (i * j + 1)
            for k, c in enumerate(a):
                out[k] += c
            for k, c in enumerate(b):
                out[k + j] += c
            cur.append(out)
        prev = cur
    return prev[n]


@functools.lru_cache(maxsize=256)
def _rank_k(m: int, n: int, level: float = LEVEL) -> int:
    """k such that the sorted pairwise differences d_(k) .. d_(mn+1-k) (1-based) cover ``level``:
    the largest k with P(U <= k-1) <= (1-level)/2. 0 when no k reaches the level."""
    alpha = (1 - level) / 2
    if m * n <= EXACT_PAIRS:
        counts = _gauss_binomial(min(m, n), max(m, n))
        total = math.comb(m + n, m)
        acc, k = 0, 0
        for u, c in enumerate(counts):
            acc += c
            if acc / total > alpha:
                break
            k = u + 1
        return k
    z = -_norm_ppf(alpha)
    sd = math.sqrt(m * n * (m + n + 1) / 12)
    return max(0, int(math.floor(m * n / 2 - z * sd)))


def _norm_ppf(p: float) -> float:
    """Inverse standard normal CDF (bisection on erf: a few dozen steps, exact enough for a rank)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _hl(arm: Sequence[float], base: Sequence[float], k: int) -> tuple[float, float, float]:
    diffs = sorted(a - b for a in arm for b in base)
    est = median(diffs)
    if k < 1:
        return est, -math.inf, math.inf
    return est, diffs[k - 1], diffs[len(diffs) - k]


def effect(arm: Sequence[float], default: Sequence[float], level: float = LEVEL) -> Effect:
    """The arm's effect against default (module doc). Values must be finite and > 0 (times)."""
    if not arm or not default:
        raise ValueError("effect needs runs on both sides")
    if any(not (math.isfinite(v) and v > 0) for v in (*arm, *default)):
        raise ValueError("run values must be finite and > 0")
    k = _rank_k(len(arm), len(default), level)
    log_est, log_lo, log_hi = _hl([math.log(v) for v in arm], [math.log(v) for v in default], k)
    shift, lo, hi = _hl(arm, default, k)
    return Effect(math.exp(log_est), math.exp(log_lo), math.exp(log_hi), shift, lo, hi, len(arm), len(default))


def judge(e: Effect, min_effect: float = 0.0) -> Status:
    """FASTER / NO_DIFFERENCE / SLOWER (module doc)."""
    if e.ratio_lo > 1 and e.ratio > 1 + min_effect:
        return Status.SLOWER
    if e.ratio_hi < 1 and e.ratio < 1 - min_effect:
        return Status.FASTER
    return Status.NO_DIFFERENCE


def confident(e: Effect, min_effect: float = 0.0) -> bool:
    """The interval excludes 1, or lies inside the band of no practical difference."""
    if not e.bounded:
        return False
    return e.ratio_lo > 1 or e.ratio_hi < 1 or (1 - min_effect <= e.ratio_lo and e.ratio_hi <= 1 + min_effect)


@dataclass(frozen=True)
class ArmVerdict:
    name: str
    status: Status
    runs: int            # runs that gave a value
    failed: int          # runs that failed (kept out of the statistic)
    median: float | None
    effect: Effect | None
    control: bool = False  # the A/A arm (default again): the job's own noise
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        e = self.effect
        out: dict[str, object] = {"arm": self.name, "status": self.status.value, "runs": self.runs,
                                  "failed": self.failed, "median": self.median, "control": self.control,
                                  "note": self.note}
        if e is not None:
            out.update(ratio=e.ratio, ratio_lo=_json_num(e.ratio_lo), ratio_hi=_json_num(e.ratio_hi),
                       shift=e.shift, shift_lo=_json_num(e.shift_lo), shift_hi=_json_num(e.shift_hi))
        return out


def _json_num(v: float) -> float | None:
    return v if math.isfinite(v) else None  # JSON has no infinity: an unbounded end is null


def verdicts(values: dict[str, list[float]], failures: dict[str, int], *, baseline: str = "default",
             controls: Sequence[str] = (), min_effect: float = 0.0) -> list[ArmVerdict]:
    """Every arm's verdict, in the order of ``values`` (arm -> its runs' values; ``failures``: arm ->
    failed runs). The baseline arm is BASELINE; an arm without a value, or a baseline without one,
    is FAILED (nothing to compare)."""
    base = values.get(baseline, [])
    out = []
    for name, vals in values.items():
        failed = failures.get(name, 0)
        med = median(vals) if vals else None
        if name == baseline:
            status = Status.BASELINE if vals else Status.FAILED
            out.append(ArmVerdict(name, status, len(vals), failed, med, None))
            continue
        if not vals or not base:
            why = "every run failed" if not vals else f"every run of {baseline} failed: nothing to compare"
            out.append(ArmVerdict(name, Status.FAILED, len(vals), failed, med, None, name in controls, why))
            continue
        e = effect(vals, base)
        note = "" if e.bounded else (f"too few runs for a 95% interval ({len(vals)} and {len(base)}; "
                                     f"{MIN_RUNS} each is enough)")
        out.append(ArmVerdict(name, judge(e, min_effect), len(vals), failed, med, e, name in controls, note))
    return out


def all_confident(vs: Sequence[ArmVerdict], min_effect: float) -> bool:
    """Every arm that is judged (not the baseline, not the A/A control, not failed) is confident."""
    judged = [v for v in vs if v.status not in (Status.BASELINE, Status.FAILED) and not v.control]
    return all(v.effect is not None and confident(v.effect, min_effect) for v in judged)
