"""Engines run one collective call; the measurement loop in ccltune.measure is shared.

- ``nccl``: NCCL's C API through ctypes (what nccl-tests measures).
- ``torch``: torch.distributed with ProcessGroupNCCL (what a PyTorch program sees).
- ``gloo``: torch.distributed on the CPU (no GPU needed: laptops and CI).

``KINDS`` is the one place that says what each engine is and can do; commands ask it
(``kind(name).gpu``, ``.own_comm``) rather than compare engine names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EngineKind:
    name: str
    gpu: bool              # runs on a GPU (CUDA or HIP): CUDA graphs, GPU memory, a stream
    own_comm: bool         # makes its own NCCL communicator: forced algorithm/protocol/channels, the tuner
                           # plugin and its rules, ncclConfig_t, buffer registration
    torch_nccl: bool       # torch.distributed's NCCL process group (the job joins with NCCL)
    min_processes: int     # the fewest processes it runs collectives on: torch.distributed makes no process
                           # group of one (engines/gloo.py:torch_api_waiver waives every call), NCCL does
    module: str            # where its class lives
    cls: str


KINDS = {
    "nccl": EngineKind("nccl", gpu=True, own_comm=True, torch_nccl=False, min_processes=1,
                       module="ccltune.engines.nccl", cls="NcclEngine"),
    "torch": EngineKind("torch", gpu=True, own_comm=False, torch_nccl=True, min_processes=2,
                        module="ccltune.engines.torch_pg", cls="TorchEngine"),
    "gloo": EngineKind("gloo", gpu=False, own_comm=False, torch_nccl=False, min_processes=2,
                       module="ccltune.engines.gloo", cls="GlooEngine"),
}
ENGINES = tuple(KINDS)
MIN_PROCESSES = {k.name: k.min_processes for k in KINDS.values()}


def kind(name: str | None) -> EngineKind:
    """The engine called ``name`` (a name argparse or the registry already checked)."""
    if name not in KINDS:
        raise KeyError(f"no engine {name!r}: one of {', '.join(ENGINES)}")
    return KINDS[name]


def make(name: str, ctx: Any, opts: Any) -> Any:
    """An engine of kind ``name`` on the job ``ctx`` (its module imported only now: torch, CUDA)."""
    import importlib

    k = kind(name)
    return getattr(importlib.import_module(k.module), k.cls)(ctx, opts)


def default_engine() -> str:
    from ccltune.gpus import visible_count

    return "nccl" if visible_count() > 0 else "gloo"
