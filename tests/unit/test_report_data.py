"""The data behind each plot and table of ``ccltune report`` (pure functions)."""

from __future__ import annotations

import pytest

from ccltune.report import data, linkdata
from ccltune.store import Run


def row(size, time_us, busbw=None, *, coll="all_reduce", run_id=1, config="default", rep=0, status="ok", **kw):
    r = {"run_id": run_id, "collective": coll, "size_bytes": size, "time_us": time_us, "busbw_gbps": busbw,
         "config": config, "rep": rep, "status": status, "in_place": 0, "dtype": "float", "op": "sum",
         "n_ranks": 8, "n_nodes": 1, "graph": 0}
    r.update(kw)
    return r


def test_medians_use_ok_rows_only():
    rows = [row(8, 10.0), row(8, 12.0, rep=1), row(8, 30.0, rep=2), row(8, 1.0, status="error"),
            row(16, None), row(16, 5.0)]
    assert data.medians(rows, "time_us") == {8: 12.0, 16: 5.0}


def test_curves_one_line_per_run_and_only_the_default_config():
    rows = [row(8, 10.0, 1.0), row(16, 11.0, 2.0), row(8, 9.0, 1.5, run_id=2),
            row(8, 1.0, 99.0, config="ring/ll/16"), row(8, 5.0, 3.0, coll="all_gather")]
    bw = data.curves(rows, "busbw_gbps")
    assert sorted(bw) == ["all_gather", "all_reduce"]
    # the line over most sizes first (a later run of fewer sizes must not hide it), else the latest first
    assert [(s.label, s.xs, s.ys) for s in bw["all_reduce"]] == [("run 1", [8.0, 16.0], [1.0, 2.0]),
                                                                ("run 2", [8.0], [1.5])]
    assert [s.label for s in bw["all_gather"]] == ["run 1"]


def test_every_spelling_of_a_collective_lands_on_one_plot():
    """Rows as ccltune stores them, as a rule file or the tuner plugin spells them, as NCCL's log
    does and as an nccl-tests binary is named: one collective, through the registry."""
    rows = [row(8, 10.0, 1.0), row(8, 9.0, 1.5, run_id=2, coll="allreduce"), row(8, 9.0, 1.2, run_id=3, coll="AllReduce"),
            row(8, 9.0, 1.3, run_id=4, coll="all_reduce_perf"), row(8, 5.0, 3.0, coll="ReduceScatter"),
            row(8, 5.0, 3.0, coll="hypercube")]  # a name no registry entry knows is kept as stored
    bw = data.curves(rows, "busbw_gbps")
    assert sorted(bw) == ["all_reduce", "hypercube", "reduce_scatter"]
    assert [s.label for s in bw["all_reduce"]] == ["run 4", "run 3", "run 2", "run 1"]
    sweep = data.sweep_curves([row(8, 10.0, 1.0, coll="allgather"), row(8, 9.0, 1.0, coll="all_gather", config="x")])
    assert list(sweep) == ["all_gather"] and len(sweep["all_gather"]) == 2
    (p,) = data.validate_points({"sizes": [{"collective": "allreduce", "size_bytes": 8, "speedup": 1.1}]}, [])
    assert p.collective == "all_reduce"


def test_curves_label_what_differs():
    rows = [row(8, 10.0, 1.0), row(8, 9.0, 1.1, in_place=1)]
    labels = [s.label for s in data.curves(rows, "busbw_gbps")["all_reduce"]]
    assert labels == ["run 1, out-of-place", "run 1, in-place"]


def sweep_rows():
    rows = []
    for rep, jitter in enumerate((1.0, 1.1, 0.9)):
        rows += [row(1024, 10.0 * jitter, 1.0, rep=rep), row(1 << 20, 100.0 * jitter, 50.0, rep=rep)]
        rows += [row(1024, 5.0 * jitter, 2.0, rep=rep, config="tree/ll/16"),
                 row(1 << 20, 200.0 * jitter, 25.0, rep=rep, config="tree/ll/16")]
        rows += [row(1 << 20, 80.0 * jitter, 62.5, rep=rep, config="ring/simple/32")]
    return rows


def test_sweep_curves_put_default_last_and_emphasised():
    lines = data.sweep_curves(sweep_rows())["all_reduce"]
    assert [(s.label, s.emphasis) for s in lines] == [("ring/simple/32", False), ("tree/ll/16", False),
                                                      ("default", True)]
    assert lines[-1].ys == [1.0, 50.0]


