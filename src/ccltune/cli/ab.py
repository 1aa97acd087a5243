"""``ccltune ab [options] -- COMMAND...``: the command line of ``ccltune.commands.ab`` (A/B the user's
own job, NCCL's default against named arms; docs/ab.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.ab import judge
from ccltune.cli import _common
from ccltune.cli._common import help_from
from ccltune.commands.ab import AbOptions, run_ab
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields


def _D(name: str) -> Any:
    return default(AbOptions, name)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ab", help="A/B your own job: NCCL's default vs rules, variables or another NCCL, with a 95%% interval",
        description="Run COMMAND (your job: torchrun, srun, mpirun, a script) again and again, NCCL's default "
                    "and each arm once per round in a shuffled order, with an A/A control (default twice: the "
                    "job's own noise). Per arm: faster / no difference / slower than default, the effect as a "
                    f"ratio and in the metric's unit, with its interval ({judge.METHOD}). Exit 0 when no arm is "
                    "slower, 1 when an arm is slower or failed in every run, 2 on bad input (before anything "
                    "runs), 130 on Ctrl-C (the verdict so far is printed and every finished run is kept).",
        formatter_class=_common.DefaultsFormatter)
    g = p.add_argument_group("arms (NCCL's default is always one, named default)")
    g.add_argument("--rules", action="append", default=[], metavar="R.conf")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    g.add_argument("--nccl-lib", action="append", default=[], metavar="PATH")
    g.add_argument("--arm", action="append", default=[], metavar="NAME:KIND:VALUE")
    g.add_argument("--no-aa", action="store_true")
    m = p.add_argument_group("metric (one value per run, or per block with --in-run)")
    m.add_argument("--metric", default=_D("metric"), metavar="wall|comm|REGEX")
    m.add_argument("--better", choices=("auto", "lower", "higher"), default=_D("better"))
    m.add_argument("--skip", type=int, default=_D("skip"), metavar="N")
    r = p.add_argument_group("rounds")
    r.add_argument("--rounds", type=int, default=None, metavar="N")
    r.add_argument("--until-confident", action="store_true")
    r.add_argument("--budget", type=float, default=None, metavar="SECONDS")
    r.add_argument("--min-effect", type=float, default=_D("min_effect"), metavar="PCT")
    r.add_argument("--seed", type=int, default=None, metavar="N")
    r.add_argument("--run-timeout", type=float, default=None, metavar="S")
    _in_run(p)
    p.add_argument("--echo", action="store_true")
    p.add_argument("--prune", default=None, metavar="OUT.conf")
    p.add_argument("--json", default=None, metavar="PATH")
    _common.add_db(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    p.set_defaults(func=main)
    help_from(p, AbOptions)


def _in_run(p: Any) -> None:
    """The in-run arms' flags (commands/ab_inrun.py)."""
    i = p.add_argument_group("in-run arms (docs/ab.md: the --rules arms switched inside ONE run of the job)")
    i.add_argument("--in-run", action="store_true")
    i.add_argument("--block-steps", type=int, default=_D("block_steps"), metavar="N")
    i.add_argument("--warmup-blocks", type=int, default=_D("warmup_blocks"), metavar="N")
    i.add_argument("--max-blocks", type=int, default=None, metavar="N")
    i.add_argument("--period", default=_D("period"), metavar="auto|N")
    i.add_argument("--workload", default=None, metavar="W.json")


def options(args: argparse.Namespace) -> AbOptions:
    """The options of the parsed arguments: the job without the ``--`` before it (argparse keeps it)."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    return from_fields(AbOptions, {**vars(args), "command": command})


def main(args: argparse.Namespace) -> int:
    return run_ab(options(args), terminal(), command_line=args._argv).exit_code
