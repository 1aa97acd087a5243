"""The report's sections, in page order, built from what was read from the database.
Pure: ``ReportInput`` holds plain records; every section is built even when it has nothing to
show (it is then marked ``empty`` and says why); the page leaves those out and names them, with
why, in one table at its end (``left_out``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ccltune.report import abview, data, linkdata, verdict, workload, zones
from ccltune.report import compare as cmp
from ccltune.report.axes import size_label
from ccltune.report.model import Block, LineChart, Note, Picker, Section, Table, Text, ZoneChart
from ccltune.status import RunStatus, Verdict
from ccltune.store import Run

# (heading, (section id, label)) of the navigation bar: the page answers in this order
NAV_GROUPS = (("Verdict", [("verdict", "cards")]),
              ("Against the hardware", [("bench", "busbw"), ("links", "links")]),
              ("Tuning", [("rules", "rules"), ("validate", "validation"), ("ab", "your job"), ("sweep", "sweep")]),
              ("Details", [("doctor", "findings"), ("runs", "runs"), ("env", "environment"), ("compare", "compare")]))
SECTION_IDS = tuple(sid for _, items in NAV_GROUPS for sid, _ in items)  # the page's sections, in order
# the page's navigation: the sections shown, then the table of those left out (``left_out``)
PAGE_NAV = (*NAV_GROUPS[:-1], (NAV_GROUPS[-1][0], [*NAV_GROUPS[-1][1], ("left-out", "not shown")]))
_NOT_BENCH = {"sweep", "validate", "replay", "ab", "links", "doctor", "topo", "tune"}
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
    # Runs drawn in full (the latest N; None: all); the others are summarised (section 'runs')
    drawn: set[int] | None = None
    # run id -> collective -> highest busbw (GB/s) of NCCL's default, over every run in ``runs``
    peaks: dict[int, dict[str, float]] = field(default_factory=dict)
    # run id -> collective -> (row status -> sizes, a note) where NCCL's default has no value at any size
    no_value: dict[int, dict[str, data.NoValue]] = field(default_factory=dict)
    # run id -> its runs of the user's job (``ccltune ab`` runs drawn in full)
    ab: dict[int, list[Any]] = field(default_factory=dict)

    def of_kind(self, *kinds: str) -> list[Run]:
        return [r for r in self.runs if r.kind in kinds and self.is_drawn(r)]

    def is_drawn(self, run: Run) -> bool:
        return self.drawn is None or run.id in self.drawn

    def measured(self) -> list[Run]:
        """Drawn runs whose default rows are drawn on the busbw plots, the latest first."""
        return sorted((r for r in self.runs if r.kind not in _NOT_BENCH and self.is_drawn(r) and self.rows.get(r.id)),
                      key=lambda r: -r.id)

    def run_colors(self) -> dict[int, int]:
        return {r.id: i for i, r in enumerate(self.measured())}


def build_sections(inp: ReportInput) -> list[Section]:
    return [verdict_section(inp), bench_section(inp), links_section(inp), rules_section(inp),
            validate_section(inp), ab_section(inp), sweep_section(inp), doctor_section(inp), runs_section(inp),
            env_section(inp), compare_section(inp)]


def picker_groups(inp: ReportInput) -> list[tuple[str, str, str]]:
    """The run picker: (group, label, colour) per run drawn on the busbw plots."""
    from ccltune.report.svg import PALETTE

    colors = inp.run_colors()
    return [(f"r{r.id}", _short(r), PALETTE[colors[r.id] % len(PALETTE)]) for r in inp.measured()]


def _none(inp: ReportInput, what: str) -> Note:
    ids = verdict.ids_text(sorted(r.id for r in inp.runs))
    return Note(f"No {what} among the runs in this report ({ids}).")


def _empty(s: Section, inp: ReportInput, what: str) -> Section:
    """``s`` with nothing to show: its one note says what is missing; the page leaves it out (``left_out``)."""
    return Section(s.id, s.title, [_none(inp, what)], empty=True)


def left_out(sections: list[Section]) -> Section | None:
    """One short section naming the sections that have nothing to show, each with why, instead of a heading and
    a 'No ...' line apiece (a bench-only database had seven such sections); None when every section has data."""
    empty = [s for s in sections if s.empty]
    if not empty:
        return None
    t = Table(["section", "why it is not shown"], [[s.title, " ".join(b.text for b in s.blocks if isinstance(b, Note))]
                                                   for s in empty], caption="Sections with nothing to show")
    return Section("left-out", "Not in this report", [t])


def _title(run: Run) -> str:
    host = data.host_text(run)
    return f"run {run.id} ({run.kind}{', ' + host if host else ''}, {run.started_at})"


def _short(run: Run) -> str:
    """'run 12 import, node-a, 4 x NVIDIA H200'."""
    gpus = data.gpus_text(run.env.get("gpus"), run.env.get("world_size"))
    return ", ".join(p for p in (f"run {run.id} {run.kind}", data.host_text(run), gpus) if p)


def verdict_section(inp: ReportInput) -> Section:
    s = Section("verdict", "Verdict")
    found = verdict.cards(inp.runs, inp.findings, inp.peaks, inp.no_value)
    if not found:
        return _empty(s, inp, "run that names its host or GPUs")
    s.blocks.append(Note("One card per node (host and GPU model) and run group (rank count and NCCL or RCCL "
                         "version), from the latest stored run of each kind in it; doctor, links and topo runs "
                         "count for every group of their node. The worst first."))
    s.blocks += found
    return s


def _ceilings(inp: ReportInput, runs: list[Run]) -> list[tuple[float, str]]:
    """Slowest-link ceilings to draw on the busbw plots of ``data.RING_BOUND``: for each drawn measurement run, the
    latest links run whose ceiling bounds that job (same host, one node, the GPUs it used:
    ``verdict.ceiling_why_not``)."""
    links = [r for r in inp.runs if r.kind == "links" and verdict.link_ceiling(r)]
    out: dict[int, tuple[float, str]] = {}
    for r in runs:
        run, _ = verdict.ceiling_for(r, links)
        if run is not None and run.id not in out:
            c, basis = verdict.link_ceiling(run), linkdata.ceiling_basis(run.summary)
            assert c, "links: runs with a ceiling"
            how = f" ({basis.product()})" if basis else ""
            out[run.id] = (c, f"ceiling {data.num(c)} GB/s{how}: {verdict.node_text(run)} (links run {run.id})")
    return list(out.values())


def bench_section(inp: ReportInput) -> Section:
    s = Section("bench", "Against the hardware: bus bandwidth against size")
    runs = inp.measured()
    rows = [row for r in runs for row in inp.rows[r.id]]
    colors = inp.run_colors()
    bw, tm = data.curves(rows, "busbw_gbps", colors), data.curves(rows, "time_us", colors)
    # a collective no drawn run has a value of at any size would vanish from the plots: said instead
    lost = [Note(f"{data.no_value_text(coll, found)} in run {run_id}: nothing to plot.", "warn")
            for (run_id, coll), found in sorted(data.no_value(rows).items(), key=lambda kv: (kv[0][1], -kv[0][0]))
            if coll not in bw and coll not in tm]
    if not bw and not tm:
        return (Section(s.id, s.title, [_none(inp, "measurements of NCCL's default (bench or import runs)"), *lost])
                if lost else _empty(s, inp, "measurements of NCCL's default (bench or import runs)"))
    s.blocks.append(Picker(picker_groups(inp)))
    s.blocks.append(Note("Median over repetitions, NCCL's default configuration; one colour per run, in-place "
                         "dashed. A run of fewer than 3 sizes is drawn as points. Click a legend entry to hide or "
                         "show its line. The busbw plots of " + data.RING_BOUND_TEXT + " carry the slowest-link "
                         "ceiling (dash-dot) of the links run, measured or imported, that bounds each run's job "
                         "(same host, one node, the GPUs its ranks used): their busbw is normalised to what a ring "
                         "moves over each GPU's links, which that ceiling bounds."))
    s.blocks += lost
    for coll in sorted(set(bw) | set(tm)):
        if coll in bw:
            mine = sorted({ln.group for ln in bw[coll]})
            refs = _ceilings(inp, [r for r in runs if f"r{r.id}" in mine]) if data.ring_bound(coll) else []
            s.blocks.append(LineChart.of(f"{coll}: bus bandwidth", "message size", "busbw GB/s", bw[coll], refs=refs))
    for coll in sorted(tm):
        s.blocks.append(LineChart.of(f"{coll}: time", "message size", "time us", tm[coll]))
    return s


def sweep_section(inp: ReportInput) -> Section:
    s = Section("sweep", "Tuning: every swept candidate against NCCL's default")
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
    return s if s.blocks else _empty(s, inp, "sweep runs")


def _time_table(run: Run) -> Table | None:
    """Where the run's time went on rank 0 (sweep and validate summaries record it; older ones do not: None)."""
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
    s = Section("rules", "Tuning: rules as zones on the size axis")
    parsed = []
    for run in inp.runs:
        text = inp.artifacts.get(run.id, {}).get("rules") if inp.is_drawn(run) else None
        if text is not None:
            parsed.append((run, text, *zones.parse_rules(text)))
    if not parsed:
        return _empty(s, inp, "rule files (artifacts named 'rules')")
    lo, hi = _size_bounds(inp, [r for p in parsed for r in p[2]])
    first: dict[str, int] = {}  # rule file text -> the run that showed it first
    for run, text, rules, problems in parsed:
        if text in first:  # validate and replay store the file they ran with: drawn once
            s.blocks.append(Note(f"{_title(run)} ran with the rule file of run {first[text]} (drawn above)."))
            s.blocks += workload.tune_tables(run)
            continue
        first[text] = run.id
        s.blocks.append(Note(f"{_title(run)}: {len(rules)} rules; first match wins, so each zone is the part "
                             "of a rule's range that no earlier rule covers."))
        if rules:
            s.blocks.append(ZoneChart(f"run {run.id}: rules by size", zones.rule_zones(rules), lo, hi))
        for p in problems:
            s.blocks.append(Note(f"rules of run {run.id}, {p} (not drawn)", "warn"))
        s.blocks.append(Text(f"rule file of run {run.id}", text))
        s.blocks += workload.tune_tables(run)
    return s


