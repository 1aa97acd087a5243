"""ccltune runs: list the runs in the results database (``ccltune.commands.runs`` reads them)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, add_db, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import from_fields
from ccltune.commands.runs import RunsOptions, run_runs


def register(sub: Any) -> None:
    p = sub.add_parser("runs", help="list runs in the results database",
                       formatter_class=DefaultsFormatter)
    p.add_argument("--kind", default=None)
    add_db(p)
    p.set_defaults(func=main)
    help_from(p, RunsOptions)


def main(args: argparse.Namespace) -> int:
    run_runs(from_fields(RunsOptions, vars(args)), terminal())
    return 0
