"""The one statistics of ccltune (pure): every verdict the tool prints comes from here and names its test.

A verdict compares an *arm* with a *base* on a metric where lower is better (a time), as the ratio
arm / base: 1.05 is 5% more time. Everything is computed on log values, so a ratio is a shift of logs.

- :func:`paired`: arm[i] and base[i] were measured together (the same round, the same interleaved
  repetition), so drift between rounds cancels. **Wilcoxon signed-rank** test on the log ratios; the
  estimate is their **Hodges-Lehmann** pseudo-median (the median of the Walsh averages
  (d_i + d_j) / 2, i <= j), the interval the sorted Walsh averages at the ranks given by the signed-rank
  distribution: exact (every sign pattern counted) up to ``EXACT_PAIRS`` pairs, its normal
  approximation above.
- :func:`unpaired`: independent samples. **Mann-Whitney U** test; the **Hodges-Lehmann** two-sample
  estimate (median of every difference arm_i - base_j) with the **Moses** interval (the sorted
  differences at the ranks the U distribution gives: exact up to ``EXACT_PRODUCT`` = m x n, normal
  above).

Both assume only symmetry (paired) or a shift (unpaired) on the log scale: no normality, no bootstrap,
nothing random. Few values cannot reach a level at all: n pairs reach two-sided 2 / 2^n at best (6 pairs
for 95%), m and n runs reach 2 / C(m+n, m) (4 and 4 for 95%). Then the interval is unbounded
(0 .. inf) and :func:`judge` says "no difference".

Repeated looks and many arms. Looking again after every round at a fixed 95% raises the false verdict
rate with the number of looks (issue 39: 7.8-26%); :func:`look_level` spends alpha over the looks so that
the whole sequence keeps 1 - alpha (a union bound: the k-th look is tested at alpha_k, with
sum alpha_k <= alpha). Several arms at one look are corrected by Holm's step-down (:func:`holm`,
:func:`holm_levels`), which keeps the family-wise rate at the look's alpha. Both together keep the
chance of any false FASTER/SLOWER, over every arm and every look, at most alpha
(tests/unit/test_stats.py checks it by simulation).

The noise band of a sweep point (:func:`point_stats`, :func:`beats`) is tune's gate over the few
repetitions a sweep takes: half the relative spread of each point, summed, floored at a margin. It is
no test (3-5 repetitions are too few for one at 95%): it keeps a rule only where the two points' ranges
do not overlap, the conservative side; ``BAND_TEST`` names it wherever it decides.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ccltune.status import ArmStatus

LEVEL = 0.95
MIN_EFFECT = 0.01      # the band of "too small to matter" by default (ab's --min-effect 1%, replay, validate)
EXACT_PAIRS = 60       # paired: the exact signed-rank distribution up to this many pairs
EXACT_PRODUCT = 900    # unpaired: the exact U distribution while m x n is at most this

PAIRED_TEST = "Wilcoxon signed-rank on paired log ratios, Hodges-Lehmann estimate, Walsh interval"
UNPAIRED_TEST = "Mann-Whitney U on log values, Hodges-Lehmann estimate, Moses interval"
BAND_TEST = "half-spread noise band (median +- half the range; no test)"


@dataclass(frozen=True)
class Estimate:
    """A ratio arm / base of a lower-is-better metric, its interval at ``level`` (0 and inf when the
    values are too few to reach it), the two-sided ``p_value`` of ``test``, and ``n``: pairs (paired) or
    the smaller sample (unpaired)."""

    ratio: float
    low: float
    high: float
    level: float
    n: int
    p_value: float
    test: str

    @property
    def bounded(self) -> bool:
        return self.low > 0 and math.isfinite(self.high)

    @property
    def said(self) -> str:
        """``x1.0042, 95% interval [1.0036, 1.0045] (Wilcoxon ...)``, or the interval's absence."""
        iv = f"[{self.low:.4f}, {self.high:.4f}]" if self.bounded else "unbounded (too few values)"
        return f"x{self.ratio:.4f}, {_pct(self.level)} interval {iv} ({self.test}, n={self.n})"


def _pct(level: float) -> str:
    return f"{100 * level:.4g}%"


