"""``ccltune report``: one self-contained HTML page from the results database.

Pipeline: ``load`` reads runs and their rows from the Store (the only I/O on the
database; rows only of the runs drawn in full) -> ``sections.build_sections`` turns them
into verdict cards, figures and tables (pure, via ``verdict``, ``data``, ``zones`` and
``compare``) -> ``html.render_page`` draws them as inline SVG ->
``write_report`` writes the page atomically; ``png.write_pngs`` draws the same figures
with matplotlib for ``--png``.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ccltune._version import __version__
from ccltune.errors import UsageError
from ccltune.files import write_text
from ccltune.report.compare import DEFAULT_TOLERANCE_PCT
from ccltune.report.data import NoValue, canonical
from ccltune.report.html import render_page
from ccltune.report.model import Section
from ccltune.report.sections import PAGE_NAV, ReportInput, build_sections, left_out, picker_groups
from ccltune.report.verdict import ids_text
from ccltune.status import RowStatus
from ccltune.store import Store

__all__ = ["ReportResult", "load", "write_report", "DEFAULT_TOLERANCE_PCT", "DEFAULT_LATEST"]


@dataclass
class ReportResult:
    path: Path
    sections: list[Section]
    run_ids: list[int]
    pngs: list[Path]


DEFAULT_LATEST = 12  # runs drawn in full when no --runs is given; older ones are summarised


def load(store: Store, run_ids: list[int] | None = None, compare: tuple[int, int] | None = None,
         tolerance_pct: float = DEFAULT_TOLERANCE_PCT, latest: int | None = None) -> ReportInput:
    """Everything the report shows, read from ``store``. ``run_ids`` None: every run
    (only the compared two when ``compare`` is given). Unknown ids raise UsageError.
    ``latest``: how many of them (the latest) are drawn in full; default all of ``run_ids``,
    else ``DEFAULT_LATEST``. Rows are read only for drawn runs; every run's best busbw per
    collective comes from one aggregate query, so 1,000 runs stay small and fast."""
    if compare is not None and compare[0] == compare[1]:
        raise UsageError(f"--compare needs two different runs, got {compare[0]} twice")
    if tolerance_pct < 0:
        raise UsageError(f"--tolerance must be >= 0 (percent), got {tolerance_pct:g}")
    if latest is not None and latest < 1:
        raise UsageError(f"--latest must be >= 1 (runs drawn in full), got {latest}")
    if run_ids is None:
        runs = [store.run(i) for i in compare] if compare else store.runs()
        if not runs:
            raise UsageError(f"database {str(store.path)!r} has no runs yet; measure something first "
                             "(ccltune bench, sweep, links, doctor)")
    else:
        runs = [store.run(i) for i in dict.fromkeys(run_ids)]
    pair = (store.run(compare[0]), store.run(compare[1])) if compare else None
    n_drawn = latest if latest is not None else (len(runs) if run_ids is not None or compare else DEFAULT_LATEST)
    drawn = {r.id for r in sorted(runs, key=lambda r: -r.id)[:n_drawn]} | set(compare or ())
    ids = sorted(drawn)
    rows: dict[int, list[dict]] = defaultdict(list)
    for row in store.measurement_rows(ids):
        rows[row["run_id"]].append(row)
    every = {r.id for r in runs}
    peaks, failed = _peaks(store)
    judged = {r.id for r in runs if r.kind in ("doctor", "check")} | set(ids)
    return ReportInput(
        runs=runs,
        rows=dict(rows),
        links={i: store.links(i) for i in ids},
        findings={i: f for i, f in _findings(store).items() if i in judged},
        artifacts={i: store.artifacts(i) for i in ids},
        compare=pair,
        tolerance_pct=tolerance_pct,
        drawn=None if drawn >= every else drawn,
        peaks={i: p for i, p in peaks.items() if i in every},
        no_value={i: p for i, p in failed.items() if i in every},
        ab={r.id: store.ab_samples(r.id) for r in runs if r.kind == "ab" and r.id in drawn},
    )


def _peaks(store: Store) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, NoValue]]]:
    """(run id -> collective -> highest busbw (GB/s) of NCCL's default, 'ok' rows only; run id ->
    collective -> what its rows were, for each collective of a run with no such value at any size:
    ``data.no_value`` over every run, from one aggregate query)."""
    out: dict[int, dict[str, float]] = defaultdict(dict)
    seen: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    notes: dict[tuple[int, str], str] = {}
    for run_id, coll, status, sizes, best, note in store.default_summary():
        name = canonical(coll)  # one entry per collective, however the rows spell it
        if status == RowStatus.OK and best is not None:
            out[run_id][name] = max(best, out[run_id].get(name, 0.0))
        else:
            seen[(run_id, name)][str(status)] += sizes
            if note:
                notes.setdefault((run_id, name), str(note))
    failed: dict[int, dict[str, NoValue]] = defaultdict(dict)
    for (run_id, name), counts in seen.items():
        if name not in out.get(run_id, {}):
            failed[run_id][name] = (dict(sorted(counts.items())), notes.get((run_id, name), ""))
    return dict(out), dict(failed)


def _findings(store: Store) -> dict[int, list[dict]]:
    return store.all_findings()


def write_report(store: Store, out: str | os.PathLike[str], *, run_ids: list[int] | None = None,
                 compare: tuple[int, int] | None = None, png_dir: str | os.PathLike[str] | None = None,
                 tolerance_pct: float = DEFAULT_TOLERANCE_PCT, latest: int | None = None) -> ReportResult:
    out = Path(out)
    if not out.parent.is_dir():
        raise UsageError(f"--out {str(out)!r}: folder {str(out.parent)!r} does not exist")
    if png_dir is not None:
        from ccltune.report import png  # raises UsageError when matplotlib is missing

        png.require_matplotlib()
    inp = load(store, run_ids, compare, tolerance_pct, latest)
    sections = build_sections(inp)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
    ids = [r.id for r in inp.runs]
    drawn = "" if inp.drawn is None else f"; the latest {len(inp.drawn)} drawn in full"
    absent = left_out(sections)
    page = render_page(
        [x for x in sections if not x.empty] + ([absent] if absent is not None else []),
        title="ccltune report",
        subtitle=f"{len(ids)} run(s) from {store.path.name}: {ids_text(sorted(ids))}{drawn}",
        footer=f"Generated by ccltune {__version__} from {store.path} on {stamp}.",
        groups=picker_groups(inp), nav_groups=list(PAGE_NAV),
    )
    write_text(out, page, flag="--out")  # as any file the user makes: 0666 less the umask
    pngs = png.write_pngs(sections, Path(png_dir)) if png_dir is not None else []
    return ReportResult(out, sections, ids, pngs)
