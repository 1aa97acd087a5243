"""The report's sections, in page order, built from what was read from the database.
Pure: ``ReportInput`` holds plain records; every section is present even when it has
nothing to show (it then says why), so the page always has the same ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ccltune.report import compare as cmp
from ccltune.report import data, zones
from ccltune.report.axes import size_label
from ccltune.report.model import Block, LineChart, Note, Section, Table, Text, ZoneChart
from ccltune.store import Run

SECTION_IDS = ("env", "bench", "sweep", "rules", "validate", "links", "doctor", "compare")
_NOT_BENCH = {"sweep", "validate", "links", "doctor", "check", "tune"}
_MAX_SIZE = 1 << 40  # rule ranges open to "any size" are drawn up to here


@dataclass
class ReportInput:
    runs: list[Run]
    rows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    links: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    findings: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    artifacts: dict[int, dict[str, str]] = field(default_factory=dict)
    compare: tuple[Run, Run] | None = None
    tolerance_pct: float = cmp.DEFAULT_TOLERANCE_PCT

    def of_kind(self, *kinds: str) -> list[Run]:
        return [r for r in self.runs if r.kind in kinds]


def build_sections(inp: ReportInput) -> list[Section]:
    return [env_section(inp), bench_section(inp), sweep_section(inp), rules_section(inp),
            validate_section(inp), links_section(inp), doctor_section(inp), compare_section(inp)]


def _none(inp: ReportInput, what: str) -> Note:
    ids = ', '.join(str(r.id) for r in inp.runs)
    return Note(f"No {what} among the runs in this report ({ids}).")


def _title(run: Run) -> str:
    host = run.env.get("host") or run.host
    return f"run {run.id} ({run.kind}{', ' + host if host else ''}, {run.started_at})"


def env_section(inp: ReportInput) -> Section:
    s = Section("env", "Environment")
    s.blocks.append(Note("One column per run; rows whose values differ between runs are highlighted."))
    s.blocks.append(data.env_table(inp.runs))
    return s


def bench_section(inp: ReportInput) -> Section:
    s = Section("bench", "Bus bandwidth and time against size")
    runs = [r for r in inp.runs if r.kind not in _NOT_BENCH and inp.rows.get(r.id)]
    rows = [row for r in runs for row in inp.rows[r.id]]
    bw, tm = data.curves(rows, "busbw_gbps"), data.curves(rows, "time_us")
    if not bw and not tm:
        return Section(s.id, s.title, [_none(inp, "measurements of NCCL's default (bench runs)")])
    s.blocks.append(Note(f"Runs {', '.join(str(r.id) for r in runs)}: median over repetitions, NCCL's default configuration."))
    for coll in sorted(set(bw) | set(tm)):
        if coll in bw:
            s.blocks.append(LineChart(f"{coll}: bus bandwidth", "message size", "busbw GB/s", bw[coll]))
        if coll in tm:
            s.blocks.append(LineChart(f"{coll}: time", "message size", "time us", tm[coll]))
    return s


def sweep_section(inp: ReportInput) -> Section:
    s = Section("sweep", "Sweep: every candidate against NCCL's default")
    for run in inp.of_kind("sweep"):
        rows = inp.rows.get(run.id, [])
        s.blocks.append(Note(_title(run)))
        speed = data.sweep_speedups(rows)
        for coll, lines in data.sweep_curves(rows).items():
            s.blocks.append(LineChart(f"run {run.id} {coll}: busbw per configuration (default in black)",
                                      "message size", "busbw GB/s", lines))
            if coll in speed:
                s.blocks.append(LineChart(f"run {run.id} {coll}: speedup over NCCL's default", "message size",
                                          "default time / candidate time", speed[coll], y_log=False, ref_y=1.0))
        if not rows:
            s.blocks.append(Note(f"run {run.id} has no measurements.", "warn"))
        else:
            s.blocks.append(data.sweep_best(rows))
        timing = _time_table(run)
        s.blocks += [timing] if timing is not None else []
    return s if s.blocks else Section(s.id, s.title, [_none(inp, "sweep runs")])


def _time_table(run: Run) -> Table | None:
    """Where the run's time went on rank 0 (sweep and validate summaries since 2026-11-22), or None."""
    phases = run.summary.get("time")
    if not isinstance(phases, dict) or not phases:
        return None
    wall = run.summary.get("wall_s")
    t = Table(["phase", "seconds", "count", "share of the run"], [],
              caption=f"run {run.id}: time on rank 0" + (f", {wall:.1f} s in all" if isinstance(wall, (int, float)) else ""))
    for name, v in phases.items():
        if not isinstance(v, dict):
            continue
        secs = float(v.get("seconds") or 0.0)
        label = name + (f" (in {v['part_of']})" if v.get("part_of") else "")
        share = f"{100 * secs / wall:.0f}%" if isinstance(wall, (int, float)) and wall > 0 else ""
        t.rows.append([label, f"{secs:.1f}", str(v.get("count", "")), share])
    return t


