"""Model-guided search: NCCL's default at every size, the candidates where they may win.

Each configuration's time is modelled as ``t(s) = alpha + s / beta`` (latency µs, bandwidth
bytes/µs), piecewise: between two sizes where a configuration was measured, the alpha-beta line
through both points (``segment``). :func:`fit_alpha_beta` (relative least squares) and
:func:`crossing` serve reporting and checks over a region.

The loop the sweep runs::

    todo = plan_initial(sizes)                   # size -> configurations (None = all)
    while todo:
        measure(todo)
        todo = plan_refine(rows_so_far, sizes)   # {} once nothing is left to measure

``plan_initial`` asks for every configuration at the anchors and NCCL's default at every other
size; ``plan_refine`` asks for a configuration at a size where it is *predicted* to beat the
default, is *adjacent* to a size where it does, or has a *sibling* channel count that does; the
A/A twin only around such sizes. The planner decides nothing itself: the rules are ``derive``'s
on the rows gathered. docs/tuning.md ("Model-guided search") gives the rules in full, their
limits, and the measurements behind them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccltune.commconfig import BASELINE, TWIN, CommConfig
from ccltune.stats import PointStats, beats, gain, margin, point_stats
from ccltune.store import as_record
from ccltune.tune.derive import (
    ISOLATED_MARGIN,
    MIN_GAIN_US,
    candidate_of,
    samples_by_size,
)

STRIDE = 14  # plan_initial: anchors at most STRIDE sizes apart (16384x with step factor 2)
Probes = dict[int, "list[CommConfig] | None"]  # size -> configurations to measure (None: all)


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


def anchors(sizes: Iterable[int], stride: int = STRIDE) -> list[int]:
    """Where every configuration is measured first: the smallest and the largest size and, spread
    evenly between them, as few more as keep consecutive anchors at most ``stride`` sizes apart."""
    s = sorted(x for x in set(sizes) if x > 0) or sorted(set(sizes))  # a 0-byte size models nothing
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    if len(s) < 2:
        return s
    gaps = -(-(len(s) - 1) // stride)  # ceil
    return [s[round(i * (len(s) - 1) / gaps)] for i in range(gaps + 1)]


def plan_initial(sizes: Iterable[int], stride: int = STRIDE) -> Probes:
    """The first measurements: every configuration at the :func:`anchors`, the default elsewhere."""
    s = sorted(set(sizes))
    at = set(anchors(s, stride))
    return {x: None if x in at else [BASELINE] for x in s}


def _chord(points: Mapping[int, PointStats], size: int) -> PointStats | None:
    """Alpha-beta prediction at ``size``: the segment through the nearest measured points around it."""
    below = [s for s in points if s < size]
    above = [s for s in points if s > size]
    if not below or not above:
        return None
    a, b = max(below), min(above)
    pa, pb = points[a], points[b]
    t = segment((a, pa.median_us), (b, pb.median_us)).predict(size)
    return PointStats(t, (pa.noise + pb.noise) / 2, min(pa.n, pb.n))


def default_trend(default: Mapping[int, PointStats], sizes: Sequence[int]) -> dict[int, float]:
    """The default's trend (µs) at each size where it was measured: the geometric mean of its times at
    the neighbouring sizes of ``sizes`` (both measured), else its own time. A size where the default
    is above its trend is a bump of NCCL's choice that a candidate may not share."""
    out = {}
    for i, s in enumerate(sizes):
        if s not in default:
            continue
        nb = [default[sizes[j]].median_us for j in (i - 1, i + 1)
              if 0 <= j < len(sizes) and sizes[j] in default and sizes[j] > 0]  # 0 B: NCCL launches nothing
        out[s] = math.sqrt(nb[0] * nb[1]) if len(nb) == 2 else default[s].median_us
    return out


def _track(points: Mapping[int, PointStats], trend: Mapping[int, float], size: int) -> PointStats | None:
    """Prediction for a configuration that leaves NCCL a choice: the default's trend at ``size`` times
    the configuration's ratio to that trend, interpolated in log(size) between its nearest measured
    sizes around ``size``."""
    below = [s for s in points if s < size and s in trend]
    above = [s for s in points if s > size and s in trend]
    if not below or not above or size not in trend:
        return None
    a, b = max(below), min(above)
    # log(size) interpolation; a 0-byte size (a layout rounding a tiny size down) sits at 1 byte
    w = math.log(size / max(a, 1)) / math.log(b / max(a, 1)) if b > max(a, 1) else 0.0
    pa, pb = points[a], points[b]
    ratio = (pa.median_us / trend[a]) ** (1 - w) * (pb.median_us / trend[b]) ** w
    return PointStats(trend[size] * ratio, (pa.noise + pb.noise) / 2, min(pa.n, pb.n))


