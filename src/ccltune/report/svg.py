"""Plot primitives as inline SVG strings: log-axis line charts with error bands, heatmaps,
zone bars. No scripts, fonts or images, so a report opens offline; every point carries a
``<title>`` tooltip with its exact value."""

from __future__ import annotations

import math
from dataclasses import replace
from html import escape
from typing import TypeVar

from ccltune.report import axes
from ccltune.report.model import Heatmap, LineChart, Series, StripChart, ZoneChart

# Okabe and Ito's palette for colour-blind readers (its yellow and black left out: too pale on
# white, and black is NCCL's default), then Paul Tol's wine: 7 + 1 distinct hues. A chart shows
# at most 8 series by default, so no two visible series share a colour.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#882255", "#999933")
DEFAULT_COLOR = "#1b1b1b"  # NCCL's default configuration
REF_COLOR = "#444"  # the slowest-link ceiling, the line at 1
ALARM = "#d62728"  # regressions, slower sizes, the slowest link
WIDTH = 760
_FONT = 'font-family="sans-serif" font-size="12"'
_LEFT, _RIGHT, _TOP, _PLOT_H = 72, 24, 34, 300
T = TypeVar("T")


def series_style(i: int, s: Series) -> tuple[str, float, str]:
    """(colour, stroke width, dash pattern) of the i-th series; shared with png.py."""
    if s.emphasis:
        return DEFAULT_COLOR, 3.0, ""
    k = i if s.color is None else s.color
    dash = "6,3" if s.dashed else ("" if (k // len(PALETTE)) % 2 == 0 else "2,2")
    return PALETTE[k % len(PALETTE)], 2.0, dash


def _open(width: float, height: float, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(title)}" {_FONT}>'
            f'<rect width="100%" height="100%" fill="#fff"/>'
            f'<text x="{width / 2:.0f}" y="20" text-anchor="middle" font-size="14" font-weight="bold">'
            f'{escape(title)}</text>')


def _text(x: float, y: float, s: str, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'


class _Scale:
    def __init__(self, lo: float, hi: float, p0: float, p1: float, log: bool):
        self.log, self.p0, self.p1 = log, p0, p1
        self.lo, self.hi = (math.log(lo), math.log(hi)) if log else (lo, hi)

    def __call__(self, v: float) -> float:
        v = math.log(v) if self.log else v
        return self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)


def y_range(chart: LineChart) -> tuple[float, float, list[float]]:
    """(lo, hi, ticks) of the value axis; shared with png.py."""
    vals = [v for s in chart.series for v in (*s.ys, *(s.lo or []), *(s.hi or []))]
    if chart.y_log:  # a ceiling line keeps some room above it: it is a limit, not the plot's frame
        vals += [v * 1.4 for v, _ in chart.refs] if vals else []
        lo, hi = axes.log_bounds(vals)
        return lo, hi, axes.log_ticks(lo, hi)
    extra = [chart.ref_y] if chart.ref_y is not None else []
    extra += list(chart.ref_band or ())
    lo, hi = axes.linear_bounds(vals + extra)
    return lo, hi, axes.linear_ticks(lo, hi)


def x_range(xs: list[float]) -> tuple[float, float]:
    lo, hi = min(xs, default=1.0), max(xs, default=1024.0)
    return max(lo / 1.4, 0.5), hi * 1.4


def plottable(chart: LineChart) -> LineChart:
    """The chart without points a log axis cannot show (a 0-byte size, a 0.00 GB/s busbw): such
    a point becomes a gap of its series, never silently dropped. Every series is kept (empty
    ones too), so series k is still the k-th legend entry. A gap at 0 bytes has no place on the
    size axis: it gets no mark (the legend's gap note, from the chart as given, names it); its
    mark had crashed the report of ``ccltune bench all`` on the CPU (8 B all_gather on 2 ranks
    stores 0 B)."""
    def keep(x: float, y: float) -> bool:
        return (x > 0 or not chart.x_log) and (y > 0 or not chart.y_log)

    series = []
    for s in chart.series:
        idx = [i for i, (x, y) in enumerate(zip(s.xs, s.ys)) if keep(x, y)]
        lost = [(x, f"{y:g}, below a log axis") for x, y in zip(s.xs, s.ys) if not keep(x, y) and x > 0]
        series.append(replace(s, xs=_take(s.xs, idx), ys=_take(s.ys, idx), lo=_pick(s.lo, idx), hi=_pick(s.hi, idx),
                              marked=_pick(s.marked, idx),
                              gaps=sorted(g for g in s.gaps + lost if g[0] > 0 or not chart.x_log)))
    return replace(chart, series=series)


def _take(values: list[T], idx: list[int]) -> list[T]:
    return [values[i] for i in idx]


def _pick(values: list[T] | None, idx: list[int]) -> list[T] | None:
    return None if values is None else _take(values, idx)


def line_chart(chart: LineChart) -> str:
    """The plot only: its legend is HTML beside it (html.py), so entries are never cut and
    can toggle their series. Series k is ``<g class="s s{k} {group}">``."""
    chart = plottable(chart)
    xs = [x for s in chart.series for x in (*s.xs, *(g for g, _ in s.gaps))]
    x_lo, x_hi = x_range(xs)
    y_lo, y_hi, y_ticks = y_range(chart)
    right = WIDTH - _RIGHT
    bottom = _TOP + _PLOT_H
    sx = _Scale(x_lo, x_hi, _LEFT, right, True)
    sy = _Scale(y_lo, y_hi, bottom, _TOP, chart.y_log)
    out = [_open(WIDTH, bottom + 44, chart.title)]
    out.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{right - _LEFT}" height="{_PLOT_H}" fill="#fafafa" stroke="#999"/>')
    if chart.ref_band:
        b0, b1 = sorted(chart.ref_band)
        y0, y1 = sy(min(max(b1, y_lo), y_hi)), sy(max(min(b0, y_hi), y_lo))
        out.append(f'<rect x="{_LEFT}" y="{y0:.1f}" width="{right - _LEFT}" height="{y1 - y0:.1f}" fill="#e6e6e6"/>')
    for t in axes.size_ticks(x_lo, x_hi):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#e0e0e0"/>')
        out.append(_text(x, bottom + 16, axes.size_label(t)))
    for tick in y_ticks:
        y = sy(tick)
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(_text(_LEFT - 6, y + 4, axes.value_label(tick), "end"))
    if chart.ref_y is not None and y_lo <= chart.ref_y <= y_hi:
        y = sy(chart.ref_y)
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{REF_COLOR}" stroke-dasharray="6,4"/>')
    # ceilings: a labelled line each, the label under its line at the left, where busbw (which
    # grows with size) stays far below any ceiling; labels of close ceilings are stacked
    last = -1e9
    for v, label in sorted(chart.refs, key=lambda r: -r[0]):
        if not y_lo <= v <= y_hi:
            continue
        y = sy(v)
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{REF_COLOR}" stroke-width="1.6" '
                   f'stroke-dasharray="8,3,2,3"><title>{escape(label)}</title></line>')
        last = max(y + 14, last + 14)
        out.append(_text(_LEFT + 6, last, label, "start",
                         ' font-size="11" fill="#222" paint-order="stroke" stroke="#fafafa" stroke-width="3"'))
    out.append(_text((_LEFT + right) / 2, bottom + 34, chart.x_label))
    out.append(_text(16, (_TOP + bottom) / 2, chart.y_label, extra=f' transform="rotate(-90 16 {(_TOP + bottom) / 2:.1f})"'))
    for i, s in enumerate(chart.series):
        out.append(_series(i, s, sx, sy, chart.y_label, bottom))
    out.append("</svg>")
    return "".join(out)


