"""Slowest-link analysis of a measured link matrix (pure; runs on the CPU).

Rows are ``links`` table rows: ``src``, ``dst``, ``method`` (ce, sm-read, sm-write),
``direction`` (uni, bidir, all2all, latency), ``bandwidth_gbps`` (GB/s = 1e9 B/s, of that one
direction), ``latency_us``.

Why the slowest link: a ring or tree collective moves the same bytes over every link it uses,
so the bandwidth it can draw from a GPU is bounded by that GPU's slowest link times its number
of peers (``bound_gbps``); the ring ceiling is the smallest bound over the GPUs. Through an
NVSwitch each pair can use all of a GPU's links, so pair figures do not add up; where the
concurrent all-to-all was measured, the GPU's aggregate caps its bound.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ccltune.diagnose.findings import Finding
from ccltune.diagnose.parsers.linkimport import times

Pair = tuple[int, int]


def cells(rows: Iterable[Mapping[str, Any]], method: str, direction: str, key: str = "bandwidth_gbps"
          ) -> tuple[dict[Pair, float], int]:
    """((src, dst) -> value, how many pairs were measured more than once) for one method and direction; rows
    without the value are skipped. A pair measured twice keeps its worse value (the lower bandwidth, the higher
    latency): TransferBench p2p's bidirectional table holds s->d once from the s<->d run and once from the d<->s
    run, and the slower of the two is the link's bound."""
    out: dict[Pair, float] = {}
    repeated: set[Pair] = set()
    worse = max if key == "latency_us" else min
    for r in rows:
        if r["method"] != method or r["direction"] != direction or r.get(key) is None:
            continue
        pair, value = (int(r["src"]), int(r["dst"])), float(r[key])
        if pair in out:
            repeated.add(pair)
            value = worse(out[pair], value)
        out[pair] = value
    return out, len(repeated)


def matrix(rows: Iterable[Mapping[str, Any]], method: str, direction: str) -> dict[Pair, float]:
    """(src, dst) -> GB/s for one method and direction; a pair measured twice keeps the lower (:func:`cells`)."""
    return cells(rows, method, direction)[0]


def slow_links(m: Mapping[Pair, float], threshold: float) -> list[dict[str, Any]]:
    """Links below ``threshold`` x the median of their matrix, slowest first."""
    if not m:
        return []
    med = statistics.median(m.values())
    slow = [{"src": s, "dst": d, "gbps": v, "median_gbps": med, "ratio": v / med if med else 0.0}
            for (s, d), v in m.items() if v < threshold * med]
    return sorted(slow, key=lambda x: x["gbps"])


def per_gpu_bounds(m: Mapping[Pair, float], aggregate: Mapping[int, float] | None = None,
                   decimals: int | None = None) -> list[dict[str, Any]]:
    """For each GPU: its slowest outgoing link, peers, slowest x peers (capped by its measured aggregate) and
    the plain sum of its links. ``decimals``: the figures were printed with that many (an imported run):
    products and sums are rounded to it, as the tool would print them."""
    out = []
    for g in sorted({s for s, _ in m}):
        links = {d: v for (s, d), v in m.items() if s == g}
        peer = min(links, key=lambda d: links[d])
        bound = times(links[peer], len(links), decimals)
        total = sum(links.values()) if decimals is None else round(sum(links.values()), decimals)
        agg = (aggregate or {}).get(g)
        out.append({"gpu": g, "slowest_gbps": links[peer], "slowest_peer": peer, "peers": len(links),
                    "bound_gbps": min(bound, agg) if agg else bound, "aggregate_gbps": agg, "sum_gbps": total})
    return out


def aggregate_per_gpu(m: Mapping[Pair, float]) -> dict[int, float]:
    """Sum of a GPU's outgoing bandwidths measured all at once (the all-to-all matrix)."""
    agg: dict[int, float] = {}
    for (s, _), v in m.items():
        agg[s] = agg.get(s, 0.0) + v
    return agg


