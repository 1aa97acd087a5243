"""What every engine provides, and the CUDA timing loop the GPU engines share.

Timing follows nccl-tests: ranks meet at a host barrier, a host clock starts, ``iters``
calls are issued (or one CUDA graph holding ``iters`` calls is launched ``graph`` times),
the stream is synchronised, and the elapsed time is divided by the number of calls. The nccl
engine issues a series of calls from C (``Engine.issue``), as nccl-tests does; the torch
engine issues each call from Python, as a PyTorch program does.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from ccltune.collectives.base import Collective, Layout
from ccltune.datatypes import DType
from ccltune.dist import DistContext


@dataclass
class Buffers:
    """A point's send and receive buffers, laid out above the engine (``measure.buffers``)."""

    send: Any
    recv: Any
    keep: tuple[Any, ...] = ()   # allocations the views point into
    # Timed call i works ``shift_bytes * (i % steps)`` bytes further into the allocations, as
    # nccl-tests' calls step through its buffers of the largest size (steps 1: always the start)
    shift_bytes: int = 0
    steps: int = 1
    filled: bool = False  # the input holds exact values (an out-of-place call never writes it)

    def shift(self, i: int) -> int:
        return self.shift_bytes * (i % self.steps)


Alloc = Callable[[int], Any]


@dataclass(frozen=True)
class EngineOptions:
    """What a command tells its engine when making it (the nccl engine reads them; the others
    need none). The command decides them: none has a default that depends on the command."""

    nccl_lib: str | None = None      # the NCCL/RCCL library to load (None: the one PyTorch loads)
    buffers: str | None = None       # ncclmem, ncclmem-max or torch (None: from ``shared_buffers``)
    # Without ``buffers``: one ncclMemAlloc pair at the run's largest size that every size steps
    # through, as nccl-tests lays them out (bench); else a pair for every size (sweep, validate)
    shared_buffers: bool = False
    symmetric: bool = False          # register the buffers as symmetric windows (NCCL >= 2.27)
    plugin_path: str | None = None   # the ccltune tuner plugin (channels, rules), loaded once per process
    empty_rules: str | None = None   # an empty rule file: the plugin keeps NCCL's default
    workdir: str = "/tmp"            # where per-candidate channel rule files are written
    # nccl-tests' options (bench): -y 1 every call on the NULL stream, -x ncclConfig_t.CTAPolicy,
    # -R 1 ncclCommRegister of the buffers
    stream_null: bool = False
    cta_policy: int | None = None
    local_register: bool = False


@dataclass
class Point:
    """One measurement point."""

    coll: Collective
    lay: Layout
    dt: DType
    op: str
    root: int
    in_place: bool
    iters: int
    warmup: int
    graph: int           # CUDA graph launches; 0 = eager
    config: Any = None   # engine-specific (sweep candidates), None = NCCL's default
    # nccl-tests' own procedure at a point (BenchTime, --warmup-mode nccl-tests): with -G the graph's
    # first launch timed with the others and the checked call issued through a graph of its own;
    # ``warmup`` is then 0 (nccl-tests warms up over the whole series, not at each point)
    ncclt: bool = False
    # nccl-tests' schedule of the timed calls (BenchTime): ``agg`` calls per iteration (-m, in one NCCL
    # group), ``blocking`` (-z 0..3), per-iteration timing (-I); ``unalign`` (-u): buffers start this
    # many elements in
    agg: int = 1
    blocking: int = 0
    per_iter: bool = False
    unalign: int = 0

    @property
    def calls(self) -> int:
        """Timed calls: iterations x aggregated calls."""
        return self.iters * self.agg


@dataclass
class Timing:
    """One point's timing on this rank, per call, in seconds: ``seconds`` as nccl-tests' time column
    (the host clock around the calls and the wait for them; -z 3: the waits only), ``cpu_seconds``
    the host's until the last call was issued (-C 1, nccl-tests' cputime), ``iter_seconds`` each
    iteration's time per call from events (-I 1)."""

    seconds: float
    cpu_seconds: float | None = None
    iter_seconds: list[float] | None = None


