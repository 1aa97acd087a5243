"""Engines run one collective call; the measurement loop in ccltune.measure is shared.

- ``nccl``: NCCL's C API through ctypes (what nccl-tests measures).
- ``torch``: torch.distributed with ProcessGroupNCCL (what a PyTorch program sees).
- ``gloo``: torch.distributed on the CPU (no GPU needed: laptops and CI).

``KINDS`` is the one place that says what each engine is and can do; commands ask it
(``kind(name).gpu``, ``.own_comm``, ``.lacks``) rather than compare engine names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The abilities an engine may lack (``EngineKind.lacks``), named once; a command maps its flags onto them
# (cli/bench_options.py: -m needs GROUP_CALLS, -y CUDA_STREAM, ...).
GROUP_CALLS = "group calls"  # N collectives in one ncclGroupStart/ncclGroupEnd
CUDA_STREAM = "CUDA stream"  # a stream of its own to issue on (-y picks the default stream)
GPU_MEMORY = "GPU memory"  # device memory to report
CTA_POLICY = "CTA policy"  # ncclConfig_t.CTAPolicy on a communicator of its own
REGISTRATION = "buffer registration"  # ncclCommRegister on its own buffers
DEVICE_CHOICE = "device choice"  # which GPU a process uses


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
    lacks: Mapping[str, str]  # ability (GROUP_CALLS, ...) -> why this engine has none, said after "the NAME engine"


KINDS = {
    "nccl": EngineKind("nccl", gpu=True, own_comm=True, torch_nccl=False, min_processes=1,
                       module="ccltune.engines.nccl", cls="NcclEngine", lacks={}),
    "torch": EngineKind("torch", gpu=True, own_comm=False, torch_nccl=True, min_processes=2,
                        module="ccltune.engines.torch_pg", cls="TorchEngine", lacks={
        GROUP_CALLS: "issues each collective on its own through torch.distributed: it cannot put N calls in one "
                     "ncclGroupStart/ncclGroupEnd (--engine nccl does)",
        CTA_POLICY: "makes no communicator of its own (ProcessGroupNCCL does): --engine nccl sets ncclConfig_t.CTAPolicy",
        REGISTRATION: "does not own its buffers' registration (PyTorch's allocator does): --engine nccl calls "
                      "ncclCommRegister"}),
    "gloo": EngineKind("gloo", gpu=False, own_comm=False, torch_nccl=False, min_processes=2,
                       module="ccltune.engines.gloo", cls="GlooEngine", lacks={
        GROUP_CALLS: "has no group calls: gloo runs each collective on its own (--engine nccl does)",
        CUDA_STREAM: "runs on the CPU: it has no CUDA stream",
        GPU_MEMORY: "runs on the CPU: it has no GPU memory to report",
        CTA_POLICY: "has no NCCL communicator",
        REGISTRATION: "has no NCCL communicator to register buffers with",
        DEVICE_CHOICE: "runs on the CPU: there is no GPU to choose"}),
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
