"""The verdict cards, the environment the page shows, the palette, and a many-run page
(pure or in-process; the browser tests are test_report_browser.py)."""

from __future__ import annotations

import re
from pathlib import Path

from ccltune.cli import main
from ccltune.environment import INTERNAL_VARIABLES, comm_env, platform_name
from ccltune.report import data, load, svg, verdict
from ccltune.report.model import Note
from ccltune.report.sections import build_sections
from ccltune.report.verdict import cards
from ccltune.store import Measurement, Run, Store
from report_db import many_store, mixed_store

SRC = Path(__file__).resolve().parents[2] / "src" / "ccltune"
# CCLTUNE_ variables a user sets (documented); every other one ccltune sets for itself
USER_SET = {"CCLTUNE_RULES", "CCLTUNE_NCCL_LIBRARY", "CCLTUNE_SYSFS_ROOT", "CCLTUNE_CAPTURE", "CCLTUNE_GPU_MODEL",
            "CCLTUNE_NCCLT_DEFAULTS", "CCLTUNE_PROFILE", "CCLTUNE_PROFILE_EVERY", "CCLTUNE_PROFILE_CALLS",
            "CCLTUNE_ARMS"}


def _mixed(tmp_path):
    db = tmp_path / "mixed.db"
    mixed_store(db)
    with Store(db, create=False) as store:
        return load(store)


def test_cards_give_health_worst_first_ceiling_and_gain(tmp_path):
    inp = _mixed(tmp_path)
    by_title = {c.title: c for c in cards(inp.runs, inp.findings, inp.peaks)}
    a = by_title["node-a"]
    assert a.level == "bad" and a.headline.startswith("Not healthy: 1 FAIL, 1 ERROR, 1 WARN")
    assert [lv for lv, _ in a.lines][:4] == ["bad", "bad", "bad", "warn"]  # slower sizes, FAIL, ERROR, WARN
    figs = dict(a.figures)
    assert figs["slowest-link ceiling (links run 6)"] == "400.00 GB/s" and figs["largest win"] == "1.25x"
    # each ring-bound collective measured: its best busbw and fraction of the one ceiling, all_reduce first
    assert [k for k, _ in a.figures][:3] == ["all_reduce busbw, best (run 3)", "all_gather busbw, best (run 3)",
                                             "slowest-link ceiling (links run 6)"]
    assert figs["all_reduce busbw, best (run 3)"] == "361.19 GB/s, 90% of the ceiling"
    assert figs["all_gather busbw, best (run 3)"] == "329.28 GB/s, 82% of the ceiling"
    assert figs["tuning gain, geometric mean (validate run 5)"] == "1.079x"
    # node-b has no links run: node-a's does not bound a job on another host, and the card says so
    b = by_title["node-b"]
    assert not any(k.startswith("slowest-link ceiling") for k in dict(b.figures))
    assert ("info", "no slowest-link ceiling for this job shape: links run 12 measured "
                    "h100-node-07, not this job's host") in b.lines
    # an import: its host and GPU model from the file
    assert "4 x NVIDIA H200" in by_title["vm"].subtitle


def _r(i: int, kind: str, host: str | None, nccl: str | None = "2.21.5", ranks: int | None = 8, **summary) -> Run:
    env = {"host": host, "gpus": [{"name": "NVIDIA H100"}] * 8, "world_size": ranks, "nccl_version": nccl} if host \
        else {"platform": "H100"}
    return Run(i, kind, "complete", "t", None, f"ccltune {kind}", None, ranks, 1, None, host, None, None, nccl,
               env=env, summary=summary)


