"""What the commands that start a job share: the engine chosen from the options, the job's size, the
note said before it starts, torchrun started for it (``ccltune.launch``), the engine's options. The run
itself is ``measure.session``."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

from ccltune import dist, engines, launch, rules
from ccltune.commands.common import Console, terminal
from ccltune.commands.options import option
from ccltune.engines import ENGINES, default_engine
from ccltune.errors import EngineUnavailable, RuleFileError, UsageError
from ccltune.store import DEFAULT_DB

BUFFERS = ("ncclmem", "ncclmem-max", "torch")  # --buffers: where the nccl engine's buffers come from


def buffers_help(default: str) -> str:
    """--buffers' help, naming the command's choice without it (the nccl engine's, from
    ``EngineOptions.shared_buffers``: said here, not computed); bench redeclares the field with its own."""
    return ("nccl engine: ncclmem-max: one ncclMemAlloc pair of the largest size, each call further into it, as "
            "nccl-tests; ncclmem: a pair per size; torch: PyTorch's allocator (default: "
            f"{default}; torch before NCCL 2.19; docs/bench.md, 'Buffers')")


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """What every command that starts ranks takes (``cli._common.add_launch``'s flags, and ``--db``):
    the base of its options."""

    db: str = option(DEFAULT_DB, flag="--db", help="results database (default: %(default)s)")
    engine: str | None = option(None, flag="--engine", choices=ENGINES,
                                help="nccl: NCCL's C API, eager calls issued from C as nccl-tests issues them (default "
                                     "with GPUs); torch: torch.distributed/ProcessGroupNCCL, each call from Python, what a "
                                     "PyTorch program sees; gloo: CPU (default without GPUs)")
    nproc: int | None = option(None, flag="--nproc",
                               help="start N processes on this node with torchrun (default: one per GPU, 2 on the CPU "
                                    "engine). Under torchrun, srun or mpirun the launcher starts the processes: leave it out")
    timeout: float = option(120.0, flag="--timeout",
                            help="seconds after which a dead or hung rank stops the others (default: %(default)s)")
    nccl_lib: str | None = option(None, flag="--nccl-lib",
                                  help="NCCL/RCCL library to call (default: the one PyTorch loads)")
    buffers: str | None = option(None, flag="--buffers", choices=BUFFERS, help=buffers_help("ncclmem"))



def gpu_count() -> int:
    from ccltune.gpus import visible_count

    return visible_count()


# the longest any watchdog waits: a year (nccl-tests' -T 0, "no timeout", becomes this). Beyond it the
# watchdogs themselves fail: threading.Timer past TIMEOUT_MAX (~292 years) and a process group's timedelta
# past 86,400 x 999,999,999 s raise OverflowError, and the run would go unguarded
MAX_TIMEOUT_S = 365 * 24 * 3600.0


def check_timeout(seconds: float, flag: str = "--timeout") -> None:
    """A finite number of seconds in (0, :data:`MAX_TIMEOUT_S`]: no run can be waited on for NaN, inf or
    1e300 seconds (a watchdog that cannot be armed guards nothing)."""
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_S):
        raise UsageError(f"{flag} must be > 0 and at most {MAX_TIMEOUT_S:.0f} seconds (a year), got {seconds:g}")


def check_nproc(nproc: int | None) -> None:
    if nproc is not None and nproc < 1:
        raise UsageError(f"--nproc must be >= 1, got {nproc}")


NO_GPU_NOTE = "no GPU found: running on the CPU engine (gloo)"
NOTE_ENV = "CCLTUNE_ENGINE_NOTE"


def resolve_engine(options: Any) -> tuple[str, str | None]:
    """(engine, note): the note says when the CPU engine was chosen for lack of a GPU."""
    check_timeout(options.timeout)
    if options.engine:
        if engines.kind(options.engine).gpu and gpu_count() == 0:
            raise EngineUnavailable(f"--engine {options.engine} needs a CUDA/ROCm GPU and none is visible; "
                                    "use --engine gloo")
        engine, note = options.engine, os.environ.get(NOTE_ENV) or None  # relaunch() passes the parent's note on
    else:
        engine = default_engine()
        note = None if engines.kind(engine).gpu else NO_GPU_NOTE
    chosen = f"--engine {options.engine}" if options.engine else f"the {engine} engine (no GPU is visible)"
    for flag, value in (("--buffers", getattr(options, "buffers", None)), ("--nccl-lib", getattr(options, "nccl_lib", None))):
        if value and not engines.kind(engine).own_comm:
            raise UsageError(f"{flag} {value} is for the nccl engine, not {chosen}")
    return engine, note


def announce(note: str | None, caller: launch.Caller | None = None, console: Console | None = None) -> None:
    """Say ``note`` on stderr (what the command knows before any process starts: the CPU engine chosen for
    lack of a GPU, a flag taken without effect) once, right away: from the process the user started, before
    torchrun starts the job (seconds), not from the job's rank 0 after it. Under a launcher of the user's own,
    rank 0 says it; a worker that ``relaunch`` started says nothing (its parent did)."""
    if not note:
        return
    if dist.under_launcher() and (launch.started_by_parent() or dist.launch_info().rank != 0):
        return
    if console is not None:
        console.note(f"ccltune: {note}")
        return
    print(f"ccltune: {note}", file=caller.stderr if caller is not None and caller.stderr else sys.stderr, flush=True)


def check_db(path: str) -> None:
    """The results database a measuring command will write: a ccltune database (made when missing) that
    this user may write."""
    from ccltune.store import Store

    Store(path).close()
    if not os.access(path, os.W_OK):
        raise UsageError(f"--db {path!r}: no permission to write it")


def job_size(options: Any, engine: str) -> int:
    """How many processes the job will have (``launch.job_size``: the launcher's, --nproc's, or the default)."""
    return launch.job_size(options.nproc, engines.kind(engine).gpu, gpu_count)


def oversubscribed(nproc: int, engine: str, cores: int) -> str | None:
    """Why ``nproc`` processes of a CPU engine on ``cores`` cores measure badly, or None when they fit."""
    if engines.kind(engine).gpu or nproc <= cores:
        return None
    return (f"--nproc {nproc} CPU processes on {cores} CPU cores: they take turns on the cores, so the times "
            "measure the scheduler more than the collective")


def relaunch(options: Any, argv: list[str], engine: str, caller: launch.Caller | None = None,
             command_line: list[str] | None = None, console: Console | None = None) -> int | None:
    """Start torchrun for --nproc (or the default count) unless already launched or the job runs in this
    process (``launch.runs_here``; ``caller``: the Python API's, a ``launch.Caller``). The workers run
    ``ccltune ARGV``; ``command_line`` (default ARGV) is what the user typed, recorded with the run;
    ``console``: where a warning goes (default: stderr).
    Returns the exit code of the job, or None to run in this process."""
    if dist.under_launcher():
        return None
    nproc = job_size(options, engine)
    if nproc < 1:  # no GPU visible to the nccl or torch engine
        raise UsageError(f"--nproc must be >= 1, got {nproc}")
    if warning := oversubscribed(nproc, engine, os.cpu_count() or 1):
        (console or terminal()).warn(f"ccltune: warning: {warning}")
    if launch.runs_here(nproc, engines.kind(engine).gpu, caller):
        return None
    if getattr(options, "db", None):  # an unusable database is said once, before a process per GPU starts
        check_db(options.db)
    note = NO_GPU_NOTE if not engines.kind(engine).gpu and not getattr(options, "engine", None) else ""
    command = {"CCLTUNE_COMMAND": "ccltune " + " ".join(command_line or argv), NOTE_ENV: note}
    return launch.relaunch(argv, nproc, engine, command, caller)


def engine_options(options: Any, **bench: Any) -> Any:
    """The engine's options from the launch flags (--nccl-lib, --buffers), and ``bench``'s own
    (``engines.base.EngineOptions`` fields: shared_buffers lays the buffers out as nccl-tests does
    unless --buffers says otherwise)."""
    from ccltune.engines.base import EngineOptions

    return EngineOptions(nccl_lib=options.nccl_lib, buffers=options.buffers, **bench)


def args_record(options: Any) -> dict[str, Any]:
    """The command's options (or parsed arguments) as a run records them."""
    if dataclasses.is_dataclass(options):
        return dataclasses.asdict(options)  # type: ignore[arg-type]
    return {k: v for k, v in vars(options).items() if k not in ("func", "_argv", "_caller")}


def check_virtual_nodes(options: Any, engine: str) -> None:
    """--virtual-nodes K against the job's size, before any process is started."""
    k = options.virtual_nodes
    if k < 1:
        raise UsageError(f"--virtual-nodes must be >= 1, got {k}")
    n = job_size(options, engine)
    if k > 1 and n >= 1 and n % k:
        raise UsageError(f"--virtual-nodes {k} does not divide the job's {n} processes")


def check_timing(options: Any) -> None:
    """--target-us, --max-iters and -w (sweep's and validate's): a finite length, at least one call."""
    if not (math.isfinite(options.target_us) and options.target_us > 0):
        raise UsageError(f"--target-us must be a number of microseconds > 0, got {options.target_us:g}")
    if options.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1, got {options.max_iters}")
    if options.warmup_iters < 0:
        raise UsageError(f"-w/--warmup_iters must be >= 0, got {options.warmup_iters}")


def check_rule_file(path: str, flag: str) -> None:
    """A rule file that can be read and has no rejected line (validate's RULES, replay's --rules)."""
    try:
        diags = rules.load(path, flag).diagnostics
    except RuleFileError as exc:
        raise UsageError(str(exc)) from None
    if diags:
        raise UsageError(f"{path} has rejected lines (ccltune plugin check {path}): "
                         + "; ".join(f"line {d.line}: {d.reason}" for d in diags[:3]))

