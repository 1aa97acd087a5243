"""Model-guided search: measure few sizes, predict where decisions change, measure there.

Each configuration's time is modelled as ``t(s) = alpha + s / beta`` (latency µs, bandwidth
bytes/µs). One global fit is poor across eight decades of size (protocols saturate, NCCL
switches internally), so the planner uses the model *piecewise*: between two measured sizes,
the alpha-beta line through both points (``segment``). :func:`fit_alpha_beta` (relative least
squares) and :func:`crossing` serve reporting and checks over a region.

The loop the sweep runs::

    todo = {s: None for s in plan_initial(sizes)}       # None: every configuration
    while todo:
        measure(todo)                                  # size -> configurations (None = all)
        todo = plan_refine(rows_so_far, sizes)         # {} once decisions are stable

``plan_refine`` looks at every gap between consecutive measured sizes (per collective, nRanks,
nNodes) and asks for the geometric middle size of the gap when

- the decisions at the two ends differ (a boundary lies inside: bisect it down to adjacent sizes),
- the decision the rules would imply inside the gap differs from the model's prediction there, or
- the predicted gain of a contender is within ``ambiguity`` of the margin (noise could flip it).

At a probe it asks only for the default, the winners at both ends and the configurations the
model predicts could win there (beating the default within ``ambiguity`` of the margin, and
within their noise plus ``ambiguity`` (plus ``sm_tolerance`` for ``--objective sm``) of the
fastest such prediction); the others were measured at the ends and lose there clearly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccltune.tune.derive import DEFAULT, Candidate, _record, decide, samples_by_size
from ccltune.tune.stats import PointStats, beats, margin, point_stats

WIDE_GAP = 4  # sizes spanning more than this factor count as a wide gap (see _probe_candidates)
Probes = dict[int, "list[Candidate] | None"]  # size -> configurations to measure (None: all)


@dataclass(frozen=True)
class AlphaBeta:
    alpha_us: float
    beta_bytes_per_us: float  # math.inf: flat

    def predict(self, size_bytes: float) -> float:
        return self.alpha_us + size_bytes / self.beta_bytes_per_us


def segment(a: tuple[float, float], b: tuple[float, float]) -> AlphaBeta:
    """The alpha-beta line through two (size, time) points; flat when time does not grow."""
    (sa, ta), (sb, tb) = a, b
    if sb == sa or tb <= ta:
        return AlphaBeta((ta + tb) / 2, math.inf)
    beta = (sb - sa) / (tb - ta)
    return AlphaBeta(ta - sa / beta, beta)


def fit_alpha_beta(points: Sequence[tuple[float, float]]) -> AlphaBeta:
    """Least squares of relative error: minimise sum((alpha + s/beta - t) / t)^2 over (s, t)."""
    if len(points) < 2:
        raise ValueError(f"need >= 2 (size, time) points, got {len(points)}")
    # weighted linear least squares of t = alpha + g*s with weights 1/t^2
    w = [1.0 / (t * t) for _, t in points]
    sw = sum(w)
    sx = sum(wi * s for wi, (s, _) in zip(w, points))
    sy = sum(wi * t for wi, (_, t) in zip(w, points))
    sxx = sum(wi * s * s for wi, (s, _) in zip(w, points))
    sxy = sum(wi * s * t for wi, (s, t) in zip(w, points))
    det = sw * sxx - sx * sx
    g = (sw * sxy - sx * sy) / det if det else 0.0
    alpha = (sy - g * sx) / sw
    return AlphaBeta(alpha, 1.0 / g if g > 0 else math.inf)


def crossing(a: AlphaBeta, b: AlphaBeta) -> float | None:
    """Size (bytes) where two models predict the same time, or None when they do not cross."""
    ga, gb = 1.0 / a.beta_bytes_per_us, 1.0 / b.beta_bytes_per_us
    if ga == gb:
        return None
    s = (b.alpha_us - a.alpha_us) / (ga - gb)
    return s if s > 0 else None


def plan_initial(sizes: Iterable[int], stride: int = 6) -> list[int]:
    """Every ``stride``-th size (ascending) plus the largest: where every configuration is measured first."""
    s = sorted(set(sizes))
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    picked = s[::stride]
    if s and picked[-1] != s[-1]:
        picked.append(s[-1])
    return picked


def _predict(points: Mapping[int, PointStats], size: int) -> PointStats | None:
    """Piecewise alpha-beta prediction at ``size`` from the bracketing measured points."""
    below = [s for s in points if s < size]
    above = [s for s in points if s > size]
    if not below or not above:
        return None
    a, b = max(below), min(above)
    pa, pb = points[a], points[b]
    t = segment((a, pa.median_us), (b, pb.median_us)).predict(size)
    return PointStats(t, (pa.noise + pb.noise) / 2, min(pa.n, pb.n))


def _group_key(row: Mapping[str, Any]) -> tuple[str, int, int]:
    return (row["collective"], int(row["n_ranks"]), int(row.get("n_nodes") or 1))


def plan_refine(measured_rows: Iterable[Any], all_sizes: Sequence[int], *, objective: str = "time",
                sm_tolerance: float = 0.02, min_margin: float = 0.02, ambiguity: float = 0.01,
                placement: str = "out-of-place") -> Probes:
    """More sizes to measure, each with the configurations to measure there; {} when stable.

    Rows as :func:`ccltune.tune.derive.derive` takes them (the sweep's rows so far). Sizes are
    always drawn from ``all_sizes``; a size is asked for only once per call.
    """
    groups: dict[tuple[str, int, int], list[Mapping[str, Any]]] = defaultdict(list)
    for row in map(_record, measured_rows):
        groups[_group_key(row)].append(row)
    todo: dict[int, set[Candidate]] = defaultdict(set)
    universe = sorted(set(all_sizes))
    opts = dict(objective=objective, sm_tolerance=sm_tolerance, min_margin=min_margin)
    for rows in groups.values():
        by_size = samples_by_size(rows, placement)
        tried = {s for s in by_size}  # measured, even if every config there failed
        stats = {s: {c: point_stats(t) for c, t in cands.items()} for s, cands in by_size.items()}
        measured = sorted(s for s in stats if DEFAULT in stats[s])
        decisions = {s: decide(stats[s][DEFAULT], {c: p for c, p in stats[s].items() if not c.is_default}, **opts)
                     for s in measured}
        per_cand: dict[Candidate, dict[int, PointStats]] = defaultdict(dict)
        for s in measured:
            for c, p in stats[s].items():
                per_cand[c][s] = p
        for a, b in zip(measured, measured[1:]):
            inside = [s for s in universe if a < s < b and s not in tried]
            if not inside:
                continue
            mid = math.isqrt(a * b)  # the rule boundary derive() would place
            probe = min(inside, key=lambda s: (abs(math.log(s / mid)), s))
            want = _probe_candidates(per_cand, (a, b), (decisions[a], decisions[b]), inside, mid,
                                     ambiguity, min_margin, opts)
            if want is not None:
                todo[probe] |= want
    return {s: sorted(c, key=lambda x: (not x.is_default, x.sort_key())) for s, c in sorted(todo.items())}


def _probe_candidates(per_cand: Mapping[Candidate, Mapping[int, PointStats]], ends: tuple[int, int],
                      winners: tuple[Candidate | None, Candidate | None], inside: list[int], mid: int,
                      ambiguity: float, min_margin: float, opts: dict[str, Any]) -> set[Candidate] | None:
    """Configurations to measure inside the gap, or None when the gap is settled."""
    wa, wb = winners
    unsettled = wa != wb
    # Over a wide gap the straight segments can miss a switch inside NCCL: keep every
    # configuration that may beat the default, not only those near the predicted best.
    wide = max(inside) > WIDE_GAP * min(inside)
    contenders = {c for c in (wa, wb) if c is not None}
    if unsettled:  # a boundary inside: whatever beats the default at an end may win in between
        dflt = per_cand[DEFAULT]
        contenders |= {c for c, pts in per_cand.items() if not c.is_default and any(
            e in pts and beats(dflt[e], pts[e], min_margin) for e in ends)}
    slack = opts["sm_tolerance"] if opts["objective"] == "sm" else 0.0
    for s in inside:
        d = _predict(per_cand[DEFAULT], s)
        if d is None:
            continue
        preds = {c: p for c, pts in per_cand.items() if not c.is_default and (p := _predict(pts, s))}
        implied = wa if s <= mid else wb
        if decide(d, preds, **opts) != implied:
            unsettled = True
        near = {c: p for c, p in preds.items() if d.median_us / p.median_us - 1.0 > margin(d, p, min_margin) - ambiguity}
        if not near:
            continue
        best = min(p.median_us for p in near.values())
        for c, p in near.items():
            if wide or p.median_us <= best * (1.0 + slack + p.noise + ambiguity):  # could win here
                contenders.add(c)
                if abs(d.median_us / p.median_us - 1.0 - margin(d, p, min_margin)) < ambiguity:
                    unsettled = True  # noise could flip it
    if not unsettled:
        return None
    return {DEFAULT, *contenders}