def segments(s: Series) -> list[list[tuple[float, float]]]:
    """The series' points cut into runs that no gap falls inside: a line never crosses a size
    that was run without a value, nor a stretch of sizes the run skipped (a step over 4x the
    run's usual size step, and over 16x). Fewer than 3 points in all: no line, points only."""
    pts = sorted(zip(s.xs, s.ys))
    if len(pts) < 3:
        return []
    gaps = sorted(g for g, _ in s.gaps)
    steps = sorted(b[0] / a[0] for a, b in zip(pts, pts[1:]) if a[0] > 0)
    usual = steps[len(steps) // 2] if steps else 2.0
    out: list[list[tuple[float, float]]] = [[pts[0]]]
    for prev, cur in zip(pts, pts[1:]):
        jump = prev[0] > 0 and cur[0] / prev[0] > max(16.0, 4 * usual)
        if jump or any(prev[0] < g < cur[0] for g in gaps):
            out.append([])
        out[-1].append(cur)
    return [seg for seg in out if len(seg) > 1]


def _series(i: int, s: Series, sx: _Scale, sy: _Scale, unit: str, bottom: float) -> str:
    color, width, dash = series_style(i, s)
    out = [f'<g class="s s{i + 1}{" " + escape(s.group) if s.group else ""}">']
    if s.lo and s.hi:
        upper = [f"{sx(x):.1f},{sy(h):.1f}" for x, h in zip(s.xs, s.hi)]
        lower = [f"{sx(x):.1f},{sy(lo):.1f}" for x, lo in zip(reversed(s.xs), reversed(s.lo))]
        out.append(f'<polygon points="{" ".join(upper + lower)}" fill="{color}" fill-opacity="0.18" stroke="none"/>')
    for seg in segments(s):
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in seg)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="{width}"'
                   + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
    alone = len(s.xs) < 3
    for j, (x, y) in enumerate(zip(s.xs, s.ys)):
        marked = bool(s.marked and s.marked[j])
        fill, r = (ALARM, 4.5) if marked else (color, 4.0 if alone else 2.6)
        tip = f"{s.label}: {axes.size_label(x)}, {y:.4g} {unit}" + (" (flagged)" if marked else "")
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{r}" fill="{fill}"'
                   + (' stroke="#fff"' if alone else "") + f'><title>{escape(tip)}</title></circle>')
    for x, why in s.gaps:  # a cross on the size axis: run at this size, nothing to draw
        cx, cy = sx(x), bottom - 6
        tip = f"{s.label}: not drawn at {axes.size_label(x)} ({why})"
        out.append(f'<path d="M{cx - 4:.1f},{cy - 4:.1f}l8,8m0,-8l-8,8" stroke="{color}" stroke-width="2">'
                   f'<title>{escape(tip)}</title></path>')
    out.append("</g>")
    return "".join(out)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def cell_color(v: float, lo: float, hi: float) -> str:
    """Light (slow) to dark blue (fast)."""
    f = 0.0 if hi <= lo else (v - lo) / (hi - lo)
    a, b = (239, 243, 255), (8, 81, 156)
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def heat_range(h: Heatmap) -> tuple[float, float]:
    """The colour scale of a heatmap: from 0 to its fastest link, so a shade is a fraction of the
    fastest (a link at 99% of the others looks like them, one at a third looks pale); shared
    with png.py."""
    vals = [v for row in h.values for v in row if v is not None]
    return 0.0, max(vals, default=1.0) or 1.0


