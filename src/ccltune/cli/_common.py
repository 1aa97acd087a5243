"""Argument helpers shared by the commands: launch options and their checks, the engine chosen from
them, output files, run ids. The run itself is ``measure.session``; launching is ``dist``."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from ccltune import dist, engines, files, launch, rules
from ccltune.engines import ENGINES, default_engine
from ccltune.errors import EngineUnavailable, RuleFileError, UsageError
from ccltune.store import DEFAULT_DB, check_path


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


def parse_run_ids(text: str, flag: str = "--runs") -> list[tuple[int, int]]:
    """'3,5-7' -> [(3, 3), (5, 7)]: inclusive ranges of run ids (``Store.runs_in`` resolves them)."""
    out: list[tuple[int, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise UsageError(f"{flag}: {part!r} is not a run id or a range like 5-7 (in {text!r})") from None
        if a > b:
            raise UsageError(f"{flag}: range {part!r} runs backwards")
        out.append((a, b))
    if not out:
        raise UsageError(f"{flag}: {text!r} names no run")
    return out


# Flags (argparse dest -> spelling) through which a command writes a file of its own
OUTPUT_FLAGS = {"json": "--json", "json_path": "--json", "junit": "--junit", "out": "--out", "save_log": "--save-log"}


# Flags (argparse dest -> spelling) naming a file the command reads: no output may be one of them
INPUT_FLAGS = {"db": "--db", "from_json": "--from-json", "nccl_log": "--nccl-log", "from_log": "--from-log",
               "rules": "RULES", "file": "RULES", "files": "FILE", "exclude_failed": "--exclude-failed",
               "profile": "--profile", "best_from": "--best-from"}


def check_outputs(args: argparse.Namespace) -> None:
    """Every file the command will write, checked before it reads or measures anything
    (:func:`ccltune.files.check_output`): a name the file system can hold, its folder there, not a
    folder, not a file the command reads (the results database above all: writing it would replace
    every run stored there), and no two outputs the same file. The results database itself is
    checked too (:func:`ccltune.store.check_path`): a command that measures first must not find
    out after the measurement that it cannot store it."""
    if getattr(args, "db", None):
        check_path(args.db)
    taken = {("the results database (--db)" if flag == "--db" else f"the input {flag}"): getattr(args, dest)
             for dest, flag in INPUT_FLAGS.items() if getattr(args, dest, None)}
    for dest, flag in OUTPUT_FLAGS.items():
        path = getattr(args, dest, None)
        if isinstance(path, str) and path:
            files.check_output(path, flag, taken)
            taken[f"the output {flag}"] = path


def add_under_load(p: argparse.ArgumentParser) -> None:
    p.add_argument("--under-load", type=int, default=None, metavar="M",
                   help="while collectives are timed, run an M x M bf16 matrix multiply back to back on a second "
                        "stream of each rank's GPU, so configurations compete for SMs as in training (recorded "
                        "with the run; `ccltune tune --under-load M` derives from such runs). Not on gloo")


def add_sysfs_root(p: argparse.ArgumentParser) -> None:
    from ccltune.diagnose.probes.sysfs import ROOT_ENV

    p.add_argument("--sysfs-root", metavar="DIR", default=None,
                   help=f"folder standing for / when reading sys/ and proc/ (default: ${ROOT_ENV} or /)")


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
