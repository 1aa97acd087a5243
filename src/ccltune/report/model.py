"""What a report is made of, independent of how it is drawn.

``data.py`` turns database rows into these records; ``svg.py`` and ``png.py`` draw the
figures, ``html.py`` lays out sections. Keeping the model plain lets the unit tests check
what a plot shows without parsing SVG.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

from ccltune.report.axes import ids_text


@dataclass
class Series:
    """One line. ``lo``/``hi`` (same length as ``xs``) draw an error band around it;
    ``marked`` flags points to draw in the alarm colour (regressions, slower sizes)."""

    label: str
    xs: list[float]
    ys: list[float]
    lo: list[float] | None = None
    hi: list[float] | None = None
    emphasis: bool = False  # NCCL's default: drawn thick and dark
    marked: list[bool] | None = None
    # Sizes the series was run at but has no drawable value for (an error row, a 0 GB/s
    # busbw on a log axis): (size, why). The line breaks there and the chart says so.
    gaps: list[tuple[float, str]] = field(default_factory=list)
    color: int | None = None  # palette index; None: by position in the chart
    dashed: bool = False  # in-place placement (bench curves)
    group: str = ""  # what the run picker toggles together: 'r12' (run 12); '' none
    # Waived at every size (out-of-place on gloo: torch.distributed is in-place only): the reason.
    # Such a series is not drawn; its chart says so in one line (``LineChart.notes``).
    waived: str = ""


@dataclass
class LineChart:
    title: str
    x_label: str
    y_label: str
    series: list[Series]
    x_log: bool = True  # x is always a size in bytes, log2 axis
    y_log: bool = True
    ref_y: float | None = None  # a horizontal reference line (1.0 for ratios)
    ref_band: tuple[float, float] | None = None  # a shaded tolerance band
    refs: list[tuple[float, str]] = field(default_factory=list)  # labelled lines: slowest-link ceilings
    max_visible: int = 8  # series beyond these are listed but hidden until picked
    notes: list[str] = field(default_factory=list)  # one line each under the legend

    @classmethod
    def of(cls, title: str, x_label: str, y_label: str, series: list[Series], **kw: object) -> "LineChart":
        """A chart of ``series``, those waived at every size left out and named, one line per reason
        ('out-of-place of runs 1-12: waived, torch.distributed is in-place only': ``waived_notes``)."""
        notes = waived_notes([s for s in series if s.waived])
        return cls(title, x_label, y_label, [s for s in series if not s.waived], notes=notes, **kw)  # type: ignore[arg-type]


_RUN_LABEL = re.compile(r"run (\d+)(?:, (.*))?\Z")


def waived_notes(series: list[Series]) -> list[str]:
    """One line per reason for series waived at every size: a gloo database of a dozen ``bench all`` runs
    waived out-of-place all_reduce in each, and its plot carried one identical line per run. Series that
    differ only by run are named once with their runs ('out-of-place of runs 1-12'); others by count and
    their first labels."""
    by_reason: dict[str, list[str]] = {}
    for s in series:
        by_reason.setdefault(s.waived, []).append(s.label)
    out = []
    for reason, labels in by_reason.items():
        found = [_RUN_LABEL.match(x) for x in labels]
        rests = {m.group(2) for m in found if m is not None}
        if len(labels) == 1:
            who = labels[0]
        elif all(found) and len(rests) == 1:
            rest, ids = rests.pop(), sorted(int(m.group(1)) for m in found if m is not None)
            who = f"{rest + ' of ' if rest else ''}runs {ids_text(ids)}"
        else:
            who = f"{len(labels)} series ({'; '.join(labels[:3])}{f' and {len(labels) - 3} more' if len(labels) > 3 else ''})"
        out.append(f"{who}: waived, {reason}")
    return out


@dataclass
class Heatmap:
    """``values[r][c]``; None is an empty cell. ``mark`` (row, col) gets a thick outline."""

    title: str
    row_label: str
    col_label: str
    row_names: list[str]
    col_names: list[str]
    values: list[list[float | None]]
    unit: str
    mark: tuple[int, int] | None = None


@dataclass
class Zone:
    lo: int  # bytes, inclusive
    hi: int  # bytes, inclusive
    label: str  # 'ring/ll/16'


@dataclass
class ZoneChart:
    """One horizontal bar per row; each zone covers a size range on a log axis."""

    title: str
    rows: list[tuple[str, list[Zone]]]
    x_min: int
    x_max: int


@dataclass
class StripRow:
    """One arm of an A/B of the user's job (``ccltune ab``): every run's value, its median, the ratio
    to default with its interval as text, and a level (good | bad | '' | info)."""

    label: str
    values: list[float]
    median: float | None
    effect: str = ""
    level: str = ""


@dataclass
class StripChart:
    """Each arm's runs as dots on one shared linear axis, with its quartile box and median."""

    title: str
    unit: str
    rows: list[StripRow]
    item: str = "run"   # what one dot is: a run of the job, or a block of one run (ab --in-run)


Figure = Union[LineChart, Heatmap, ZoneChart]


@dataclass
class Card:
    """One verdict: a node (host, GPUs), a run group on it ('8 ranks, NCCL 2.21.5') and the runs
    it draws on. ``lines`` are (level, text), worst first; ``figures`` are (label, value text)
    pairs shown large."""

    title: str
    subtitle: str
    level: str  # good | warn | bad | info
    headline: str
    figures: list[tuple[str, str]] = field(default_factory=list)
    lines: list[tuple[str, str]] = field(default_factory=list)
    group: str = ""


@dataclass
class Picker:
    """The run picker: (group, label, colour) per run drawn on the plots."""

    groups: list[tuple[str, str, str]]


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    row_class: list[str] = field(default_factory=list)  # '' | 'bad' | 'warn' | 'good' per row
    caption: str = ""
    wide: bool = False  # cells keep one line (commands): the table scrolls sideways
    folded: str = ""  # non-empty: shown folded under this summary


@dataclass
class Note:
    text: str
    level: str = "info"  # info | good | warn | bad


@dataclass
class Text:
    """Verbatim text (a rule file), shown folded under ``summary``."""

    summary: str
    text: str


Block = Union[LineChart, Heatmap, ZoneChart, StripChart, Table, Note, Text, Card, Picker]


@dataclass
class Section:
    id: str  # stable: see sections.SECTION_IDS
    title: str
    blocks: list[Block] = field(default_factory=list)
    empty: bool = False  # nothing to show: its note says why; the page names it in one table, not as a section

    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, (LineChart, Heatmap, ZoneChart))]
