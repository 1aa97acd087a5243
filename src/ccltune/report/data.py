"""Pure functions from database rows (plain dicts, as ``Store.measurement_rows``,
``Store.links`` and ``Store.findings`` return them) to plot series and tables.

Conventions: a point is the median over repetitions of rows with status 'ok'; NCCL's own
choice is ``config == 'default'``; a speedup or ratio above 1 means faster. Collectives are
grouped by the registry's name (``canonical``, through ``collectives.canonical``), so imported rows spelled
``allreduce`` or ``AllReduce`` land on the same plot as ``all_reduce``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccltune import collectives
from ccltune.report.axes import size_label
from ccltune.report.model import Series, Table
from ccltune.status import RowStatus, Verdict

Row = Mapping[str, Any]

# Row fields that tell two curves of one collective apart, and how a label spells them.
_CURVE_KEYS = ("run_id", "in_place", "dtype", "op", "n_ranks", "n_nodes", "graph")
_KEY_TEXT: dict[str, Callable[[Any], str]] = {
    "run_id": lambda v: f"run {v}",
    "in_place": lambda v: "in-place" if v else "out-of-place",
    "dtype": str,
    "op": lambda v: str(v) if v else "no op",
    "n_ranks": lambda v: f"{v} ranks",
    "n_nodes": lambda v: f"{v} node{'' if v == 1 else 's'}",
    "graph": lambda v: "graph" if v else "no graph",
}


def canonical(name: Any) -> str:
    """Our name of a stored collective, however the rows spell it (``collectives.canonical``);
    a name the registry does not know is shown as stored."""
    return collectives.canonical(str(name)) or str(name)


def ring_bound(name: Any) -> bool:
    """Whether a collective's busbw is bounded by the slowest-link ceiling (``Collective.ring_bound``)."""
    c = collectives.REGISTRY.get(canonical(name))
    return bool(c is not None and c.ring_bound)


RING_BOUND = tuple(n for n, c in collectives.REGISTRY.items() if c.ring_bound)  # all_reduce, all_gather, ...
RING_BOUND_TEXT = ", ".join(RING_BOUND)


def ok_rows(rows: Iterable[Row], metric: str) -> list[Row]:
    return [r for r in rows if r.get("status") == RowStatus.OK and r.get(metric) is not None]


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


def curves(rows: Iterable[Row], metric: str, colors: Mapping[int, int] | None = None) -> dict[str, list[Series]]:
    """collective -> one line per run (and placement, dtype... where those differ) of
    ``metric`` against size, using NCCL's default configuration only; the lines over most sizes first,
    the latest run first among equals.
    ``colors``: run id -> palette index, so a run keeps its colour on every plot. A size a
    line was run at without a drawable value (a row not 'ok', no value, 0 on the log axis)
    is a gap, named in ``Series.gaps``."""
    by_coll: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if (r.get("config") or "default") == "default":
            by_coll[canonical(r["collective"])].append(r)
    out: dict[str, list[Series]] = {}
    for coll, crows in sorted(by_coll.items()):
        groups, varying = _split(crows, _CURVE_KEYS)
        if "run_id" not in varying:
            varying.insert(0, "run_id")
        both = "in_place" in varying
        lines = []
        for g, gr in sorted(groups.items(), key=lambda kv: (-(kv[0][0] or 0), str(kv[0][1:]))):
            s = _series(_label(_CURVE_KEYS, g, varying), {k: v for k, v in medians(gr, metric).items() if v > 0},
                        gaps=_gaps(gr, metric), dashed=both and bool(g[1]), group=f"r{g[0]}",
                        color=None if colors is None else colors.get(g[0]))
            if not s.xs and all(r.get("status") == RowStatus.WAIVED for r in gr):  # one line, not a gap at every size
                s.gaps, s.waived = [], next((str(r["note"]) for r in gr if r.get("note")), "no reason recorded")
            if s.xs or s.gaps or s.waived:
                lines.append(s)
        # a plot shows its first LineChart.max_visible series: the run over most sizes first (the main result:
        # a dozen later runs of one or two sizes had hidden a bench over 8 B-32 MB), the latest among equals
        lines.sort(key=lambda s: -len(s.xs))  # stable: the latest first is kept among equals
        if any(s.xs for s in lines):
            out[coll] = lines
    return out


NoValue = tuple[dict[str, int], str]  # (row status -> sizes with it, the first note), see ``no_value``
_STATUS_WORD: dict[str, str] = {RowStatus.OK: "ok but no busbw"}