def median(values: Iterable[float]) -> float:
    """The median of a non-empty sequence (mean of the middle two for even lengths)."""
    s = sorted(values)
    if not s:
        raise ValueError("median of no values")
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _logs(values: Sequence[float], what: str) -> list[float]:
    if not values:
        raise ValueError(f"{what}: no values")
    bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"{what}: values must be finite and > 0, got {bad[0]!r}")
    return [math.log(v) for v in values]


def norm_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def norm_ppf(p: float) -> float:
    """Inverse standard normal CDF (bisection on erfc: exact enough for a rank or a level)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if norm_cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- paired: Wilcoxon signed-rank ---------------------------------------------------------------

@functools.lru_cache(maxsize=128)
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """Number of sign patterns of ranks 1..n giving W+ = 0..n(n+1)/2 (exact integers)."""
    counts = [1]
    for r in range(1, n + 1):
        out = counts + [0] * r
        for w, c in enumerate(counts):
            out[w + r] += c
        counts = out
    return tuple(counts)


@functools.lru_cache(maxsize=1024)
def _signed_rank_k(n: int, level: float) -> int:
    """The largest k with P(W+ <= k - 1) <= (1 - level) / 2: the interval is the k-th smallest and
    k-th largest Walsh average. 0 when no k reaches ``level``."""
    alpha = (1 - level) / 2
    if n <= EXACT_PAIRS:
        total, acc, k = 2 ** n, 0, 0
        for w, c in enumerate(_signed_rank_counts(n)):
            acc += c
            if acc > alpha * total:
                break
            k = w + 1
        return k
    mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(0, math.floor(mean + norm_ppf(alpha) * sd + 0.5))


def _signed_rank_p(d: Sequence[float]) -> float:
    """Two-sided p of the signed-rank test (zeros dropped; mid-ranks and the normal approximation with
    tie correction when |d| ties or the pairs are many)."""
    nz = sorted((abs(x), x > 0) for x in d if x != 0)
    n = len(nz)
    if n == 0:
        return 1.0
    ranks, ties, i = [0.0] * n, 0.0, 0
    while i < n:
        j = i
        while j + 1 < n and nz[j + 1][0] == nz[i][0]:
            j += 1
        for t in range(i, j + 1):
            ranks[t] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    w = sum(r for r, (_, pos) in zip(ranks, nz) if pos)
    if n <= EXACT_PAIRS and ties == 0:
        counts = _signed_rank_counts(n)
        wi = round(w)
        lower = sum(counts[:wi + 1])
        upper = sum(counts[wi:])
        return min(1.0, 2 * min(lower, upper) / 2 ** n)
    mean = n * (n + 1) / 4
    var = n * (n + 1) * (2 * n + 1) / 24 - ties / 48
    if var <= 0:
        return 1.0
    z = (abs(w - mean) - 0.5) / math.sqrt(var)
    return min(1.0, 2 * (1 - norm_cdf(max(0.0, z))))


def paired(arm: Sequence[float], base: Sequence[float], level: float = LEVEL) -> Estimate:
    """arm[i] against base[i] (module doc). Values: finite and > 0."""
    return _Paired(arm, base).at(level)


class _Paired:
    """The level-free part of :func:`paired` (log ratios, sorted Walsh averages, p), read at any level."""

    def __init__(self, arm: Sequence[float], base: Sequence[float]):
        if len(arm) != len(base):
            raise ValueError(f"paired: {len(arm)} arm values against {len(base)} base values")
        d = [a - b for a, b in zip(_logs(arm, "paired arm"), _logs(base, "paired base"))]
        self.n = len(d)
        self.walsh = sorted((d[i] + d[j]) / 2 for i in range(self.n) for j in range(i, self.n))
        self.est = median(self.walsh)
        self.p = _signed_rank_p(d)

    def at(self, level: float) -> Estimate:
        k = _signed_rank_k(self.n, level)
        lo, hi = (self.walsh[k - 1], self.walsh[-k]) if k >= 1 else (-math.inf, math.inf)
        return Estimate(math.exp(self.est), _exp(lo), _exp(hi), level, self.n, self.p, PAIRED_TEST)


def _exp(x: float) -> float:
    return 0.0 if x == -math.inf else math.inf if x == math.inf else math.exp(x)


def min_pairs(level: float = LEVEL) -> int:
    """The fewest pairs whose signed-rank interval reaches ``level`` (6 at 95%)."""
    n = 1
    while _signed_rank_k(n, level) < 1:
        n += 1
    return n


# --- unpaired: Mann-Whitney U, Hodges-Lehmann, Moses ----------------------------------------------

@functools.lru_cache(maxsize=256)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """Counts of U = 0..m*n over all C(m+n, m) orderings of two samples without ties: the coefficients
    of the Gaussian binomial [m+n choose m](q), by f(i, j) = f(i, j-1) + q^j f(i-1, j)."""
    prev = [[1] for _ in range(n + 1)]
    for i in range(1, m + 1):
        cur: list[list[int]] = [[1]]
        for j in range(1, n + 1):
            a, b = cur[j - 1], prev[j]
            out = [0] * (i * j + 1)
            for t, c in enumerate(a):
                out[t] += c
            for t, c in enumerate(b):
                out[t + j] += c
            cur.append(out)
        prev = cur
    return tuple(prev[n])


@functools.lru_cache(maxsize=1024)
def _u_rank_k(m: int, n: int, level: float) -> int:
    """The largest k with P(U <= k - 1) <= (1 - level) / 2 (0: no k reaches ``level``)."""
    alpha = (1 - level) / 2
    if m * n <= EXACT_PRODUCT:
        counts = _u_counts(min(m, n), max(m, n))
        total, acc, k = math.comb(m + n, m), 0, 0
        for u, c in enumerate(counts):
            acc += c
            if acc > alpha * total:
                break
            k = u + 1
        return k
    sd = math.sqrt(m * n * (m + n + 1) / 12)
    return max(0, math.floor(m * n / 2 + norm_ppf(alpha) * sd + 0.5))


def _u_p(x: Sequence[float], y: Sequence[float]) -> float:
    m, n = len(x), len(y)
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    tied = any(a == b for a in x for b in y)
    if m * n <= EXACT_PRODUCT and not tied:
        counts = _u_counts(min(m, n), max(m, n))
        ui = round(u)
        lower, upper = sum(counts[:ui + 1]), sum(counts[ui:])
        return min(1.0, 2 * min(lower, upper) / math.comb(m + n, m))
    z = (abs(u - m * n / 2) - 0.5) / math.sqrt(m * n * (m + n + 1) / 12)
    return min(1.0, 2 * (1 - norm_cdf(max(0.0, z))))


def unpaired(arm: Sequence[float], base: Sequence[float], level: float = LEVEL) -> Estimate:
    """arm's values against base's, independent draws (module doc). Values: finite and > 0."""
    x, y = _logs(arm, "unpaired arm"), _logs(base, "unpaired base")
    diffs = sorted(a - b for a in x for b in y)
    k = _u_rank_k(len(x), len(y), level)
    lo, hi = (diffs[k - 1], diffs[-k]) if k >= 1 else (-math.inf, math.inf)
    return Estimate(math.exp(median(diffs)), _exp(lo), _exp(hi), level, min(len(x), len(y)), _u_p(x, y),
                    UNPAIRED_TEST)


def paired_shift(arm: Sequence[float], base: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """:func:`paired`'s estimate and interval on the raw values: arm - base in the metric's unit, as
    (estimate, low, high); (estimate, -inf, inf) when the pairs are too few."""
    d = [a - b for a, b in zip(arm, base)]
    vals = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
    k = _signed_rank_k(len(d), level)
    est = median(vals)
    return (est, vals[k - 1], vals[-k]) if k >= 1 else (est, -math.inf, math.inf)


# --- verdicts, looks, arms -----------------------------------------------------------------------

def judge(e: Estimate, min_effect: float = 0.0) -> ArmStatus:
    """SLOWER when the interval lies above 1 and the ratio above 1 + min_effect; FASTER when it lies
    below 1 and the ratio below 1 - min_effect; else NO_DIFFERENCE."""
    if e.low > 1 and e.ratio > 1 + min_effect:
        return ArmStatus.SLOWER
    if e.high < 1 and e.ratio < 1 - min_effect:
        return ArmStatus.FASTER
    return ArmStatus.NO_DIFFERENCE


def decided(e: Estimate, min_effect: float = 0.0) -> bool:
    """The interval excludes 1, or lies inside the band [1 - min_effect, 1 + min_effect]: more values
    would not change the verdict's kind (``ab --until-confident`` stops when every arm is decided)."""
    if not e.bounded:
        return False
    return e.low > 1 or e.high < 1 or (1 - min_effect <= e.low and e.high <= 1 + min_effect)