def test_sweep_winners_come_first_so_a_plot_never_hides_them():
    slow = [row(size, 500.0, 0.1, rep=k, config=f"a{i}/ll/1") for i in range(8) for size in (1024, 1 << 20)
            for k in range(3)]
    rows = sweep_rows() + slow
    for lines in (data.sweep_curves(rows)["all_reduce"], data.sweep_speedups(rows)["all_reduce"]):
        assert [s.label for s in lines][:3] == ["ring/simple/32", "tree/ll/16", "a0/ll/1"]


def test_sweep_speedups_are_default_time_over_candidate_time():
    lines = {s.label: s for s in data.sweep_speedups(sweep_rows())["all_reduce"]}
    assert lines["tree/ll/16"].xs == [1024.0, float(1 << 20)]
    assert lines["tree/ll/16"].ys == pytest.approx([2.0, 0.5])
    assert lines["ring/simple/32"].ys == pytest.approx([1.25])
    assert "default" not in lines


def test_sweep_best_table():
    t = data.sweep_best(sweep_rows())
    assert [r[:4] + r[5:] for r in t.rows] == [["all_reduce", "1K", "1.00", "tree/ll/16", "2.000x"],
                                               ["all_reduce", "1M", "50.00", "ring/simple/32", "1.250x"]]
    assert t.row_class == ["good", "good"]


def test_sweep_best_keeps_default_on_a_tie():
    rows = [row(8, 10.0, 1.0), row(8, 10.0, 1.0, config="ring/ll/16")]
    assert data.sweep_best(rows).rows[0][3] == "default"


def test_validate_points_from_the_summary():
    summary = {"verdict": "FAIL", "sizes": [
        {"collective": "all_reduce", "size_bytes": 1024, "speedup": 1.2, "noise_pct": 2.0, "slower": False},
        {"collective": "all_reduce", "size_bytes": 4096, "speedup": 0.9, "noise_pct": 3.0, "slower": True}]}
    s = data.validate_series(data.validate_points(summary, []))["all_reduce"]
    assert s.ys == [1.2, 0.9]
    assert s.lo == pytest.approx([1.2 * 0.98, 0.9 * 0.97]) and s.hi == pytest.approx([1.2 * 1.02, 0.9 * 1.03])
    assert s.marked == [False, True]


def test_validate_points_computed_from_measurements_when_the_summary_has_none():
    rows = [row(8, t, config="default", rep=i) for i, t in enumerate((10.0, 10.2, 9.8))]
    rows += [row(8, t, config="rules", rep=i) for i, t in enumerate((12.5, 12.5, 12.5))]
    (p,) = data.validate_points({}, rows)
    assert p.speedup == pytest.approx(0.8)
    assert p.noise_pct == pytest.approx(2.0)  # half of the 0.4 us spread, in % of 10 us
    assert p.slower


def links():
    out = []
    for src in range(3):
        for dst in range(3):
            if src != dst:
                out.append({"src": src, "dst": dst, "method": "ce", "direction": "uni",
                            "bandwidth_gbps": 50.0 if (src, dst) == (2, 0) else 100.0, "latency_us": 2.0})
    out.append({"src": 0, "dst": 1, "method": "sm", "direction": "bi", "bandwidth_gbps": 10.0})
    return out


def test_link_heatmaps_one_per_method_and_direction():
    ce, sm = linkdata.link_heatmaps(links(), {})
    assert ce.title == "CE copy, unidirectional" and sm.title == "SM copy, bidirectional"
    assert ce.values[2][0] == 50.0 and ce.values[0][0] is None
    assert ce.mark == (2, 0) and sm.mark == (0, 1)  # each matrix marks its own slowest link


def test_link_heatmaps_mark_the_runs_own_slowest():
    slowest = {"src": 2, "dst": 0, "method": "ce", "direction": "uni", "bandwidth_gbps": 50.0}
    ce, sm = linkdata.link_heatmaps(links(), {"slowest": slowest})
    assert ce.mark == (2, 0) and sm.mark == (0, 1)
    assert linkdata.slowest_link([], {}) is None


