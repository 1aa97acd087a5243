"""Page assembly: one self-contained HTML file (inline CSS and SVG, no scripts, fonts or
images from anywhere). Every string from the database goes through ``html.escape``.

Toggling needs no script: each line chart holds one hidden checkbox per series (checked =
hidden) before its SVG, and its HTML legend entries are ``<label>``s of them; generic CSS
rules (``.tg:nth-of-type(k):checked ~ svg .sk``) hide series k. The run picker is the same
with one checkbox per run before ``<main>``. It works offline, with scripts off, in any
browser of the last decade."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from html import escape

from ccltune.report import svg
from ccltune.report.axes import size_label
from ccltune.report.model import (
    Block,
    Card,
    Heatmap,
    LineChart,
    Note,
    Picker,
    Section,
    StripChart,
    Table,
    Text,
    ZoneChart,
)

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1b1b;background:#f3f4f6}
header{background:#1f2d3d;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}header p{margin:4px 0 0;font-size:13px;color:#cfd8e3}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:8px 24px;z-index:1}
nav a{margin-right:16px;color:#1f5fa8;text-decoration:none;font-size:14px}
main{padding:8px 24px 40px;max-width:1600px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;margin:16px 0;padding:8px 18px 16px}
section h2{font-size:17px;margin:8px 0 10px}
.figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
figure{margin:0;border:1px solid #eee;border-radius:4px;flex:1 1 540px;max-width:780px}
figure>svg{display:block;width:100%;height:auto}figure.fixed{flex:0 1 auto}figure.fixed>svg{width:auto;max-width:100%}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0;max-width:100%}
caption{text-align:left;font-weight:600;padding:4px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5}
td:first-child{white-space:nowrap}
td{max-width:520px;overflow-wrap:anywhere}
tr.good td{background:#e8f5e9}tr.warn td{background:#fff8e1}tr.bad td{background:#fdecea}
.note{margin:8px 0;padding:6px 10px;border-left:4px solid #9aa5b1;background:#f7f8fa;font-size:14px}
.note.good{border-color:#2e7d32;background:#e8f5e9}.note.warn{border-color:#f9a825;background:#fff8e1}
.note.bad{border-color:#c62828;background:#fdecea;font-weight:600}
details{margin:8px 0}pre{background:#f7f8fa;border:1px solid #eee;padding:8px;overflow:auto;font-size:12px}
footer{color:#666;font-size:12px;padding:0 24px 24px}
nav b{margin-right:6px;color:#555;font-size:13px}
input.tg,input.pick{position:absolute;opacity:0;width:1px;height:1px;margin:0;pointer-events:none}  /* hidden, not display:none: Tab reaches them, Space toggles */
.legend{display:flex;flex-wrap:wrap;gap:2px 14px;padding:2px 10px 8px;font-size:12.5px}
.legend label,.picker label{cursor:pointer;user-select:none;white-space:nowrap}
.legend label:hover,.picker label:hover{text-decoration:underline}
.legend svg{display:inline;vertical-align:middle;margin-right:4px;width:24px;height:12px}
.legend .more{color:#666}
.fignote{font-size:12px;color:#6b4e00;margin:0 10px 8px}
.picker{font-size:13px;margin:6px 0;padding:6px 10px;background:#f7f8fa;border:1px solid #e3e6ea;border-radius:4px}
.picker label{display:inline-block;margin:2px 10px 2px 0;padding:1px 6px;border-radius:3px;border-left:6px solid #999}
.cards{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.card{flex:1 1 340px;max-width:560px;border:1px solid #ddd;border-top:6px solid #9aa5b1;border-radius:6px;padding:8px 14px;background:#fff}
.card.wide{flex-basis:100%;max-width:none}.card.wide ul{columns:2 420px}
.card.good{border-top-color:#2e7d32}.card.warn{border-top-color:#f9a825}.card.bad{border-top-color:#c62828}
.card h3{margin:2px 0;font-size:16px}
.card h3 .grp{font-weight:400;color:#444;margin-left:8px;font-size:14px}.card .sub{color:#555;font-size:12.5px;margin:0 0 6px}
.card .head{font-weight:600;margin:4px 0 8px}.card.info .head{font-weight:400;color:#555}
.card .nums{display:flex;flex-wrap:wrap;gap:6px 18px;margin:4px 0 8px}
.card .num b{display:block;font-size:21px}.card .num span{font-size:12px;color:#555}
.card ul{margin:4px 0;padding-left:18px;font-size:13px}.card li.bad{color:#b71c1c}.card li.warn{color:#8a6100}
.card li.good{color:#1b5e20}
table.wide td,table.wide th{white-space:nowrap;max-width:none}
.scroll{overflow-x:auto;max-width:100%}
code.cmd{white-space:nowrap}
"""
# CSS colour of a run picker entry is inline; hiding rules are generated per page (_toggle_css).