def analyze(rows: Sequence[Mapping[str, Any]], *, threshold: float = 0.8,
            nvlink_limit: Mapping[Pair, float] | None = None,
            decimals: Mapping[str, int] | None = None) -> tuple[dict[str, Any], list[Finding]]:
    """(summary, findings) of a link run. ``nvlink_limit``: per pair GB/s of one direction (NVML).
    ``decimals``: per series ("method/direction") the precision an importing tool printed with."""
    summary: dict[str, Any] = {"series": {}, "threshold": threshold}
    findings: list[Finding] = []
    methods = sorted({r["method"] for r in rows})
    for method in methods:
        agg = aggregate_per_gpu(matrix(rows, method, "all2all"))
        if agg:
            summary.setdefault("all2all_per_gpu_gbps", {})[method] = agg
        for direction in ("uni", "bidir", "all2all"):
            m = matrix(rows, method, direction)
            if not m:
                continue
            series = _series(m, threshold, agg if direction == "uni" else None, nvlink_limit,
                             (decimals or {}).get(f"{method}/{direction}"))
            repeated = cells(rows, method, direction)[1]
            if repeated:
                series["pairs_measured_twice"] = repeated
            summary["series"][f"{method}/{direction}"] = series
            if series["slow_links"]:
                worst = series["slow_links"][0]
                findings.append(Finding(
                    f"links:{method}/{direction}", "WARN",
                    f"{len(series['slow_links'])} links below {threshold:g} x median {series['median_gbps']:.1f} GB/s; "
                    f"slowest {worst['src']}->{worst['dst']} {worst['gbps']:.1f} GB/s",
                    "check the link: nvidia-smi nvlink -s / -e (NVIDIA) or amd-smi metric --xgmi-err (AMD) for errors; "
                    "reseat or service the GPU/baseboard",
                    value=worst["gbps"], data={"slow_links": series["slow_links"]}))
            else:
                ratio = f", {series['nvlink_ratio']:.0%} of the NVLink limit" if series.get("nvlink_ratio") else ""
                findings.append(Finding(f"links:{method}/{direction}", "PASS",
                                        f"median {series['median_gbps']:.1f} GB/s, min {series['min_gbps']:.1f}"
                                        f"{ratio}; no link below {threshold:g} x median", value=series["median_gbps"]))
    ceilings = [(s["ring_ceiling_gbps"], k) for k, s in summary["series"].items() if k.endswith("/uni")]
    if not ceilings:  # only the concurrent all-to-all was measured (TransferBench a2a): its bounds set the ceiling
        ceilings = [(s["ring_ceiling_gbps"], k) for k, s in summary["series"].items() if k.endswith("/all2all")]
    if ceilings:  # the method that allows most; the series it came from, so a reader can multiply it out
        summary["ring_ceiling_gbps"], summary["ring_ceiling_series"] = max(ceilings, key=lambda c: c[0])
    lat = [float(r["latency_us"]) for r in rows if r.get("latency_us") is not None]
    if lat:
        summary["latency_us"] = {"median": statistics.median(lat), "max": max(lat), "min": min(lat)}
    return summary, findings


def _series(m: Mapping[Pair, float], threshold: float, aggregate: Mapping[int, float] | None,
            nvlink_limit: Mapping[Pair, float] | None, decimals: int | None = None) -> dict[str, Any]:
    values = list(m.values())
    bounds = per_gpu_bounds(m, aggregate, decimals)
    series: dict[str, Any] = {"median_gbps": statistics.median(values), "min_gbps": min(values),
                              "max_gbps": max(values), "slow_links": slow_links(m, threshold), "per_gpu": bounds,
                              "ring_ceiling_gbps": min(b["bound_gbps"] for b in bounds)}
    if nvlink_limit:
        ratios = [v / nvlink_limit[p] for p, v in m.items() if nvlink_limit.get(p)]
        if ratios:
            series["nvlink_ratio"] = statistics.median(ratios)
    return series



def analyze_stored(rows: list[dict[str, Any]], imported: dict[str, Any], *, threshold: float
                   ) -> tuple[dict[str, Any], list[Any]]:
    """The analysis a links run keeps in its summary, with the tool's facts beside it."""
    summary, findings = analyze(rows, threshold=threshold, decimals=imported.get("printed_decimals") or {})
    summary.update(imported)
    return summary, findings
