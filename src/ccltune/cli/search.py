"""``ccltune search --workload W.json --metric REGEX -- COMMAND...``: the command line of
``ccltune.commands.search`` (the job's best rules, found and proven inside the job; docs/ab.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.ab import candidates
from ccltune.cli import _common
from ccltune.cli._common import help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.search import SearchOptions, run_search


def _D(name: str) -> Any:
    return default(SearchOptions, name)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "search", help="find the rules that make your job faster, proven inside it (in-run arms)",
        description="From the job's workload (ccltune workload import), candidates per (collective, size group): "
                    "the idle sweep's best (--sweep-db or --sweep-rules) and SM-budget candidates (NCCL's algorithm on "
                    f"{', '.join(map(str, candidates.SM_CHANNELS))} channels, well under NCCL's, for collectives "
                    "that overlap compute). Each run of the job switches between NCCL's default, its A/A twin and "
                    "the candidates still in the race (ab --in-run); the better half goes on (successive halving), "
                    "the finalists are confirmed in a last run. Then NCCL_CTA_POLICY and NCCL_MAX_CTAS, where the "
                    "job's NCCL has them, as whole-run arms (ab's rounds). Writes the winners' rule file (--out), each "
                    "rule with its in-job ratio and interval, a whole-run winner as a comment line with the setting, "
                    "or says how close NCCL's default is to the best candidate.",
        formatter_class=_common.DefaultsFormatter)
    p.add_argument("--workload", default=None, metavar="W.json")
    p.add_argument("--sweep-rules", default=None, metavar="R.conf")
    p.add_argument("--sweep-db", default=None, metavar="PATH")
    p.add_argument("--steps", type=int, default=None, metavar="N")
    p.add_argument("--metric", default=_D("metric"), metavar="REGEX")
    p.add_argument("--better", choices=("auto", "lower", "higher"), default=_D("better"))
    p.add_argument("--out", default=None, metavar="OUT.conf")
    p.add_argument("--runs", type=int, default=_D("runs"), metavar="N")
    p.add_argument("--finalists", type=int, default=_D("finalists"), metavar="N")
    p.add_argument("--max-groups", type=int, default=_D("max_groups"), metavar="N")
    p.add_argument("--block-steps", type=int, default=_D("block_steps"), metavar="N")
    p.add_argument("--warmup-blocks", type=int, default=_D("warmup_blocks"), metavar="N")
    p.add_argument("--period", default=_D("period"), metavar="auto|N")
    p.add_argument("--min-effect", type=float, default=_D("min_effect"), metavar="PCT")
    p.add_argument("--seed", type=int, default=None, metavar="N")
    p.add_argument("--run-timeout", type=float, default=None, metavar="S")
    p.add_argument("--no-whole-run", action="store_true")
    p.add_argument("--whole-run-rounds", type=int, default=None, metavar="N")
    p.add_argument("--echo", action="store_true")
    _common.add_db(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    p.set_defaults(func=main)
    help_from(p, SearchOptions)


def main(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    o = from_fields(SearchOptions, {**vars(args), "command": command})
    return run_search(o, terminal(), command_line=args._argv).exit_code
