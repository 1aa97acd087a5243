"""Links runs for the page (pure): the slowest link, the ceiling and what it is the product of,
the heatmaps.

A links run's summary (ccltune.diagnose.checks.linkmath) keeps, per method and direction
(``series``, e.g. ``ce-write/uni``), each GPU's slowest link, its peers and its bound (slowest x
peers, capped by its all-to-all aggregate where that was measured), and as the node's ceiling the
largest over the methods of the smallest bound over the GPUs (``ring_ceiling_gbps``, from the
series ``ring_ceiling_series``). The page names that series and the link that sets it, so the
slowest link it shows and the ceiling are of one method and a reader can multiply one out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccltune.report.model import Heatmap

Row = Mapping[str, Any]

_DIRECTIONS = {"uni": "unidirectional", "bi": "bidirectional", "bidir": "bidirectional",
               "all2all": "all links at once (all-to-all)"}


def ceiling_gbps(summary: Mapping[str, Any]) -> float | None:
    """The node's slowest-link ceiling of a links run (``ring_ceiling_gbps``, linkmath), or the
    expected ceiling older runs recorded (``ceiling_gbps``)."""
    for key in ("ring_ceiling_gbps", "ceiling_gbps"):
        v = summary.get(key)
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
    return None


@dataclass
class CeilingBasis:
    """What a ceiling is the product of: GPU ``gpu``'s slowest link (to ``peer``) in ``series``
    times its ``peers``, or its measured all-to-all aggregate where that is smaller."""

    series: str  # "ce-write/uni"
    gpu: int
    peer: int
    slowest_gbps: float
    peers: int
    ceiling_gbps: float
    aggregate_gbps: float | None = None

    @property
    def capped(self) -> bool:
        return self.aggregate_gbps is not None and self.aggregate_gbps <= self.slowest_gbps * self.peers

    @property
    def upper_bound(self) -> bool:
        """Pairwise figures (one pair at a time) multiplied, no all-to-all measurement to cap them."""
        return not self.series.endswith("/all2all") and self.aggregate_gbps is None

    def product(self) -> str:
        """'ce-write/uni, 389.26 GB/s x 3 peers' (or the aggregate that capped it)."""
        if self.capped:
            return f"{self.series}, GPU {self.gpu}'s all-to-all aggregate {self.aggregate_gbps:.2f} GB/s"
        return f"{self.series}, {self.slowest_gbps:.2f} GB/s x {self.peers} peers"

    def text(self) -> str:
        """The sentence under the links heatmaps."""
        out = (f"{self.ceiling_gbps:.2f} GB/s = {self.series}: GPU {self.gpu}'s slowest link, "
               f"{self.slowest_gbps:.2f} GB/s to GPU {self.peer}, x {self.peers} peers")
        if self.capped:
            out = (f"{self.ceiling_gbps:.2f} GB/s = {self.series}: GPU {self.gpu}'s all-to-all aggregate (all links "
                   f"measured at once), below its slowest link {self.slowest_gbps:.2f} GB/s x {self.peers} peers")
        out += (" (per GPU its slowest link x its peers, the smallest over the GPUs; the largest over the "
                "methods measured)")
        if self.upper_bound:
            out += (". The links were measured one pair at a time: multiplied without an all-to-all "
                    "measurement, this is an upper bound, not a rate the GPUs were seen to reach together")
        return out + "."


def ceiling_basis(summary: Mapping[str, Any]) -> CeilingBasis | None:
    """The series and GPU the run's ceiling came from (``ring_ceiling_series``; for a run stored
    before it was recorded, the series whose ceiling equals it); None when not recorded."""
    ceiling, series = ceiling_gbps(summary), summary.get("series")
    if ceiling is None or not isinstance(series, Mapping):
        return None
    name = summary.get("ring_ceiling_series")
    if name not in series:
        same = sorted((k for k, v in series.items() if isinstance(v, Mapping) and v.get("ring_ceiling_gbps") == ceiling),
                      key=lambda k: not k.endswith("/uni"))
        name = same[0] if same else None
    bounds = [b for b in (series[name].get("per_gpu") or []) if isinstance(b, Mapping)] if name else []
    if not bounds:
        return None
    b = min(bounds, key=lambda b: float(b["bound_gbps"]))
    return CeilingBasis(str(name), int(b["gpu"]), int(b["slowest_peer"]), float(b["slowest_gbps"]), int(b["peers"]),
                        ceiling, float(b["aggregate_gbps"]) if b.get("aggregate_gbps") else None)


def _lowest(links: Sequence[Row]) -> Row | None:
    measured = [r for r in links if r.get("bandwidth_gbps") is not None]
    return min(measured, key=lambda r: r["bandwidth_gbps"]) if measured else None


def slowest_link(links: Sequence[Row], summary: Mapping[str, Any]) -> Row | None:
    """The run's own verdict on the slowest link; else the link that sets its ceiling (the same
    method and direction as the ceiling, ``ceiling_basis``); else the lowest measured bandwidth."""
    if isinstance(summary.get("slowest"), Mapping):
        return summary["slowest"]
    basis = ceiling_basis(summary)
    if basis is not None:
        method, direction = basis.series.rsplit("/", 1)
        return next((r for r in links if (r["method"], r["direction"], r["src"], r["dst"])
                     == (method, direction, basis.gpu, basis.peer)),
                    {"src": basis.gpu, "dst": basis.peer, "method": method, "direction": direction,
                     "bandwidth_gbps": basis.slowest_gbps})
    return _lowest(links)


def slower_elsewhere(links: Sequence[Row], summary: Mapping[str, Any]) -> Row | None:
    """The lowest measured link when it is slower than ``slowest_link`` (another method or direction
    than the ceiling's); None otherwise."""
    shown, low = slowest_link(links, summary), _lowest(links)
    if shown is None or low is None or shown.get("bandwidth_gbps") is None:
        return None
    return low if low["bandwidth_gbps"] < shown["bandwidth_gbps"] else None


def link_heatmaps(links: Sequence[Row], summary: Mapping[str, Any]) -> list[Heatmap]:
    """One bandwidth matrix (src rows, dst columns) per method and direction, its slowest link
    marked (the run's own verdict where it names one in this matrix)."""
    slow = slowest_link(links, summary)
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in links:
        groups[(r["method"], r["direction"])].append(r)
    maps = []
    for (method, direction), rs in sorted(groups.items()):
        gpus = sorted({int(r["src"]) for r in rs} | {int(r["dst"]) for r in rs})
        idx = {g: i for i, g in enumerate(gpus)}
        values: list[list[float | None]] = [[None] * len(gpus) for _ in gpus]
        for r in rs:
            if r.get("bandwidth_gbps") is not None:
                values[idx[int(r["src"])]][idx[int(r["dst"])]] = float(r["bandwidth_gbps"])
        if slow is not None and slow.get("method", method) == method \
                and slow.get("direction", direction) == direction \
                and slow.get("src") in idx and slow.get("dst") in idx:
            mark: tuple[int, int] | None = (idx[slow["src"]], idx[slow["dst"]])
        else:  # this matrix's own slowest link
            own = _lowest(rs)
            mark = (idx[int(own["src"])], idx[int(own["dst"])]) if own is not None else None
        maps.append(Heatmap(f"{method.upper()} copy, {_DIRECTIONS.get(direction, direction)}",
                            "src GPU", "dst GPU", [str(g) for g in gpus], [str(g) for g in gpus],
                            values, "GB/s", mark))
    return maps