def schedule(pt: Point, call: Callable[[int], None], sync: Callable[[], None], barrier: Callable[[], None],
             mark: Callable[[int], None] | None = None) -> float:
    """nccl-tests' timed iterations (BenchTime/startColl) issued from Python, for engines without
    the C loop (which runs the same schedule: native/src/series.c): per call, ``-z`` 1..3 wait
    (``sync``), -z 1 also meets every rank (``barrier``); -z 3 waits and meets after each iteration,
    the barrier left out of the returned busy seconds. ``mark(k)``: event k (-I): at each iteration's
    start and once after the last, or (-z 3) at its start and after its wait. -m > 1 needs an NCCL
    group these engines cannot open: one call per iteration."""
    busy, paired = 0.0, pt.blocking == 3
    for k in range(pt.iters):
        t0 = time.perf_counter()
        if mark is not None:
            mark(2 * k if paired else k)
        call(k)
        if pt.blocking:
            sync()
            if pt.blocking == 1:
                barrier()
        if paired:
            sync()
            if mark is not None:
                mark(2 * k + 1)
            busy += time.perf_counter() - t0
            barrier()
    if mark is not None and not paired:
        mark(pt.iters)
    return busy


def iteration_seconds(pt: Point, elapsed: Callable[[int, int], float]) -> list[float]:
    """Each iteration's seconds per call from its events (``elapsed(a, b)``: seconds from event a to
    b), as nccl-tests' getElapsedTimes divides by -m."""
    if pt.blocking == 3:
        return [elapsed(2 * k, 2 * k + 1) / pt.agg for k in range(pt.iters)]
    return [elapsed(k, k + 1) / pt.agg for k in range(pt.iters)]


class Engine:
    name = "?"
    device: Any = None
    supports_graph = False
    on_fatal: Any = None  # called with the message before a hung process exits

    def __init__(self, ctx: DistContext, opts: EngineOptions = EngineOptions()):
        import torch

        self.torch = torch
        self.ctx = ctx
        self.opts = opts

    def info(self) -> dict[str, Any]:
        return {}

    def waive_reason(self, pt: Point) -> str | None:
        return None

    def alloc(self, pt: Point) -> Alloc | None:
        return None

    def reserve(self, nbytes: int) -> None:
        """The largest buffer (bytes) the run will ask ``alloc`` for; engines that allocate once
        per run (``--buffers ncclmem-max``) allocate it here."""

    def connect(self, config: Any = None) -> None:
        """Make the communicator of ``config`` now (engines that make their own)."""

    def free_memory(self) -> int:
        """Free bytes on this engine's GPU (-M); 0 without one."""
        return 0

    def prepare(self, pt: Point, bufs: Buffers) -> None:
        """Per-buffer setup (e.g. window registration) before timing."""

    def release(self, pt: Point, bufs: Buffers) -> None:
        """Undo ``prepare``."""

    def arrange(self, pt: Point, bufs: Buffers) -> None:
        """Set how the timed calls step through ``bufs`` (``Buffers.shift``); default: they don't."""

    def launch(self, pt: Point, bufs: Buffers) -> None:
        raise NotImplementedError

    def launch_at(self, pt: Point, bufs: Buffers, i: int) -> None:
        """The ``i``-th call of a warm-up or timed series (engines that step through buffers
        override this)."""
        self.launch(pt, bufs)

    def issue(self, pt: Point, bufs: Buffers, calls: int, *, step: bool = True) -> None:
        """``calls`` calls of ``pt`` in a row: calls 0 .. calls-1 of its series (``launch_at``), or
        with ``step`` False all on the buffers' start (``launch``). The nccl engine issues them from C
        (engines/series.py); here, one Python call each, which is what a PyTorch program pays."""
        for i in range(calls):
            if step:
                self.launch_at(pt, bufs, i)
            else:
                self.launch(pt, bufs)

    def capture(self, pt: Point, bufs: Buffers, calls: int | None, *, step: bool = True) -> Any:
        """A CUDA graph of ``calls`` calls of ``pt``, not launched yet: an engine whose ``supports_graph``
        is True has one (``CudaEngine``)."""
        raise NotImplementedError(f"the {self.name} engine captures no CUDA graph")

    def series(self, pt: Point, bufs: Buffers, calls: int, *, step: bool = True) -> Callable[[], None]:
        """``issue(pt, bufs, calls, step=step)`` made ready before a clock starts: what the call
        needs is prepared now (the nccl engine builds its launch loop's arguments), so the timed
        region holds the calls and little else."""
        return lambda: self.issue(pt, bufs, calls, step=step)

    def sync(self) -> None:
        pass

    def stream_context(self) -> Any:
        """Where this engine's calls are issued (a CUDA stream for GPU engines)."""
        return contextlib.nullcontext()

    def drop_comm(self, config: Any, abort: bool = False) -> None:
        """Forget the communicator of ``config`` (engines that keep several)."""

    def park_comm(self, config: Any) -> None:
        """Forget the communicator of ``config`` after NCCL refused a call on it on this rank (nothing
        was enqueued): the default drops it as :meth:`drop_comm` does."""
        self.drop_comm(config, abort=True)

    def time_point(self, pt: Point, bufs: Buffers) -> Timing:
        """This rank's timing of ``pt`` (per call)."""
        raise NotImplementedError

    def start_together(self, config: Any = None) -> None:
        """Line the ranks up just before a clock starts: the host barrier, then (GPU
        engines) one tiny collective and a sync, which releases every rank within
        microseconds of the others, where a host barrier over TCP leaves tens."""
        self.ctx.barrier("timing barrier")

    def abort(self) -> None:
        """Unblock a hung wait (called from the watchdog thread)."""

    def close(self) -> None:
        pass


