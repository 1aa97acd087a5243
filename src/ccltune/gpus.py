"""How many GPUs a process started here would see, without importing torch where that can be helped.

The parent ``ccltune`` process only decides the engine and how many workers torchrun starts;
importing torch there costs seconds before torchrun and every worker import torch again
(docs/performance.md, "Start-up"). So:

1. torch's build is read from its ``version.py`` (``cuda`` / ``hip``), without importing it: no
   torch or a CPU build sees no GPU;
2. a CUDA build counts the devices through NVML (``libnvidia-ml.so.1``, what ``nvidia-smi``
   reads), then applies ``CUDA_VISIBLE_DEVICES`` as CUDA does for a list of indices (the list
   ends at the first index that is not a device, a repeated one included);
3. anything else (a ROCm build, no NVML, device UUIDs or MIG instances in the variable) asks
   torch, as before.

One case reads differently from torch: NVML sees GPUs that torch's CUDA cannot use (a driver too
old for torch's CUDA). The parent then picks the nccl engine, and the workers stop with the
engine's own message (no usable CUDA GPU; `--engine gloo`) instead of running on the CPU unasked.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.util
import os
from pathlib import Path


def torch_build(version_file: str | Path | None = None) -> str | None:
    """'cuda', 'hip' or 'cpu' from torch's ``version.py``; None when torch is not installed or the
    file does not say."""
    if version_file is None:
        try:
            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(Path(version_file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    if "cuda" not in values and "hip" not in values:
        return None
    if values.get("cuda"):
        return "cuda"
    if values.get("hip"):
        return "hip"
    return "cpu"


def cuda_visible(value: str | None, devices: int) -> int | None:
    """Devices CUDA shows under ``CUDA_VISIBLE_DEVICES=value`` out of ``devices``; None when the
    value names devices by anything but index (UUIDs, MIG instances): torch must say."""
    if value is None:
        return devices
    count, seen = 0, set()
    for tok in value.split(","):
        tok = tok.strip()
        if not tok:
            break
        try:
            i = int(tok)
        except ValueError:
            return None
        if i < 0 or i >= devices or i in seen:
            break
        seen.add(i)
        count += 1
    return count


def nvml_count() -> int | None:
    """Physical NVIDIA GPUs through NVML; None without the library or a working driver."""
    try:
        nv = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if nv.nvmlInit_v2() != 0:
            return None
    except AttributeError:
        return None
    try:
        n = ctypes.c_uint(0)
        return int(n.value) if nv.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0 else None
    finally:
        nv.nvmlShutdown()


def torch_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver is no GPU
        return 0


def visible_count() -> int:
    """GPUs a process started here sees (module doc)."""
    build = torch_build()
    if build == "cpu":
        return 0
    if build == "cuda":
        n = nvml_count()
        if n is not None:
            seen = cuda_visible(os.environ.get("CUDA_VISIBLE_DEVICES"), n)
            if seen is not None:
                return seen
    return torch_count()