def test_one_card_per_node_and_run_group_worst_first():
    runs = [_r(1, "doctor", "node-a"), _r(2, "sweep", "node-a"), _r(3, "tune", None, source_runs=[2, 99]),
            _r(4, "validate", "node-a", status="PASS", sizes=[{"collective": "all_reduce", "size_bytes": 1 << 20,
                                                              "speedup": 1.2, "noise": 0.01, "status": "PASS"}]),
            _r(5, "bench", "node-a", nccl="2.23.4"), _r(6, "bench", "node-a", ranks=4),
            _r(7, "links", "node-c"), _r(8, "bench", "node-b")]
    found = cards(runs, {1: [{"name": "nvlink", "status": "FAIL", "evidence": "GPU 3 -> 5"}]}, {})
    assert [(c.title, c.group) for c in found] == [
        ("node-a", "4 ranks, NCCL 2.21.5"), ("node-a", "8 ranks, NCCL 2.21.5"), ("node-a", "8 ranks, NCCL 2.23.4"),
        ("node-b", "8 ranks, NCCL 2.21.5"), ("node-c", "node-wide runs only")]
    a = {c.group: c for c in found if c.title == "node-a"}
    # the doctor run feeds every group of its node; the tune run joins its sweep's group
    assert all(c.level == "bad" and "doctor run 1" in c.headline for c in a.values())
    assert "runs 1-4 (1 doctor, 1 sweep, 1 tune, 1 validate)" in a["8 ranks, NCCL 2.21.5"].subtitle
    assert "runs 1, 5 (1 bench, 1 doctor)" in a["8 ranks, NCCL 2.23.4"].subtitle
    assert found[-1].level == "info"  # nothing judged on node-c


def _job(i: int, kind: str, ranks: int, nodes: int = 1, bus: list[str] | None = None, visible: int = 8) -> Run:
    gpus = [{"name": "NVIDIA H100", **({"pci_bus_id": bus[g]} if bus else {})} for g in range(visible)]
    env = {"host": "node-a", "gpus": gpus, "world_size": None if kind == "links" else ranks, "n_nodes": nodes,
           "nccl_version": "2.21.5"}
    return Run(i, kind, "complete", "t", None, f"ccltune {kind}", None, env["world_size"], nodes, None, "node-a",
               None, None, "2.21.5", env=env, summary={"ring_ceiling_gbps": 700.0} if kind == "links" else {})


def test_a_ceiling_applies_only_to_the_job_shape_it_bounds():
    links8 = _job(1, "links", 8)
    peaks = {i: {"all_reduce": 350.0} for i in range(2, 6)}
    tune = Run(9, "tune", "complete", "t", None, "ccltune tune", None, None, None, None, None, None, None, None,
               env={}, summary={"source_runs": [4]})  # records no host: joins run 4's group, as its last run
    runs = [links8, _job(2, "bench", 2), _job(3, "bench", 8, nodes=2), _job(4, "bench", 8), tune]
    by_group = {c.group: c for c in cards(runs, {}, peaks)}
    two = by_group["2 ranks, NCCL 2.21.5"]  # 8 GPUs x 7 peers does not bound a 2-rank job
    assert dict(two.figures) == {"all_reduce busbw, best (run 2)": "350.00 GB/s"}  # no fraction, no ceiling
    assert any("no slowest-link ceiling for this job shape: links run 1 measured 8 GPUs" in t for _, t in two.lines)
    eight = dict(by_group["8 ranks, NCCL 2.21.5"].figures)  # run 3 ran on 2 nodes: run 4 is the one bounded
    assert eight["slowest-link ceiling (links run 1)"] == "700.00 GB/s"
    assert eight["all_reduce busbw, best (run 3)"] == "350.00 GB/s; run 4: 50% of the ceiling"
    assert verdict.ceiling_why_not(runs[2], links8) == "a 2-node job: the links of one node (links run 1) do not bound it"
    # by PCI bus id: a links run over the two GPUs a 2-rank job used bounds it; the node's 8 do not
    bus = [f"0000:{b:02x}:00" for b in range(8)]
    pair = _job(5, "links", 2, bus=bus[:2], visible=2)
    job = _job(6, "bench", 2, bus=bus)
    assert verdict.ceiling_for(job, [_job(1, "links", 8, bus=bus), pair])[0] is pair
    assert verdict.ceiling_for(job, [_job(1, "links", 8, bus=bus)])[0] is None
    moved = _job(7, "bench", 2, bus=bus)
    moved.env["variables"] = {"NCCL_TESTS_DEVICE": "4"}  # ranks on GPUs 4 and 5: not the pair measured
    assert verdict.ceiling_for(moved, [pair])[0] is None


