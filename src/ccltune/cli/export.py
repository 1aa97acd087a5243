"""ccltune export RUN: one run's environment and rows as JSON or CSV, stdout or --out
(``ccltune.commands.export`` renders it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, add_db, help_from
from ccltune.commands.common import terminal
from ccltune.commands.export import FORMATS, ExportOptions, run_export
from ccltune.commands.options import default, from_fields


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export one run as JSON or CSV",
                       formatter_class=DefaultsFormatter)
    p.add_argument("run")
    p.add_argument("--format", choices=FORMATS, default=default(ExportOptions, "format"))
    p.add_argument("--out", default=None, metavar="PATH")
    add_db(p)
    p.set_defaults(func=main)
    help_from(p, ExportOptions)


def main(args: argparse.Namespace) -> int:
    run_export(from_fields(ExportOptions, vars(args)), terminal())
    return 0