def look_level(look: int, alpha: float = 1 - LEVEL) -> float:
    """The confidence level of the ``look``-th look (1-based) of a sequence with no fixed end: look k
    spends alpha_k = alpha * 6 / (pi^2 k^2), and sum over k >= 1 of 6 / (pi^2 k^2) = 1 (Basel), so the
    chance that any look of the whole sequence gives a false verdict is at most alpha (union bound)."""
    if look < 1:
        raise ValueError(f"look must be >= 1, got {look}")
    return 1 - alpha * 6 / (math.pi ** 2 * look ** 2)


def holm(p_values: Mapping[str, float], alpha: float) -> dict[str, bool]:
    """Holm's step-down across arms: which reject at family-wise rate ``alpha``. The j-th smallest p
    (0-based) is compared with alpha / (m - j); the first that misses stops the rejections."""
    out = {name: False for name in p_values}
    m = len(p_values)
    for j, (name, p) in enumerate(sorted(p_values.items(), key=lambda kv: (kv[1], kv[0]))):
        if p > alpha / (m - j):
            break
        out[name] = True
    return out


def holm_levels(p_values: Mapping[str, float], alpha: float) -> dict[str, float]:
    """The confidence level at which to state each arm's interval so that the intervals agree with
    :func:`holm`: the j-th smallest p gets 1 - alpha / (m - j) while every smaller one rejected; the first
    that misses, and every arm after it, get that step's level."""
    out: dict[str, float] = {}
    m = len(p_values)
    stop: float | None = None
    for j, (name, p) in enumerate(sorted(p_values.items(), key=lambda kv: (kv[1], kv[0]))):
        level = stop if stop is not None else 1 - alpha / (m - j)
        out[name] = level
        if stop is None and p > alpha / (m - j):
            stop = level
    return out


