"""Page assembly: one self-contained HTML file (inline CSS and SVG, no scripts, fonts or
images from anywhere). Every string from the database goes through ``html.escape``."""

from __future__ import annotations

from html import escape

from ccltune.report import svg
from ccltune.report.model import Block, Heatmap, LineChart, Note, Section, Table, Text, ZoneChart

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1b1b;background:#f3f4f6}
header{background:#1f2d3d;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}header p{margin:4px 0 0;font-size:13px;color:#cfd8e3}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:8px 24px;z-index:1}
nav a{margin-right:16px;color:#1f5fa8;text-decoration:none;font-size:14px}
main{padding:8px 24px 40px;max-width:1600px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;margin:16px 0;padding:8px 18px 16px}
section h2{font-size:17px;margin:8px 0 10px}
.figs{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;border:1px solid #eee;border-radius:4px;flex:1 1 540px;max-width:780px}
figure svg{display:block;width:100%;height:auto}
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
"""


def render_table(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = []
    for i, row in enumerate(t.rows):
        cls = t.row_class[i] if i < len(t.row_class) else ""
        attr = f' class="{escape(cls)}"' if cls else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    cap = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_block(b: Block) -> str:
    if isinstance(b, (LineChart, Heatmap, ZoneChart)):
        return f"<figure>{svg.render(b)}</figure>"
    if isinstance(b, Table):
        return render_table(b)
    if isinstance(b, Note):
        return f'<p class="note {escape(b.level)}">{escape(b.text)}</p>'
    if isinstance(b, Text):
        return f"<details><summary>{escape(b.summary)}</summary><pre>{escape(b.text)}</pre></details>"
    raise TypeError(f"cannot render {type(b).__name__}")


def render_section(s: Section) -> str:
    parts, figs = [], []
    for b in s.blocks:  # consecutive figures share one wrapping row
        if isinstance(b, (LineChart, Heatmap, ZoneChart)):
            figs.append(render_block(b))
            continue
        if figs:
            parts.append(f'<div class="figs">{"".join(figs)}</div>')
            figs = []
        parts.append(render_block(b))
    if figs:
        parts.append(f'<div class="figs">{"".join(figs)}</div>')
    return f'<section id="{escape(s.id)}"><h2>{escape(s.title)}</h2>{"".join(parts)}</section>'


def render_page(sections: list[Section], *, title: str, subtitle: str, footer: str) -> str:
    nav = "".join(f'<a href="#{escape(s.id)}">{escape(s.title.split(":")[0])}</a>' for s in sections)
    body = "".join(render_section(s) for s in sections)
    return (
        "<!DOCTYPE html>\n"
        f"<!-- {escape(footer).replace('--', '- -')} -->\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>"
        f"<nav>{nav}</nav><main>{body}</main><footer>{escape(footer)}</footer></body></html>\n"
    )
