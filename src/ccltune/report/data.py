"""Pure functions from database rows (plain dicts, as ``Store.measurement_rows``,
``Store.links`` and ``Store.findings`` return them) to plot series and tables.

Conventions: a point is the median over repetitions of rows with status 'ok'; NCCL's own
choice is ``config == 'default'``; a speedup or ratio above 1 means faster.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ccltune.report.axes import size_label
from ccltune.report.model import Heatmap, Series, Table

Row = Mapping[str, Any]

# Row fields that tell two curves of one collective apart, and how a label spells them.
_CURVE_KEYS = ("run_id", "in_place", "dtype", "op", "n_ranks", "n_nodes", "graph")
_KEY_TEXT = {
    "run_id": lambda v: f"run {v}",
    "in_place": lambda v: "in-place" if v else "out-of-place",
    "dtype": str,
    "op": lambda v: str(v) if v else "no op",
    "n_ranks": lambda v: f"{v} ranks",
    "n_nodes": lambda v: f"{v} nodes",
    "graph": lambda v: "graph" if v else "no graph",
}


def ok_rows(rows: Iterable[Row], metric: str) -> list[Row]:
    return [r for r in rows if r.get("status") == "ok" and r.get(metric) is not None]


def medians(rows: Iterable[Row], metric: str) -> dict[int, float]:
    """size_bytes -> median of ``metric`` over the repetitions at that size."""
    by_size: dict[int, list[float]] = defaultdict(list)
    for r in ok_rows(rows, metric):
        by_size[int(r["size_bytes"])].append(float(r[metric]))
    return {s: statistics.median(v) for s, v in sorted(by_size.items())}


def _series(label: str, points: Mapping[int, float], **kw: Any) -> Series:
    xs = sorted(points)
    return Series(label, [float(x) for x in xs], [points[x] for x in xs], **kw)


def _split(rows: Iterable[Row], keys: tuple[str, ...]) -> tuple[dict[tuple, list[Row]], list[str]]:
    """Group rows by ``keys``; also return the keys whose values differ between groups."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        groups[tuple(r.get(k) for k in keys)].append(r)
    varying = [k for i, k in enumerate(keys) if len({g[i] for g in groups}) > 1]
    return groups, varying


def _label(keys: tuple[str, ...], group: tuple, varying: list[str], base: str = "") -> str:
    parts = [base] if base else []
    parts += [_KEY_TEXT[k](group[keys.index(k)]) for k in varying]
    return ", ".join(parts) or "all"


def curves(rows: Iterable[Row], metric: str) -> dict[str, list[Series]]:
    """collective -> one line per run (and placement, dtype... where those differ) of
    ``metric`` against size, using NCCL's default configuration only."""
    by_coll: dict[str, list[Row]] = defaultdict(list)
    for r in ok_rows(rows, metric):
        if r.get("config", "default") == "default":
            by_coll[r["collective"]].append(r)
    out: dict[str, list[Series]] = {}
    for coll, crows in sorted(by_coll.items()):
        groups, varying = _split(crows, _CURVE_KEYS)
        if "run_id" not in varying:
            varying.insert(0, "run_id")
        out[coll] = [_series(_label(_CURVE_KEYS, g, varying), medians(gr, metric))
                     for g, gr in sorted(groups.items(), key=lambda kv: str(kv[0]))]
    return out


def sweep_curves(rows: Iterable[Row], metric: str = "busbw_gbps") -> dict[str, list[Series]]:
    """collective -> one line per swept configuration, NCCL's default emphasised and last."""
    out: dict[str, list[Series]] = {}
    for coll, by_cfg in _by_coll_config(ok_rows(rows, metric)).items():
        lines = [_series(cfg, medians(cr, metric), emphasis=cfg == "default") for cfg, cr in by_cfg.items()]
        out[coll] = sorted(lines, key=lambda s: (s.emphasis, s.label))
    return out


def sweep_speedups(rows: Iterable[Row]) -> dict[str, list[Series]]:
    """collective -> per candidate, default time / candidate time at each size both have."""
    out: dict[str, list[Series]] = {}
    for coll, by_cfg in _by_coll_config(ok_rows(rows, "time_us")).items():
        base = medians(by_cfg.get("default", []), "time_us")
        lines = []
        for cfg, cr in sorted(by_cfg.items()):
            if cfg == "default":
                continue
            t = medians(cr, "time_us")
            pts = {s: base[s] / t[s] for s in t if s in base and t[s] > 0}
            if pts:
                lines.append(_series(cfg, pts))
        if lines:
            out[coll] = lines
    return out


