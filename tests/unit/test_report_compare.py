"""``ccltune report --compare A B``: per-size ratio and regressions."""

from __future__ import annotations

import pytest

from ccltune.report.compare import compare, compare_series, compare_table
from test_report_data import row


def test_ratio_and_tolerance():
    a = [row(8, 10.0, 1.0), row(16, 10.0, 2.0), row(32, 10.0, 4.0), row(64, 10.0, 8.0)]
    b = [row(8, 10.0, 1.0, run_id=2), row(16, 10.25, 1.95, run_id=2), row(32, 11.0, 3.6, run_id=2),
         row(128, 1.0, run_id=2)]
    c = compare(a, b, tolerance_pct=3.0)
    assert [(p.size_bytes, round(p.ratio, 4), p.regression) for p in c.points] == [
        (8, 1.0, False), (16, 0.9756, False), (32, 0.9091, True)]
    assert (c.only_a, c.only_b) == (1, 1)
    assert [p.size_bytes for p in c.regressions] == [32]
    assert compare(a, b, tolerance_pct=1.0).regressions[0].size_bytes == 16
    with pytest.raises(ValueError):
        compare(a, b, tolerance_pct=-1)


def test_medians_over_reps_and_default_config_only():
    a = [row(8, t, rep=i) for i, t in enumerate((10.0, 11.0, 50.0))]
    b = [row(8, t, rep=i, run_id=2) for i, t in enumerate((5.0, 5.5, 6.0))]
    b.append(row(8, 1.0, run_id=2, config="ring/ll/16"))
    (p,) = compare(a, b).points
    assert p.ratio == pytest.approx(2.0)


def test_variants_split_lines_and_table_flags_rows():
    a = [row(8, 10.0, in_place=0), row(8, 10.0, in_place=1)]
    b = [row(8, 20.0, in_place=0, run_id=2), row(8, 5.0, in_place=1, run_id=2)]
    c = compare(a, b)
    lines = compare_series(c)["all_reduce"]
    assert sorted((s.label, s.ys[0], s.marked[0]) for s in lines) == [
        ("in-place", 2.0, False), ("out-of-place", 0.5, True)]
    t = compare_table(c, 1, 2)
    assert t.columns[1] == "variant" and "run 2 time us" in t.columns
    assert sorted(t.row_class) == ["bad", "good"]


def test_no_common_points():
    c = compare([row(8, 1.0)], [row(8, 1.0, coll="all_gather", run_id=2)])
    assert c.points == [] and (c.only_a, c.only_b) == (1, 1)


def test_spellings_of_one_collective_are_compared():
    (p,) = compare([row(8, 10.0, coll="allreduce")], [row(8, 5.0, coll="AllReduce", run_id=2)]).points
    assert p.collective == "all_reduce" and p.ratio == pytest.approx(2.0)
