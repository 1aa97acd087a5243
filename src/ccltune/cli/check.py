"""``ccltune check``: pass/fail gates of a platform profile, for CI (exit 1 on any FAIL or ERROR;
``ccltune.commands.check`` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, add_output_flags
from ccltune.commands.check import CheckOptions, run_check
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.diagnose.checks import gates, profiles


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check", help="pass/fail gates of a platform profile (CI: exit 1 on FAIL or ERROR)",
        description="Measure all_reduce (or read a stored run or a bench JSON) and hold it to a platform profile's "
                    "gates. Without a built-in profile for this machine, the gate is derived from what its own "
                    f"links carry: {gates.RING_FRACTION:.0%} of the ring ceiling (docs/diagnose.md). "
                    "Statuses: PASS, FAIL, WAIVED (cannot run here), ERROR (a gate could not be evaluated). "
                    "Exit 0 when every check passed or was waived, 1 when any FAILed or ERRORed, 2 on bad input.",
        formatter_class=DefaultsFormatter)
    p.add_argument("--profile", metavar="NAME|PATH",
                   help="built-in profile (" + ", ".join(profiles.builtin_names()) + ") or a .toml file; "
                        "default: the built-in matching the GPUs (of this machine, or of --run's run)")
    p.add_argument("--run", type=int, metavar="N", help="judge stored run N of --db (a ccltune bench run or an "
                   "imported nccl-tests/rccl-tests run) instead of measuring")
    p.add_argument("--force-profile", action="store_true",
                   help="judge with --profile even when its GPU model or GPU count differs from the run's")
    p.add_argument("--links-run", type=int, metavar="N", help="without a matching built-in profile, derive the gate "
                   "from links run N of --db (ccltune links) instead of measuring the links")
    p.add_argument("--ring-fraction", type=float, default=_D("ring_fraction"), metavar="F",
                   help="a gate derived from the links requires this fraction of their ring ceiling")
    p.add_argument("--from-json", metavar="FILE", help="judge a bench JSON written earlier (ccltune bench --json) "
                   "instead of measuring")
    p.add_argument("--junit", metavar="PATH", help="write JUnit XML for CI")
    p.add_argument("--timeout", type=float, default=_D("timeout"), metavar="S", help="seconds the measurement may take")
    p.add_argument("--list-profiles", action="store_true", help="list the built-in profiles and exit")
    add_output_flags(p)
    p.set_defaults(func=main)


def _D(name: str) -> Any:
    return default(CheckOptions, name)


def main(args: argparse.Namespace) -> int:
    return run_check(from_fields(CheckOptions, vars(args)), terminal(), command_line=args._argv).exit_code