def sweep_best(rows: Iterable[Row]) -> Table:
    """Per collective and size: NCCL's default, the fastest candidate and its speedup."""
    table = Table(["collective", "size", "default busbw GB/s", "best config", "best busbw GB/s", "speedup"],
                  [], caption="Fastest configuration at each size (median over repetitions)")
    for coll, by_cfg in _by_coll_config(ok_rows(rows, "time_us")).items():
        times = {cfg: medians(cr, "time_us") for cfg, cr in by_cfg.items()}
        bws = {cfg: medians(cr, "busbw_gbps") for cfg, cr in by_cfg.items()}
        for size in sorted({s for t in times.values() for s in t}):
            have = {cfg: t[size] for cfg, t in times.items() if size in t}
            best = min(have, key=lambda c: (have[c], c != "default"))
            base = have.get("default")
            speed = base / have[best] if base else None
            table.rows.append([coll, size_label(size), num(bws.get("default", {}).get(size)), best,
                               num(bws[best].get(size)), ratio_text(speed)])
            table.row_class.append("good" if speed and speed > 1.0 else "")
    return table


def _by_coll_config(rows: list[Row]) -> dict[str, dict[str, list[Row]]]:
    out: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        out[r["collective"]][r.get("config") or "default"].append(r)
    return {c: dict(v) for c, v in sorted(out.items())}


# -- validate ------------------------------------------------------------------------------
@dataclass
class SpeedPoint:
    collective: str
    size_bytes: int
    speedup: float  # default time / rules time
    noise_pct: float
    slower: bool


def validate_points(summary: Mapping[str, Any], rows: Iterable[Row]) -> list[SpeedPoint]:
    """The verdict's per-size speedups; computed from the 'default' and 'rules'
    measurements when the summary has none (noise = half the spread, in % of the median)."""
    if summary.get("sizes"):
        return [SpeedPoint(s["collective"], int(s["size_bytes"]), float(s["speedup"]), _noise_pct(s), _slower(s))
                for s in summary["sizes"] if s.get("speedup") is not None]
    points = []
    for coll, by_cfg in _by_coll_config(ok_rows(rows, "time_us")).items():
        base, rules = by_cfg.get("default", []), by_cfg.get("rules", [])
        tb, tr = medians(base, "time_us"), medians(rules, "time_us")
        for size in sorted(set(tb) & set(tr)):
            noise = max(_spread_pct(base, size), _spread_pct(rules, size))
            speed = tb[size] / tr[size]
            points.append(SpeedPoint(coll, size, speed, noise, speed < 1 - noise / 100))
    return points


def _noise_pct(size: Mapping[str, Any]) -> float:
    """ccltune validate stores ``noise`` as a fraction (ccltune.validate.verdict); older or
    hand-written summaries may carry ``noise_pct``."""
    if size.get("noise") is not None:
        return 100.0 * float(size["noise"])
    return float(size.get("noise_pct") or 0.0)


def _slower(size: Mapping[str, Any]) -> bool:
    """The verdict's own judgement (status FAIL), else an explicit ``slower`` flag."""
    if "status" in size:
        return size["status"] == "FAIL"
    return bool(size.get("slower"))


def _spread_pct(rows: list[Row], size: int) -> float:
    vals = [float(r["time_us"]) for r in rows if r["size_bytes"] == size]
    med = statistics.median(vals)
    return 50.0 * (max(vals) - min(vals)) / med if med else 0.0


def validate_series(points: list[SpeedPoint]) -> dict[str, Series]:
    """collective -> speedup line with a band of +- noise around it, slower sizes marked."""
    out: dict[str, Series] = {}
    for p in sorted(points, key=lambda p: (p.collective, p.size_bytes)):
        s = out.setdefault(p.collective, Series("rules vs default", [], [], lo=[], hi=[], marked=[]))
        s.xs.append(float(p.size_bytes))
        s.ys.append(p.speedup)
        s.lo.append(p.speedup * (1 - p.noise_pct / 100))  # type: ignore[union-attr]
        s.hi.append(p.speedup * (1 + p.noise_pct / 100))  # type: ignore[union-attr]
        s.marked.append(p.slower)  # type: ignore[union-attr]
    return out


