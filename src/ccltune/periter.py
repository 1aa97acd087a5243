"""Per-iteration timing statistics (``-I 1``), computed as nccl-tests 2.19.6 computes them
(src/util.cu computeIterStats: sorted times, p50 = sorted[n/2], pXX = sorted[min(n-1, ceil(n*XX/100)-1)],
population standard deviation, cv = stdev/avg in percent). Pure: seconds in, a record out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IterStats:
    """One placement's per-iteration summary. Times in microseconds."""

    min_us: float
    max_us: float
    avg_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    stdev_us: float
    cv_pct: float
    skipped: int = 0                       # -K: leading iterations the summary leaves out
    times_us: tuple[float, ...] = ()       # every iteration, the skipped ones included
    per_process_us: tuple[tuple[float, ...], ...] = field(default=())  # one row per process (> 1 process)


def _percentile_index(n: int, percentile: int) -> int:
    return min(n - 1, (n * percentile + 99) // 100 - 1)


def compute(times_us: Sequence[float], skip: int = 0,
            per_process_us: Sequence[Sequence[float]] = ()) -> IterStats:
    """Statistics of ``times_us[skip:]`` (each iteration's time: the slowest process's, as
    nccl-tests reduces them). Raises ValueError when ``skip`` leaves no iteration."""
    if not 0 <= skip < len(times_us):
        raise ValueError(f"-K/--per_iter_skip must be between 0 and iterations - 1 ({len(times_us) - 1}), got {skip}")
    kept = sorted(times_us[skip:])
    n = len(kept)
    avg = sum(kept) / n
    stdev = math.sqrt(sum((t - avg) ** 2 for t in kept) / n)
    return IterStats(min_us=kept[0], max_us=kept[-1], avg_us=avg, p50_us=kept[n // 2],
                     p95_us=kept[_percentile_index(n, 95)], p99_us=kept[_percentile_index(n, 99)],
                     stdev_us=stdev, cv_pct=stdev / avg * 100.0 if avg > 0 else 0.0, skipped=skip,
                     times_us=tuple(times_us), per_process_us=tuple(tuple(r) for r in per_process_us))


def slowest_process(per_process_us: Sequence[Sequence[float]]) -> list[float]:
    """Iteration i's time: the largest of the processes' times at i (nccl-tests'
    ReduceProcessMaxIterTimes)."""
    return [max(col) for col in zip(*per_process_us)]