ENV8 = {"host": "node-a", "gpus": [{"name": "NVIDIA H100"}] * 8, "world_size": 8, "n_nodes": 1,
        "nccl_version": "2.21.5"}


def _stored_cards(db, *runs: tuple[str, dict, dict]) -> list:
    """The cards of runs stored as ccltune stores them: (kind, {collective: busbw GB/s} or, for a
    links run, its summary, env changes from ENV8)."""
    with Store(db) as store:
        for kind, what, changes in runs:
            rid = store.begin_run(kind, command=f"ccltune {kind}", env={**ENV8, **changes})
            if kind != "links":
                store.add_measurements(rid, [Measurement(c, 1 << 28, 1 << 26, "float", "sum", None, False, 8,
                                                         time_us=1e3, algbw_gbps=bw / 1.75, busbw_gbps=bw)
                                             for c, bw in what.items()])
            store.finish_run(rid, "complete", what if kind == "links" else None)
        inp = load(store)
    return cards(inp.runs, inp.findings, inp.peaks, inp.no_value)


LINKS = ("links", {"ring_ceiling_gbps": 400.0}, {"world_size": None})  # over the 8 GPUs of ENV8


def test_the_card_gives_each_ring_bound_collective_its_fraction_of_the_ceiling(tmp_path):
    (card,) = _stored_cards(tmp_path / "c.db", ("bench", {"all_gather": 300.0, "reduce_scatter": 320.0}, {}),
                            ("bench", {"reduce_scatter": 340.0, "broadcast": 380.0}, {}), LINKS)
    assert card.figures == [("all_gather busbw, best (run 1)", "300.00 GB/s, 75% of the ceiling"),
                            ("reduce_scatter busbw, best (run 2)", "340.00 GB/s, 85% of the ceiling"),
                            ("slowest-link ceiling (links run 3)", "400.00 GB/s")]  # broadcast: not ring-bound


def test_a_card_with_all_gather_only_gives_its_fraction(tmp_path):
    (only,) = _stored_cards(tmp_path / "g.db", ("sweep", {"all_gather": 328.0}, {}), LINKS)
    assert only.figures == [("all_gather busbw, best (run 1)", "328.00 GB/s, 82% of the ceiling"),
                            ("slowest-link ceiling (links run 2)", "400.00 GB/s")]


def test_a_collective_no_links_run_bounds_gets_no_fraction(tmp_path):
    # all_gather's best run ran on 2 nodes: the one-node run the links bound is named; reduce_scatter ran
    # only on 2 nodes: no fraction; all_reduce stays first
    (mixed,) = _stored_cards(tmp_path / "m.db", ("bench", {"all_gather": 360.0, "reduce_scatter": 350.0},
                                              {"n_nodes": 2}),
                             ("bench", {"all_gather": 200.0, "all_reduce": 380.0}, {}), LINKS)
    assert mixed.figures == [("all_reduce busbw, best (run 2)", "380.00 GB/s, 95% of the ceiling"),
                             ("all_gather busbw, best (run 1)", "360.00 GB/s; run 2: 50% of the ceiling"),
                             ("reduce_scatter busbw, best (run 1)", "350.00 GB/s"),
                             ("slowest-link ceiling (links run 3)", "400.00 GB/s")]
    # nothing bounded: busbw only, and why
    (far,) = _stored_cards(tmp_path / "f.db", ("bench", {"all_gather": 300.0}, {"n_nodes": 2}), LINKS)
    assert far.figures == [("all_gather busbw, best (run 1)", "300.00 GB/s")]
    assert ("info", "no slowest-link ceiling for this job shape: a 2-node job: the links of one node "
                    "(links run 2) do not bound it") in far.lines


