"""``ccltune import nccl-tests FILE...``: store nccl-tests output (each run in each file) as measurements of one
configuration (``ccltune.commands.import_`` runs it); ``import transferbench|nvbandwidth``: cli/import_links.py."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli import import_links
from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.import_ import ImportNcclTestsOptions, run_import_nccl_tests
from ccltune.commands.options import default, from_fields


def _D(name: str) -> Any:
    return default(ImportNcclTestsOptions, name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="store results of other benchmarks (nccl-tests, TransferBench, nvbandwidth) as a run",
                       description="Store measurements made by other tools as a run of kind 'import'.")
    src = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    n = src.add_parser(
        "nccl-tests", help="nccl-tests text output or -J JSON",
        description="Import nccl-tests output (stdout table or -J JSON; both out-of-place and in-place"
                    " columns) as measurements of the configuration it was run with: pass --algo/--proto/"
                    "--channels as set through NCCL_ALGO/NCCL_PROTO/the plugin; none = NCCL's default.",
        formatter_class=DefaultsFormatter)
    n.add_argument("files", nargs="+", metavar="FILE")
    n.add_argument("--db", default=_D("db"))
    n.add_argument("--algo", default=None)
    n.add_argument("--proto", default=None)
    n.add_argument("--channels", type=int, default=None)
    n.add_argument("--nranks", type=int, default=None)
    n.add_argument("--gpu", default=None, metavar="NAME")
    n.add_argument("--collective", default=None)
    n.set_defaults(func=run)
    help_from(n, ImportNcclTestsOptions)
    import_links.register(src)  # transferbench, nvbandwidth: link matrices, stored as links runs


def run(args: argparse.Namespace) -> int:
    run_import_nccl_tests(from_fields(ImportNcclTestsOptions, vars(args)), terminal())
    return 0