def heatmap(h: Heatmap) -> str:
    n_r, n_c = len(h.row_names), len(h.col_names)
    cell = max(18.0, min(44.0, 400.0 / max(n_r, n_c, 1)))
    left, top = 60.0, 56.0
    lo, hi = heat_range(h)
    width = max(left + cell * n_c + 120, 380)
    height = max(top + cell * n_r + 16, top + 6 * 20 + 30)
    out = [_open(width, height, h.title)]
    out.append(_text(left + cell * n_c / 2, top - 22, h.col_label))
    out.append(_text(16, top + cell * n_r / 2, h.row_label, extra=f' transform="rotate(-90 16 {top + cell * n_r / 2:.1f})"'))
    for j, name in enumerate(h.col_names):
        out.append(_text(left + cell * (j + 0.5), top - 6, name))
    for i, name in enumerate(h.row_names):
        out.append(_text(left - 8, top + cell * (i + 0.6), name, "end"))
        for j, v in enumerate(h.values[i]):
            x, y = left + cell * j, top + cell * i
            if v is None:
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell:.1f}" height="{cell:.1f}" fill="#f4f4f4" stroke="#fff"/>')
                continue
            tip = f"{h.row_label} {name} -> {h.col_label} {h.col_names[j]}: {v:.4g} {h.unit}"
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell:.1f}" height="{cell:.1f}" '
                       f'fill="{cell_color(v, lo, hi)}" stroke="#fff"><title>{escape(tip)}</title></rect>')
            if cell >= 30:
                dark = hi > lo and (v - lo) / (hi - lo) > 0.55
                out.append(_text(x + cell / 2, y + cell / 2 + 4, f"{v:.3g}", extra=' font-size="10"'
                                 + (' fill="#fff"' if dark else "")))
    if h.mark is not None:
        i, j = h.mark
        out.append(f'<rect x="{left + cell * j + 1.5:.1f}" y="{top + cell * i + 1.5:.1f}" width="{cell - 3:.1f}" '
                   f'height="{cell - 3:.1f}" fill="none" stroke="{ALARM}" stroke-width="3"><title>slowest link</title></rect>')
    kx = left + cell * n_c + 16
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        y = top + k * 20
        out.append(f'<rect x="{kx:.1f}" y="{y:.1f}" width="16" height="16" fill="{cell_color(v, lo, hi)}" stroke="#ccc"/>')
        out.append(_text(kx + 22, y + 12, f"{v:.3g} {h.unit}", "start"))
    if h.mark is not None:
        y = top + 5 * 20 + 6
        out.append(f'<rect x="{kx:.1f}" y="{y:.1f}" width="16" height="16" fill="none" stroke="{ALARM}" stroke-width="3"/>')
        out.append(_text(kx + 22, y + 12, "slowest", "start"))
    out.append("</svg>")
    return "".join(out)


