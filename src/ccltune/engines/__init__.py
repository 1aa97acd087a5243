"""Engines run one collective call; the measurement loop in ccltune.measure is shared.

- ``nccl``: NCCL's C API through ctypes (what nccl-tests measures).
- ``torch``: torch.distributed with ProcessGroupNCCL (what a PyTorch program sees).
- ``gloo``: torch.distributed on the CPU (no GPU needed: laptops and CI).
"""

from __future__ import annotations

ENGINES = ("nccl", "torch", "gloo")
# the fewest processes an engine runs collectives on: torch.distributed makes no process group of
# one (engines/gloo.py:torch_api_waiver waives every call of a one-process job), NCCL does
MIN_PROCESSES = {"nccl": 1, "torch": 2, "gloo": 2}


def default_engine() -> str:
    from ccltune.gpus import visible_count

    return "nccl" if visible_count() > 0 else "gloo"
