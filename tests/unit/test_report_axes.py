"""Axis ticks/labels and the SVG primitives of ``ccltune report``."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ccltune.report import axes, svg
from ccltune.report.model import Heatmap, LineChart, Series, Zone, ZoneChart

NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("n, text", [(8, "8B"), (1000, "1000B"), (1024, "1K"), (1536, "1.5K"),
                                     (1 << 20, "1M"), (64 << 20, "64M"), (1 << 30, "1G"), (1 << 40, "1T")])
def test_size_label(n, text):
    assert axes.size_label(n) == text


def test_size_ticks_are_powers_of_two_with_1k_1m_1g():
    ticks = axes.size_ticks(8, 1 << 30)
    assert len(ticks) <= 10
    assert {1 << 10, 1 << 20, 1 << 30} <= set(ticks)
    assert all(t & (t - 1) == 0 for t in ticks)
    assert [axes.size_label(t) for t in axes.size_ticks(1024, 1 << 20)] == [
        "1K", "4K", "16K", "64K", "256K", "1M"]


def test_size_ticks_inside_one_power_of_two():
    assert axes.size_ticks(1100, 1900) == [1100, 1900]


def test_log_ticks_decades_and_finer_steps():
    assert axes.log_ticks(0.5, 300) == [1.0, 10.0, 100.0]
    assert axes.log_ticks(20, 90) == [20.0, 30.0, 50.0, 70.0]
    with pytest.raises(ValueError):
        axes.log_ticks(0, 10)


def test_linear_ticks_nice_steps():
    assert axes.linear_ticks(0.7, 1.3) == [0.8, 1.0, 1.2]
    assert axes.linear_ticks(0.95, 1.02) == [0.96, 0.98, 1.0, 1.02]


@pytest.mark.parametrize("v, text", [(0, "0"), (0.25, "0.25"), (12, "12"), (2000, "2k"), (3e6, "3M")])
def test_value_label(v, text):
    assert axes.value_label(v) == text


def _parse(text: str) -> ET.Element:
    return ET.fromstring(text)  # well-formed XML, or this raises


def test_line_chart_svg_has_points_ticks_band_and_marks():
    s = Series("a<b>", [1024, 4096, 16384], [1.0, 0.9, 1.1], lo=[0.9, 0.8, 1.0], hi=[1.1, 1.0, 1.2],
               marked=[False, True, False])
    root = _parse(svg.line_chart(LineChart("t & t", "size", "ratio", [s], y_log=False, ref_y=1.0,
                                           ref_band=(0.97, 1.03))))
    circles = list(root.iter(f"{NS}circle"))
    assert len(circles) == 3
    assert [c.get("fill") for c in circles].count(svg.ALARM) == 1
    assert list(root.iter(f"{NS}polygon")), "error band missing"
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "1K" in texts and "16K" in texts and "t & t" in texts  # the legend is HTML (test_report_page)
    assert "4K, 0.9 ratio (flagged)" in circles[1].find(f"{NS}title").text


def test_default_series_is_emphasised():
    assert svg.series_style(0, Series("default", [], [], emphasis=True))[:2] == (svg.DEFAULT_COLOR, 3.0)
    assert svg.series_style(len(svg.PALETTE), Series("x", [], []))[2] == "2,2"  # second round: dotted
    assert svg.series_style(0, Series("x", [], [], dashed=True))[2] == "6,3"  # in-place: dashed


def test_heatmap_svg_marks_one_cell_and_skips_empty_ones():
    h = Heatmap("bw", "src", "dst", ["0", "1"], ["0", "1"], [[None, 300.0], [100.0, None]], "GB/s", mark=(1, 0))
    root = _parse(svg.heatmap(h))
    titled = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert sorted(r.find(f"{NS}title").text for r in titled) == [
        "slowest link", "src 0 -> dst 1: 300 GB/s", "src 1 -> dst 0: 100 GB/s"]
    assert svg.cell_color(100, 100, 300) == "#eff3ff" and svg.cell_color(300, 100, 300) == "#08519c"
    assert svg.heat_range(h)[0] == 0.0  # shades are fractions of the fastest link, not of the spread


def test_zone_chart_svg_clips_zones_to_the_axis():
    z = ZoneChart("rules", [("allreduce", [Zone(0, 65535, "tree/ll"), Zone(65536, 1 << 40, "ring/simple")])],
                  1024, 1 << 28)
    root = _parse(svg.zone_chart(z))
    tips = [t.text for t in root.iter(f"{NS}title")]
    assert tips == ["allreduce: tree/ll for 0B to 64K", "allreduce: ring/simple for 64K to 1T"]
    assert svg.zone_colors(z) == {"tree/ll": svg.PALETTE[0], "ring/simple": svg.PALETTE[1]}


def test_log_charts_drop_points_a_log_axis_cannot_show():
    from ccltune.report import svg
    from ccltune.report.model import LineChart, Series

    chart = LineChart("t", "size", "GB/s", [Series("a", [0, 8, 16], [1.0, 0.0, 2.0], lo=[0.5, 0.0, 1.5],
                                                   hi=[1.5, 0.1, 2.5])])
    kept = svg.plottable(chart).series[0]
    assert kept.xs == [16] and kept.ys == [2.0] and kept.lo == [1.5] and kept.hi == [2.5]
    assert kept.gaps == [(8, "0, below a log axis")]  # a gap, not dropped
    page = svg.line_chart(chart)  # renders instead of raising on log(0)
    assert "<circle" in page and "<polyline" not in page  # one point left: a point, no line
    assert "not drawn at 8B (0, below a log axis)" in page