def test_the_ceiling_line_is_drawn_only_where_it_bounds_the_job():
    from ccltune.report.sections import ReportInput, bench_section

    rows = {i: [{"collective": "all_reduce", "size_bytes": 1 << 20, "busbw_gbps": 300.0, "time_us": 10.0,
                 "status": "ok", "config": "default", "run_id": i, "in_place": 0}] for i in (2, 4)}
    runs = [_job(1, "links", 8), _job(2, "bench", 2), _job(4, "bench", 8)]
    for drawn, refs in (({1, 2}, []), ({1, 2, 4}, [700.0])):
        sec = bench_section(ReportInput(runs, rows={k: v for k, v in rows.items() if k in drawn}, drawn=drawn))
        ar = next(f for f in sec.figures() if f.title == "all_reduce: bus bandwidth")
        assert [v for v, _ in ar.refs] == refs


def test_ceiling_line_on_all_reduce_plots(tmp_path):
    inp = _mixed(tmp_path)
    bench = next(s for s in build_sections(inp) if s.id == "bench")
    ar = next(f for f in bench.figures() if f.title == "all_reduce: bus bandwidth")
    assert [v for v, _ in ar.refs] == [400.0]
    # all_gather's busbw is normalised to the same ring bound: the same line (run 1, node-a, drawn with
    # every run); a time plot has none
    with Store(tmp_path / "mixed.db", create=False) as store:
        every = load(store, latest=13)
    by_title = {f.title: f for f in next(s for s in build_sections(every) if s.id == "bench").figures()}
    assert [v for v, _ in by_title["all_gather: bus bandwidth"].refs] == [400.0]
    assert by_title["all_gather: time"].refs == []
    assert [data.ring_bound(c) for c in ("reducescatter", "AllGather", "all_reduce", "broadcast", "alltoall")] == [
        True, True, True, False, False]
    check = next(s for s in ar.series if s.label.startswith("run 8"))
    assert len(check.xs) == 2 and check.gaps == [(float(1 << 20), "status error")]


def test_the_imported_ceiling_can_be_multiplied_out_from_the_link_the_page_names(tmp_path):
    inp = _mixed(tmp_path)  # run 12: nvbandwidth on 4 H100s; ce-write allows most, ce-read has a 301.45 GB/s link
    card = next(c for c in cards(inp.runs, inp.findings, inp.peaks) if c.title == "h100-node-07")
    assert dict(card.figures)["slowest-link ceiling (links run 12: ce-write/uni, 389.26 GB/s x 3 peers; "
                              "pairwise, an upper bound)"] == "1167.78 GB/s"
    links = next(s for s in build_sections(inp) if s.id == "links")
    notes = [b.text for b in links.blocks if isinstance(b, Note)]
    at = next(i for i, t in enumerate(notes) if t.startswith("run 12 "))
    slow, other, ceiling = notes[at + 1:at + 4]
    assert slow.startswith("Slowest link of ce-write/uni") and "GPU 3 -> GPU 0: 389.26 GB/s" in slow
    assert "GPU 2 -> GPU 3 ce-read/uni: 301.45 GB/s" in other
    assert ceiling.startswith("Slowest-link ceiling: 1167.78 GB/s = ce-write/uni: GPU 3's slowest link, "
                              "389.26 GB/s to GPU 0, x 3 peers") and "this is an upper bound" in ceiling


def test_peaks_merge_spellings_of_one_collective(tmp_path):
    with Store(tmp_path / "s.db") as store:
        rid = store.begin_run("import", command="ccltune import nccl-tests x", env={"host": "vm"})
        store.add_measurements(rid, [Measurement(c, 1 << 20, 1 << 18, "float", "sum", None, False, 2, time_us=10.0,
                                                 algbw_gbps=bw, busbw_gbps=bw) for c, bw in
                                     (("allreduce", 90.0), ("all_reduce", 80.0), ("AllGather", 70.0))])
        store.finish_run(rid, "complete")
        assert load(store).peaks == {rid: {"all_reduce": 90.0, "all_gather": 70.0}}


