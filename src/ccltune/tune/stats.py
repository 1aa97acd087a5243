"""Per-point statistics for comparing configurations: median and a noise estimate.

A *point* is one (configuration, size) with its repeated samples ``time_us``.

Noise choice: **half the relative spread**, ``(max - min) / (2 * median)``. With the 3-10
repetitions a sweep takes, a MAD or a bootstrap interval is itself too noisy to trust, and the
half spread is the widest deviation actually seen, so it errs towards "no rule" (NCCL stays in
charge), which is the safe side. A point with a single sample has no measured spread: it counts
as :data:`SINGLE_SAMPLE_NOISE` (5%).

Comparing two points, the noise of the comparison is the sum of both points' noise (the
intervals ``median ± half spread`` must not overlap), floored at the caller's ``min_margin``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Relative noise assumed for a point measured once (documented in docs/tuning.md).
SINGLE_SAMPLE_NOISE = 0.05


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence (mean of the middle two for even lengths)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


@dataclass(frozen=True)
class PointStats:
    """Median time (µs), relative noise (fraction of the median) and the sample count."""

    median_us: float
    noise: float
    n: int


def point_stats(samples: Iterable[float]) -> PointStats:
    """Median and noise of repeated samples (µs). Raises ValueError on no or non-positive samples."""
    s = [float(x) for x in samples]
    if not s:
        raise ValueError("no samples")
    if any(not math.isfinite(x) or x <= 0 for x in s):
        raise ValueError(f"samples must be finite and > 0 µs, got {s}")
    med = median(s)
    noise = SINGLE_SAMPLE_NOISE if len(s) == 1 else (max(s) - min(s)) / (2 * med)
    return PointStats(med, noise, len(s))


def margin(a: PointStats, b: PointStats, min_margin: float = 0.0) -> float:
    """Relative difference two points must exceed to count as different (a fraction)."""
    return max(min_margin, a.noise + b.noise)


def gain(default: PointStats, other: PointStats) -> float:
    """Relative speed-up of ``other`` over ``default``: 0.2 means 1.2x faster."""
    return default.median_us / other.median_us - 1.0


def beats(default: PointStats, other: PointStats, min_margin: float = 0.0) -> bool:
    """True when ``other`` is faster than ``default`` by more than the noise of the comparison."""
    return gain(default, other) > margin(default, other, min_margin)


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """A distribution-free interval for the median of ``values``: (low, high, its confidence).

    The k-th smallest and k-th largest value hold the median with probability
    ``1 - 2 * P(Binomial(n, 1/2) < k)``, whatever the distribution (the sign test's interval). k is
    the largest that keeps at least ``confidence``; when even the smallest and largest values (k = 1)
    hold less (fewer than 6 values for 95%), the interval is theirs and its own confidence is returned:
    5 values give 93.75%, 4 give 87.5%. One value: (v, v, 0.0)."""
    s = sorted(float(v) for v in values)
    n = len(s)
    if n == 0:
        raise ValueError("interval of no values")

    def cover(k: int) -> float:
        return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / 2.0 ** n

    k = 1
    while k + 1 <= n // 2 and cover(k + 1) >= confidence:
        k += 1
    return s[k - 1], s[n - k], max(0.0, cover(k))
