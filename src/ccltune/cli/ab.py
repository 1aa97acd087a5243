"""``ccltune ab [options] -- COMMAND...``: the command line of ``ccltune.commands.ab`` (A/B the user's
own job, NCCL's default against named arms; docs/ab.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.ab import judge, prune
from ccltune.cli import _common
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
    g.add_argument("--rules", action="append", default=[], metavar="R.conf",
                   help="an arm per rule file, through ccltune's tuner plugin (NCCL_TUNER_PLUGIN, CCLTUNE_RULES); "
                        "named after the file")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an arm per setting, named NAME=VALUE")
    g.add_argument("--nccl-lib", action="append", default=[], metavar="PATH",
                   help="an arm per NCCL/RCCL library, put first with LD_PRELOAD (a job whose NCCL is loaded "
                        "dynamically, as PyTorch's wheels load libnccl.so.2); named nccl-lib:FILE")
    g.add_argument("--arm", action="append", default=[], metavar="NAME:KIND:VALUE",
                   help="a named arm; KIND env (VALUE NAME=VALUE), unset (VALUE a variable of your environment to "
                        "remove), rules (a file) or nccl-lib (a library); "
                        "repeat a NAME to combine settings into one arm (--arm fix:env:NCCL_P2P_LEVEL=SYS "
                        "--arm fix:rules:r.conf)")
    g.add_argument("--no-aa", action="store_true", help="leave out the A/A control arm (default-2)")
    m = p.add_argument_group("metric (one value per run; lower is better)")
    m.add_argument("--metric", default=_D("metric"), metavar="wall|comm|REGEX",
                   help="wall: the run's wall time; comm: its collectives' GPU time from ccltune's profiler "
                        "plugin (NCCL_PROFILER_PLUGIN); REGEX: group 1 of every match in the job's output is a "
                        "sample, the run's value their median; auto: comm when the profiler plugin is built, "
                        "else wall")
    m.add_argument("--skip", type=int, default=_D("skip"), metavar="N", help="REGEX: leave out each run's first N matches "
                                                                    "(warm-up steps)")
    r = p.add_argument_group("rounds")
    r.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="rounds (each arm once per round; default 5, or the fewest that can reach a 95%% verdict "
                        "across the arms, 7 for two; at most 50 with --until-confident)")
    r.add_argument("--until-confident", action="store_true",
                   help="stop when every arm's interval excludes 1 or lies inside the --min-effect band")
    r.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="stop before a round that would end past this many seconds")
    r.add_argument("--min-effect", type=float, default=_D("min_effect"), metavar="PCT",
                   help="effects smaller than this many percent are 'no difference'")
    r.add_argument("--seed", type=int, default=None, metavar="N", help="the shuffle's seed (default: random; "
                                                                       "recorded)")
    r.add_argument("--run-timeout", type=float, default=None, metavar="S", help="end a run after S seconds "
                                                                               "(it counts as failed)")
    _in_run(p)
    p.add_argument("--echo", action="store_true", help="show the job's output as it runs")
    p.add_argument("--prune", default=None, metavar="OUT.conf",
                   help="with one --rules file: A/B its rules (one arm per group of rules sharing a collective "
                        f"and size range when there are <= {prune.MAX_GROUPS} groups, else the whole file) and "
                        "write OUT.conf with only the rules whose arm was faster")
    p.add_argument("--json", default=None, metavar="PATH", help="the verdict and every run as JSON")
    _common.add_db(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...", help="your job")
    p.set_defaults(func=main)


def _in_run(p: Any) -> None:
    """The in-run arms' flags (commands/ab_inrun.py)."""
    i = p.add_argument_group("in-run arms (docs/ab.md: the --rules arms switched inside ONE run of the job)")
    i.add_argument("--in-run", action="store_true",
                   help="run the job once: ccltune's tuner plugin switches between default, its A/A twin and each "
                        "--rules arm in blocks of whole steps (CCLTUNE_ARMS); each arm is judged against default "
                        "paired by round, on the step lines --metric REGEX matches")
    i.add_argument("--better", choices=("auto", "lower", "higher"), default=_D("better"),
                   help="the direction of --metric REGEX: lower (a step time) or higher (tokens/s); auto: higher "
                        "when the REGEX names a throughput (tps, tokens/s, samples/s, it/s, throughput, mfu, "
                        "tflops), else lower; the header says which")
    i.add_argument("--block-steps", type=int, default=_D("block_steps"), metavar="N",
                   help="steps per block (the first step of each block is not judged)")
    i.add_argument("--warmup-blocks", type=int, default=_D("warmup_blocks"), metavar="N",
                   help="blocks on default before the schedule (then one warm-up round, each arm once, not judged)")
    i.add_argument("--max-blocks", type=int, default=None, metavar="N",
                   help="after this many blocks the plugin stays on default (default: no limit)")
    i.add_argument("--period", default=_D("period"), metavar="auto|N",
                   help="tuner calls per step per communicator; auto: found by the plugin from the call sequence")


def options(args: argparse.Namespace) -> AbOptions:
    """The options of the parsed arguments: the job without the ``--`` before it (argparse keeps it)."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    return from_fields(AbOptions, {**vars(args), "command": command})


def main(args: argparse.Namespace) -> int:
    return run_ab(options(args), terminal(), command_line=args._argv).exit_code