def validate_section(inp: ReportInput) -> Section:
    s = Section("validate", "Tuning: the rules against NCCL's default")
    for run in inp.of_kind("validate"):
        word = str(run.summary.get("status") or run.summary.get("verdict") or "none recorded")
        level = verdict.PASS_FAIL_LEVEL.get(word.upper(), "warn")
        s.blocks.append(Note(f"{_title(run)}: verdict {word}", level))
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
        t = Table(["collective", "size", "speedup", "noise %", "slower"], [],
                  folded=f"run {run.id}: speedup per size (table)")
        for p in points:
            t.rows.append([p.collective, size_label(p.size_bytes), data.ratio_text(p.speedup),
                           f"{p.noise_pct:.1f}", "yes" if p.slower else ""])
            t.row_class.append("bad" if p.slower else ("good" if p.speedup > 1 + p.noise_pct / 100 else ""))
        s.blocks.append(t)
        s.blocks += [timing] if timing is not None else []
    s.blocks += _replays(inp)
    return s if s.blocks else _empty(s, inp, "validate or replay runs")


def ab_section(inp: ReportInput) -> Section:
    s = Section("ab", "Tuning: your own job, A/B (ccltune ab)")
    for run in inp.of_kind("ab"):
        s.blocks += abview.blocks(run, inp.ab.get(run.id, []), _title(run))
    return s if s.blocks else _empty(s, inp, "ab runs (ccltune ab -- <your job>)")


