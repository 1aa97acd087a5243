"""``ccltune report``: write one self-contained HTML page (and optionally PNGs) from the
results database. See docs/report.md for what each section shows."""

from __future__ import annotations

import argparse
import math

from ccltune.cli._common import comma_list, parse_run_ids
from ccltune.errors import UsageError
from ccltune.report.compare import DEFAULT_TOLERANCE_PCT
from ccltune.store import DEFAULT_DB, Store

DEFAULT_OUT = "ccltune-report.html"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="write an HTML report of runs in the results database",
        description="Write one self-contained HTML page (inline SVG plots, no script, works offline): a "
                    "verdict per node (health, busbw against the slowest-link ceiling, what tuning gained), "
                    "busbw against size with the ceiling, link heatmaps, tuned rules as size zones, "
                    "validation speedups, sweep candidates, findings, runs and what differs between them.",
    )
    p.add_argument("--db", default=DEFAULT_DB, help="results database to read (default: %(default)s)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="FILE.html", help="the page to write, atomically (default: %(default)s)")
    which = p.add_mutually_exclusive_group()
    comma_list(which.add_argument("--runs", metavar="IDS", help="runs to show, e.g. 3,4 or 2-5 (default: all runs)"))
    which.add_argument("--run", type=int, metavar="N", help="show one run")
    p.add_argument("--latest", type=int, metavar="N",
                   help="draw the latest N runs in full and summarise the older ones in one table "
                        "(default: 12, or every run named by --runs/--run)")
    p.add_argument("--compare", type=int, nargs=2, metavar=("A", "B"),
                   help="put run B next to run A, per size; a ratio below 1 - tolerance is a regression "
                        "(without --runs/--run the page then shows runs A and B only)")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE_PCT, metavar="PCT",
                   help="--compare: slowdown in percent that counts as a regression (default: %(default)s)")
    p.add_argument("--png", metavar="DIR", help="also write every plot as a PNG file here (needs matplotlib: pip install 'ccltune[png]')")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ccltune.report import write_report

    ranges = [(args.run, args.run)] if args.run is not None else (parse_run_ids(args.runs) if args.runs else None)
    if not math.isfinite(args.tolerance):
        raise UsageError(f"--tolerance must be a number of percent, got {args.tolerance:g}")
    with Store(args.db, readonly=True) as store:
        run_ids = None if ranges is None else store.runs_in(ranges, "--run" if args.run is not None else "--runs")
        result = write_report(store, args.out, run_ids=run_ids,
                              compare=tuple(args.compare) if args.compare else None,
                              png_dir=args.png, tolerance_pct=args.tolerance, latest=args.latest)
    n_figs = sum(len(s.figures()) for s in result.sections)
    print(f"wrote {result.path}: {len(result.run_ids)} run(s), {n_figs} plot(s)")
    if result.pngs:
        print(f"wrote {len(result.pngs)} PNG file(s) under {args.png}")
    return 0