def predict(cand: CommConfig, points: Mapping[int, PointStats], default: Mapping[int, PointStats],
            trend: Mapping[int, float], size: int, min_margin: float = 0.02) -> PointStats | None:
    """``cand``'s predicted time at ``size`` from its measured ``points`` (None: not bracketed).

    A configuration forcing both algorithm and protocol keeps one cost curve: the alpha-beta
    segment (``_chord``). Where it beats the default at neither end of the segment, it can win
    inside only as far as the default rises above its trend there, so the prediction is not
    below the trend (a segment over a wide gap runs below a curve that bends, which would
    otherwise predict wins everywhere inside). A configuration leaving NCCL a choice (channel
    count only, or algorithm or protocol left open) switches where NCCL switches: it follows the
    default's trend (``_track``).
    """
    if cand.algo is None or cand.proto is None:
        return _track(points, trend, size)
    p = _chord(points, size)
    if p is None or size not in trend:
        return p
    ends = (max(s for s in points if s < size), min(s for s in points if s > size))
    if not any(e in default and beats(default[e], points[e], min_margin) for e in ends):
        return PointStats(max(p.median_us, trend[size]), p.noise, p.n)
    return p


def _siblings(c: CommConfig, configs: Iterable[CommConfig]) -> set[CommConfig]:
    """Among ``configs`` (the forced candidates: neither the default nor its twin), the configurations to try next beside ``c`` where ``c`` beats the default: the same algorithm and
    protocol choice (a family) with the next lower and next higher channel counts of ``c``'s, and, for a
    family's NCCL-chosen count, its lowest and highest counts.

    A channel count that beats NCCL says NCCL's choice of channels is off at this size; the neighbouring
    counts (which no trend predicts) may beat it more. One that does is a win here too and asks for its own
    next count in the next round: a climb along the counts, not all of them at once (docs/tuning.md,
    "Model-guided search", says why). A forced algorithm/protocol winning at NCCL's count
    (``sweep --grid full``) starts the climb from both ends of its family's counts."""
    family = sorted({o.channels for o in configs if (o.algo, o.proto) == (c.algo, c.proto) and o.channels})
    if not family:
        return set()
    if c.channels is None:
        steps = {family[0], family[-1]}
    else:
        k = family.index(c.channels)
        steps = {family[j] for j in (k - 1, k + 1) if 0 <= j < len(family)}
    return {o for o in configs if (o.algo, o.proto) == (c.algo, c.proto) and o.channels in steps}


def _group_key(row: Mapping[str, Any]) -> tuple[str, int, int]:
    return (row["collective"], int(row["n_ranks"]), int(row.get("n_nodes") or 1))


def plan_refine(measured_rows: Iterable[Any], all_sizes: Sequence[int], *, min_margin: float = 0.02,
                isolated_margin: float = ISOLATED_MARGIN, ambiguity: float = 0.01, min_gain_us: float = MIN_GAIN_US,
                placement: str = "out-of-place") -> Probes:
    """More (size, configurations) to measure; {} when nothing more is needed (module doc).

    Rows as :func:`ccltune.tune.derive.derive` takes them (the sweep's rows so far); the margins
    and placement are the ones ``derive`` will use. ``all_sizes`` are the sizes of the series,
    as the rows store them. A point that has rows (even failed ones) is not asked for again,
    except the default beside new candidates at its size. The objective does not enter: every
    configuration that may qualify is measured, whichever of them an objective then picks.
    """
    groups: dict[tuple[str, int, int], list[Mapping[str, Any]]] = defaultdict(list)
    for row in map(as_record, measured_rows):
        groups[_group_key(row)].append(row)
    todo: dict[int, set[CommConfig]] = defaultdict(set)
    universe = sorted(set(all_sizes))
    for rows in groups.values():
        for s, cands in _refine_group(rows, universe, min_margin, isolated_margin, ambiguity, min_gain_us,
                                      placement).items():
            todo[s] |= cands
    return {s: sorted(c, key=lambda x: (not x.is_default, x.sort_key())) for s, c in sorted(todo.items())}


