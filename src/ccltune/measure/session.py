"""One run of ranks, from joining the job to the run's final status: the harness every command that
runs ranks (bench, sweep, validate, ...) shares, as nccl-tests' common harness is shared by its tests.

A :class:`Session` joins the job, quiets every rank but 0, makes the engine, collects the
environment, begins the run in the results database (rank 0), marks it failed from the watchdog
when a rank hangs, turns SIGTERM into an interrupt, tells a peer's death from a cancel, tears the
engine and the process group down and finishes the run with its final status. The commands only
plan, measure inside :meth:`Session.running` and render.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ccltune import dist, engines, environment, launch
from ccltune.engines.base import EngineOptions
from ccltune.errors import DataError, DistError, Interrupted, UsageError
from ccltune.groups import Split, groups_of
from ccltune.status import RunStatus
from ccltune.store import Measurement, Store


class Session:
    """The lifecycle of one run of ``kind`` on ``engine_name``. Use as a context manager::

        with Session("bench", "gloo", db=..., argv=..., timeout_s=...) as s:
            s.start_engine(opts)
            s.begin(args_record, s.environment())
            with s.running(lambda: "interrupted; ..."):
                ...measure...
        if s.interrupted: return s.exit_code

    ``summary`` (a callable, read when the run finishes) gives the run's summary; ``clock`` (a
    ``measure.sweep.Clock``), when set, times the engine's teardown; ``on_finished`` callables run on
    rank 0 once the run's final status is stored (e.g. writing --json from the stored run).
    ``split`` (nccl-tests' NCCL_TESTS_SPLIT, ``ranks_per_proc`` ranks to one nccl-tests process) splits
    the ranks into groups, each running its collectives on its own communicator, before the engine."""

    def __init__(self, kind: str, engine_name: str, *, db: str, argv: list[str], timeout_s: float,
                 virtual_nodes: int = 1, split: Split | None = None, ranks_per_proc: int = 1):
        self.kind, self.engine_name, self.db, self.argv = kind, engine_name, db, argv
        self.timeout_s, self.virtual_nodes = timeout_s, virtual_nodes
        self.split, self.ranks_per_proc = split, ranks_per_proc
        self.ctx: dist.DistContext | None = None
        self.engine: Any = None
        self.store: Store | None = None
        self.run_id: int | None = None
        self.status = RunStatus.FAILED
        self.exit_code = 0
        self.summary: Callable[[], dict[str, Any]] = dict
        self.clock: Any = None
        self.on_finished: list[Callable[[Store, int], None]] = []
        self._error: BaseException | None = None
        self._rows: int | None = None  # rank 0: the rows the finished run holds (its summary's)
        self._message: Callable[[], str] = lambda: "interrupted"

    # -- the run's beginning ------------------------------------------------------------------
    def __enter__(self) -> Session:
        self.ctx = join(self.engine_name, self.timeout_s)
        quiet_other_ranks(self.ctx)
        apply_virtual_nodes(self.ctx, self.virtual_nodes)
        if self.split is not None:
            dist.split(self.ctx, groups_of(self.split, self.ctx.world_size, self.ranks_per_proc).colors)
        self.store = Store(self.db) if self.ctx.is_root else None
        return self

    @property
    def is_root(self) -> bool:
        return self.ctx is not None and self.ctx.is_root

    @property
    def joined(self) -> dist.DistContext:
        """The process group ``with`` joined (``ctx``, which is None before it)."""
        if self.ctx is None:
            raise RuntimeError(f"{self.kind}: the session's process group is used before `with` joined it")
        return self.ctx

    def add_measurements(self, rows: Iterable[Measurement]) -> None:
        """Rank 0: ``rows`` stored in the run begun (or resumed); the other ranks store nothing."""
        if self.store is not None and self.run_id is not None:
            self.store.add_measurements(self.run_id, rows)

    def add_artifact(self, name: str, content: str) -> None:
        """Rank 0: a file's text stored with the run begun; the other ranks store nothing."""
        if self.store is not None and self.run_id is not None:
            self.store.add_artifact(self.run_id, name, content)

    def start_engine(self, opts: EngineOptions) -> Any:
        assert self.ctx is not None
        with terminate_as_interrupt():
            self.engine = make_engine(self.engine_name, self.ctx, opts)
        return self.engine

    def environment(self) -> dict[str, Any]:
        """The run's environment record: versions, NCCL, world, hosts, GPUs (and simulated nodes)."""
        ctx = self.ctx
        assert ctx is not None and self.engine is not None
        env = environment.collect(world_size=ctx.world_size, n_nodes=ctx.n_nodes, engine=self.engine_name,
                                  nccl=self.engine.info(), hosts=ctx.hosts, argv=self.argv)
        mark_virtual_nodes(env, self.virtual_nodes)
        if self.split is not None:
            mark_groups(env, self.split, groups_of(self.split, ctx.world_size, self.ranks_per_proc).colors)
        return env

    def begin(self, args: dict[str, Any], env: dict[str, Any]) -> int | None:
        """Rank 0: a new run in the database, marked failed by the watchdog if a rank hangs."""
        if self.store is not None:
            env = {**env, "processes": launch.job_processes()}  # to tell a run left running from a live one
            self.run_id = self.store.begin_run(self.kind, command=command_line(self.argv), env=env, args=args,
                                               engine=self.engine_name)
            self._watch()
        return self.run_id

    def resume(self, run_id: int) -> None:
        """Rank 0: continue the stored run ``run_id`` (status running again)."""
        if self.store is not None:
            self.store.reopen_run(run_id, launch.job_processes())
            self.run_id = run_id
            self._watch()

    def _watch(self) -> None:
        if self.run_id is not None:
            launch.note_run(self.db, self.run_id)  # the launcher finishes the run if this process cannot
        if self.engine is not None and self.run_id is not None:
            self.engine.on_fatal = fail_run_hook(self.db, self.run_id)

    # -- the measuring part ----------------------------------------------------------------------
    @contextmanager
    def running(self, interrupted_message: Callable[[], str]) -> Iterator[None]:
        """The measurement. It ends ``complete``; Ctrl-C or a launcher's SIGTERM ends it
        ``interrupted`` (rank 0 says ``interrupted_message()``, the exit code is 130) unless a peer
        died, which is raised as a DistError naming it."""
        assert self.ctx is not None
        self._message = interrupted_message
        try:
            with terminate_as_interrupt():
                yield
            self.status = RunStatus.COMPLETE
        except KeyboardInterrupt as exc:
            dead = peer_death(self.ctx, exc)
            if dead is not None:
                raise dead from None
            self.status = RunStatus.INTERRUPTED
            self._store_status()  # before the teardown, which a launcher's kill may cut short
            self.exit_code = interrupted(self.ctx, exc, interrupted_message())

    def _store_status(self) -> None:
        """Rank 0: the run's status stored now, as ``_finish`` stores it again at the end. srun's second
        Ctrl-C and a launcher's last SIGKILL end the processes during their teardown; the run then
        reads ``interrupted`` with its rows instead of being left ``running``."""
        if self.store is None or self.run_id is None:
            return
        try:
            self.store.finish_run(self.run_id, self.status, self.summary())
        except Exception:  # noqa: BLE001 - _finish stores it (or says why) after the teardown
            pass

    @property
    def interrupted(self) -> bool:
        return self.status == RunStatus.INTERRUPTED

    # -- the run's end -----------------------------------------------------------------------------
    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        self._error = exc
        stopped = False
        if exc is not None:
            self.status = RunStatus.FAILED
            # the launcher was told to stop, and a peer that went first broke a collective: a stop
            stopped = isinstance(exc, (Exception, KeyboardInterrupt)) and launch.stop_requested()
            if stopped:
                self.status, self._error = RunStatus.INTERRUPTED, None
        try:
            self._teardown_engine()
        finally:
            try:
                self._finish()
            finally:
                if self.status != RunStatus.FAILED and self.ctx is not None:
                    self.ctx.close(together=self.status == RunStatus.COMPLETE)
        if isinstance(exc, DistError) and self._rows is not None:  # the error's one line says what was kept
            exc.args = (f"{exc}; {self._rows} rows kept in {self.db} (run {self.run_id}, marked failed)",)
        if stopped and self.ctx is not None:
            self.exit_code = Interrupted.exit_code
            if self.ctx.is_root:
                print(f"ccltune: {self._message()}", file=sys.stderr)
        return stopped

    def _teardown_engine(self) -> None:
        engine = self.engine
        if engine is None:
            return
        # after a fault, abort: destroying a communicator on a faulted GPU can hang
        faulted = self.status == RunStatus.FAILED and not isinstance(self._error, (UsageError, DataError))
        try:
            if faulted and engines.kind(engine.name).own_comm:   # its own communicators: abort them
                engine.abort()
            elif self.clock is not None:
                from ccltune.measure.sweep import close_timed

                close_timed(engine, self.clock)
            else:
                engine.close()
        except Exception:  # noqa: BLE001 - teardown after a failure
            if not faulted:
                raise

    def _finish(self) -> None:
        store, run_id = self.store, self.run_id
        if store is None:
            return
        try:
            if run_id is not None:
                summary = self.summary()
                store.finish_run(run_id, self.status, summary)
                self._rows = summary.get("rows")
                for hook in self.on_finished:
                    hook(store, run_id)
        finally:
            store.close()


def command_line(argv: list[str]) -> str:
    return os.environ.get("CCLTUNE_COMMAND") or "ccltune " + " ".join(argv)


def join(engine: str, timeout: float) -> dist.DistContext:
    device = None
    torch_nccl = engines.kind(engine).torch_nccl
    if torch_nccl:
        import torch

        info = dist.launch_info()
        device = torch.device("cuda", info.local_rank % max(torch.cuda.device_count(), 1))
    return dist.init(timeout, with_nccl=torch_nccl, device=device)


def make_engine(name: str, ctx: dist.DistContext, opts: EngineOptions) -> Any:
    return engines.make(name, ctx, opts)


def plugin_options(opts: EngineOptions, workdir: str) -> EngineOptions:
    """Engine options for sweep, validate and replay: the plugin (for channels and rules) and an empty
    rule file for NCCL's default, in ``workdir``."""
    from ccltune import tuner_plugin

    try:
        plugin_path: str | None = str(tuner_plugin.library_path())
    except Exception:  # noqa: BLE001 - without the plugin, channels go through min/maxCTAs
        plugin_path = None
    empty_rules = os.path.join(workdir, "empty.conf")
    with open(empty_rules, "w", encoding="utf-8") as fh:
        fh.write("# ccltune: no rules (NCCL's default)\n")
    return replace(opts, workdir=workdir, plugin_path=plugin_path, empty_rules=empty_rules)


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


def mark_groups(env: dict[str, Any], split: Split, colors: tuple[int, ...]) -> None:
    """Say in a run's environment record how its ranks were split (every rank's color), and that its
    rows' n_ranks is a group's size (rank 0's group, whose layout the rows report, as nccl-tests does)."""
    env["groups"] = {"variable": split.variable, "value": split.value, "colors": list(colors),
                     "count": len(set(colors))}


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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: a launcher stopping this rank (a cancel, or torchrun after a peer died)."""


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (srun/mpirun cancelling, torchrun stopping the job, a closed terminal) act
    like Ctrl-C. One stop is enough: after it, these signals are ignored, so the teardown that
    follows stores the run whole (the launcher kills what does not end in time)."""
    def handler(signum: int, frame: Any) -> None:
        for s in _STOPS:
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated

    old = {s: signal.signal(s, handler) for s in _STOPS}
    try:
        yield
    finally:
        for s, h in old.items():
            if signal.getsignal(s) is not signal.SIG_IGN:  # a stop came: it stays ignored
                signal.signal(s, h)


def peer_death(ctx: dist.DistContext, exc: BaseException) -> DistError | None:
    """An interrupt that is really a peer's death (torchrun's SIGTERM after a worker exited),
    as an error naming the rank and host that died; None for a real interrupt."""
    if launch.stop_requested():  # the launcher was told to stop: the others go too
        return None
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
    return Interrupted.exit_code


def fail_run_hook(db: str, run_id: int) -> Any:
    """For the watchdog thread: mark the run failed through its own connection."""
    def hook(message: str) -> None:
        try:
            with Store(db) as st:
                st.finish_run(run_id, RunStatus.FAILED, {"error": message})
        except Exception:  # noqa: BLE001 - the process is about to exit anyway
            pass
    return hook
