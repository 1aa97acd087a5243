"""The CPU engine: torch.distributed's gloo backend, so every command runs without a GPU. Each call
is issued from Python through torch.distributed, what a PyTorch program sees (no launch loop in C:
gloo's own per-call cost is tens of us, and its times say how the tool runs, not how NCCL does)."""

from __future__ import annotations

import time
from typing import Any

from ccltune.engines.base import Buffers, Engine, EngineOptions, HostClock, Point, Timing, iteration_seconds, schedule

_UNSUPPORTED_OPS = {"avg": "gloo has no AVG reduction",
                    "mulsum": "gloo has no pre-multiplied sum (mulsum is NCCL's ncclRedOpCreatePreMulSum)"}
IN_PLACE_ONLY_REASON = "torch.distributed's API is in-place only for this collective"
# torch's gloo backend refuses unsigned types wider than a byte in every collective ("Invalid scalar type"
# from its type switch, torch 2.11/2.13)
_UNSUPPORTED_DTYPES = ("uint32", "uint64")


def torch_api_waiver(pt: Point, world_size: int) -> str | None:
    """What torch.distributed (gloo or ProcessGroupNCCL) cannot run as asked."""
    if not pt.in_place and pt.coll.torch_in_place_only:
        return IN_PLACE_ONLY_REASON
    if world_size == 1:  # no process group (a group of one rank under NCCL_TESTS_SPLIT has one)
        return "one process: start several with --nproc N or a launcher"
    return None


class GlooEngine(Engine):
    name = "gloo"

    def __init__(self, ctx: Any, opts: EngineOptions = EngineOptions()):
        super().__init__(ctx, opts)
        self.device = self.torch.device("cpu")
        self._ops = None
        if ctx.dist is not None:
            d = ctx.dist.ReduceOp
            self._ops = {"sum": d.SUM, "prod": d.PRODUCT, "min": d.MIN, "max": d.MAX}

    def info(self) -> dict[str, Any]:
        return {"backend": "gloo"}

    def waive_reason(self, pt: Point) -> str | None:
        if pt.coll.reduces and pt.op in _UNSUPPORTED_OPS:
            return _UNSUPPORTED_OPS[pt.op]
        if pt.dt.min_sm:
            return f"the gloo engine has no {pt.dt.name} (FP8 needs NCCL >= 2.24 on an sm_90+ GPU: --engine nccl)"
        if pt.dt.name in _UNSUPPORTED_DTYPES:
            return f"torch's gloo backend has no {pt.dt.name} (it moves uint8 and the signed types; --engine nccl has it)"
        return torch_api_waiver(pt, self.ctx.world_size)

    def launch(self, pt: Point, bufs: Buffers) -> None:
        ctx = self.ctx
        op = self._ops.get(pt.op) if self._ops else None
        pt.coll.run_torch(ctx.calls, bufs.send, bufs.recv, pt.lay, op, pt.root, ctx.comm_rank, ctx.comm_size,
                          pt.in_place)

    def time_point(self, pt: Point, bufs: Buffers) -> Timing:
        """nccl-tests' schedule on the host clock: each call returns when it is complete, so the
        time to issue the calls (-C) is the time, and -I's events are clock readings."""
        for _ in range(pt.warmup):
            self.launch(pt, bufs)
        clock = HostClock(2 * pt.iters if pt.blocking == 3 else pt.iters + 1) if pt.per_iter else None
        self.start_together()
        t0 = time.perf_counter()
        busy = schedule(pt, lambda i: self.launch(pt, bufs), lambda: None, lambda: self.ctx.barrier("-z barrier"),
                        clock.record if clock is not None else None)
        elapsed = (busy if pt.blocking == 3 else time.perf_counter() - t0) / pt.calls
        return Timing(elapsed, elapsed, iteration_seconds(pt, clock.elapsed) if clock is not None else None)