def render_table(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = []
    for i, row in enumerate(t.rows):
        cls = t.row_class[i] if i < len(t.row_class) else ""
        attr = f' class="{escape(cls)}"' if cls else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    cap = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    wide = ' class="wide"' if t.wide else ""
    html = f"<table{wide}>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    html = f'<div class="scroll">{html}</div>' if t.wide else html
    return f"<details><summary>{escape(t.folded)}</summary>{html}</details>" if t.folded else html


_fig_ids = itertools.count(1)


def _swatch(color: str, width: float, dash: str, points_only: bool) -> str:
    line = ("" if points_only else f'<line x1="1" y1="6" x2="23" y2="6" stroke="{color}" stroke-width="{width}"'
            + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
    return (f'<svg width="24" height="12" aria-hidden="true">{line}'
            f'<circle cx="12" cy="6" r="3" fill="{color}"/></svg>')


def render_chart(c: LineChart) -> str:
    """The SVG, a checkbox per series before it and an HTML legend of their labels after it;
    series past ``max_visible`` start hidden. Gaps are named under the legend."""
    fig = next(_fig_ids)
    boxes, entries, gaps = [], [], []
    shown = 0
    for i, s in enumerate(c.series):
        sid = f"f{fig}s{i + 1}"
        hidden = shown >= c.max_visible and not s.emphasis  # NCCL's default is always shown
        shown += not hidden
        boxes.append(f'<input type="checkbox" class="tg" id="{sid}"{" checked" if hidden else ""}>')
        color, width, dash = svg.series_style(i, s)
        group = f" g-{escape(s.group)}" if s.group else ""
        n = len(s.xs)
        what = "" if n >= 3 else (" (1 size: a point)" if n == 1 else f" ({n} sizes: points)" if n else " (no value)")
        entries.append(f'<label for="{sid}" class="l{i + 1}{group}" title="click to show or hide">'
                       f'{_swatch(color, width, dash, n < 3)}{escape(s.label)}{escape(what)}</label>')
        if s.gaps:
            where = ", ".join(f"{size_label(x)} ({why})" for x, why in s.gaps[:6])
            more = f" and {len(s.gaps) - 6} more" if len(s.gaps) > 6 else ""
            gaps.append(f"{s.label}: not drawn at {where}{more}")
    extra = len(c.series) - shown
    if extra > 0:
        entries.append(f'<span class="more">{extra} more series hidden: click a faded entry to show it</span>')
    note = "".join(f'<p class="fignote">{escape(n)}</p>' for n in c.notes)
    if gaps:
        note += ('<p class="fignote">Gaps (× on the size axis; the line breaks there): '
                 + escape("; ".join(gaps)) + "</p>")
    return (f'<figure>{"".join(boxes)}{svg.render(c)}<div class="legend">{"".join(entries)}</div>{note}</figure>')


def render_card(c: Card) -> str:
    nums = "".join(f'<div class="num"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for k, v in c.figures)
    lines = "".join(f'<li class="{escape(lv)}">{escape(t)}</li>' for lv, t in c.lines)
    grp = f'<span class="grp">{escape(c.group)}</span>' if c.group else ""
    # a card with much to say (a red one, or tuning and workload numbers) takes the whole row, so
    # its numbers sit side by side and the cards after it are not pushed below a tall narrow one
    wide = " wide" if c.level == "bad" or len(c.figures) > 3 else ""
    return (f'<div class="card {escape(c.level)}{wide}"><h3>{escape(c.title)}{grp}</h3><p class="sub">{escape(c.subtitle)}</p>'
            f'<p class="head">{escape(c.headline)}</p>' + (f'<div class="nums">{nums}</div>' if nums else "")
            + (f"<ul>{lines}</ul>" if lines else "") + "</div>")


def render_block(b: Block) -> str:
    if isinstance(b, LineChart):
        return render_chart(b)
    if isinstance(b, (Heatmap, ZoneChart)):
        return f'<figure class="fixed">{svg.render(b)}</figure>'
    if isinstance(b, StripChart):
        return f'<figure class="fixed">{svg.strip_chart(b)}</figure>'
    if isinstance(b, Card):
        return render_card(b)
    if isinstance(b, Picker):
        return picker(b.groups)
    if isinstance(b, Table):
        return render_table(b)
    if isinstance(b, Note):
        return f'<p class="note {escape(b.level)}">{escape(b.text)}</p>'
    if isinstance(b, Text):
        return f"<details><summary>{escape(b.summary)}</summary><pre>{escape(b.text)}</pre></details>"
    raise TypeError(f"cannot render {type(b).__name__}")


def render_section(s: Section) -> str:
    parts: list[str] = []
    run: list[tuple[Block, str]] = []  # consecutive figures (or cards) share one wrapping row
    kinds = ((LineChart, Heatmap, ZoneChart), (Card,))

    def flush() -> None:
        if run:
            cls = "cards" if isinstance(run[0][0], Card) else "figs"
            parts.append(f'<div class="{cls}">{"".join(h for _, h in run)}</div>')
            run.clear()

    for b in s.blocks:
        kind = next((k for k in kinds if isinstance(b, k)), None)
        if kind is None:
            flush()
            parts.append(render_block(b))
            continue
        if run and not isinstance(run[0][0], kind):
            flush()
        run.append((b, render_block(b)))
    flush()
    return f'<section id="{escape(s.id)}"><h2>{escape(s.title)}</h2>{"".join(parts)}</section>'


_FOCUS = "outline:2px solid #1f5fa8;outline-offset:1px"  # the label of the checkbox a keyboard is on


def _toggle_css(n_series: int, groups: list[str]) -> str:
    """Hiding rules: series k of a chart, and every series of a picked-off run; the label of the
    checkbox that has the keyboard's focus is outlined."""
    rules = [f".tg:nth-of-type({k}):checked~svg .s{k}{{display:none}}"
             f".tg:nth-of-type({k}):checked~.legend .l{k}{{opacity:.4;text-decoration:line-through}}"
             f".tg:nth-of-type({k}):focus-visible~.legend .l{k}{{{_FOCUS}}}"
             for k in range(1, n_series + 1)]
    for g in groups:
        rules.append(f"#pick-{g}:checked~main .{g}{{display:none}}"
                     f"#pick-{g}:checked~main label[for=pick-{g}],#pick-{g}:checked~main .g-{g}"
                     "{opacity:.4;text-decoration:line-through}"
                     f"#pick-{g}:focus-visible~main label[for=pick-{g}]{{{_FOCUS}}}")
    return "".join(rules)


def picker(groups: list[tuple[str, str, str]]) -> str:
    """The run picker's labels: (group, label, colour) per drawn run."""
    labels = "".join(f'<label for="pick-{escape(g)}" style="border-left-color:{escape(c)}" '
                     f'title="click to hide or show this run on every plot">{escape(t)}</label>'
                     for g, t, c in groups)
    return f'<div class="picker"><b>Runs drawn</b> (click one to hide or show it on every plot): {labels}</div>'


def render_page(sections: list[Section], *, title: str, subtitle: str, footer: str,
                groups: Sequence[tuple[str, str, str]] = (),
                nav_groups: Sequence[tuple[str, Sequence[tuple[str, str]]]] = ()) -> str:
    """``groups``: the run picker's entries; ``nav_groups``: (heading, [(section id, label)])
    for the navigation bar (default: every section by its title)."""
    global _fig_ids
    _fig_ids = itertools.count(1)
    have = {s.id for s in sections}
    nav_groups = list(nav_groups) or [("", [(s.id, s.title) for s in sections])]
    nav = "".join((f"<b>{escape(h)}:</b>" if h else "")
                  + "".join(f'<a href="#{escape(i)}">{escape(label)}</a>' for i, label in ids if i in have)
                  for h, ids in nav_groups if any(i in have for i, _ in ids))  # a heading only over links
    body = "".join(render_section(s) for s in sections)
    n_series = max((len(b.series) for s in sections for b in s.blocks if isinstance(b, LineChart)), default=0)
    css = _CSS + _toggle_css(n_series, [g for g, _, _ in groups])
    boxes = "".join(f'<input type="checkbox" class="pick" id="pick-{escape(g)}">' for g, _, _ in groups)
    return (
        "<!DOCTYPE html>\n"
        f"<!-- {escape(footer).replace('--', '- -')} -->\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{css}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>{boxes}"
        f"<nav>{nav}</nav><main>{body}</main><footer>{escape(footer)}</footer></body></html>\n"
    )
