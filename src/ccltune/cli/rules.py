"""`ccltune rules explain`: the decision table a rule file gives one communicator
(``ccltune.commands.rules`` says it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.rules import RulesExplainOptions, run_rules_explain


def _D(name: str) -> Any:
    return default(RulesExplainOptions, name)


def register(sub: Any) -> None:
    parser = sub.add_parser("rules", help="read a rule file as the plugin will follow it",
                            description="Rule files (NCCL_TUNER_CONFIG_FILE format) as the plugin reads them.")
    acts = parser.add_subparsers(dest="rules_command", metavar="ACTION")
    ex = acts.add_parser(
        "explain", help="the decision table the plugin follows, size range by size range",
        description="For one communicator (ranks, nodes, GPU), every size range from 0 to 2^64-1 with the rule "
        "the plugin applies there (line, algorithm/protocol, channels) or NCCL's default. Computed by the "
        "Python twin of the plugin's matcher (proved equal to the C one by tests/plugin/test_golden.py). "
        "A rule whose cell NCCL marks IGNORE on the machine falls through to the next one at run time.",
        formatter_class=DefaultsFormatter)
    ex.add_argument("file", metavar="RULES")
    ex.add_argument("--collective", default=None, metavar="C")
    ex.add_argument("--nranks", type=int, default=_D("nranks"), metavar="N")
    ex.add_argument("--nnodes", type=int, default=_D("nnodes"), metavar="K")
    ex.add_argument("--gpu", default=_D("gpu"), metavar="NAME")
    ex.add_argument("--num-pipe-ops", type=int, default=_D("num_pipe_ops"))
    ex.add_argument("--reg-buff", type=int, default=_D("reg_buff"), choices=(0, 1))
    ex.set_defaults(func=_explain)
    help_from(ex, RulesExplainOptions)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _explain(args: argparse.Namespace) -> int:
    run_rules_explain(from_fields(RulesExplainOptions, vars(args)), terminal())
    return 0
