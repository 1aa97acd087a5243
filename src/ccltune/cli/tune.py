"""``ccltune tune``: derive tuner rules from sweep/import runs and write the rule file
(``ccltune.commands.tune`` runs it)."""

from __future__ import annotations

import argparse

from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.tune import TuneOptions, run_tune
from ccltune.tune.derive import OBJECTIVES, PLACEMENTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="derive tuner rules from measured runs",
        description="Per (collective, nRanks, nNodes, platform) and size, keep the configuration that beats"
                    " NCCL's default by more than the measured noise; write the plugin's rule file.",
        formatter_class=DefaultsFormatter)
    p.add_argument("--db", default=_D("db"))
    p.add_argument("--out", required=True)
    p.add_argument("--runs", default=None)
    p.add_argument("--objective", choices=OBJECTIVES, default=_D("objective"))
    p.add_argument("--sm-tolerance", type=float, default=_D("sm_tolerance"), metavar="PCT")
    p.add_argument("--min-margin", type=float, default=_D("min_margin"), metavar="PCT")
    p.add_argument("--isolated-margin", type=float, default=_D("isolated_margin"), metavar="PCT")
    p.add_argument("--min-gain-us", type=float, default=_D("min_gain_us"), metavar="US")
    p.add_argument("--placement", choices=PLACEMENTS, default=_D("placement"))
    p.add_argument("--exclude-failed", action="append", default=[], metavar="VALIDATE_JSON")
    p.add_argument("--workload", default=None, metavar="W.json")
    p.add_argument("--min-share", type=float, default=_D("min_share"), metavar="PCT")
    p.add_argument("--under-load", type=int, default=None, metavar="M")
    p.set_defaults(func=main)
    help_from(p, TuneOptions)


def _D(name: str) -> object:
    return default(TuneOptions, name)


def main(args: argparse.Namespace) -> int:
    run_tune(from_fields(TuneOptions, vars(args)), terminal())
    return 0
