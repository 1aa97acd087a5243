"""Argument helpers shared by the commands: launch options and their checks, the engine chosen from
them, output files, run ids. The run itself is ``measure.session``; launching is ``dist``."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from ccltune import dist, engines, files, launch, rules
from ccltune.engines import ENGINES, default_engine
from ccltune.errors import EngineUnavailable, RuleFileError, UsageError
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


def check_virtual_nodes(args: argparse.Namespace, engine: str) -> None:
    """--virtual-nodes K against the job's size, before any process is started."""
    k = args.virtual_nodes
    if k < 1:
        raise UsageError(f"--virtual-nodes must be >= 1, got {k}")
    n = job_size(args, engine)
    if k > 1 and n >= 1 and n % k:
        raise UsageError(f"--virtual-nodes {k} does not divide the job's {n} processes")


def comma_list(action: argparse.Action) -> argparse.Action:
    """Mark an option whose value is a comma-separated list (``--algos ring,tree``): the Python API
    (``ccltune.api``) takes a list or tuple for it too and joins it with commas."""
    action.comma_list = True  # type: ignore[attr-defined]
    return action


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
    """``--db`` and ``--json`` of the diagnose commands (links, topo, doctor, check), spelled the same in each."""
    parser.add_argument("--db", default=DEFAULT_DB, metavar="PATH",
                        help="results database to record the run in (default: %(default)s)")
    parser.add_argument("--json", dest="json_path", metavar="PATH",
                        help="also write the results as JSON to PATH")


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, metavar="PATH", help="results database (default: %(default)s)")


def add_launch(p: argparse.ArgumentParser) -> None:
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
                   help="nccl engine: where buffers come from. ncclmem-max (bench's default): one ncclMemAlloc send and "
                        "one recv buffer of the run's largest size, as nccl-tests allocates them with NCCL >= 2.19; "
                        "each timed call starts one size further into them, wrapping at the end, as nccl-tests' "
                        "calls do, so the data is not in the GPU's L2 cache from the call before. ncclmem: a fresh "
                        "ncclMemAlloc pair for every size, every call on its start (sweep's and validate's default). "
                        "In CUDA graphs NCCL reaches peers' ncclMemAlloc buffers directly. torch: PyTorch's caching "
                        "allocator (cudaMalloc), what a PyTorch program passes by default")


BUFFERS = ("ncclmem", "ncclmem-max", "torch")


def gpu_count() -> int:
    from ccltune.gpus import visible_count

    return visible_count()


