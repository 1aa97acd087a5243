"""``ccltune replay W.json``: the command line of ``ccltune.commands.replay`` (the workload's collectives
in their captured order, NCCL's default against the rules; docs/workload.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli import _common
from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.replay import ReplayOptions, run_replay
from ccltune.workload.plan import ORDERS


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay", help="replay a workload's collectives: NCCL's default vs RULES, time per step",
        description="Issue the workload's collectives (ccltune workload import) in their captured order, on "
                    "NCCL's default and on the plugin with --rules, interleaved rounds on separate communicators; "
                    "report communication time per step both ways and their ratio. Exit 1 when the rules are "
                    "slower beyond noise. gloo, or one rank: NCCL's default only (WAIVED).",
        formatter_class=DefaultsFormatter)
    p.add_argument("workload", metavar="W.json")
    p.add_argument("--rules", default=None, metavar="R")
    p.add_argument("--iters", type=int, default=default(ReplayOptions, "iters"), metavar="N")
    p.add_argument("--order", choices=ORDERS, default=default(ReplayOptions, "order"))
    _common.add_under_load(p)
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)
    help_from(p, ReplayOptions)


def main(args: argparse.Namespace) -> int:
    return run_replay(from_fields(ReplayOptions, vars(args)), terminal(), command_line=args._argv).exit_code
