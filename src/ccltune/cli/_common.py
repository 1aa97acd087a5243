"""Argument helpers shared by the commands' parsers: the launch flags, --db, the help formatter. What the
commands do with the values is ``ccltune.commands`` (``commands.launching``: the engine, the job, the
checks the launching commands share); the run itself is ``measure.session``."""

from __future__ import annotations

import argparse

from ccltune.commands.diagnosis import DiagnoseOptions
from ccltune.commands.launching import BUFFERS
from ccltune.commands.options import default
from ccltune.engines import ENGINES
from ccltune.store import DEFAULT_DB


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help with each default shown once: not '(default: None)' (a flag that is off unless given), not
    a second '(default: ...)' after help that already names its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or "default" in text.lower() or action.default is argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)

def add_virtual_nodes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--virtual-nodes", type=int, default=1, metavar="K",
                   help="SIMULATION AID: split this host's ranks into K groups NCCL treats as nodes (NCCL_HOSTID); "
                        "rows and rules then carry nNodes=K; never real multi-node figures")


def add_under_load(p: argparse.ArgumentParser) -> None:
    p.add_argument("--under-load", type=int, default=None, metavar="M",
                   help="while collectives are timed, run an M x M bf16 matrix multiply back to back on a second "
                        "stream of each rank's GPU, so configurations compete for SMs as in training (recorded "
                        "with the run; `ccltune tune --under-load M` derives from such runs). Not on gloo")


def add_sysfs_root(p: argparse.ArgumentParser) -> None:
    from ccltune.diagnose.probes.sysfs import ROOT_ENV

    p.add_argument("--sysfs-root", metavar="DIR", default=None,
                   help=f"folder standing for / when reading sys/ and proc/ (default: ${ROOT_ENV} or /)")


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """``--db`` and ``--json`` of the diagnose commands (links, topo, doctor, check), spelled the same in each
    (``commands.diagnosis.DiagnoseOptions``)."""
    parser.add_argument("--db", default=default(DiagnoseOptions, "db"), metavar="PATH",
                        help="results database to record the run in (default: %(default)s)")
    parser.add_argument("--json", dest="json_path", metavar="PATH",
                        help="also write the results as JSON to PATH")


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, metavar="PATH", help="results database (default: %(default)s)")


def add_launch(p: argparse.ArgumentParser, buffers_default: str = "ncclmem") -> None:
    """The launch flags; ``buffers_default``: where this command's buffers come from without --buffers (the
    nccl engine's choice from ``EngineOptions.shared_buffers``, said here, not computed)."""
    g = p.add_argument_group("processes and engine")
    g.add_argument("--engine", choices=ENGINES, default=None,
                   help="nccl: NCCL's C API, eager calls issued from C as nccl-tests issues them (default "
                        "with GPUs); torch: torch.distributed/ProcessGroupNCCL, each call from Python, what a "
                        "PyTorch program sees; gloo: CPU (default without GPUs)")
    g.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="start N processes on this node with torchrun (default: one per GPU, 2 on the CPU "
                        "engine). Under torchrun, srun or mpirun the launcher starts the processes: leave it out")
    g.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds after which a dead or hung rank stops the others (default: %(default)s)")
    g.add_argument("--nccl-lib", default=None, metavar="PATH",
                   help="NCCL/RCCL library to call (default: the one PyTorch loads)")
    g.add_argument("--buffers", choices=BUFFERS, default=None,
                   help="nccl engine: ncclmem-max: one ncclMemAlloc pair of the largest size, each call further into "
                        "it, as nccl-tests; ncclmem: a pair per size; torch: PyTorch's allocator (default: "
                        f"{buffers_default}; torch before NCCL 2.19; docs/bench.md, 'Buffers')")