def _size_bounds(inp: ReportInput, rules: list[zones.Rule]) -> tuple[int, int]:
    sizes = [int(r["size_bytes"]) for run in inp.of_kind("sweep") for r in inp.rows.get(run.id, [])]
    if not sizes:
        sizes = [v for r in rules for v in (r.min_bytes, r.max_bytes) if v < _MAX_SIZE]
    return max(1, min(sizes, default=1)), max(sizes, default=1 << 30)


def rules_section(inp: ReportInput) -> Section:
    s = Section("rules", "Tuned rules as zones on the size axis")
    parsed = []
    for run in inp.runs:
        text = inp.artifacts.get(run.id, {}).get("rules")
        if text is not None:
            parsed.append((run, text, *zones.parse_rules(text)))
    if not parsed:
        return Section(s.id, s.title, [_none(inp, "rule files (artifacts named 'rules')")])
    lo, hi = _size_bounds(inp, [r for p in parsed for r in p[2]])
    for run, text, rules, problems in parsed:
        s.blocks.append(Note(f"{_title(run)}: {len(rules)} rules; first match wins, so each zone is the part "
                             "of a rule's range that no earlier rule covers."))
        if rules:
            s.blocks.append(ZoneChart(f"run {run.id}: rules by size", zones.rule_zones(rules), lo, hi))
        for p in problems:
            s.blocks.append(Note(f"rules of run {run.id}, {p} (not drawn)", "warn"))
        s.blocks.append(Text(f"rule file of run {run.id}", text))
    return s


def validate_section(inp: ReportInput) -> Section:
    s = Section("validate", "Validation: tuned rules against NCCL's default")
    for run in inp.of_kind("validate"):
        verdict = str(run.summary.get("status") or run.summary.get("verdict") or "none recorded")
        level = {"PASS": "good", "FAIL": "bad"}.get(verdict.upper(), "warn")
        s.blocks.append(Note(f"{_title(run)}: verdict {verdict}", level))
        points = data.validate_points(run.summary, inp.rows.get(run.id, []))
        timing = _time_table(run)
        if not points:
            s.blocks.append(Note(f"run {run.id} has no speedups (no summary sizes, no default/rules pairs).", "warn"))
            s.blocks += [timing] if timing is not None else []
            continue
        series = data.validate_series(points)
        for coll, line in series.items():
            line.label = coll
        s.blocks.append(LineChart(f"run {run.id}: speedup of the rules (band: noise; red: slower)",
                                  "message size", "default time / rules time", list(series.values()),
                                  y_log=False, ref_y=1.0))
        t = Table(["collective", "size", "speedup", "noise %", "slower"], [])
        for p in points:
            t.rows.append([p.collective, size_label(p.size_bytes), data.ratio_text(p.speedup),
                           f"{p.noise_pct:.1f}", "yes" if p.slower else ""])
            t.row_class.append("bad" if p.slower else ("good" if p.speedup > 1 + p.noise_pct / 100 else ""))
        s.blocks.append(t)
        s.blocks += [timing] if timing is not None else []
    return s if s.blocks else Section(s.id, s.title, [_none(inp, "validate runs")])


