"""What every engine provides, and the CUDA timing loop the GPU engines share.

Timing follows nccl-tests: ranks meet at a host barrier, a host clock starts, ``iters``
calls are issued (or one CUDA graph holding ``iters`` calls is launched ``graph`` times),
the stream is synchronised, and the elapsed time is divided by the number of calls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ccltune.collectives.base import Collective, Layout
from ccltune.dist import DistContext
from ccltune.measure.buffers import Alloc, Buffers
from ccltune.types import DType


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


class Engine:
    name = "?"
    device: Any = None
    supports_graph = False

    def __init__(self, ctx: DistContext, opts: Any):
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

    def prepare(self, pt: Point, bufs: Buffers) -> None:
        """Per-buffer setup (e.g. window registration) before timing."""

    def release(self, pt: Point, bufs: Buffers) -> None:
        """Undo ``prepare``."""

    def launch(self, pt: Point, bufs: Buffers) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        pass

    def time_point(self, pt: Point, bufs: Buffers) -> float:
        """Seconds per call on this rank."""
        raise NotImplementedError

    def abort(self) -> None:
        """Unblock a hung wait (called from the watchdog thread)."""

    def close(self) -> None:
        pass


class Watchdog:
    """Calls ``engine.abort()`` if the armed region outlives ``seconds``."""

    def __init__(self, engine: Engine, seconds: float):
        self.engine, self.seconds = engine, seconds
        self.fired = False
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Watchdog:
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _fire(self) -> None:
        self.fired = True
        self.engine.abort()

    def __exit__(self, *exc: object) -> None:
        assert self._timer is not None
        self._timer.cancel()


class CudaEngine(Engine):
    """Shared by the nccl and torch engines: one GPU per process, a dedicated stream."""

    supports_graph = True
    capture_mode = "thread_local"

    def __init__(self, ctx: DistContext, opts: Any):
        super().__init__(ctx, opts)
        torch = self.torch
        ndev = torch.cuda.device_count()
        self.device = torch.device("cuda", ctx.info.local_rank % max(ndev, 1))
        torch.cuda.set_device(self.device)
        self.stream = torch.cuda.Stream(device=self.device)

    def sync(self) -> None:
        self.stream.synchronize()

    def _issue(self, pt: Point, bufs: Buffers, n: int) -> None:
        for _ in range(n):
            self.launch(pt, bufs)

    def time_point(self, pt: Point, bufs: Buffers) -> float:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self._issue(pt, bufs, pt.warmup)
            self.sync()
            if pt.graph:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=self.stream, capture_error_mode=self.capture_mode):
                    self._issue(pt, bufs, pt.iters)
                graph.replay()  # the first launch uploads the graph
                self.sync()
                self.ctx.barrier("timing barrier")
                t0 = time.perf_counter()
                for _ in range(pt.graph):
                    graph.replay()
                self.sync()
                elapsed = time.perf_counter() - t0
                del graph
                return elapsed / (pt.iters * pt.graph)
            self.ctx.barrier("timing barrier")
            t0 = time.perf_counter()
            self._issue(pt, bufs, pt.iters)
            self.sync()
            return (time.perf_counter() - t0) / pt.iters
