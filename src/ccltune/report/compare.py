"""Two runs side by side: per-size ratio of NCCL-default timings, regressions flagged.

``ratio = time_A / time_B`` (equal to busbw_B / busbw_A at one size): above 1 means run B
is faster. A point is a regression when ``ratio < 1 - tolerance``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ccltune.report.axes import size_label
from ccltune.report.data import Row, canonical, medians, num, ok_rows, ratio_text
from ccltune.report.model import Series, Table

# What must be equal for two measurements to be the same point.
_MATCH = ("collective", "dtype", "op", "in_place", "n_ranks", "graph")
DEFAULT_TOLERANCE_PCT = 3.0


@dataclass
class ComparePoint:
    collective: str
    variant: str  # '' or 'in-place' etc. when the runs hold several placements/dtypes
    size_bytes: int
    time_a_us: float
    time_b_us: float
    busbw_a_gbps: float | None
    busbw_b_gbps: float | None
    ratio: float
    regression: bool


@dataclass
class Comparison:
    points: list[ComparePoint]
    only_a: int  # points measured in A only
    only_b: int
    tolerance_pct: float

    @property
    def regressions(self) -> list[ComparePoint]:
        return [p for p in self.points if p.regression]


def _keyed(rows: Iterable[Row]) -> dict[tuple, list[Row]]:
    out: dict[tuple, list[Row]] = defaultdict(list)
    for r in ok_rows(rows, "time_us"):
        if (r.get("config") or "default") == "default":
            key = (canonical(r["collective"]), *(r.get(k) for k in _MATCH[1:]))
            out[key].append(r)
    return out


def _variant(key: tuple, varying: list[int]) -> str:
    names: dict[int, Callable[[Any], str]] = {1: str, 2: lambda v: str(v or ""), 3: lambda v: "in-place" if v else "out-of-place",
             4: lambda v: f"{v} ranks", 5: lambda v: "graph" if v else "no graph"}
    return ", ".join(names[i](key[i]) for i in varying)


def compare(rows_a: Iterable[Row], rows_b: Iterable[Row], tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> Comparison:
    if tolerance_pct < 0:
        raise ValueError(f"tolerance must be >= 0 %, got {tolerance_pct}")
    ka, kb = _keyed(rows_a), _keyed(rows_b)
    keys = sorted(set(ka) & set(kb), key=str)
    varying = [i for i in range(1, len(_MATCH)) if len({k[i] for k in keys}) > 1]
    points, only_a, only_b = [], 0, 0
    for key in sorted(set(ka) | set(kb), key=str):
        ta, tb = medians(ka.get(key, []), "time_us"), medians(kb.get(key, []), "time_us")
        only_a += len(set(ta) - set(tb))
        only_b += len(set(tb) - set(ta))
        ba, bb = medians(ka.get(key, []), "busbw_gbps"), medians(kb.get(key, []), "busbw_gbps")
        for size in sorted(set(ta) & set(tb)):
            if tb[size] <= 0:
                continue
            ratio = ta[size] / tb[size]
            points.append(ComparePoint(key[0], _variant(key, varying), size, ta[size], tb[size],
                                       ba.get(size), bb.get(size), ratio, ratio < 1 - tolerance_pct / 100))
    return Comparison(points, only_a, only_b, tolerance_pct)


def compare_series(c: Comparison) -> dict[str, list[Series]]:
    """collective -> one ratio line per variant, regressions marked."""
    out: dict[str, dict[str, Series]] = defaultdict(dict)
    for p in c.points:
        s = out[p.collective].setdefault(p.variant, Series(p.variant or "B vs A", [], [], marked=[]))
        s.xs.append(float(p.size_bytes))
        s.ys.append(p.ratio)
        s.marked.append(p.regression)  # type: ignore[union-attr]
    return {coll: list(v.values()) for coll, v in sorted(out.items())}


def compare_table(c: Comparison, a: int, b: int) -> Table:
    variants = any(p.variant for p in c.points)
    t = Table(["collective", *(["variant"] if variants else []), "size", f"run {a} time us", f"run {b} time us",
               f"run {a} busbw GB/s", f"run {b} busbw GB/s", "ratio (B faster > 1)"], [],
              caption=f"Regression: ratio below {1 - c.tolerance_pct / 100:.3f} (tolerance {c.tolerance_pct:g}%)")
    for p in c.points:
        t.rows.append([p.collective, *([p.variant] if variants else []), size_label(p.size_bytes), f"{p.time_a_us:.2f}",
                       f"{p.time_b_us:.2f}", num(p.busbw_a_gbps), num(p.busbw_b_gbps), ratio_text(p.ratio)])
        t.row_class.append("bad" if p.regression else ("good" if p.ratio > 1 + c.tolerance_pct / 100 else ""))
    return t