def links_section(inp: ReportInput) -> Section:
    s = Section("links", "GPU-to-GPU link bandwidth")
    for run in inp.of_kind("links"):
        links = inp.links.get(run.id, [])
        s.blocks.append(Note(_title(run)))
        slow = data.slowest_link(links, run.summary)
        if slow is not None:
            lat = f", {slow['latency_us']:.3g} us" if slow.get("latency_us") is not None else ""
            bw = slow.get("bandwidth_gbps")
            how = "/".join(str(slow[k]) for k in ("method", "direction") if slow.get(k))
            s.blocks.append(Note(f"Slowest link (outlined in red): GPU {slow.get('src')} -> GPU {slow.get('dst')}"
                                 f"{' ' + how if how else ''}: {bw if bw is None else f'{bw:.4g}'} GB/s{lat}", "warn"))
        if run.summary.get("ceiling_gbps") is not None:
            s.blocks.append(Note(f"Expected ceiling: {run.summary['ceiling_gbps']} GB/s"))
        s.blocks += data.link_heatmaps(links, run.summary) or [Note(f"run {run.id} has no link rows.", "warn")]
    return s if s.blocks else Section(s.id, s.title, [_none(inp, "links runs")])


def doctor_section(inp: ReportInput) -> Section:
    s = Section("doctor", "Doctor and check findings")
    for run in inp.of_kind("doctor", "check"):
        found = inp.findings.get(run.id, [])
        counts = data.status_counts(found)
        level = "bad" if counts.get("FAIL") or counts.get("ERROR") else ("warn" if counts.get("WARN") else "good")
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no findings"
        s.blocks.append(Note(f"{_title(run)}: {summary}", level))
        if found:
            s.blocks.append(data.findings_table(found))
    return s if s.blocks else Section(s.id, s.title, [_none(inp, "doctor or check runs")])


def compare_section(inp: ReportInput) -> Section:
    s = Section("compare", "Two runs side by side")
    if inp.compare is None:
        return Section(s.id, s.title, [Note("No comparison requested: `ccltune report --compare A B` puts run B "
                                            "next to run A, per size, with regressions highlighted.")])
    a, b = inp.compare
    c = cmp.compare(inp.rows.get(a.id, []), inp.rows.get(b.id, []), inp.tolerance_pct)
    env = data.env_table([a, b])
    differ = Table(env.columns, [row for row, cls in zip(env.rows, env.row_class) if cls],
                   caption="Environment facts that differ")
    blocks: list[Block] = [Note(f"A = {_title(a)}; B = {_title(b)}. Ratio = time A / time B: above 1, B is faster.")]
    blocks.append(differ if differ.rows else Note("The two environments record the same facts."))
    if not c.points:
        blocks.append(Note("The runs share no measured point (same collective, size, dtype, op, placement, ranks).", "warn"))
        return Section(s.id, s.title, blocks)
    reg = c.regressions
    blocks.append(Note(f"{len(reg)} of {len(c.points)} points regress by more than {c.tolerance_pct:g}%"
                       + (f"; {c.only_a} only in A, {c.only_b} only in B" if c.only_a or c.only_b else ""),
                       "bad" if reg else "good"))
    band = (1 - c.tolerance_pct / 100, 1 + c.tolerance_pct / 100)
    for coll, lines in cmp.compare_series(c).items():
        blocks.append(LineChart(f"{coll}: run {b.id} vs run {a.id} (grey band: tolerance; red: regression)",
                                "message size", "time A / time B", lines, y_log=False, ref_y=1.0, ref_band=band))
    blocks.append(cmp.compare_table(c, a.id, b.id))
    return Section(s.id, s.title, blocks)
