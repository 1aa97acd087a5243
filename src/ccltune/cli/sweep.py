"""``ccltune sweep``: the command line of ``ccltune.commands.sweep`` (NCCL's default against forced
algorithm x protocol x channel candidates)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune import collectives, rules
from ccltune.cli import _common
from ccltune.cli._common import DefaultsFormatter
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.sweep import run_sweep
from ccltune.commands.sweep_options import GRIDS, MODES, SweepOptions
from ccltune.commands.sweep_workload import DEFAULT_LOAD_M


def _D(name: str) -> Any:
    return default(SweepOptions, name)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="measure NCCL's default against forced algorithm/protocol/channel candidates",
        usage="%(prog)s [options] [COLLECTIVE ...]",  # the options are listed below, once
        description="For each tunable collective and size, time NCCL's own choice and every candidate "
                    "side by side (interleaved, repeated, CUDA graphs), one process per GPU.",
        formatter_class=DefaultsFormatter)
    p.add_argument("collective", nargs="*", default=list(_D("collective")),
                   help=f"tunable collectives ({', '.join(c.name for c in collectives.TUNABLE)})")
    p.add_argument("-b", "--minbytes", default=_D("minbytes"))
    p.add_argument("-e", "--maxbytes", default=_D("maxbytes"))
    p.add_argument("-f", "--stepfactor", type=float, default=_D("stepfactor"))
    p.add_argument("-d", "--datatype", default=_D("datatype"))
    p.add_argument("-o", "--op", default=_D("op"))
    p.add_argument("--algos", default=_D("algos"),
                   help=f"algorithms to force, comma-separated ({', '.join(rules.ALGORITHMS)}; "
                        "NCCL_ALGO's spelling, CollNetDirect, is taken too)")
    p.add_argument("--protos", default=_D("protos"),
                   help=f"protocols to force, comma-separated ({', '.join(rules.PROTOCOLS)})")
    p.add_argument("--channels", default=_D("channels"),
                   help="channel counts to try with NCCL's algorithm/protocol, comma-separated ('' for none)")
    p.add_argument("--grid", choices=GRIDS, default=_D("grid"),
                   help="full: every algorithm x protocol x channel count, besides each pair with NCCL's channel "
                        "count and each count with NCCL's pair; axes: only those two (about a third of the points "
                        "and half the time; rules like ring/LL128 at 32 channels need the full grid)")
    p.add_argument("--reps", type=int, default=_D("reps"), help="timed rounds per point (noise is estimated from them)")
    p.add_argument("--target-us", type=float, default=_D("target_us"), help="length of one timed replay")
    p.add_argument("--max-iters", type=int, default=_D("max_iters"), help="most calls in one replay")
    p.add_argument("-w", "--warmup_iters", type=int, default=_D("warmup_iters"))
    p.add_argument("--no-graph", action="store_true", help="time eager calls instead of CUDA graphs")
    p.add_argument("--mode", choices=MODES, default=_D("mode"),
                   help="exhaustive: every size x candidate; model: NCCL's default at every size, every candidate "
                        "at a few sizes, then candidates only where their alpha-beta lines predict a win "
                        "(docs/tuning.md)")
    p.add_argument("--no-twin", action="store_true",
                   help="do not measure NCCL's default a second time on another communicator (the A/A control "
                        "whose gap every candidate must beat; see docs/tuning.md)")
    p.add_argument("--workload", default=None, metavar="W.json",
                   help="sweep exactly this workload's (collective, size) points (`ccltune workload import`) that "
                        "this launch can reproduce, instead of -b/-e/-f; the others are listed with the reason. "
                        "Collectives named restrict it (docs/workload.md)")
    _common.add_under_load(p)
    p.add_argument("--idle", action="store_true",
                   help="with --workload: sweep on an idle GPU even when the job's own times (profiler files, "
                        "trace kernels) show its calls at least 2x slower than NCCL's default idle in --db, where "
                        "the sweep otherwise runs under a load sized from the job's traces (--under-load "
                        f"{DEFAULT_LOAD_M} when nothing sizes it; docs/workload.md)")
    _common.add_virtual_nodes(p)
    p.add_argument("--resume", type=int, default=None, metavar="RUN", help="continue an interrupted sweep run")
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run_sweep(from_fields(SweepOptions, vars(args)), terminal(), command_line=args._argv).exit_code
