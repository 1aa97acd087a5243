"""``--png DIR``: the report's figures as PNG files, drawn with matplotlib (optional: only
this module imports it). Same data, ticks and colours as the SVG in the page."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ccltune.errors import UsageError
from ccltune.report import axes, svg
from ccltune.report.model import Heatmap, LineChart, Section, ZoneChart

_DPI = 100


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--png needs matplotlib, which is not installed here (pip install 'ccltune[png]'); "
                         "the HTML report itself does not need it") from None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "figure"


def png_names(sections: list[Section]) -> list[str]:
    """File names, in page order: '<section id>-<nn>-<title slug>.png'."""
    return [f"{s.id}-{k:02d}-{slug(f.title)}.png" for s in sections for k, f in enumerate(s.figures(), 1)]


def write_pngs(sections: list[Section], folder: Path) -> list[Path]:
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--png {str(folder)!r}: cannot create the folder: {exc.strerror}") from None
    figs = [f for s in sections for f in s.figures()]
    written = []
    for name, spec in zip(png_names(sections), figs):
        fig = Figure(figsize=(7.6, 4.6 if not isinstance(spec, ZoneChart) else 1.4 + 0.4 * len(spec.rows)), dpi=_DPI)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        if isinstance(spec, LineChart):
            _line(ax, spec)
        elif isinstance(spec, Heatmap):
            _heatmap(fig, ax, spec)
        else:
            _zones(ax, spec)
        ax.set_title(spec.title, fontsize=11)
        fig.tight_layout()
        path = folder / name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        try:
            fig.savefig(tmp, format="png")
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        written.append(path)
    return written


def _size_axis(ax: Any, lo: float, hi: float) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ticks = axes.size_ticks(lo, hi)
    ax.set_xticks(ticks, [axes.size_label(t) for t in ticks])
    ax.minorticks_off()


def _line(ax: Any, c: LineChart) -> None:
    c = svg.plottable(c)
    lo, hi = svg.x_range([x for s in c.series for x in s.xs])
    y_lo, y_hi, y_ticks = svg.y_range(c)
    if c.ref_band:
        ax.axhspan(*sorted(c.ref_band), color="#e6e6e6", zorder=0)
    if c.ref_y is not None:
        ax.axhline(c.ref_y, color="#555", linestyle="--", linewidth=1)
    for v, label in c.refs:
        ax.axhline(v, color=svg.REF_COLOR, linestyle="-.", linewidth=1.2, label=label)
    for i, s in enumerate(c.series):
        color, width, dash = svg.series_style(i, s)
        if s.lo and s.hi:
            ax.fill_between(s.xs, s.lo, s.hi, color=color, alpha=0.18, linewidth=0)
        for k, seg in enumerate(svg.segments(s)):  # broken at gaps, none for < 3 points
            ax.plot(*zip(*seg), color=color, linewidth=width, linestyle="--" if dash else "-",
                    label=s.label if k == 0 else None)
        ax.plot(s.xs, s.ys, color=color, linestyle="none", marker="o", markersize=3 if len(s.xs) >= 3 else 5,
                label=None if svg.segments(s) else s.label)
        bad = [(x, y) for j, (x, y) in enumerate(zip(s.xs, s.ys)) if s.marked and s.marked[j]]
        if bad:
            ax.scatter(*zip(*bad), color=svg.ALARM, s=36, zorder=3)
    _size_axis(ax, lo, hi)
    if c.y_log:
        ax.set_yscale("log")
    ax.set_ylim(y_lo, y_hi)
    ax.set_yticks(y_ticks, [axes.value_label(t) for t in y_ticks])
    if c.y_log:
        ax.minorticks_off()
    ax.set_xlabel(c.x_label)
    ax.set_ylabel(c.y_label)
    ax.grid(True, color="#e0e0e0")
    if c.series:
        ax.legend(fontsize=7, ncol=3, loc="best")


def _heatmap(fig: Any, ax: Any, h: Heatmap) -> None:
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.patches import Rectangle

    lo, hi = svg.heat_range(h)
    cmap = LinearSegmentedColormap.from_list("ccltune", [svg.cell_color(0, 0, 1), svg.cell_color(1, 0, 1)])
    grid = [[float("nan") if v is None else v for v in row] for row in h.values]
    im = ax.imshow(grid, cmap=cmap, vmin=lo, vmax=hi if hi > lo else lo + 1)
    ax.set_xticks(range(len(h.col_names)), h.col_names)
    ax.set_yticks(range(len(h.row_names)), h.row_names)
    ax.set_xlabel(h.col_label)
    ax.set_ylabel(h.row_label)
    if len(h.row_names) <= 16:
        for i, row in enumerate(h.values):
            for j, v in enumerate(row):
                if v is not None:
                    dark = hi > lo and (v - lo) / (hi - lo) > 0.55
                    ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7, color="#fff" if dark else "#000")
    if h.mark is not None:
        i, j = h.mark
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor=svg.ALARM, linewidth=3))
    fig.colorbar(im, ax=ax, label=h.unit)


def _zones(ax: Any, z: ZoneChart) -> None:
    colors = svg.zone_colors(z)
    seen: set[str] = set()
    for i, (_, zones) in enumerate(z.rows):
        for zone in zones:
            lo, hi = max(zone.lo, z.x_min, 1), min(zone.hi + 1, z.x_max)
            if hi <= lo:
                continue
            label = None if zone.label in seen else zone.label
            seen.add(zone.label)
            ax.barh(i, hi - lo, left=lo, height=0.7, color=colors[zone.label], label=label)
    ax.set_yticks(range(len(z.rows)), [label for label, _ in z.rows], fontsize=8)
    ax.invert_yaxis()
    _size_axis(ax, z.x_min, z.x_max)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.25))
