"""``ccltune topo``: the GPUs of this host and how each pair is connected (``ccltune.commands.topo`` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli import _common
from ccltune.cli._common import DefaultsFormatter, add_output_flags, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import from_fields
from ccltune.commands.topo import TopoOptions, run_topo


def register(sub: Any) -> None:
    p = sub.add_parser(
        "topo", help="GPUs, per-pair links (NVLink / xGMI / PCIe level), NUMA, NVSwitch fabric, MIG, AMD partitions",
        description="Show how the GPUs of this host are connected. Sources, first that answers: NVML "
                    "(nvidia-ml-py), `nvidia-smi topo -m`, `amd-smi topology/static --json`, AMD sysfs (KFD). "
                    "Without a GPU it says so (WAIVED, exit 0). "
                    "Exit 1 when a check FAILs (e.g. NVSwitch fabric not complete).",
        formatter_class=DefaultsFormatter)
    _common.add_sysfs_root(p)
    p.add_argument("--from-amd-smi", action="append", metavar="FILE", default=None)
    add_output_flags(p)
    p.set_defaults(func=main)
    help_from(p, TopoOptions)


def main(args: argparse.Namespace) -> int:
    return run_topo(from_fields(TopoOptions, vars(args)), terminal(), command_line=args._argv).exit_code