def _replays(inp: ReportInput) -> list[Block]:
    """``replay`` runs: the verdict, communication time per step both ways, the entries by share."""
    out: list[Block] = []
    for run in inp.of_kind("replay"):
        status = str(run.summary.get("status") or "none recorded")
        stats = {arm: run.summary.get(f"{arm}_us_per_step") for arm in ("default", "rules")}
        both = ", ".join(f"{arm} {st['median_us']:.1f} us ± {100 * float(st.get('noise') or 0):.2g}%"
                         for arm, st in stats.items() if isinstance(st, dict) and st.get("median_us") is not None)
        out.append(Note(f"{_title(run)}: replay verdict {status}" + (f"; communication per step: {both}" if both else "")
                        + (f" ({run.summary['reason']})" if run.summary.get("reason") else ""),
                        verdict.PASS_FAIL_LEVEL.get(status.upper(), "info")))
        table = workload.replay_table(run)
        out += [table] if table is not None else []
    return out


def links_section(inp: ReportInput) -> Section:
    s = Section("links", "Against the hardware: GPU-to-GPU link bandwidth")
    for run in inp.of_kind("links"):
        links = inp.links.get(run.id, [])
        src = run.env.get("source") if run.command.startswith("ccltune import") else None
        how = f"imported from {src} {run.env.get('tool_version') or ''}".strip() if src else "measured by ccltune links"
        s.blocks.append(Note(f"{_title(run)}: {data.gpus_text(run.env.get('gpus'))}, {how}"))
        slow = linkdata.slowest_link(links, run.summary)
        basis = linkdata.ceiling_basis(run.summary)
        if slow is not None:
            what = f"Slowest link of {basis.series}, the ceiling's method and direction" if basis else "Slowest link"
            s.blocks.append(Note(f"{what} (outlined in red): {_link_text(slow, kind=basis is None)}", "warn"))
        other = linkdata.slower_elsewhere(links, run.summary)
        if other is not None:
            s.blocks.append(Note(f"Slowest link of any method and direction: {_link_text(other)} (outlined on its "
                                 "heatmap; the ceiling takes the method that allows most).", "warn"))
        ceiling = linkdata.ceiling_gbps(run.summary)
        if basis is not None:
            s.blocks.append(Note(f"Slowest-link ceiling: {basis.text()} The busbw plots of {data.RING_BOUND_TEXT} "
                                 "draw it as a line."))
        elif ceiling is not None:
            s.blocks.append(Note(f"Slowest-link ceiling: {ceiling:.2f} GB/s (per GPU, its slowest link x its peers; "
                                 f"the smallest over the GPUs). The busbw plots of {data.RING_BOUND_TEXT} draw it as a line."))
        s.blocks += linkdata.link_heatmaps(links, run.summary) or [Note(f"run {run.id} has no link rows.", "warn")]
    return s if s.blocks else _empty(s, inp, "links runs (measured or imported)")


