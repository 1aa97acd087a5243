"""``ccltune bench``: the command line of ``ccltune.commands.bench`` (nccl-tests' options and table)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune import collectives
from ccltune.cli import _common, bench_options
from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.bench import run_bench
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.measure.bench import WARMUP_MODES


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="measure collectives (nccl-tests' options and table)",
        usage="%(prog)s [options] COLLECTIVE [COLLECTIVE ...]",  # the options are listed below, once
        description="Measure collectives with nccl-tests' options and output table. "
                    "COLLECTIVE: " + ", ".join(collectives.REGISTRY) + ", or all.",
        formatter_class=DefaultsFormatter)
    p.add_argument("collective", nargs="+", metavar="COLLECTIVE")
    bench_options.register(p)
    p.add_argument("--ncclt-defaults", action="store_true")
    p.add_argument("--warmup-mode", choices=WARMUP_MODES, default=default(BenchOptions, "warmup_mode"))
    p.add_argument("--symmetric", action="store_true")
    p.add_argument("--algo", default=None)
    p.add_argument("--proto", default=None)
    p.add_argument("--channels", type=int, default=None)
    p.add_argument("--json", default=None, metavar="PATH")
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)
    help_from(p, BenchOptions)


def main(args: argparse.Namespace) -> int:
    return run_bench(from_fields(BenchOptions, vars(args)), terminal(), command_line=args._argv).exit_code
