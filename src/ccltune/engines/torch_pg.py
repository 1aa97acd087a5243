"""The torch engine: torch.distributed with ProcessGroupNCCL, what a PyTorch program sees,
eager or captured in a CUDA graph. Eager calls are issued one by one from Python, as a training
script issues them, so eager times include Python's and ProcessGroupNCCL's host cost per call
(tens of us); the nccl engine issues its eager series from C instead (engines/series.py)."""

from __future__ import annotations

from typing import Any

from ccltune.engines.base import Buffers, CudaEngine, EngineOptions, Point
from ccltune.engines.gloo import torch_api_waiver


class TorchEngine(CudaEngine):
    name = "torch"
    capture_mode = "global"

    def __init__(self, ctx: Any, opts: EngineOptions = EngineOptions()):
        super().__init__(ctx, opts)
        d = ctx.dist.ReduceOp if ctx.dist is not None else None
        self._ops = {} if d is None else {"sum": d.SUM, "prod": d.PRODUCT, "min": d.MIN,
                                          "max": d.MAX, "avg": d.AVG}

    def info(self) -> dict[str, Any]:
        torch = self.torch
        v = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else None
        return {"backend": "nccl", "version": ".".join(map(str, v)) if v else None}

    def waive_reason(self, pt: Point) -> str | None:
        if pt.op == "mulsum" and pt.coll.reduces:
            return "the torch engine does not run mulsum (NCCL's pre-multiplied sum): --engine nccl does"
        return torch_api_waiver(pt, self.ctx.world_size)

    def launch(self, pt: Point, bufs: Buffers) -> None:
        ctx = self.ctx
        pt.coll.run_torch(ctx.calls, bufs.send, bufs.recv, pt.lay, self._ops.get(pt.op), pt.root,
                          ctx.comm_rank, ctx.comm_size, pt.in_place)

    def abort(self) -> None:
        mine = [self.ctx.comm_group] if self.ctx.comm_group is not None else []  # NCCL_TESTS_SPLIT's group
        for group in mine + [None]:  # then the world
            try:
                self.ctx.dist.distributed_c10d._abort_process_group(group)
            except Exception:  # noqa: BLE001 - best effort from the watchdog thread
                pass