def no_value(rows: Iterable[Row]) -> dict[tuple[int, str], NoValue]:
    """(run id, collective) -> (status -> number of sizes, the first note) for each collective of a
    run whose rows of NCCL's default hold no positive busbw at any size (every size errored, was
    waived...): none of it can be drawn, so the page says so instead of leaving it out."""
    sizes: dict[tuple[int, str], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    notes: dict[tuple[int, str], str] = {}
    good: set[tuple[int, str]] = set()
    for r in rows:
        if (r.get("config") or "default") != "default":
            continue
        key = (int(r["run_id"]), canonical(r["collective"]))
        if r.get("status") == RowStatus.OK and (r.get("busbw_gbps") or 0) > 0:
            good.add(key)
            continue
        sizes[key][str(r.get("status"))].add(int(r["size_bytes"]))
        if r.get("note"):
            notes.setdefault(key, str(r["note"]))
    return {k: ({s: len(v) for s, v in sorted(st.items())}, notes.get(k, "")) for k, st in sizes.items()
            if k not in good}


def no_value_text(collective: str, found: NoValue) -> str:
    """'reduce_scatter: no value at any size (error x3: timeout)'."""
    counts, note = found
    what = ", ".join(f"{_STATUS_WORD.get(s, s)} x{n}" for s, n in counts.items())
    return f"{collective}: no value at any size ({what}{': ' + note[:120] if note else ''})"


def _gaps(rows: list[Row], metric: str) -> list[tuple[float, str]]:
    """(size, why) for each size of ``rows`` with no positive 'ok' value of ``metric``."""
    why: dict[int, set[str]] = defaultdict(set)
    good: set[int] = set()
    for r in rows:
        size, v = int(r["size_bytes"]), r.get(metric)
        if r.get("status") == RowStatus.OK and v is not None and v > 0:
            good.add(size)
        elif r.get("status") != RowStatus.OK:
            why[size].add(f"status {r.get('status')}")
        else:
            why[size].add("no value" if v is None else f"{v:g}, below a log axis")
    return [(float(s), ", ".join(sorted(w))) for s, w in sorted(why.items()) if s not in good]


def _candidate_order(by_cfg: Mapping[str, list[Row]]) -> list[str]:
    """The swept candidates in legend order: those fastest at some size first (a plot shows its
    first ``LineChart.max_visible`` series, so the winners are never among the hidden ones),
    then the others, each by name; NCCL's default is not a candidate. Both sweep plots use this
    order, so a candidate has one colour on both."""
    times = {cfg: medians(cr, "time_us") for cfg, cr in by_cfg.items() if cfg != "default"}
    winners = {min((c for c in times if size in times[c]), key=lambda c: times[c][size])
               for size in {s for t in times.values() for s in t}}
    return sorted(times, key=lambda c: (c not in winners, c))


def sweep_curves(rows: Iterable[Row], metric: str = "busbw_gbps") -> dict[str, list[Series]]:
    """collective -> one line per swept configuration (winners first), NCCL's default emphasised
    and last."""
    out: dict[str, list[Series]] = {}
    for coll, by_cfg in _by_coll_config(ok_rows(rows, metric)).items():
        order = _candidate_order(by_cfg) + (["default"] if "default" in by_cfg else [])
        out[coll] = [_series(cfg, medians(by_cfg[cfg], metric), emphasis=cfg == "default") for cfg in order]
    return out


def sweep_speedups(rows: Iterable[Row]) -> dict[str, list[Series]]:
    """collective -> per candidate (winners first), default time / candidate time at each size both have."""
    out: dict[str, list[Series]] = {}
    for coll, by_cfg in _by_coll_config(ok_rows(rows, "time_us")).items():
        base = medians(by_cfg.get("default", []), "time_us")
        lines = []
        for cfg in _candidate_order(by_cfg):
            cr = by_cfg[cfg]
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
        out[canonical(r["collective"])][r.get("config") or "default"].append(r)
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
        return [SpeedPoint(canonical(str(s["collective"])), int(s["size_bytes"]), float(s["speedup"]), _noise_pct(s), _slower(s))
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
        return size["status"] == Verdict.FAIL
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


# -- findings and environment -------------------------------------------------------------
_STATUS_CLASS: dict[str, str] = {Verdict.PASS: "good", Verdict.WARN: "warn", Verdict.FAIL: "bad", Verdict.ERROR: "bad", Verdict.WAIVED: ""}


def findings_table(findings: Sequence[Row]) -> Table:
    t = Table(["status", "check", "evidence", "fix"], [])
    for f in findings:
        status = str(f.get("status", "")).upper()
        t.rows.append([status, str(f.get("name", "")), str(f.get("evidence") or ""), str(f.get("fix") or "")])
        t.row_class.append(_STATUS_CLASS.get(status, ""))
    return t


def status_counts(findings: Sequence[Row]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for f in findings:
        counts[str(f.get("status", "")).upper()] += 1
    return dict(counts)


# (label, env key): what a run ran on, in the order shown. Imports carry what their files
# name (host, GPU model, NCCL or RCCL version, library path, the tool and its version).
_ENV_FACTS = (
    ("driver", "driver_version"), ("CUDA", "cuda_version"), ("HIP", "hip_version"), ("ROCm", "rocm_version"),
    ("NCCL", "nccl_version"), ("RCCL", "rccl_version"), ("library", "nccl_library"), ("library", "library_path"),
    ("torch", "torch_version"), ("world size", "world_size"), ("nodes", "n_nodes"), ("launcher", "launcher"),
    ("engine", "engine"), ("source", "source"), ("source version", "tool_version"), ("ccltune", "ccltune_version"),
)


def gpu_names(gpus: Any) -> list[str]:
    if not isinstance(gpus, list):
        return [str(gpus)] if gpus else []
    return [str(g.get("name", g)) if isinstance(g, Mapping) else str(g) for g in gpus]


def gpus_text(gpus: Any, world_size: int | None = None) -> str:
    """['H100', 'H100'] or [{'name': 'H100'}, ...] -> '2 x H100'. ``gpus`` are the GPUs rank 0's
    host shows; with a ``world_size`` that differs (two hosts of one name, CUDA_VISIBLE_DEVICES)
    the job's ranks come first, so the count agrees with the platform ('NVIDIA H200 x4')."""
    names = gpu_names(gpus)
    if not names:
        return ""
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    seen = ", ".join(f"{c} x {n}" for n, c in counts.items())
    if world_size and world_size != len(names) and len(counts) == 1:
        return f"{world_size} x {names[0]} ({len(names)} visible on rank 0's host)"
    return seen


def host_text(run: Any) -> str:
    env = run.env
    hosts = env.get("hosts")
    if isinstance(hosts, list) and len(set(map(str, hosts))) > 1:
        return ", ".join(sorted(set(map(str, hosts))))
    return str(env.get("host") or run.host or (hosts[0] if isinstance(hosts, list) and hosts else "") or "")


def platform_text(run: Any) -> str:
    """The stored platform; for a node-wide command (no world size: links, doctor, topo) recorded
    by an older ccltune as 'model x1', the node's GPUs instead, so it agrees with the GPUs row."""
    from ccltune.environment import platform_name

    stored = run.env.get("platform") or run.platform or ""
    names = gpu_names(run.env.get("gpus"))
    if not run.env.get("world_size") and names and stored.endswith(" x1") and len(names) > 1:
        return platform_name([{"name": names[0]}] * len(names), None, 1)
    return stored


def status_text(run: Any) -> str:
    note = getattr(run, "note", "")
    return f"{run.status} ({note})" if note else str(run.status)


def user_variables(env: Mapping[str, Any]) -> dict[str, str]:
    """The run's recorded NCCL_*/RCCL_*/... variables, without ccltune's own plumbing, and, for a run
    that did not record which names its parent's environment had (``variables_from``), without the
    value its launcher sets when the user did not (``LAUNCHER_DEFAULTS``: torchrun's
    TORCH_NCCL_ASYNC_ERROR_HANDLING=1)."""
    from ccltune.environment import INTERNAL_VARIABLES, LAUNCHER_DEFAULTS

    added = LAUNCHER_DEFAULTS.get(str(env.get("launcher")), {}) if env.get("variables_from") != "parent" else {}
    return {k: str(v) for k, v in sorted((env.get("variables") or {}).items())
            if k not in INTERNAL_VARIABLES and added.get(k) != str(v)}


def run_facts(run: Any) -> dict[str, str]:
    """label -> value of everything known about where a run ran (empty values left out)."""
    env = run.env
    facts = {"host": host_text(run), "GPUs": gpus_text(env.get("gpus"), env.get("world_size")),
             "platform": platform_text(run)}
    for label, key in _ENV_FACTS:
        v = env.get(key, getattr(run, key, None))
        if v not in (None, "", []):
            facts[label] = facts[label] + ", " + str(v) if label in facts and str(v) not in facts[label] else str(v)
    facts.update(user_variables(env))
    return {k: v for k, v in facts.items() if v}


def command_text(run: Any) -> str:
    return " ".join(str(run.env.get("command") or run.command).split())


def env_tables(runs: list[Any]) -> tuple[Table, Table]:
    """(facts every run shares, one row per run of the facts that differ). Commands are
    shown elsewhere (one line each), not here."""
    facts = {r.id: run_facts(r) for r in runs}
    names = list(dict.fromkeys(k for f in facts.values() for k in f))
    same = [n for n in names if len({facts[r.id].get(n, "") for r in runs}) == 1]
    differ = [n for n in names if n not in same]
    shared = Table(["fact", "value"], [[n, facts[runs[0].id][n]] for n in same],
                   caption=f"Shared by all {len(runs)} runs" if len(runs) > 1 else "")
    rows = [[f"{r.id}", r.kind, *[facts[r.id].get(n, "—") for n in differ]] for r in runs]
    table = Table(["run", "kind", *differ], rows if differ else [], wide=True,
                  caption="What differs between the runs (— : not recorded)")
    return shared, table


def env_table(runs: list[Any]) -> Table:
    """Facts down, runs across (``Run`` records); rows whose values differ are flagged
    (``--compare``'s two runs)."""
    t = Table(["", *[f"run {r.id} ({r.kind})" for r in runs]], [])
    facts = [{"status": status_text(r), "command": command_text(r), **run_facts(r)} for r in runs]
    for name in dict.fromkeys(k for f in facts for k in f):
        cells = [f.get(name, "") for f in facts]
        t.rows.append([name, *cells])
        t.row_class.append("warn" if len(runs) > 1 and len(set(cells)) > 1 else "")
    return t


def num(v: float | None) -> str:
    """Two decimals, or three significant digits below 1 (small-message busbw)."""
    if v is None:
        return ""
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


def ratio_text(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}x"