def arms_at(pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]], alpha: float) -> dict[str, Estimate]:
    """Each arm's paired estimate against its base (``pairs``: arm -> (arm values, base values)) at the
    level Holm gives it among all of them at family-wise ``alpha`` (:func:`holm_levels`); its ``test``
    says so when there are several."""
    parts = {name: _Paired(a, b) for name, (a, b) in pairs.items()}
    if len(parts) <= 1:
        return {name: p.at(1 - alpha) for name, p in parts.items()}
    levels = holm_levels({name: p.p for name, p in parts.items()}, alpha)
    note = f", Holm across {len(parts)} arms"
    out = {}
    for name, p in parts.items():
        e = p.at(levels[name])
        out[name] = Estimate(e.ratio, e.low, e.high, e.level, e.n, e.p_value, e.test + note)
    return out


# --- tune's noise band over a sweep point's few repetitions ----------------------------------------

SINGLE_SAMPLE_NOISE = 0.05   # relative noise assumed for a point measured once (docs/tuning.md)


@dataclass(frozen=True)
class PointStats:
    """Median time (us), relative noise (half the range over the median) and the sample count."""

    median_us: float
    noise: float
    n: int


def point_stats(samples: Iterable[float]) -> PointStats:
    """Median and noise of repeated samples (us). Raises ValueError on no or non-positive samples."""
    s = [float(x) for x in samples]
    if not s:
        raise ValueError("no samples")
    if any(not math.isfinite(x) or x <= 0 for x in s):
        raise ValueError(f"samples must be finite and > 0 us, got {s}")
    med = median(s)
    noise = SINGLE_SAMPLE_NOISE if len(s) == 1 else (max(s) - min(s)) / (2 * med)
    return PointStats(med, noise, len(s))


def margin(a: PointStats, b: PointStats, min_margin: float = 0.0) -> float:
    """Relative difference two points must exceed to count as different: both noises, floored."""
    return max(min_margin, a.noise + b.noise)


def gain(default: PointStats, other: PointStats) -> float:
    """Relative speed-up of ``other`` over ``default``: 0.2 means 1.2x faster."""
    return default.median_us / other.median_us - 1.0


def beats(default: PointStats, other: PointStats, min_margin: float = 0.0) -> bool:
    """``other`` is faster than ``default`` beyond the band (``BAND_TEST``)."""
    return gain(default, other) > margin(default, other, min_margin)
