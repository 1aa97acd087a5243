"""`ccltune workload`: import a job's collectives (plugin capture files, NCCL COLL logs,
PyTorch traces) into one workload file, and show it (``ccltune.commands.workload`` runs both)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import from_fields
from ccltune.commands.workload import (
    WorkloadImportOptions,
    WorkloadShowOptions,
    run_workload_import,
    run_workload_show,
)
from ccltune.workload import importer


def register(sub: Any) -> None:
    parser = sub.add_parser("workload", help="import and show the collectives a job issues (docs/workload.md)",
                            description="A job's collectives: import them from the plugin's capture files "
                            "(CCLTUNE_CAPTURE), NCCL COLL logs or PyTorch profiler traces, and show them.")
    acts = parser.add_subparsers(dest="workload_command", metavar="ACTION")
    imp = acts.add_parser("import", help="read capture files, COLL logs and traces into one workload file",
                          description=f"Read any mix of: {importer.KINDS} (.gz too). One entry per (collective, "
                          "datatype, count, size, ranks, nodes) with its calls per rank and, from traces, its GPU "
                          "time. Exit 2 on a file of none of these kinds, a cut gzip or a trace without "
                          "communication; a COLL line cut by a dying rank is skipped with a warning.",
                          formatter_class=DefaultsFormatter)
    imp.add_argument("files", nargs="+", metavar="FILE")
    imp.add_argument("--out", required=True, metavar="W.json")
    imp.add_argument("--steps", type=int, default=None, metavar="N")
    imp.set_defaults(func=_import)
    help_from(imp, WorkloadImportOptions)
    sh = acts.add_parser("show", help="the entries by share of bytes; with --db, estimated time per step",
                         description="A table of the workload's entries by share of bytes. With --db, the time "
                         "per call NCCL's default took at those sizes in that database (exact sizes, or "
                         "interpolated between measured ones), the time per step and the share of time.")
    sh.add_argument("workload", metavar="W.json")
    sh.add_argument("--db", default=None, metavar="PATH")
    sh.set_defaults(func=_show)
    help_from(sh, WorkloadShowOptions)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _import(args: argparse.Namespace) -> int:
    run_workload_import(from_fields(WorkloadImportOptions, vars(args)), terminal())
    return 0


def _show(args: argparse.Namespace) -> int:
    run_workload_show(from_fields(WorkloadShowOptions, vars(args)), terminal())
    return 0
