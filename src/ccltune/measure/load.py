"""``--under-load M``: a square matrix multiply of size M, back to back on a second stream of each
rank's GPU, while collectives are timed, so configurations compete for SMs as they do when a
training step overlaps its communication with compute.

The load is a thread that keeps two batches of ``BATCH`` multiplies in flight on its own CUDA
stream (it waits for the older batch's event before queueing the next), so the GPU never runs dry
and the queue never grows without bound. It runs from :meth:`MatrixLoad.start` to
:meth:`MatrixLoad.stop`; ``stop`` returns what it achieved (multiplies, seconds, TFLOP/s), which
the run records beside ``under_load``. On the CPU (the gloo engine) there is no second stream to
share SMs with: commands refuse ``--under-load`` there (:func:`check`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ccltune import engines
from ccltune.errors import UsageError

BATCH = 4          # multiplies queued per batch
MAX_M = 65536


def check(m: int | None, engine_name: str) -> None:
    """Refuse a size that is not one, or an engine without a GPU, before anything starts."""
    if m is None:
        return
    if not 1 <= m <= MAX_M:
        raise UsageError(f"--under-load must be a matrix size between 1 and {MAX_M}, got {m}")
    if not engines.kind(engine_name).gpu:
        raise UsageError(f"--under-load {m} runs a matrix multiply on a second CUDA stream of each rank's GPU; "
                         "the gloo engine runs on the CPU, where there is no GPU to share: use the nccl or torch "
                         "engine on GPUs, or leave --under-load out")


class MatrixLoad:
    """C = A @ B (``m`` x ``m``, bfloat16 on a GPU) back to back on its own stream."""

    def __init__(self, torch: Any, device: Any, m: int):
        self.torch, self.device, self.m = torch, device, m
        cuda = getattr(device, "type", "cpu") == "cuda"
        dtype = torch.bfloat16 if cuda else torch.float32
        self.a = torch.randn(m, m, device=device, dtype=dtype)
        self.b = torch.randn(m, m, device=device, dtype=dtype)
        self.c = torch.empty(m, m, device=device, dtype=dtype)
        self.stream = torch.cuda.Stream(device=device) if cuda else None
        self.done = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _batch(self) -> Any:
        torch = self.torch
        if self.stream is None:
            for _ in range(BATCH):
                torch.mm(self.a, self.b, out=self.c)
            return None
        with torch.cuda.stream(self.stream):
            for _ in range(BATCH):
                torch.mm(self.a, self.b, out=self.c)
            ev = torch.cuda.Event()
            ev.record(self.stream)
        return ev

    def _run(self) -> None:
        try:
            if self.stream is not None:
                self.torch.cuda.set_device(self.device)
            older = self._batch()
            while not self._stop.is_set():
                newer = self._batch()
                if older is not None:
                    older.synchronize()
                self.done += BATCH
                older = newer
            if older is not None:
                older.synchronize()
            self.done += BATCH
        except BaseException as exc:  # noqa: BLE001 - reported by stop(), on the measuring thread
            self.error = exc

    def start(self) -> MatrixLoad:
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="ccltune-under-load", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop the load and say what it did: ``{"matrix": m, "multiplies": n, "seconds": s, "tflops": f}``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        secs = time.perf_counter() - self._t0
        if self.error is not None:
            raise RuntimeError(f"--under-load {self.m}: the matrix multiply failed: {self.error}") from self.error
        flops = 2.0 * self.m ** 3 * self.done
        return {"matrix": self.m, "multiplies": self.done, "seconds": round(secs, 3),
                "tflops": float(f"{flops / secs / 1e12:.4g}") if secs > 0 else None}  # 4 significant digits: a CPU rate is tiny

    def __enter__(self) -> MatrixLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None and not self._stop.is_set():
            self._stop.set()
            self._thread.join()


class Loaded:
    """``with Loaded(engine, m) as got: ...measure...``: a :class:`MatrixLoad` of size ``m`` on the
    engine's GPU around the block (nothing when ``m`` is None); ``got.result`` is then what it
    achieved (:meth:`MatrixLoad.stop`), None without a load. A failure inside the block stays the
    error raised; the load is stopped either way."""

    def __init__(self, engine: Any, m: int | None):
        self.load = MatrixLoad(engine.torch, engine.device, m) if m else None
        self.result: dict[str, Any] | None = None

    def __enter__(self) -> Loaded:
        if self.load is not None:
            self.load.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.load is None:
            return
        if exc is None:
            self.result = self.load.stop()
        else:
            self.load.__exit__(exc_type, exc, tb)