# -- links ---------------------------------------------------------------------------------
def slowest_link(links: list[Row], summary: Mapping[str, Any]) -> Row | None:
    """The run's own verdict on the slowest link, else the lowest measured bandwidth."""
    if isinstance(summary.get("slowest"), Mapping):
        return summary["slowest"]
    measured = [r for r in links if r.get("bandwidth_gbps") is not None]
    return min(measured, key=lambda r: r["bandwidth_gbps"]) if measured else None


def link_heatmaps(links: list[Row], summary: Mapping[str, Any]) -> list[Heatmap]:
    """One bandwidth matrix (src rows, dst columns) per method and direction."""
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
        mark = None
        if slow is not None and slow.get("method", method) == method \
                and slow.get("direction", direction) == direction \
                and slow.get("src") in idx and slow.get("dst") in idx:
            mark = (idx[slow["src"]], idx[slow["dst"]])
        maps.append(Heatmap(f"{method.upper()} copy, {'bidirectional' if direction == 'bi' else 'unidirectional'}",
                            "src GPU", "dst GPU", [str(g) for g in gpus], [str(g) for g in gpus],
                            values, "GB/s", mark))
    return maps


# -- findings and environment -------------------------------------------------------------
_STATUS_CLASS = {"PASS": "good", "WARN": "warn", "FAIL": "bad", "ERROR": "bad", "WAIVED": ""}


def findings_table(findings: list[Row]) -> Table:
    t = Table(["status", "check", "evidence", "fix"], [])
    for f in findings:
        status = str(f.get("status", "")).upper()
        t.rows.append([status, str(f.get("name", "")), str(f.get("evidence") or ""), str(f.get("fix") or "")])
        t.row_class.append(_STATUS_CLASS.get(status, ""))
    return t


def status_counts(findings: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for f in findings:
        counts[str(f.get("status", "")).upper()] += 1
    return dict(counts)


_ENV_FACTS = (
    ("host", "host"), ("GPUs", "gpus"), ("driver", "driver_version"), ("CUDA", "cuda_version"),
    ("NCCL", "nccl_version"), ("NCCL library", "nccl_library"), ("torch", "torch_version"),
    ("world size", "world_size"), ("nodes", "n_nodes"), ("launcher", "launcher"),
    ("platform", "platform"), ("ccltune", "ccltune_version"),
)


def gpus_text(gpus: Any) -> str:
    """['H100', 'H100'] or [{'name': 'H100'}, ...] -> '2 x H100'."""
    if not gpus:
        return ""
    if not isinstance(gpus, list):
        return str(gpus)
    names = [g.get("name", str(g)) if isinstance(g, Mapping) else str(g) for g in gpus]
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{c} x {n}" for n, c in counts.items())


def env_table(runs: list[Any]) -> Table:
    """Facts down, runs across (``Run`` records); rows whose values differ are flagged."""
    t = Table(["", *[f"run {r.id} ({r.kind})" for r in runs]], [])

    def add(name: str, values: list[Any]) -> None:
        cells = ["" if v is None else str(v) for v in values]
        if not any(cells):  # a fact no run recorded
            return
        t.rows.append([name, *cells])
        t.row_class.append("warn" if len(runs) > 1 and len(set(cells)) > 1 else "")

    add("status", [r.status for r in runs])
    add("started", [r.started_at for r in runs])
    add("command", [r.env.get("command") or r.command for r in runs])
    for name, key in _ENV_FACTS:
        add(name, [gpus_text(r.env.get("gpus")) if key == "gpus" else r.env.get(key, getattr(r, key, None))
                   for r in runs])
    names = sorted({k for r in runs for k in (r.env.get("variables") or {})})
    for n in names:
        add(n, [(r.env.get("variables") or {}).get(n) for r in runs])
    return t


def num(v: float | None) -> str:
    """Two decimals, or three significant digits below 1 (small-message busbw)."""
    if v is None:
        return ""
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


def ratio_text(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}x"
