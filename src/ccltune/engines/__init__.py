"""Engines run one collective call; the measurement loop in ccltune.measure is shared.

- ``nccl``: NCCL's C API through ctypes (what nccl-tests measures).
- ``torch``: torch.distributed with ProcessGroupNCCL (what a PyTorch program sees).
- ``gloo``: torch.distributed on the CPU (no GPU needed: laptops and CI).
"""

from __future__ import annotations

ENGINES = ("nccl", "torch", "gloo")


def default_engine() -> str:
    from ccltune.gpus import visible_count

    return "nccl" if visible_count() > 0 else "gloo"
