"""A job's own time per call, as robust statistics (pure).

One outlier must not own the figure: a TP-decode trace had an all_reduce of 256 KB with a mean of
409 us, a median of 10.5 us and one call of 266,512 us that waited for a peer. So every figure of
the job's time per call that ccltune shows or uses is a median (with p10, p90 and max beside it),
never a mean.

Where the times come from decides how they pool:

- per-call samples (a trace's kernels, Inspector's lines, the profiler's ``call`` lines): the
  quantiles of all samples, exact (at most :data:`MAX_SAMPLES` per entry are kept: the first ones;
  ``calls`` still counts all);
- per-source summaries (a profiler file's line: timed calls, p10/p50/p90 from its histogram, max):
  each quantile is the timed-weighted median of the summaries' quantiles (exact when the ranks'
  distributions agree; an approximation, said in docs/workload.md, when they do not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MAX_SAMPLES = 1 << 20


def quantile(sorted_us: list[float], q: float) -> float:
    """The q-quantile of sorted values, linear between order statistics (numpy's default)."""
    if not sorted_us:
        raise ValueError("quantile of no values")
    pos = q * (len(sorted_us) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_us) - 1)
    return sorted_us[lo] + (sorted_us[hi] - sorted_us[lo]) * (pos - lo)


def _weighted_median(pairs: list[tuple[float, int]]) -> float:
    pairs = sorted(pairs)
    half = sum(w for _, w in pairs) / 2
    acc = 0
    for v, w in pairs:
        acc += w
        if acc >= half:
            return v
    return pairs[-1][0]


@dataclass
class Timing:
    """The job's GPU time of the calls of one entry that a source timed, in microseconds."""

    calls: int = 0                       # timed calls
    total_us: float = 0.0
    min_us: float = float("inf")
    max_us: float = 0.0
    samples: list[float] = field(default_factory=list)
    parts: list[tuple[int, float, float, float]] = field(default_factory=list)  # (timed, p10, p50, p90)
    fixed: tuple[float, float, float] | None = None  # p10, p50, p90 as read from a workload file

    def add(self, us: float) -> None:
        self.calls += 1
        self.total_us += us
        self.min_us = min(self.min_us, us)
        self.max_us = max(self.max_us, us)
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(us)

    def add_summary(self, timed: int, sum_us: float, p10: float, p50: float, p90: float, max_us: float) -> None:
        """A source's own summary of ``timed`` calls (a profiler file's line)."""
        self.calls += timed
        self.total_us += sum_us
        self.min_us = min(self.min_us, p10)   # the summary has no minimum: p10 bounds it from above
        self.max_us = max(self.max_us, max_us)
        self.parts.append((timed, p10, p50, p90))

    def merge(self, other: Timing) -> None:
        self.calls += other.calls
        self.total_us += other.total_us
        self.min_us = min(self.min_us, other.min_us)
        self.max_us = max(self.max_us, other.max_us)
        self.samples += other.samples[:max(0, MAX_SAMPLES - len(self.samples))]
        self.parts += other.parts
        if other.fixed is not None and self.fixed is None:
            self.fixed = other.fixed

    def quantiles(self) -> tuple[float, float, float] | None:
        """(p10, p50, p90) in microseconds, or None when nothing was timed (module doc)."""
        if self.parts:
            parts = self.parts + [(1, s, s, s) for s in self.samples]
            return tuple(_weighted_median([(p[i], p[0]) for p in parts]) for i in (1, 2, 3))  # type: ignore[return-value]
        if self.samples:
            s = sorted(self.samples)
            return quantile(s, 0.1), quantile(s, 0.5), quantile(s, 0.9)
        return self.fixed

    @property
    def median_us(self) -> float | None:
        q = self.quantiles()
        return None if q is None else q[1]

    @property
    def mean_us(self) -> float:
        return self.total_us / self.calls if self.calls else 0.0

    def to_dict(self, prefix: str = "time_us") -> dict[str, float | int]:
        """The workload file's fields of this timing (docs/workload.md)."""
        q = self.quantiles()
        out: dict[str, float | int] = {"timed_calls": self.calls} if prefix == "time_us" else {}
        if q is not None:
            out.update({f"{prefix}_p10": round(q[0], 3), f"{prefix}_median": round(q[1], 3),
                        f"{prefix}_p90": round(q[2], 3)})
        out[f"{prefix}_max"] = round(self.max_us, 3)
        if prefix == "time_us":
            out["time_us_mean"] = round(self.mean_us, 3)
            out["time_us_min"] = round(self.min_us, 3) if math.isfinite(self.min_us) else 0.0
        return out

    @classmethod
    def from_dict(cls, d: dict[str, object], calls: int, prefix: str = "time_us") -> Timing:
        """The timing a workload file holds (fields as :meth:`to_dict` writes them; the caller checked types)."""
        t = cls(calls, float(d.get("time_us_mean", 0.0)) * calls if prefix == "time_us" else 0.0,  # type: ignore[arg-type]
                float(d.get("time_us_min", 0.0)) if prefix == "time_us" else float("inf"),  # type: ignore[arg-type]
                float(d.get(f"{prefix}_max", 0.0)))  # type: ignore[arg-type]
        if f"{prefix}_median" in d:
            t.fixed = tuple(float(d[f"{prefix}_{q}"]) for q in ("p10", "median", "p90"))  # type: ignore[assignment,arg-type]
        return t
