"""``ccltune links``: per GPU pair bandwidth (copy engine and SM kernel) and latency, slowest-link analysis
(``ccltune.commands.links`` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, add_output_flags, help_from
from ccltune.commands.common import terminal
from ccltune.commands.links import LinksOptions, run_links
from ccltune.commands.options import default, from_fields


def register(sub: Any) -> None:
    p = sub.add_parser(
        "links", help="per GPU pair bandwidth/latency matrix and slowest-link analysis",
        description="Measure every GPU pair from one process: copy engine (ce) and SM copy kernel (sm-read: "
                    "the receiver loads over NVLink; sm-write: the sender stores), one direction, both at once, "
                    "all pairs at once, and 4-byte copy latency. Then: per GPU bound (slowest link x peers), "
                    "ring ceiling, links below --threshold x median. Without 2 GPUs: WAIVED, exit 0. "
                    "Exit 1 on FAIL/ERROR (a copy that came out wrong). Use CUDA_VISIBLE_DEVICES to pick GPUs.",
        formatter_class=DefaultsFormatter)
    p.add_argument("-s", "--size", default=_D("size"))
    p.add_argument("-n", "--iters", type=int, default=_D("iters"))
    p.add_argument("-w", "--warmup", type=int, default=_D("warmup"))
    p.add_argument("--latency-iters", type=int, default=_D("latency_iters"))
    p.add_argument("--method", default=_D("method"))
    p.add_argument("--threshold", type=float, default=_D("threshold"))
    p.add_argument("--run", type=int, default=None, metavar="N")
    add_output_flags(p)
    p.set_defaults(func=main)
    help_from(p, LinksOptions)


def _D(name: str) -> Any:
    return default(LinksOptions, name)


def main(args: argparse.Namespace) -> int:
    return run_links(from_fields(LinksOptions, vars(args)), terminal(), command_line=args._argv).exit_code