def test_env_shows_only_the_users_variables_and_consistent_gpus(tmp_path):
    inp = _mixed(tmp_path)
    shared, differ = data.env_tables(inp.runs)
    text = str(shared.rows) + str(differ.rows) + str(differ.columns)
    assert "CCLTUNE_" not in text and "NCCL_IB_DISABLE" in differ.columns
    assert comm_env({"CCLTUNE_OUTCOME_FILE": "/tmp/x", "NCCL_DEBUG": "INFO", "CCLTUNE_RULES": "r"}) == {
        "CCLTUNE_RULES": "r", "NCCL_DEBUG": "INFO"}
    assert data.gpus_text([{"name": "NVIDIA H200"}] * 2, 4) == "4 x NVIDIA H200 (2 visible on rank 0's host)"
    assert platform_name([{"name": "NVIDIA H200"}] * 4, None, None) == "NVIDIA H200 x4"
    old = Run(1, "links", "complete", "t", None, "ccltune links", None, None, None, None, "vm", "NVIDIA H200 x1",
              None, None, env={"gpus": [{"name": "NVIDIA H200"}] * 4, "platform": "NVIDIA H200 x1"})
    assert data.platform_text(old) == "NVIDIA H200 x4"


def test_variables_torchrun_adds_are_not_the_users(monkeypatch):
    from ccltune.environment import USER_VARIABLES_ENV, parent_names

    worker = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_DEBUG": "INFO", "LOCAL_RANK": "0",
              USER_VARIABLES_ENV: parent_names({"NCCL_DEBUG": "INFO", "HOME": "/root"})}
    assert comm_env(worker) == {"NCCL_DEBUG": "INFO"}  # the parent had NCCL_DEBUG only
    worker[USER_VARIABLES_ENV] = parent_names({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})  # the user set it
    assert comm_env(worker) == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    worker[USER_VARIABLES_ENV] = "not json"  # no usable list: nothing left out but ccltune's own
    assert set(comm_env(worker)) == {"NCCL_DEBUG", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}
    monkeypatch.setenv(USER_VARIABLES_ENV, "[]")  # os.environ as a worker sees it (collect's source)
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    assert comm_env() == {}
    # a run recorded without its parent's names under torchrun: torchrun's default is not shown as the user's
    old = {"launcher": "torchrun", "variables": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_DEBUG": "INFO"}}
    assert data.user_variables(old) == {"NCCL_DEBUG": "INFO"}
    assert data.user_variables({**old, "variables_from": "parent"}) == old["variables"]
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" in data.user_variables({**old, "launcher": None})


def test_every_ccltune_variable_is_either_the_users_or_internal():
    # variable names as the code spells them: quoted strings (os.environ["X"], env.get("X"), {"X": ...})
    names = {m for p in SRC.rglob("*.py") for m in re.findall(r"[\"'](CCLTUNE_[A-Z_]+[A-Z])[\"']", p.read_text())}
    assert names - USER_SET - INTERNAL_VARIABLES == set(), "new CCLTUNE_ variable: user-set or internal?"


def _lab(hex_color: str, m: tuple | None = None) -> tuple[float, float, float]:
    rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    if m:  # colour-blind simulation in linear RGB (Vienot, Brettel and Mollon 1999)
        lin = [sum(m[i][j] * lin[j] for j in range(3)) for i in range(3)]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.9505
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.089
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_palette_colours_are_distinct_also_for_colour_blind_readers():
    deutan = ((0.29275, 0.70725, 0.0), (0.29275, 0.70725, 0.0), (-0.02234, 0.02234, 1.0))
    protan = ((0.11238, 0.88762, 0.0), (0.11238, 0.88762, 0.0), (0.00401, -0.00401, 1.0))
    for m, least in ((None, 20), (deutan, 8), (protan, 8)):
        labs = [_lab(c, m) for c in svg.PALETTE]
        worst = min(sum((a - b) ** 2 for a, b in zip(p, q)) ** 0.5 for i, p in enumerate(labs) for q in labs[i + 1:])
        assert worst > least, (m, worst)


def test_many_runs_draw_the_latest_and_summarise_the_rest(tmp_path):
    db, page = tmp_path / "many.db", tmp_path / "many.html"
    many_store(db, 60)
    assert main(["report", "--db", str(db), "--out", str(page), "--latest", "5"]) == 0
    html = page.read_text()
    assert "60 run(s)" in html and "the latest 5 drawn in full" in html
    assert html.count("summarised") >= 55 and len(html) < 400_000
    assert html.count('class="pick"') == 2  # the drawn nccl-tests imports (57, 59: copies of run 1)


def test_a_collective_that_failed_at_every_size_is_said_not_dropped(tmp_path):
    env = {"host": "node-a", "gpus": [{"name": "NVIDIA H100"}] * 8, "world_size": 8, "n_nodes": 1,
           "nccl_version": "2.21.5"}
    with Store(tmp_path / "f.db") as store:
        rid = store.begin_run("bench", command="ccltune bench all_reduce reduce_scatter", env=env)
        rows = [Measurement("all_reduce", s, s // 4, "float", "sum", None, False, 8, time_us=10.0, algbw_gbps=1.0,
                            busbw_gbps=1.75) for s in (1 << 20, 2 << 20)]
        rows += [Measurement("reduce_scatter", s, s // 32, "float", "sum", None, False, 8, status="error",
                             note="timeout") for s in (1 << 20, 2 << 20, 4 << 20)]
        store.add_measurements(rid, rows)
        store.finish_run(rid, "complete")
        inp = load(store)
    assert inp.no_value == {rid: {"reduce_scatter": ({"error": 3}, "timeout")}}
    text = "reduce_scatter: no value at any size (error x3: timeout)"
    bench = next(s for s in build_sections(inp) if s.id == "bench")
    assert Note(f"{text} in run {rid}: nothing to plot.", "warn") in bench.blocks
    assert not any(f.title.startswith("reduce_scatter") for f in bench.figures())
    (card,) = cards(inp.runs, inp.findings, inp.peaks, inp.no_value)
    assert ("warn", f"{text} in bench run {rid}") in card.lines and card.level == "warn"


def test_small_bandwidths_gloo_groups_and_series_waived_at_every_size():
    from ccltune.report import html
    from ccltune.report.model import LineChart

    gloo = Run(1, "bench", "complete", "t", None, "ccltune bench", "gloo", 2, 1, "torchrun", "vm", None, None, None,
               env={"host": "vm", "gpus": [], "world_size": 2, "engine": "gloo"})
    (card,) = cards([gloo], {}, {1: {"all_reduce": 0.0614}})
    assert card.group == "2 ranks, gloo (CPU)"  # not 'library version not recorded'
    assert dict(card.figures)["all_reduce busbw, best (run 1)"] == "0.0614 GB/s"  # 3 significant digits, not 0.1
    reason = "torch.distributed's all_gather is in-place only"
    rows = [{"run_id": 1, "collective": "all_gather", "size_bytes": s, "in_place": p, "config": "default",
             "status": "ok" if p else "waived", "busbw_gbps": 0.05 if p else None, "time_us": 9.0 if p else None,
             "note": None if p else reason} for s in (8, 64, 512) for p in (0, 1)]
    (inp, oop) = data.curves(rows, "busbw_gbps")["all_gather"]
    assert (oop.label, oop.waived, oop.gaps, oop.xs) == ("run 1, out-of-place", reason, [], [])
    chart = LineChart.of("all_gather: bus bandwidth", "message size", "busbw GB/s", [oop, inp])
    assert chart.series == [inp] and chart.notes == [f"run 1, out-of-place: waived, {reason}"]
    page = html.render_chart(chart)
    assert page.count("waived") == 1 and "Gaps" not in page and "×" not in page
