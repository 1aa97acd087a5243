"""Pieces shared by the commands that measure (bench, sweep, validate): launch options,
starting torchrun for --nproc, joining the job, choosing the engine, signals."""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ccltune import dist, files
from ccltune.engines import ENGINES, default_engine
from ccltune.errors import DistError, EngineUnavailable, Interrupted, UsageError
from ccltune.store import DEFAULT_DB, check_path


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


def apply_virtual_nodes(ctx: Any, k: int) -> None:
    """Before any communicator exists: make NCCL see ``k`` nodes of consecutive ranks on this host
    (a host id per group, NCCL_HOSTID), and record them as the job's nodes (rows, rules)."""
    if k <= 1:
        return
    if ctx.n_nodes > 1:
        raise UsageError(f"--virtual-nodes {k}: the job already spans {ctx.n_nodes} hosts; virtual nodes "
                         "split one host")
    if ctx.world_size % k:
        raise UsageError(f"--virtual-nodes {k} does not divide {ctx.world_size} ranks")
    os.environ["NCCL_HOSTID"] = f"ccltune-virtual-node-{ctx.rank * k // ctx.world_size}"
    ctx.virtual_nodes = k


def mark_virtual_nodes(env: dict[str, Any], k: int) -> None:
    """Say in a run's environment record that its nodes were simulated."""
    if k > 1:
        env["virtual_nodes"] = k
        env["platform"] = f"{env.get('platform', '')} (simulated {k} nodes)".strip()


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


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, metavar="PATH", help="results database (default: %(default)s)")


def add_launch(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("processes and engine")
    g.add_argument("--engine", choices=ENGINES, default=None,
                   help="nccl: NCCL's C API (default with GPUs); torch: torch.distributed/ProcessGroupNCCL; "
                        "gloo: CPU (default without GPUs)")
    g.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="start N processes on this node with torchrun (default: one per GPU, 2 on the CPU "
                        "engine). Not needed under torchrun, srun or mpirun")
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
        if args.engine in ("nccl", "torch") and gpu_count() == 0:
            raise EngineUnavailable(f"--engine {args.engine} needs a CUDA/ROCm GPU and none is visible; "
                                    "use --engine gloo")
        engine, note = args.engine, os.environ.get(NOTE_ENV) or None  # relaunch() passes the parent's note on
    else:
        engine = default_engine()
        note = NO_GPU_NOTE if engine == "gloo" else None
    chosen = f"--engine {args.engine}" if args.engine else f"the {engine} engine (no GPU is visible)"
    for flag, value in (("--buffers", getattr(args, "buffers", None)), ("--nccl-lib", getattr(args, "nccl_lib", None))):
        if value and engine != "nccl":
            raise UsageError(f"{flag} {value} is for the nccl engine, not {chosen}")
    return engine, note


def check_db(path: str) -> None:
    """The results database a measuring command will write: a ccltune database (made when missing) that
    this user may write."""
    from ccltune.store import Store

    Store(path).close()
    if not os.access(path, os.W_OK):
        raise UsageError(f"--db {path!r}: no permission to write it")


def under_launcher() -> bool:
    return dist.launch_info().launcher != "single"


def job_size(args: argparse.Namespace, engine: str) -> int:
    """How many processes the job will have: the launcher's world size, else what relaunch() starts."""
    info = dist.launch_info()
    if info.launcher != "single":
        return info.world_size
    if args.nproc is not None:
        check_nproc(args.nproc)
        if engine != "gloo" and args.nproc > (n := gpu_count()):  # NCCL refuses two ranks on one GPU
            raise UsageError(f"--nproc {args.nproc}: one process per GPU, and {n} GPUs are visible here")
        return args.nproc
    return gpu_count() if engine != "gloo" else 2


def relaunch(args: argparse.Namespace, argv: list[str], engine: str) -> int | None:
    """Start torchrun for --nproc (or the default count) unless already launched.
    Returns the exit code of the job, or None to run in this process."""
    if under_launcher():
        return None
    nproc = job_size(args, engine)
    if nproc < 1:  # no GPU visible to the nccl or torch engine
        raise UsageError(f"--nproc must be >= 1, got {nproc}")
    if nproc == 1:
        return None
    if getattr(args, "db", None):  # an unusable database is said once, before a process per GPU starts
        check_db(args.db)
    child = _strip_nproc(argv) + ["--engine", engine]
    cmd = dist.torchrun_argv(nproc, child)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["CCLTUNE_COMMAND"] = "ccltune " + " ".join(argv)
    env[NOTE_ENV] = NO_GPU_NOTE if engine == "gloo" and not getattr(args, "engine", None) else ""
    fd, outcome = tempfile.mkstemp(prefix="ccltune-outcome-")
    os.close(fd)
    env[OUTCOME_ENV] = outcome
    try:
        proc = subprocess.Popen(cmd, env=env)
        interrupted = False
        while True:  # Ctrl-C reaches the workers through torchrun; wait for them to finish
            try:
                rc = _exit_code(proc.wait())
                if interrupted and rc != 0:
                    return Interrupted.exit_code
                return outcome_code(outcome, rc)
            except KeyboardInterrupt:
                interrupted = True
    finally:
        os.unlink(outcome)