class Watchdog:
    """Bounds a region that waits on other ranks: after ``seconds`` it calls
    ``engine.abort()`` (which unblocks NCCL waits); if the region still has not returned
    ``GRACE_S`` later (a blocking call that cannot be aborted, such as communicator
    init), it reports the ranks that stopped answering and ends the process."""

    GRACE_S = 15.0

    def __init__(self, engine: Engine, seconds: float, what: str):
        self.engine, self.seconds, self.what = engine, seconds, what
        self.fired = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Watchdog:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        self.fired = True
        self.engine.abort()
        if self._done.wait(self.GRACE_S):
            return
        err = self.engine.ctx.peer_failure(self.what, f"no progress for {self.seconds:g}s")
        fatal = getattr(self.engine, "on_fatal", None)
        if fatal is not None:
            fatal(str(err))
        print(f"ccltune: error: {err}", file=sys.stderr, flush=True)
        os._exit(err.exit_code)

    def __exit__(self, *exc: object) -> None:
        self._done.set()


class CudaEngine(Engine):
    """Shared by the nccl and torch engines: one GPU per process, a dedicated stream."""

    supports_graph = True
    capture_mode = "thread_local"

    def __init__(self, ctx: DistContext, opts: EngineOptions = EngineOptions()):
        super().__init__(ctx, opts)
        torch = self.torch
        ndev = torch.cuda.device_count()
        self.device = torch.device("cuda", device_index(ctx.info.local_rank, ndev))
        torch.cuda.set_device(self.device)
        # -y 1: every call on the legacy NULL stream, as nccl-tests' stream_null (torch's default stream)
        self.stream = (torch.cuda.default_stream(self.device) if opts.stream_null
                       else torch.cuda.Stream(device=self.device))

    def sync(self) -> None:
        self.stream.synchronize()

    def stream_context(self) -> Any:
        return self.torch.cuda.stream(self.stream)

    def capture(self, pt: Point, bufs: Buffers, calls: int | None, *, step: bool = True) -> Any:
        """A CUDA graph of ``calls`` calls of ``pt`` (``issue``; None: the point's timed calls), captured
        on this engine's stream and not launched yet."""
        graph = self.torch.cuda.CUDAGraph()
        with warnings.catch_warnings():  # a call that enqueues nothing is ours to report, not torch's
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
            with self.torch.cuda.graph(graph, stream=self.stream, capture_error_mode=self.capture_mode):
                if calls is None:
                    self.timed(pt, bufs, None)()  # iters x agg calls (-z and -I are refused with -G)
                else:
                    self.issue(pt, bufs, calls, step=step)
        return graph

    def free_memory(self) -> int:
        return int(self.torch.cuda.mem_get_info(self.device)[0])

    def time_point(self, pt: Point, bufs: Buffers) -> Timing:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self.issue(pt, bufs, pt.warmup)
            self.sync()
            if pt.graph and pt.lay.count > 0:  # nothing to capture for an empty buffer
                graph = self.capture(pt, bufs, None)
                if not pt.ncclt:
                    graph.replay()  # the first launch uploads the graph (and may set up what it reaches)
                    self.sync()
                self.start_together(pt.config)
                t0 = time.perf_counter()
                launch_graph(graph, pt.graph)
                issued = time.perf_counter() - t0
                self.sync()
                elapsed = time.perf_counter() - t0
                close_graph(graph)
                # nccl-tests' cputime under -G: the launches' host time over iters x agg, not x launches
                return Timing(elapsed / (pt.calls * pt.graph), issued / pt.calls)
            events = self.events(2 * pt.iters if pt.blocking == 3 else pt.iters + 1) if pt.per_iter else None
            run = self.clocked(pt, bufs, events)
            self.start_together(pt.config)
            cpu, elapsed = run()
            iters = iteration_seconds(pt, events.elapsed) if events is not None else None
            return Timing(elapsed / pt.calls, cpu / pt.calls, iters)

    def clocked(self, pt: Point, bufs: Buffers, events: Any) -> Callable[[], tuple[float, float]]:
        """The timed calls of ``pt`` (``timed``), ready to run and time as nccl-tests' BenchTime does: the
        returned callable gives (seconds issuing them, seconds until the stream was idle); -z 3: its busy
        seconds for both. Here on the host clock around Python's calls and stream sync; the nccl engine
        times them in C."""
        run = self.timed(pt, bufs, events)

        def go() -> tuple[float, float]:
            t0 = time.perf_counter()
            busy = run()
            issued = time.perf_counter() - t0
            self.sync()
            if pt.blocking == 3:
                return busy, busy
            return issued, time.perf_counter() - t0
        return go

    def timed(self, pt: Point, bufs: Buffers, events: Any) -> Callable[[], float]:
        """The timed calls of ``pt`` in nccl-tests' schedule, ready to run (returns the busy seconds of
        -z 3). Here from Python, one call each; the nccl engine runs them from C."""
        stream = self.stream

        def run() -> float:
            return schedule(pt, lambda i: self.launch_at(pt, bufs, i), self.sync,
                            lambda: self.ctx.barrier("-z barrier"),
                            (lambda k: events.record(k, stream)) if events is not None else None)
        return run

    def events(self, n: int) -> Any:
        """``n`` timing events on this engine's GPU (-I)."""
        return TorchEvents(self.torch, n)


