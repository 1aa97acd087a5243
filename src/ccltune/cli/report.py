"""``ccltune report``: write one self-contained HTML page (and optionally PNGs) from the
results database (``ccltune.commands.report`` writes it). See docs/report.md for what each section shows."""

from __future__ import annotations

import argparse

from ccltune.cli._common import help_from
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
    p.add_argument("--db", default=default(ReportOptions, "db"))
    p.add_argument("--out", default=default(ReportOptions, "out"), metavar="FILE.html")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--runs", metavar="IDS")
    which.add_argument("--run", type=int, metavar="N")
    p.add_argument("--latest", type=int, metavar="N")
    p.add_argument("--compare", type=int, nargs=2, metavar=("A", "B"))
    p.add_argument("--tolerance", type=float, default=default(ReportOptions, "tolerance"), metavar="PCT")
    p.add_argument("--png", metavar="DIR")
    p.set_defaults(func=main)
    help_from(p, ReportOptions)


def main(args: argparse.Namespace) -> int:
    run_report(from_fields(ReportOptions, vars(args)), terminal())
    return 0
