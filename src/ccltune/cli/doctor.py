"""ccltune doctor: what on this host slows collectives, each finding with evidence and a fix."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import environment
from ccltune.cli import _common
from ccltune.commands import launching
from ccltune.diagnose.checks.registry import Context, run_checks
from ccltune.diagnose.findings import exit_code, format_findings, overall
from ccltune.diagnose.parsers.ncclog import read_log
from ccltune.diagnose.probes import sysfs
from ccltune.cli._common import add_output_flags
from ccltune.diagnose.record import record_run, write_json


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
    p.add_argument("--nccl-log", metavar="FILE", help="only analyse this NCCL_DEBUG=INFO log (NCCL or RCCL)")
    p.add_argument("--from-amd-smi", action="append", metavar="FILE", default=None,
                   help="with --nccl-log of an RCCL job: the node's saved `amd-smi topology --json` / `amd-smi static "
                        "--asic --partition --numa --json` output (GPU count, xGMI links, NUMA nodes); give it once "
                        "per file; without it the node is read from this host")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="GPUs to run the collective on (default: all present)")
    p.add_argument("--no-run", action="store_true", help="skip the collective runs (host and environment checks only)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds each collective run may take")
    _common.add_sysfs_root(p)
    add_output_flags(p)
    p.set_defaults(func=main)


def check_flags(args: argparse.Namespace) -> None:
    """--nproc and --timeout, checked as ``bench`` checks them, before anything is read or run."""
    launching.check_nproc(args.nproc)
    launching.check_timeout(args.timeout)


def main(args: argparse.Namespace) -> int:
    check_flags(args)
    artifacts: dict[str, str] = {}
    if args.nccl_log:
        text = read_log(args.nccl_log)
        ctx = Context(root=sysfs.sys_root(args.sysfs_root), nccl_log_text=text, amd_smi=args.from_amd_smi)
        findings = run_checks("doctor --nccl-log", ctx)
        title = f"ccltune doctor --nccl-log {args.nccl_log}"
        artifacts["nccl-log"] = text
    else:
        root = sysfs.sys_root(args.sysfs_root)
        ctx = Context(root=root, lspci=sysfs.run_lspci(), environ=dict(os.environ), nproc=args.nproc,
                      run=not args.no_run, timeout_s=args.timeout,
                      log=lambda line: print(line, file=sys.stderr, flush=True))
        findings, artifacts = run_checks("doctor", ctx), ctx.artifacts
        title = "ccltune doctor" + ("" if str(root) == "/" else f" (host files read under {root})")  # --sysfs-root
    print(format_findings(findings, title=title))
    result = {"status": overall(findings), "checks": [f.to_record() for f in findings]}
    if args.json_path:
        write_json(args.json_path, result)
    artifacts["doctor.json"] = json.dumps(result, indent=2, default=str)
    record_run(args.db, "doctor", env=environment.collect(), args=args, findings=findings, artifacts=artifacts,
               summary={"status": result["status"]})
    return exit_code(findings)
