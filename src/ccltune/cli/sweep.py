"""``ccltune sweep``: the command line of ``ccltune.commands.sweep`` (NCCL's default against forced
algorithm x protocol x channel candidates)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli import _common
from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.sweep import run_sweep
from ccltune.commands.sweep_options import GRIDS, MODES, SweepOptions


def _D(name: str) -> Any:
    return default(SweepOptions, name)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="measure NCCL's default against forced algorithm/protocol/channel candidates",
        usage="%(prog)s [options] [COLLECTIVE ...]",  # the options are listed below, once
        description="For each tunable collective and size, time NCCL's own choice and every candidate "
                    "side by side (interleaved, repeated, CUDA graphs), one process per GPU.",
        formatter_class=DefaultsFormatter)
    p.add_argument("collective", nargs="*", default=list(_D("collective")))
    p.add_argument("-b", "--minbytes", default=_D("minbytes"))
    p.add_argument("-e", "--maxbytes", default=_D("maxbytes"))
    p.add_argument("-f", "--stepfactor", type=float, default=_D("stepfactor"))
    p.add_argument("-d", "--datatype", default=_D("datatype"))
    p.add_argument("-o", "--op", default=_D("op"))
    p.add_argument("--algos", default=_D("algos"))
    p.add_argument("--protos", default=_D("protos"))
    p.add_argument("--channels", default=_D("channels"))
    p.add_argument("--grid", choices=GRIDS, default=_D("grid"))
    p.add_argument("--reps", type=int, default=_D("reps"))
    p.add_argument("--target-us", type=float, default=_D("target_us"))
    p.add_argument("--max-iters", type=int, default=_D("max_iters"))
    p.add_argument("-w", "--warmup_iters", type=int, default=_D("warmup_iters"))
    p.add_argument("--no-graph", action="store_true")
    p.add_argument("--mode", choices=MODES, default=_D("mode"))
    p.add_argument("--no-twin", action="store_true")
    p.add_argument("--workload", default=None, metavar="W.json")
    _common.add_under_load(p)
    p.add_argument("--idle", action="store_true")
    _common.add_virtual_nodes(p)
    p.add_argument("--resume", type=int, default=None, metavar="RUN")
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)
    help_from(p, SweepOptions)


def main(args: argparse.Namespace) -> int:
    return run_sweep(from_fields(SweepOptions, vars(args)), terminal(), command_line=args._argv).exit_code
