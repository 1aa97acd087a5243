"""``ccltune doctor``: what on this host slows collectives, each finding with evidence and a fix
(``ccltune.commands.doctor`` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli import _common
from ccltune.cli._common import DefaultsFormatter, add_output_flags, help_from
from ccltune.commands.common import terminal
from ccltune.commands.doctor import DoctorOptions, run_doctor
from ccltune.commands.options import default, from_fields


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="host, environment and NCCL transport checks (PASS/WARN/FAIL/WAIVED with evidence and fix)",
        description="Check NUMA balancing, numad, IOMMU, PCIe ACS, NCCL/RCCL variables, then run a short "
                    "all_reduce under torchrun with NCCL_DEBUG=INFO and read its log: transport of every ring/tree "
                    "edge, channels, tuner plugin, process layout. Where a P2P-capable pair uses SHM it measures "
                    "again with NCCL_P2P_LEVEL=SYS; with --nproc below the GPUs present it measures channel counts. "
                    "--nccl-log FILE analyses a log you already have (NCCL or RCCL) and runs nothing. "
                    "Exit 1 when a check FAILs or ERRORs, 0 otherwise (WARN and WAIVED included), 2 on bad input.",
        formatter_class=DefaultsFormatter)
    p.add_argument("--nccl-log", metavar="FILE")
    p.add_argument("--from-amd-smi", action="append", metavar="FILE", default=None)
    p.add_argument("--nproc", type=int, default=None, metavar="N")
    p.add_argument("--no-run", action="store_true")
    p.add_argument("--timeout", type=float, default=default(DoctorOptions, "timeout"), metavar="S")
    _common.add_sysfs_root(p)
    add_output_flags(p)
    p.set_defaults(func=main)
    help_from(p, DoctorOptions)


def main(args: argparse.Namespace) -> int:
    return run_doctor(from_fields(DoctorOptions, vars(args)), terminal(), command_line=args._argv).exit_code