# A worker started by relaunch() whose command ends in a failed check (a FAIL verdict, wrong
# results) writes its exit code to this file and exits 0: the check has said what failed, and a
# non-zero worker would make torchrun print its own failure report (a "Root Cause" block naming
# the rank, pid and a missing traceback) under it. relaunch() returns the code written.
OUTCOME_ENV = "CCLTUNE_OUTCOME_FILE"


def hand_over(code: int) -> int:
    """The exit code for a worker whose check failed: 0 after writing ``code`` for relaunch() to
    return, when relaunch() started this worker; else ``code`` itself."""
    path = os.environ.get(OUTCOME_ENV)
    if not path:
        return code
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(str(code))
    except OSError:
        return code
    return 0


def outcome_code(path: str, rc: int) -> int:
    """The job's exit code: torchrun's, or, when every worker exited 0, the code a worker handed over."""
    if rc != 0:
        return rc
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return rc
    return int(text) if text.isdigit() else rc


def _exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def _strip_nproc(argv: list[str]) -> list[str]:
    """argv without --nproc and --engine (the parent resolves both once)."""
    return _drop_option(_drop_option(argv, "--nproc"), "--engine")


def _drop_option(argv: list[str], name: str) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            out.append(a)
    return out


class Terminated(KeyboardInterrupt):
    """SIGTERM: a launcher stopping this rank (a cancel, or torchrun after a peer died)."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (srun/mpirun cancelling, torchrun stopping the job) acts like Ctrl-C."""
    def handler(signum: int, frame: Any) -> None:
        raise Terminated

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def peer_death(ctx: dist.DistContext, exc: BaseException) -> DistError | None:
    """An interrupt that is really a peer's death (torchrun's SIGTERM after a worker exited),
    as an error naming the rank and host that died; None for a real interrupt."""
    lost = dist.lost_local_ranks(ctx.info) if isinstance(exc, Terminated) else []
    if not lost:
        return None
    who = ", ".join(f"rank {r} on host {ctx.host_of(r)}" for r in lost)
    return DistError(f"{who} exited (killed or crashed); the launcher stopped rank {ctx.rank} "
                     f"on {ctx.host_of(ctx.rank)}")


def interrupted(ctx: dist.DistContext, exc: BaseException, message: str) -> int:
    """Ctrl-C or a launcher's SIGTERM: raise the peer's death as an error if that is what it
    was, else rank 0 says what was kept; the exit code is 130."""
    dead = peer_death(ctx, exc)
    if dead is not None:
        raise dead from None
    if ctx.is_root:
        print(f"ccltune: {message}", file=sys.stderr)
    return 130


def make_engine(name: str, ctx: dist.DistContext, opts: Any) -> Any:
    if name == "gloo":
        from ccltune.engines.gloo import GlooEngine

        return GlooEngine(ctx, opts)
    if name == "torch":
        from ccltune.engines.torch_pg import TorchEngine

        return TorchEngine(ctx, opts)
    from ccltune.engines.nccl import NcclEngine

    return NcclEngine(ctx, opts)


def join(engine: str, timeout: float) -> dist.DistContext:
    device = None
    if engine == "torch":
        import torch

        info = dist.launch_info()
        device = torch.device("cuda", info.local_rank % max(torch.cuda.device_count(), 1))
    return dist.init(timeout, with_nccl=engine == "torch", device=device)


def command_line(argv: list[str]) -> str:
    return os.environ.get("CCLTUNE_COMMAND") or "ccltune " + " ".join(argv)


def quiet_other_ranks(ctx: dist.DistContext) -> None:
    """Only rank 0 writes to stdout; and it measures on when its reader goes (``ccltune bench | head``)."""
    if not ctx.is_root:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    elif not isinstance(sys.stdout, _ReaderMayGo):
        sys.stdout = _ReaderMayGo(sys.stdout)


def stdout_to_devnull() -> None:
    """Point file descriptor 1 at /dev/null: what is left to print (and Python's flush at exit) after
    the reader of a pipe went is dropped, not raised as BrokenPipeError."""
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(fd, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    finally:
        os.close(fd)


class _ReaderMayGo:
    """Rank 0's stdout. When the reader of a pipe exits (``| head``), the table stops there and the
    measurement goes on: its rows still reach the database, and the run ends as it would have."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        stdout_to_devnull()
        self._stream = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def fail_run_hook(db: str, run_id: int) -> Any:
    """For the watchdog thread: mark the run failed through its own connection."""
    def hook(message: str) -> None:
        from ccltune.store import Store

        try:
            with Store(db) as st:
                st.finish_run(run_id, "failed", {"error": message})
        except Exception:  # noqa: BLE001 - the process is about to exit anyway
            pass
    return hook
