"""``ccltune check``: pass/fail gates of a platform profile, for CI (exit 1 on any FAIL or ERROR;
``ccltune.commands.check`` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, add_output_flags, help_from
from ccltune.commands.check import CheckOptions, run_check
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.diagnose.checks import gates


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check", help="pass/fail gates of a platform profile (CI: exit 1 on FAIL or ERROR)",
        description="Measure all_reduce (or read a stored run or a bench JSON) and hold it to a platform profile's "
                    "gates. Without a built-in profile for this machine, the gate is derived from what its own "
                    f"links carry: {gates.RING_FRACTION:.0%} of the ring ceiling (docs/diagnose.md). "
                    "Statuses: PASS, FAIL, WAIVED (cannot run here), ERROR (a gate could not be evaluated). "
                    "Exit 0 when every check passed or was waived, 1 when any FAILed or ERRORed, 2 on bad input.",
        formatter_class=DefaultsFormatter)
    p.add_argument("--profile", metavar="NAME|PATH")
    p.add_argument("--run", type=int, metavar="N")
    p.add_argument("--force-profile", action="store_true")
    p.add_argument("--links-run", type=int, metavar="N")
    p.add_argument("--ring-fraction", type=float, default=_D("ring_fraction"), metavar="F")
    p.add_argument("--from-json", metavar="FILE")
    p.add_argument("--junit", metavar="PATH")
    p.add_argument("--timeout", type=float, default=_D("timeout"), metavar="S")
    p.add_argument("--list-profiles", action="store_true")
    add_output_flags(p)
    p.set_defaults(func=main)
    help_from(p, CheckOptions)


def _D(name: str) -> Any:
    return default(CheckOptions, name)


def main(args: argparse.Namespace) -> int:
    return run_check(from_fields(CheckOptions, vars(args)), terminal(), command_line=args._argv).exit_code
