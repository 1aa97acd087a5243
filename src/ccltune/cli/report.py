"""``ccltune report``: write one self-contained HTML page (and optionally PNGs) from the
results database (``ccltune.commands.report`` writes it). See docs/report.md for what each section shows."""

from __future__ import annotations

import argparse

from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.report import ReportOptions, run_report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="write an HTML report of runs in the results database",
        description="Write one self-contained HTML page (inline SVG plots, no script, works offline): a "
                    "verdict per node (health, busbw against the slowest-link ceiling, what tuning gained), "
                    "busbw against size with the ceiling, link heatmaps, tuned rules as size zones, "
                    "validation speedups, sweep candidates, findings, runs and what differs between them.",
    )
    p.add_argument("--db", default=default(ReportOptions, "db"), help="results database to read (default: %(default)s)")
    p.add_argument("--out", default=default(ReportOptions, "out"), metavar="FILE.html", help="the page to write, atomically (default: %(default)s)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--runs", metavar="IDS", help="runs to show, e.g. 3,4 or 2-5 (default: all runs)")
    which.add_argument("--run", type=int, metavar="N", help="show one run")
    p.add_argument("--latest", type=int, metavar="N",
                   help="draw the latest N runs in full and summarise the older ones in one table "
                        "(default: 12, or every run named by --runs/--run)")
    p.add_argument("--compare", type=int, nargs=2, metavar=("A", "B"),
                   help="put run B next to run A, per size; a ratio below 1 - tolerance is a regression "
                        "(without --runs/--run the page then shows runs A and B only)")
    p.add_argument("--tolerance", type=float, default=default(ReportOptions, "tolerance"), metavar="PCT",
                   help="--compare: slowdown in percent that counts as a regression (default: %(default)s)")
    p.add_argument("--png", metavar="DIR", help="also write every plot as a PNG file here (needs matplotlib: pip install 'ccltune[png]')")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    run_report(from_fields(ReportOptions, vars(args)), terminal())
    return 0