def _link_text(link: Any, kind: bool = True) -> str:
    """'GPU 2 -> GPU 3 ce-read/uni: 301.45 GB/s, 2.1 us' (``kind``: with its method and direction)."""
    lat = f", {link['latency_us']:.3g} us" if link.get("latency_us") is not None else ""
    bw = link.get("bandwidth_gbps")
    how = "/".join(str(link[k]) for k in ("method", "direction") if link.get(k)) if kind else ""
    return (f"GPU {link.get('src')} -> GPU {link.get('dst')}{' ' + how if how else ''}: "
            f"{bw if bw is None else f'{bw:.2f}'} GB/s{lat}")


def env_section(inp: ReportInput) -> Section:
    s = Section("env", "Environment")
    runs = [r for r in inp.runs if inp.is_drawn(r)]
    if not runs:
        return _empty(s, inp, "runs drawn in full")
    shared, differ = data.env_tables(runs)
    s.blocks.append(Note("What the runs ran on: facts every run shares once, then one row per run for the facts "
                         "that differ. ccltune's own variables (CCLTUNE_COMMAND, CCLTUNE_OUTCOME_FILE, ...) are "
                         "not the user's environment and are left out."))
    s.blocks.append(differ if differ.rows else Note("Every run records the same facts."))
    if shared.rows:
        s.blocks.append(shared)
    s.blocks.append(Table(["run", "command"], [[str(r.id), data.command_text(r)] for r in runs], wide=True,
                          caption="Commands, one line each"))
    return s


def runs_section(inp: ReportInput) -> Section:
    """Every run: one line each (older ones are only here), then the drawn numbers as tables."""
    s = Section("runs", "Runs")
    colls = sorted({c for p in inp.peaks.values() for c in p})[:6]
    t = Table(["run", "kind", "status", "started", "host", "GPUs", "drawn", *[f"{c} best busbw GB/s" for c in colls]],
              [], wide=True, caption=f"All {len(inp.runs)} runs in this report")
    for r in sorted(inp.runs, key=lambda r: -r.id):
        peak = inp.peaks.get(r.id, {})
        t.rows.append([str(r.id), r.kind, data.status_text(r), r.started_at, data.host_text(r),
                       data.gpus_text(r.env.get("gpus"), r.env.get("world_size")),
                       "yes" if inp.is_drawn(r) else "summarised", *[data.num(peak.get(c)) for c in colls]])
        t.row_class.append("bad" if r.status in (RunStatus.FAILED, RunStatus.ABANDONED) else "warn" if r.status == RunStatus.INTERRUPTED else "")
    if inp.drawn is not None:
        s.blocks.append(Note(f"{len(inp.drawn)} of {len(inp.runs)} runs are drawn in full (the latest); the others are "
                             "summarised here. Choose with --runs, or draw more with --latest N."))
    s.blocks.append(t)
    for coll, lines in data.curves([row for r in inp.measured() for row in inp.rows[r.id]], "busbw_gbps").items():
        sizes = sorted({x for ln in lines for x in ln.xs})
        lines = [ln for ln in lines if not ln.waived]
        raw = Table(["size", *[ln.label for ln in lines]], [], wide=True, folded=f"{coll}: busbw GB/s per size (raw)")
        for x in sizes:
            raw.rows.append([size_label(x), *[data.num(dict(zip(ln.xs, ln.ys)).get(x)) for ln in lines]])
        s.blocks.append(raw)
    return s


def doctor_section(inp: ReportInput) -> Section:
    s = Section("doctor", "Doctor and check findings")
    for run in inp.of_kind("doctor", "check"):
        found = inp.findings.get(run.id, [])
        counts = data.status_counts(found)
        level = "bad" if counts.get(Verdict.FAIL) or counts.get(Verdict.ERROR) else ("warn" if counts.get(Verdict.WARN) else "good")
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no findings"
        s.blocks.append(Note(f"{_title(run)}: {summary}", level))
        if found:
            s.blocks.append(data.findings_table(found))
    return s if s.blocks else _empty(s, inp, "doctor or check runs")


def compare_section(inp: ReportInput) -> Section:
    s = Section("compare", "Two runs side by side")
    if inp.compare is None:
        return Section(s.id, s.title, [Note("No comparison requested: `ccltune report --compare A B` puts run B "
                                            "next to run A, per size, with regressions highlighted.")], empty=True)
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