def launch_graph(graph: Any, n: int) -> None:
    """Launch a graph of ``capture`` ``n`` times back to back: from C for the launch loop's graphs
    (``launch``), one ``replay()`` each for PyTorch's."""
    if hasattr(graph, "launch"):
        graph.launch(n)
    else:
        for _ in range(n):
            graph.replay()


def close_graph(graph: Any) -> None:
    """Free a graph of ``capture`` now (the launch loop's; PyTorch's is freed when dropped)."""
    if hasattr(graph, "close"):
        graph.close()


class TorchEvents:
    """-I's events as torch's CUDA events (engines that issue calls from Python)."""

    def __init__(self, torch: Any, n: int):
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(n)]

    def record(self, k: int, stream: Any) -> None:
        self.events[k].record(stream)

    def elapsed(self, a: int, b: int) -> float:
        return self.events[a].elapsed_time(self.events[b]) / 1e3


class HostClock:
    """-I's "events" on the CPU engine: the host clock (its calls complete before they return)."""

    def __init__(self, n: int):
        self.t = [0.0] * n

    def record(self, k: int, stream: Any = None) -> None:
        self.t[k] = time.perf_counter()

    def elapsed(self, a: int, b: int) -> float:
        return self.t[b] - self.t[a]


def device_index(local_rank: int, ndev: int) -> int:
    """The GPU a process uses: NCCL_TESTS_DEVICE (nccl-tests' first device; process i of a node then
    uses that + i) or the process's local rank, modulo the GPUs present."""
    first = os.environ.get("NCCL_TESTS_DEVICE")
    base = int(first) if first not in (None, "") and first.lstrip("-").isdigit() else -1
    return (base + local_rank if base != -1 else local_rank) % max(ndev, 1)
