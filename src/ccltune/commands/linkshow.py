"""``ccltune links --run N``: a stored links run, measured or imported, shown again (read-only).

For every series (method/direction): the matrix, then per GPU its slowest outgoing link, the
bound it sets (slowest x peers), the plain sum of its links, and, when the importing tool printed
its own per-GPU figures (TransferBench a2a: STotal, Actual), those beside ours; then the node's
ceiling (the smallest bound) and the links below ``--threshold`` x median. Imported figures keep
the precision the tool printed them with. ``render_matrix`` is the one matrix layout of measured
and stored runs (``commands.links`` prints the measured ones with it).
"""

from __future__ import annotations

from typing import Any

from ccltune.commands.common import Console
from ccltune.commands.diagnosis import LinksResult
from ccltune.diagnose.checks import linkmath
from ccltune.diagnose.checks.linkmath import analyze_stored
from ccltune.diagnose.findings import format_findings
from ccltune.diagnose.record import write_json
from ccltune.errors import UsageError
from ccltune.store import Store

IMPORTED_KEYS = ("source", "tool_version", "tests", "method_info", "printed_decimals", "tool_figures", "notes")


def show(db: str, run_id: int, threshold: float, json_path: str | None, console: Console) -> LinksResult:
    """Say stored links run ``run_id`` of ``db`` again, its slow links those below ``threshold`` x median;
    write its record to ``json_path`` when given. Nothing is stored."""
    with Store(db, readonly=True) as store:
        run = store.run(run_id)
        if run.kind != "links":
            raise UsageError(f"run {run_id} is a {run.kind} run, not a links run (ccltune runs lists them)")
        rows = store.links(run_id)
    imported = {k: run.summary[k] for k in IMPORTED_KEYS if k in run.summary}
    summary, findings = analyze_stored(rows, imported, threshold=threshold)
    console.say(render(run, rows, summary))
    console.say(format_findings(findings, title=f"ccltune links --run {run_id} checks"))
    record = {"run": run.id, "rows": rows, "summary": summary, "checks": [f.to_record() for f in findings]}
    if json_path:
        write_json(json_path, record)
    return LinksResult(findings, record, db, json_path=json_path)


def render_matrix(rows: list[dict[str, Any]], n: int, method: str, direction: str, key: str = "bandwidth_gbps",
                  decimals: int = 2) -> str:
    """One matrix layout for measured and stored links runs: rows are sources, columns destinations. A pair
    measured twice (TransferBench p2p's bidirectional table) shows its worse value, as the analysis uses it."""
    cells, repeated = linkmath.cells(rows, method, direction, key)
    unit = "us" if key == "latency_us" else "GB/s"
    width = max(9, decimals + 7)
    twice = (f"; {repeated} pairs measured twice (from the s<->d and the d<->s run) show the "
             f"{'higher' if key == 'latency_us' else 'lower'} value") if repeated else ""
    lines = [f"# {method} {direction} ({unit}), row = source, column = destination{twice}",
             "src\\dst" + "".join(f"{d:>{width}}" for d in range(n))]
    for s in range(n):
        lines.append(f"{s:>7}" + "".join(f"{'-' if (s, d) not in cells else f'{cells[(s, d)]:.{decimals}f}':>{width}}"
                                         for d in range(n)))
    return "\n".join(lines)


def render(run: Any, rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    n = max((max(r["src"], r["dst"]) + 1 for r in rows), default=0)
    source = summary.get("source") or "ccltune links"
    version = f" {summary['tool_version']}" if summary.get("tool_version") else ""
    names = sorted({str(g["name"]) for g in run.env.get("gpus") or [] if isinstance(g, dict) and g.get("name")})
    lines = [f"# links run {run.id}: {n} GPUs{' x ' + ', '.join(names) if names else ''}, from {source}{version}"
             f" ({run.started_at})"]
    for method, info in (summary.get("method_info") or {}).items():
        lines.append(f"# method {method}: " + ", ".join(f"{k}={v}" for k, v in _flat(info)))
    decimals = summary.get("printed_decimals") or {}
    figures = summary.get("tool_figures") or {}
    for name, series in summary["series"].items():
        method, direction = name.split("/")
        places = decimals.get(name, 2)
        lines.append(render_matrix(rows, n, method, direction, decimals=places))
        lines += _bounds(name, series, places, figures.get(name) or {})
    if "ring_ceiling_gbps" in summary:
        lines.append(f"# node ceiling (smallest bound, ring collectives): {summary['ring_ceiling_gbps']:.{_places(summary, decimals)}f}"
                     " GB/s per GPU")
    for note in summary.get("notes") or []:
        lines.append(f"# note: {note}")
    return "\n".join(lines)


def _bounds(name: str, series: dict[str, Any], places: int, tool: dict[str, Any]) -> list[str]:
    stotal, actual = tool.get("stotal_gbps") or {}, tool.get("actual_gbps") or {}
    head = f"# {name}: per GPU, bound = slowest outgoing link x peers; sum = plain sum of its links"
    if actual:
        head += "; tool_* = the tool's own STotal and Actual as printed"
    lines = [head, f"{'gpu':>5} {'slowest_GBps':>13} {'to':>4} {'peers':>6} {'bound_GBps':>11} {'sum_GBps':>11}"
             + (f" {'tool_STotal':>12} {'tool_Actual':>12} {'agrees':>7}" if actual else "")]
    for b in series["per_gpu"]:
        line = (f"{b['gpu']:>5} {b['slowest_gbps']:>13.{places}f} {b['slowest_peer']:>4} {b['peers']:>6} "
                f"{b['bound_gbps']:>11.{places}f} {b['sum_gbps']:>11.{places}f}")
        if actual:
            ta, ts = actual.get(str(b["gpu"])), stotal.get(str(b["gpu"]))
            # the tool multiplies before rounding: agree within half a printed unit per peer
            ok = ta is not None and abs(ta - b["bound_gbps"]) <= b["peers"] * 0.5 * 10 ** -places + 1e-9
            line += (f" {'-' if ts is None else f'{ts:.{places}f}':>12} {'-' if ta is None else f'{ta:.{places}f}':>12}"
                     f" {'yes' if ok else 'NO':>7}")
        lines.append(line)
    lines.append(f"# {name}: ceiling {series['ring_ceiling_gbps']:.{places}f} GB/s (GPU "
                 f"{min(series['per_gpu'], key=lambda b: b['bound_gbps'])['gpu']}), median link "
                 f"{series['median_gbps']:.{places}f}, slowest {series['min_gbps']:.{places}f}")
    for s in series["slow_links"]:
        lines.append(f"#   below threshold: {s['src']}->{s['dst']} {s['gbps']:.{places}f} GB/s "
                     f"({s['ratio']:.0%} of median)")
    return lines


def _places(summary: dict[str, Any], decimals: dict[str, int]) -> int:
    return max(decimals.values(), default=2) if summary.get("source") else 1


def _flat(info: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in info.items():
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((prefix + k, v))
    return out
