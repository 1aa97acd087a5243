"""``ccltune bench``: the command line of ``ccltune.commands.bench`` (nccl-tests' options and table)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune import collectives
from ccltune.cli import _common, bench_options
from ccltune.cli._common import DefaultsFormatter
from ccltune.commands.bench import run_bench
from ccltune.commands.bench_options import NCCLT_DEFAULTS_ENV, BenchOptions
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
    p.add_argument("collective", nargs="+", metavar="COLLECTIVE", help="collective(s), comma or space separated, or 'all'")
    bench_options.register(p)
    p.add_argument("--ncclt-defaults", action="store_true",
                   help="nccl-tests' defaults for the nccl-tests options the command line omits (-b 32M -e 32M "
                        f"-f 1 -w 1; also {NCCLT_DEFAULTS_ENV}=1)")
    p.add_argument("--warmup-mode", choices=WARMUP_MODES, default=default(BenchOptions, "warmup_mode"),
                   help="point: -w calls right before each size is timed; series: also -w calls at every size "
                        "first, as nccl-tests 2.19; nccl-tests: nccl-tests' own procedure (docs/bench.md, 'Warm-up')")
    p.add_argument("--symmetric", action="store_true",
                   help="nccl engine: buffers from ncclMemAlloc registered as symmetric windows (NCCL >= 2.27)")
    p.add_argument("--algo", default=None, help="nccl engine: force NCCL_ALGO for this run's communicator")
    p.add_argument("--proto", default=None, help="nccl engine: force NCCL_PROTO for this run's communicator")
    p.add_argument("--channels", type=int, default=None, help="nccl engine: channel count (min/maxCTAs)")
    p.add_argument("--json", default=None, metavar="PATH", help="write {env, records} as JSON")
    _common.add_db(p)
    _common.add_launch(p, buffers_default="ncclmem-max")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run_bench(from_fields(BenchOptions, vars(args)), terminal(), command_line=args._argv).exit_code