def test_the_ceiling_names_its_series_and_the_slowest_link_is_of_that_series():
    from ccltune.diagnose.checks import linkmath

    rows = [dict(r, method="ce-write") for r in links() if r["method"] == "ce"]
    rows += [dict(r, method="ce-read", bandwidth_gbps=30.0 if (r["src"], r["dst"]) == (1, 2) else 60.0)
             for r in links() if r["method"] == "ce"]
    summary, _ = linkmath.analyze(rows)
    assert summary["ring_ceiling_series"] == "ce-write/uni" and summary["ring_ceiling_gbps"] == 100.0
    basis = linkdata.ceiling_basis(summary)  # 50 GB/s x 2 peers, not ce-read's 30 GB/s link
    assert (basis.series, basis.gpu, basis.peer, basis.slowest_gbps, basis.peers) == ("ce-write/uni", 2, 0, 50.0, 2)
    assert basis.product() == "ce-write/uni, 50.00 GB/s x 2 peers" and "an upper bound" in basis.text()
    slow = linkdata.slowest_link(rows, summary)
    assert (slow["method"], slow["src"], slow["dst"], slow["bandwidth_gbps"]) == ("ce-write", 2, 0, 50.0)
    assert linkdata.slower_elsewhere(rows, summary)["bandwidth_gbps"] == 30.0
    del summary["ring_ceiling_series"]  # a run stored before the series was recorded: found by its ceiling
    assert linkdata.ceiling_basis(summary).series == "ce-write/uni"
    # an all-to-all measurement caps the bound: then it is no upper bound
    rows += [dict(r, direction="all2all", bandwidth_gbps=35.0) for r in rows if r["method"] == "ce-write"]
    capped = linkdata.ceiling_basis(linkmath.analyze(rows)[0])
    assert capped.capped and not capped.upper_bound and capped.ceiling_gbps == 70.0
    assert capped.product() == "ce-write/uni, GPU 0's all-to-all aggregate 70.00 GB/s"


def test_findings_table_classes_by_status():
    t = data.findings_table([{"name": "a", "status": "PASS"}, {"name": "b", "status": "fail", "fix": "x"},
                             {"name": "c", "status": "WARN", "evidence": "e"}, {"name": "d", "status": "WAIVED"}])
    assert [r[0] for r in t.rows] == ["PASS", "FAIL", "WARN", "WAIVED"]
    assert t.row_class == ["good", "bad", "warn", ""]
    assert data.status_counts([{"status": "PASS"}, {"status": "pass"}]) == {"PASS": 2}


def _run(i, **env):
    return Run(i, "bench", "complete", "2026-01-01T00:00:00", None, "ccltune bench", None, None, None, None,
               None, None, None, None, env=env)


def test_env_table_flags_differences_and_lists_variables():
    a = _run(1, host="a", driver_version="550", gpus=["H100", "H100"], variables={"NCCL_ALGO": "ring"})
    b = _run(2, host="b", driver_version="550", gpus=[{"name": "H100"}] * 2, variables={})
    t = data.env_table([a, b])
    by_name = {r[0]: (r[1:], cls) for r, cls in zip(t.rows, t.row_class)}
    assert by_name["host"] == (["a", "b"], "warn")
    assert by_name["driver"] == (["550", "550"], "")
    assert by_name["GPUs"] == (["2 x H100", "2 x H100"], "")
    assert by_name["NCCL_ALGO"] == (["ring", ""], "warn")
    assert "torch" not in by_name  # no run recorded it
    assert t.columns == ["", "run 1 (bench)", "run 2 (bench)"]


def test_number_formats():
    assert data.num(None) == "" and data.num(12.345) == "12.35" and data.num(0.00123) == "0.00123"
    assert data.ratio_text(1.23456) == "1.235x"


def test_validate_points_read_the_verdict_modules_own_summary():
    """The summary `ccltune validate` stores is ccltune.validate.verdict's to_dict()."""
    from ccltune.report import data
    from ccltune.stats import point_stats
    from ccltune.validate.verdict import SizeVerdict, ValidateVerdict

    sizes = [SizeVerdict("all_gather", 4, 1, 2 << 20, "FAIL", "3.6% slower", point_stats([10.0, 10.2]),
                         point_stats([10.4, 10.6])),
             SizeVerdict("all_gather", 4, 1, 4 << 20, "PASS", "faster", point_stats([20.0, 20.4]),
                         point_stats([14.0, 14.2]))]
    summary = ValidateVerdict(sizes).to_dict()
    pts = data.validate_points(summary, [])
    assert [p.slower for p in pts] == [True, False]
    assert pts[1].speedup > 1.4 and pts[0].noise_pct > 0