def _refine_group(rows: list[Mapping[str, Any]], universe: list[int], min_margin: float, isolated_margin: float,
                  ambiguity: float, min_gain_us: float, placement: str) -> dict[int, set[CommConfig]]:
    """{size: configurations} to measure next for one group's rows (see the module doc)."""
    tried = {(int(r["size_bytes"]), candidate_of(r)) for r in rows}
    configs = {c for _, c in tried if not (c.is_default or c.twin)}
    stats = {s: {c: point_stats(t) for c, t in cands.items()} for s, cands in samples_by_size(rows, placement).items()}
    per_cand: dict[CommConfig, dict[int, PointStats]] = defaultdict(dict)
    for s, cands in stats.items():
        for c, p in cands.items():
            per_cand[c][s] = p
    dflt = per_cand.get(BASELINE, {})
    want: dict[int, set[CommConfig]] = defaultdict(set)
    for s in universe:  # the default everywhere (plan_initial asks for it; a resumed or other plan may not)
        if (s, BASELINE) not in tried:
            want[s].add(BASELINE)
    trend = default_trend(dflt, universe)
    wins = {(s, c) for s, d in dflt.items() for c, p in stats[s].items()
            if not c.is_default and beats(d, p, min_margin)}
    index = {s: i for i, s in enumerate(universe)}
    for s, d in dflt.items():
        if s == 0:  # a 0-byte call: no candidate makes a rule there (derive's module doc)
            continue
        i = index.get(s)
        near = [] if i is None else [universe[j] for j in (i - 1, i + 1) if 0 <= j < len(universe) and universe[j] > 0]
        near3 = [] if i is None else [universe[j] for j in range(i - 3, i + 4) if j != i and 0 <= j < len(universe)]
        for c in configs:  # predicted to beat the default by the margin a win here needs
            guess = None if (s, c) in tried else predict(c, per_cand.get(c, {}), dflt, trend, s, min_margin)
            if guess is None:
                continue
            corroborated = any((n, c) in wins for n in near)
            floor = min_margin if corroborated else max(min_margin, isolated_margin)
            if gain(d, guess) > margin(d, guess, floor) - ambiguity:
                want[s].add(c)
        for c, p in stats[s].items():  # a win here: measured at the neighbouring sizes too
            if c.is_default or c.twin:
                continue
            # ... and past up to three sizes where it is faster but within the noise, within three
            # sizes of a win: a region of wins with noisy sizes inside is measured to its real end
            bridge = (s, c) not in wins and gain(d, p) > 0 and any((n, c) in wins for n in near3)
            if (s, c) in wins or bridge:
                for n in near:
                    if (n, c) not in tried:
                        want[n].add(c)
            others = {o for o in _siblings(c, configs) if (s, o) not in tried} if (s, c) in wins else set()
            if others:
                want[s] |= others
    for n in _twin_sizes(tried, dflt, stats, universe, min_margin, min_gain_us):
        want[n].add(TWIN)
    measured_beside = {s for s, c in tried if not c.is_default}
    for s, configs_there in want.items():
        if configs_there - {BASELINE} and s not in measured_beside:
            # NCCL's default again beside the first candidates at a size, interleaved with them as
            # in an exhaustive sweep (once per size: later rounds compare against these samples)
            configs_there.add(BASELINE)
    return want


def _twin_sizes(tried: set[tuple[int, CommConfig]], dflt: Mapping[int, PointStats],
                stats: Mapping[int, Mapping[CommConfig, PointStats]], universe: list[int], min_margin: float,
                min_gain_us: float) -> set[int]:
    """The sizes to measure the A/A twin at: where a decision may hinge on it. derive's margin at a size
    is at least the largest A/A gap of that size and its neighbours, so the gap matters only around a
    size where a candidate beats the default before that gap is counted."""
    if not any(c.twin for _, c in tried):  # measured at the anchors unless the sweep runs without it
        return set()
    index = {s: i for i, s in enumerate(universe)}
    out: set[int] = set()
    for s, d in dflt.items():
        floor = max(min_margin, min_gain_us / d.median_us)
        if any(beats(d, p, floor) for c, p in stats[s].items() if not (c.is_default or c.twin)):
            i = index.get(s)
            out.update(n for n in ([s] if i is None else [universe[j] for j in (i - 1, i, i + 1) if 0 <= j < len(universe)])
                       if (n, TWIN) not in tried)
    return out
