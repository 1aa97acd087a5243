"""``report``: one self-contained HTML page (and optionally PNGs) of the runs in a results database;
the page itself is ``ccltune.report``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccltune.commands.common import Console, check_outputs, parse_run_ids
from ccltune.commands.options import option
from ccltune.errors import UsageError
from ccltune.report import ReportResult
from ccltune.report.compare import DEFAULT_TOLERANCE_PCT
from ccltune.store import DEFAULT_DB, Store

DEFAULT_OUT = "ccltune-report.html"


@dataclass(frozen=True)
class ReportOptions:
    """``ccltune report``'s options (``ccltune report --help``). ``runs`` and ``run`` exclude each other."""

    db: str = option(DEFAULT_DB, flag="--db", help="results database to read (default: %(default)s)")
    out: str = option(DEFAULT_OUT, flag="--out", help="the page to write, atomically (default: %(default)s)")
    runs: str | None = option(None, flag="--runs", comma=True, help="runs to show, e.g. 3,4 or 2-5 (default: all runs)")
    run: int | None = option(None, flag="--run", help="show one run")
    latest: int | None = option(None, flag="--latest",
                                help="draw the latest N runs in full and summarise the older ones in one table "
                                     "(default: 12, or every run named by --runs/--run)")
    compare: tuple[int, int] | None = option(None, flag="--compare",
                                             help="put run B next to run A, per size; a ratio below 1 - tolerance is a regression "
                                                  "(without --runs/--run the page then shows runs A and B only)")
    tolerance: float = option(DEFAULT_TOLERANCE_PCT, flag="--tolerance",
                              help="--compare: slowdown in percent that counts as a regression (default: %(default)s)")
    png: str | None = option(None, flag="--png",
                             help="also write every plot as a PNG file here (needs matplotlib: pip install 'ccltune[png]')")


def run_report(o: ReportOptions, console: Console = Console()) -> ReportResult:
    """Write the page (and the PNGs); say what was written to ``console``."""
    from ccltune.report import write_report

    check_outputs(o)
    if o.runs is not None and o.run is not None:
        raise UsageError("--runs and --run name the runs two ways: give one")
    ranges = [(o.run, o.run)] if o.run is not None else (parse_run_ids(o.runs) if o.runs else None)
    if not math.isfinite(o.tolerance):
        raise UsageError(f"--tolerance must be a number of percent, got {o.tolerance:g}")
    with Store(o.db, readonly=True) as store:
        run_ids = None if ranges is None else store.runs_in(ranges, "--run" if o.run is not None else "--runs")
        result = write_report(store, o.out, run_ids=run_ids, compare=o.compare, png_dir=o.png,
                              tolerance_pct=o.tolerance, latest=o.latest)
    n_figs = sum(len(s.figures()) for s in result.sections)
    console.say(f"wrote {result.path}: {len(result.run_ids)} run(s), {n_figs} plot(s)")
    if result.pngs:
        console.say(f"wrote {len(result.pngs)} PNG file(s) under {o.png}")
    return result