def zone_colors(chart: ZoneChart) -> dict[str, str]:
    """Choice label -> colour, in order of first appearance (shared with png.py)."""
    colors: dict[str, str] = {}
    for _, zones in chart.rows:
        for z in zones:
            colors.setdefault(z.label, PALETTE[len(colors) % len(PALETTE)])
    return colors


def zone_chart(chart: ZoneChart) -> str:
    left, right, top, row_h = 330.0, WIDTH - _RIGHT, 34.0, 28.0
    colors = zone_colors(chart)
    sx = _Scale(chart.x_min, chart.x_max * 1.0001, left, right, True)
    bottom = top + row_h * len(chart.rows)
    cols = 4
    height = bottom + 40 + 18 * math.ceil(len(colors) / cols)
    out = [_open(WIDTH, height, chart.title)]
    for t in axes.size_ticks(chart.x_min, chart.x_max):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e0e0e0"/>')
        out.append(_text(x, bottom + 16, axes.size_label(t)))
    for i, (label, zones) in enumerate(chart.rows):
        y = top + row_h * i
        out.append(_text(left - 8, y + row_h / 2 + 4, _clip(label, 50), "end"))
        out.append(f'<rect x="{left}" y="{y + 3:.1f}" width="{right - left:.1f}" height="{row_h - 6:.1f}" fill="#f4f4f4"/>')
        for z in zones:
            lo, hi = max(z.lo, chart.x_min), min(z.hi + 1, chart.x_max)
            if hi <= lo:
                continue
            x0, x1 = sx(max(lo, 1)), sx(hi)
            tip = f"{label}: {z.label} for {axes.size_label(z.lo)} to {axes.size_label(z.hi)}"
            out.append(f'<rect x="{x0:.1f}" y="{y + 3:.1f}" width="{max(x1 - x0, 1):.1f}" height="{row_h - 6:.1f}" '
                       f'fill="{colors[z.label]}" stroke="#fff"><title>{escape(tip)}</title></rect>')
            if x1 - x0 > 7 * len(z.label):
                out.append(_text((x0 + x1) / 2, y + row_h / 2 + 4, z.label, extra=' font-size="11" fill="#fff"'))
    for k, (label, color) in enumerate(colors.items()):
        x = left + (k % cols) * ((right - left) / cols)
        y = bottom + 36 + 18 * (k // cols)
        out.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="14" height="12" fill="{color}"/>')
        out.append(_text(x + 20, y, label, "start"))
    out.append("</svg>")
    return "".join(out)


def _quantile(s: list[float], q: float) -> float:
    k = (len(s) - 1) * q
    i = int(k)
    return s[i] if i + 1 >= len(s) else s[i] + (s[i + 1] - s[i]) * (k - i)


def strip_chart(chart: StripChart) -> str:
    """Each row: its runs as dots (spread vertically by their order, so equal values stay visible), the
    quartile box, the median as a dark tick, and the effect text at the right; a shared linear axis."""
    left, right, top, row_h = 170.0, WIDTH - 250.0, 34.0, 34.0
    vals = [v for r in chart.rows for v in r.values]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    sx = _Scale(lo - pad, hi + pad, left, right, False)
    bottom = top + row_h * len(chart.rows)
    out = [_open(WIDTH, bottom + 44, chart.title)]
    for t in axes.linear_ticks(lo - pad, hi + pad):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e0e0e0"/>')
        out.append(_text(x, bottom + 16, f"{t:g}"))
    out.append(_text((left + right) / 2, bottom + 36, f"value per {chart.item}{' (' + chart.unit + ')' if chart.unit else ''}"))
    colors = {"bad": ALARM, "good": PALETTE[2]}
    for i, r in enumerate(chart.rows):
        y = top + row_h * i
        mid = y + row_h / 2
        color = colors.get(r.level, DEFAULT_COLOR if i == 0 else PALETTE[0])
        out.append(_text(left - 8, mid + 4, _clip(r.label, 24), "end"))
        s = sorted(r.values)
        if len(s) >= 2:
            q1, q3 = sx(_quantile(s, 0.25)), sx(_quantile(s, 0.75))
            out.append(f'<rect x="{q1:.1f}" y="{y + 6:.1f}" width="{max(q3 - q1, 1):.1f}" height="{row_h - 12:.1f}" '
                       f'fill="none" stroke="{color}" stroke-opacity="0.6"/>')
        for k, v in enumerate(r.values):
            dy = ((k * 7) % 11 - 5) * (row_h - 14) / 10 / 2
            out.append(f'<circle cx="{sx(v):.1f}" cy="{mid + dy:.1f}" r="3" fill="{color}" fill-opacity="0.7">'
                       f'<title>{escape(f"{r.label} {chart.item} {k + 1}: {v:g} {chart.unit}")}</title></circle>')
        if r.median is not None:
            x = sx(r.median)
            out.append(f'<line x1="{x:.1f}" y1="{y + 4:.1f}" x2="{x:.1f}" y2="{y + row_h - 4:.1f}" stroke="#1b1b1b" '
                       f'stroke-width="2"><title>{escape(f"median {r.median:g}")}</title></line>')
        out.append(_text(right + 10, mid + 4, _clip(r.effect, 34), "start",
                         ' fill="' + colors.get(r.level, "#1b1b1b") + '"'))
    out.append("</svg>")
    return "".join(out)


def render(fig: LineChart | Heatmap | ZoneChart) -> str:
    if isinstance(fig, LineChart):
        return line_chart(fig)
    if isinstance(fig, Heatmap):
        return heatmap(fig)
    return zone_chart(fig)
