"""``ccltune tune``: derive tuner rules from sweep/import runs and write the rule file
(``ccltune.commands.tune`` runs it)."""

from __future__ import annotations

import argparse

from ccltune.cli._common import DefaultsFormatter
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
    p.add_argument("--db", default=_D("db"), help="results database")
    p.add_argument("--out", required=True, help="rule file to write (replaced whole, atomically)")
    p.add_argument("--runs", default=None, help="run ids to use, e.g. '3,5-7' (default: every sweep and import run)")
    p.add_argument("--objective", choices=OBJECTIVES, default=_D("objective"),
                   help="time: fastest configuration; sm: fewest channels within --sm-tolerance of the fastest")
    p.add_argument("--sm-tolerance", type=float, default=_D("sm_tolerance"), metavar="PCT",
                   help="with --objective sm: how much slower than the fastest a configuration may be (percent)")
    p.add_argument("--min-margin", type=float, default=_D("min_margin"), metavar="PCT",
                   help="smallest win over the default that makes a rule, even when the noise is lower (percent)")
    p.add_argument("--isolated-margin", type=float, default=_D("isolated_margin"), metavar="PCT",
                   help="smallest win that makes a rule at a size where the configuration does not also beat the"
                        " default at a neighbouring measured size (percent; see docs/tuning.md)")
    p.add_argument("--min-gain-us", type=float, default=_D("min_gain_us"), metavar="US",
                   help="least time a win must save per call, whatever the percentages (latency-bound sizes)")
    p.add_argument("--placement", choices=PLACEMENTS, default=_D("placement"),
                   help="which buffers' measurements to use")
    p.add_argument("--exclude-failed", action="append", default=[], metavar="VALIDATE_JSON",
                   help="no rule at the sizes that failed in this `ccltune validate --json` verdict (NCCL "
                        "decides there); repeatable")
    p.add_argument("--workload", default=None, metavar="W.json",
                   help="judge the rules by this workload (`ccltune workload import`): rules only at its exact "
                        "sizes, weighted by its calls; prints the predicted communication time per step "
                        "(docs/workload.md)")
    p.add_argument("--min-share", type=float, default=_D("min_share"), metavar="PCT",
                   help="with --workload: drop a rule that saves less than this share of the predicted default "
                        "communication time per step (percent)")
    p.add_argument("--under-load", type=int, default=None, metavar="M",
                   help="derive from the runs swept with --under-load M (default: the idle runs only); when idle "
                        "runs are there too, print where the winners differ")
    p.set_defaults(func=main)


def _D(name: str) -> object:
    return default(TuneOptions, name)


def main(args: argparse.Namespace) -> int:
    run_tune(from_fields(TuneOptions, vars(args)), terminal())
    return 0