def check_timeout(seconds: float, flag: str = "--timeout") -> None:
    """A finite number of seconds > 0: no run can be waited on for NaN or inf seconds."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"{flag} must be > 0 seconds, got {seconds:g}")


def check_nproc(nproc: int | None) -> None:
    if nproc is not None and nproc < 1:
        raise UsageError(f"--nproc must be >= 1, got {nproc}")


NO_GPU_NOTE = "no GPU found: running on the CPU engine (gloo)"
NOTE_ENV = "CCLTUNE_ENGINE_NOTE"


def resolve_engine(args: argparse.Namespace) -> tuple[str, str | None]:
    """(engine, note): the note says when the CPU engine was chosen for lack of a GPU."""
    check_timeout(args.timeout)
    if args.engine:
        if engines.kind(args.engine).gpu and gpu_count() == 0:
            raise EngineUnavailable(f"--engine {args.engine} needs a CUDA/ROCm GPU and none is visible; "
                                    "use --engine gloo")
        engine, note = args.engine, os.environ.get(NOTE_ENV) or None  # relaunch() passes the parent's note on
    else:
        engine = default_engine()
        note = None if engines.kind(engine).gpu else NO_GPU_NOTE
    chosen = f"--engine {args.engine}" if args.engine else f"the {engine} engine (no GPU is visible)"
    for flag, value in (("--buffers", getattr(args, "buffers", None)), ("--nccl-lib", getattr(args, "nccl_lib", None))):
        if value and not engines.kind(engine).own_comm:
            raise UsageError(f"{flag} {value} is for the nccl engine, not {chosen}")
    return engine, note


def announce(args: argparse.Namespace, note: str | None) -> None:
    """Say ``note`` on stderr (what the command knows before any process starts: the CPU engine chosen for
    lack of a GPU, a flag taken without effect) once, right away: from the process the user started, before
    torchrun starts the job (seconds), not from the job's rank 0 after it. Under a launcher of the user's own,
    rank 0 says it; a worker that ``relaunch`` started says nothing (its parent did)."""
    if not note:
        return
    if dist.under_launcher() and (launch.started_by_parent() or dist.launch_info().rank != 0):
        return
    caller = getattr(args, "_caller", None)
    print(f"ccltune: {note}", file=caller.stderr if caller is not None and caller.stderr else sys.stderr, flush=True)


def check_db(path: str) -> None:
    """The results database a measuring command will write: a ccltune database (made when missing) that
    this user may write."""
    from ccltune.store import Store

    Store(path).close()
    if not os.access(path, os.W_OK):
        raise UsageError(f"--db {path!r}: no permission to write it")


def job_size(args: argparse.Namespace, engine: str) -> int:
    """How many processes the job will have (``launch.job_size``: the launcher's, --nproc's, or the default)."""
    return launch.job_size(args.nproc, engines.kind(engine).gpu, gpu_count)


def oversubscribed(nproc: int, engine: str, cores: int) -> str | None:
    """Why ``nproc`` processes of a CPU engine on ``cores`` cores measure badly, or None when they fit."""
    if engines.kind(engine).gpu or nproc <= cores:
        return None
    return (f"--nproc {nproc} CPU processes on {cores} CPU cores: they take turns on the cores, so the times "
            "measure the scheduler more than the collective")


def relaunch(args: argparse.Namespace, argv: list[str], engine: str) -> int | None:
    """Start torchrun for --nproc (or the default count) unless already launched or the job runs in this
    process (``launch.runs_here``; the Python API sets ``args._caller``, a ``launch.Caller``).
    Returns the exit code of the job, or None to run in this process."""
    if dist.under_launcher():
        return None
    nproc = job_size(args, engine)
    if nproc < 1:  # no GPU visible to the nccl or torch engine
        raise UsageError(f"--nproc must be >= 1, got {nproc}")
    caller = getattr(args, "_caller", None)
    if warning := oversubscribed(nproc, engine, os.cpu_count() or 1):
        print(f"ccltune: warning: {warning}", file=sys.stderr)
    if launch.runs_here(nproc, engines.kind(engine).gpu, caller):
        return None
    if getattr(args, "db", None):  # an unusable database is said once, before a process per GPU starts
        check_db(args.db)
    note = NO_GPU_NOTE if not engines.kind(engine).gpu and not getattr(args, "engine", None) else ""
    return launch.relaunch(argv, nproc, engine, {"CCLTUNE_COMMAND": "ccltune " + " ".join(argv), NOTE_ENV: note},
                           caller)


def check_timing(args: argparse.Namespace) -> None:
    """--target-us, --max-iters and -w (sweep's and validate's): a finite length, at least one call."""
    if not (math.isfinite(args.target_us) and args.target_us > 0):
        raise UsageError(f"--target-us must be a number of microseconds > 0, got {args.target_us:g}")
    if args.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1, got {args.max_iters}")
    if args.warmup_iters < 0:
        raise UsageError(f"-w/--warmup_iters must be >= 0, got {args.warmup_iters}")


def engine_options(args: argparse.Namespace, **bench: Any) -> Any:
    """The engine's options from the launch flags (--nccl-lib, --buffers), and ``bench``'s own
    (``engines.base.EngineOptions`` fields: shared_buffers lays the buffers out as nccl-tests does
    unless --buffers says otherwise)."""
    from ccltune.engines.base import EngineOptions

    return EngineOptions(nccl_lib=args.nccl_lib, buffers=args.buffers, **bench)


def args_record(args: argparse.Namespace) -> dict[str, Any]:
    """The command's arguments as a run records them."""
    return {k: v for k, v in vars(args).items() if k not in ("func", "_argv", "_caller")}


def read_input(path: str, flag: str = "FILE") -> str:
    """A file named on the command line, as text (a regular file or a pipe such as ``<(cat f)``); a
    UsageError naming ``flag`` and the file when it cannot be read (:func:`ccltune.files.read_bytes`)."""
    return files.read_bytes(path, flag).decode("utf-8", errors="replace")


def check_rule_file(path: str, flag: str) -> None:
    """A rule file that can be read and has no rejected line (validate's RULES, replay's --rules)."""
    try:
        diags = rules.load(path, flag).diagnostics
    except RuleFileError as exc:
        raise UsageError(str(exc)) from None
    if diags:
        raise UsageError(f"{path} has rejected lines (ccltune plugin check {path}): "
                         + "; ".join(f"line {d.line}: {d.reason}" for d in diags[:3]))
