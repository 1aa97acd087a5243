"""``ccltune validate RULES``: the command line of ``ccltune.commands.validate`` (A/B of NCCL's default
against the tuner plugin with RULES, interleaved)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli import _common
from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.validate import ValidateOptions, run_validate


def _D(name: str) -> Any:
    return default(ValidateOptions, name)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="A/B: NCCL's default vs the tuner plugin with RULES; PASS when no size got slower",
        description="Time NCCL's default and the ccltune plugin loaded with RULES side by side (interleaved, "
                    "repeated) at every size; verdict PASS when no size is slower beyond noise (and none by "
                    "more than --hard-limit). Exit code 1 on FAIL.",
        formatter_class=DefaultsFormatter)
    p.add_argument("rules", metavar="RULES")
    p.add_argument("collective", nargs="*", default=list(_D("collective")))
    p.add_argument("-b", "--minbytes", default=_D("minbytes"))
    p.add_argument("-e", "--maxbytes", default=_D("maxbytes"))
    p.add_argument("-f", "--stepfactor", type=float, default=_D("stepfactor"))
    p.add_argument("-d", "--datatype", default=_D("datatype"))
    p.add_argument("-o", "--op", default=_D("op"))
    p.add_argument("--reps", type=int, default=_D("reps"))
    p.add_argument("--target-us", type=float, default=_D("target_us"))
    p.add_argument("--max-iters", type=int, default=_D("max_iters"))
    p.add_argument("-w", "--warmup_iters", type=int, default=_D("warmup_iters"))
    p.add_argument("--no-graph", action="store_true")
    p.add_argument("--hard-limit", type=float, default=_D("hard_limit"), metavar="PCT")
    p.add_argument("--retest", type=int, default=_D("retest"), metavar="N")
    p.add_argument("--best-from", default=None, metavar="SWEEP_DB")
    p.add_argument("--json", default=None, metavar="PATH")
    p.add_argument("--junit", default=None, metavar="PATH")
    _common.add_under_load(p)
    _common.add_virtual_nodes(p)
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)
    help_from(p, ValidateOptions)


def main(args: argparse.Namespace) -> int:
    return run_validate(from_fields(ValidateOptions, vars(args)), terminal(), command_line=args._argv).exit_code
