"""Slowest-link analysis of a measured link matrix (pure; runs on the CPU).

Rows are ``links`` table rows: ``src``, ``dst``, ``method`` (ce, sm-read, sm-write),
``direction`` (uni, bidir, all2all, latency), ``bandwidth_gbps`` (GB/s = 1e9 B/s, of that one
direction), ``latency_us``.

Why the slowest link: a ring or tree collective moves the same bytes over every link it uses,
so the bandwidth it can draw from a GPU is bounded by that GPU's slowest link times its number
of peers (``bound_gbps``); the ring ceiling is the smallest bound over the GPUs. Through an
NVSwitch each pair can use all of a GPU's links, so pair figures do not add up; where the
concurrent all-to-all was measured, the GPU's aggregate caps its bound, and a GPU whose pairs share
its links (NVML's limit of all its links is below slowest x peers, or, measured, ``shared_port_gpus``:
a pair carries far less while the others run) is bounded by its fastest single pair, which already
used all of its links.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ccltune.diagnose.findings import Finding
from ccltune.diagnose.parsers.linkimport import times
from ccltune.status import Verdict

Pair = tuple[int, int]
# A series measured again (``links`` re-times the links it flagged): its rows' direction is the series'
# direction plus this suffix ("all2all-repeat"), so they never mix into the first measurement's matrix
REPEAT = "-repeat"
# The nvbandwidth test that measures a series' pairs alone, named in a WARN as the confirming test
# (its testcase keys, testcase.h); ccltune's ce copies are issued on the source GPU: a CE write
CONFIRMING_TEST = {
    ("ce", "uni"): "device_to_device_memcpy_write_ce", ("ce-write", "uni"): "device_to_device_memcpy_write_ce",
    ("ce-read", "uni"): "device_to_device_memcpy_read_ce",
    ("ce", "bidir"): "device_to_device_bidirectional_memcpy_write_ce",
    ("ce-write", "bidir"): "device_to_device_bidirectional_memcpy_write_ce",
    ("ce-read", "bidir"): "device_to_device_bidirectional_memcpy_read_ce",
    ("sm-read", "uni"): "device_to_device_memcpy_read_sm", ("sm-write", "uni"): "device_to_device_memcpy_write_sm",
    ("sm-read", "bidir"): "device_to_device_bidirectional_memcpy_read_sm",
    ("sm-write", "bidir"): "device_to_device_bidirectional_memcpy_write_sm",
}


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


def confirming_test(method: str, direction: str) -> str:
    """The test that measures one flagged pair alone: ccltune's one-direction series and nvbandwidth's name
    for it (an all-to-all's pair is confirmed by the pair alone, one direction)."""
    alone = "uni" if direction == "all2all" else direction
    nvb = CONFIRMING_TEST.get((method, alone))
    return f"the {method}/{alone} series of `ccltune links`" + (f", nvbandwidth -t {nvb}" if nvb else "")


def _judge(rows: Sequence[Mapping[str, Any]], method: str, direction: str, series: dict[str, Any],
           threshold: float) -> Finding:
    """PASS or WARN for one series. A WARN sends hardware for service, so the links it names must be slow
    twice: in the first measurement and when measured again (the ``REPEAT`` rows); an all-to-all's pair
    must also be slow alone (the same method, one direction), since concurrent copies share a GPU's copy
    engines and their split is uneven by nature. A series measured once (imported) WARNs without the
    service advice, asking for the repeat."""
    name, slow = f"links:{method}/{direction}", series["slow_links"]
    if not slow:
        ratio = f", {series['nvlink_ratio']:.0%} of the NVLink limit" if series.get("nvlink_ratio") else ""
        return Finding(name, Verdict.PASS, f"median {series['median_gbps']:.1f} GB/s, min {series['min_gbps']:.1f}"
                                     f"{ratio}; no link below {threshold:g} x median", value=series["median_gbps"])
    worst, limit = slow[0], threshold * series["median_gbps"]
    first = (f"{len(slow)} links below {threshold:g} x median {series['median_gbps']:.1f} GB/s; "
             f"slowest {worst['src']}->{worst['dst']} {worst['gbps']:.1f} GB/s")
    confirm = confirming_test(method, direction)
    again = matrix(rows, method, direction + REPEAT)
    if not again:
        return Finding(name, Verdict.WARN, first + " (measured once)",
                       f"measure again (ccltune links) and confirm each pair with {confirm} before servicing "
                       "hardware", value=worst["gbps"], data={"slow_links": slow})
    twice = [x for x in slow if again.get((x["src"], x["dst"]), limit) < limit]
    if not twice:
        values = [again[(x["src"], x["dst"])] for x in slow if (x["src"], x["dst"]) in again]
        low = f" (the slowest of them {min(values):.1f} GB/s)" if values else ""
        return Finding(name, Verdict.PASS, f"{first}; measured again, none of them below{low}: not the links",
                       value=series["median_gbps"], data={"slow_links": slow, "slow_twice": []})
    alone = matrix(rows, method, "uni") if direction == "all2all" else {}
    alone_limit = threshold * statistics.median(alone.values()) if alone else 0.0
    slow_alone = [x for x in twice if alone.get((x["src"], x["dst"]), 0.0) < alone_limit] if alone else twice
    if not slow_alone:
        fastest = min(alone[(x["src"], x["dst"])] for x in twice)
        return Finding(name, Verdict.PASS, f"{first}; {len(twice)} of them again when measured again, but each reaches "
                                     f">= {fastest:.1f} GB/s alone ({method}/uni): concurrent copies share the GPU's "
                                     "copy engines unevenly, the links are fine", value=series["median_gbps"],
                       data={"slow_links": slow, "slow_twice": twice, "slow_alone": []})
    worst = slow_alone[0]
    both = " and alone" if direction == "all2all" else ""
    return Finding(name, Verdict.WARN, f"{len(slow_alone)} links below {threshold:g} x median {series['median_gbps']:.1f} "
                                 f"GB/s in two measurements{both}; slowest {worst['src']}->{worst['dst']} "
                                 f"{worst['gbps']:.1f} GB/s",
                   f"confirm with {confirm}; check the link: nvidia-smi nvlink -s / -e (NVIDIA) or amd-smi metric "
                   "--xgmi-err (AMD) for errors; if it stays slow, reseat or service the GPU/baseboard",
                   value=worst["gbps"], data={"slow_links": slow_alone})


# A GPU's pairs share its links when, all at once, a pair carries under this fraction of what it carries
# alone (median over the GPU's pairs). Dedicated links (a mesh) keep their bandwidth all at once; through
# an NVSwitch every pair uses the same ports: on 4 x H200 the SM all-to-all carried 0.22 of the pair copy.
# This needs no NVML (an imported run, a machine without it); NVML's link limit (``egress``) is the other way.
SHARED_FRACTION = 0.5


def shared_port_gpus(rows: Sequence[Mapping[str, Any]]) -> set[int]:
    """GPUs whose peers share its links, as measured: in some method, its all-to-all pairs' median is
    under SHARED_FRACTION of its single pairs' median."""
    shared: set[int] = set()
    for method in sorted({r["method"] for r in rows}):
        uni, a2a = matrix(rows, method, "uni"), matrix(rows, method, "all2all")
        for g in {s for s, _ in uni} & {s for s, _ in a2a}:
            alone = statistics.median(v for (s, _), v in uni.items() if s == g)
            together = statistics.median(v for (s, _), v in a2a.items() if s == g)
            if alone > 0 and together < SHARED_FRACTION * alone:
                shared.add(g)
    return shared


def per_gpu_bounds(m: Mapping[Pair, float], aggregate: Mapping[int, float] | None = None,
                   decimals: int | None = None, egress: Mapping[int, float] | None = None,
                   measured_shared: Iterable[int] = ()) -> list[dict[str, Any]]:
    """For each GPU: its slowest outgoing link, peers, slowest x peers (capped by its measured aggregate) and
    the plain sum of its links. ``decimals``: the figures were printed with that many (an imported run):
    products and sums are rounded to it, as the tool would print them. ``egress``: per GPU the NVLink limit of
    all its links, one direction (NVML: links x per-link speed); where slowest x peers exceeds it, its pairs
    share its links (through an NVSwitch one pair alone drives every port), so the bound is its fastest pair
    alone: pair figures do not add up there, and the all-to-all aggregate need not show it (on 4 x H200 its
    copy-engine copies summed to 790 GB/s out of one GPU, above the 478 its 18 links carry).
    ``measured_shared``: GPUs whose sharing was measured instead (:func:`shared_port_gpus`), bounded alike."""
    out = []
    for g in sorted({s for s, _ in m}):
        links = {d: v for (s, d), v in m.items() if s == g}
        peer = min(links, key=lambda d: links[d])
        bound = times(links[peer], len(links), decimals)
        total = sum(links.values()) if decimals is None else round(sum(links.values()), decimals)
        agg = (aggregate or {}).get(g)
        limit = (egress or {}).get(g) or None  # 0: no limit known
        shared = (limit is not None and bound > limit) or g in measured_shared
        if agg:
            bound = min(bound, agg)
        if shared:
            bound = min(bound, max(links.values()))
        out.append({"gpu": g, "slowest_gbps": links[peer], "slowest_peer": peer, "peers": len(links),
                    "bound_gbps": bound, "aggregate_gbps": agg, "sum_gbps": total, "shared_links": shared})
    return out


def aggregate_per_gpu(m: Mapping[Pair, float]) -> dict[int, float]:
    """Sum of a GPU's outgoing bandwidths measured all at once (the all-to-all matrix)."""
    agg: dict[int, float] = {}
    for (s, _), v in m.items():
        agg[s] = agg.get(s, 0.0) + v
    return agg


def analyze(rows: Sequence[Mapping[str, Any]], *, threshold: float = 0.8,
            nvlink_limit: Mapping[Pair, float] | None = None,
            decimals: Mapping[str, int] | None = None,
            egress: Mapping[int, float] | None = None) -> tuple[dict[str, Any], list[Finding]]:
    """(summary, findings) of a link run. ``nvlink_limit``: per pair GB/s of one direction (NVML).
    ``decimals``: per series ("method/direction") the precision an importing tool printed with.
    ``egress``: per GPU the NVLink limit of all its links (``per_gpu_bounds``)."""
    summary: dict[str, Any] = {"series": {}, "threshold": threshold}
    findings: list[Finding] = []
    methods = sorted({r["method"] for r in rows})
    shared = shared_port_gpus(rows)
    for method in methods:
        agg = aggregate_per_gpu(matrix(rows, method, "all2all"))
        if agg:
            summary.setdefault("all2all_per_gpu_gbps", {})[method] = agg
        for direction in ("uni", "bidir", "all2all"):
            m = matrix(rows, method, direction)
            if not m:
                continue
            series = _series(m, threshold, agg if direction == "uni" else None, nvlink_limit,
                             (decimals or {}).get(f"{method}/{direction}"), egress if direction == "uni" else None,
                             shared if direction == "uni" else set())
            repeated = cells(rows, method, direction)[1]
            if repeated:
                series["pairs_measured_twice"] = repeated
            summary["series"][f"{method}/{direction}"] = series
            findings.append(_judge(rows, method, direction, series, threshold))
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
            nvlink_limit: Mapping[Pair, float] | None, decimals: int | None = None,
            egress: Mapping[int, float] | None = None, shared: Iterable[int] = ()) -> dict[str, Any]:
    values = list(m.values())
    bounds = per_gpu_bounds(m, aggregate, decimals, egress, set(shared))
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
