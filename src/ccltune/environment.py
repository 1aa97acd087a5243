"""What a run ran on: host, GPUs, driver, CUDA, NCCL (version and the library file actually
loaded), torch, every NCCL_*/RCCL_*/TORCH_NCCL_* variable, world size, launcher, command, and on
AMD GPUs the compute and memory partition modes (CPX/NPS4 ...), as the tuner plugin reads them.

Everything here is best effort and never raises: a fact that cannot be read is ``None``.
"""

from __future__ import annotations

import glob
import json
import os
import platform as _platform
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from ccltune._version import __version__
from ccltune.errors import UsageError
from ccltune.inputs import read_system_text

ENV_PREFIXES = ("NCCL_", "RCCL_", "TORCH_NCCL_", "CCLTUNE_", "HSA_", "HIP_VISIBLE", "CUDA_VISIBLE",
                "NVSHMEM_", "TORCH_SYMM_MEM_")
# Variables ccltune sets for its own worker processes (cli/_common.py, launch.py): plumbing,
# not the user's environment, so never recorded or shown as such.
INTERNAL_VARIABLES = frozenset({"CCLTUNE_COMMAND", "CCLTUNE_ENGINE_NOTE", "CCLTUNE_OUTCOME_FILE",
                                "CCLTUNE_RUN_FILE", "CCLTUNE_STOP_FILE", "CCLTUNE_PARENT_PID",
                                "CCLTUNE_USER_VARIABLES"})
# Set by launch.relaunch for the workers it starts: the names (a JSON list) of the variables comm_env
# finds in the parent's own environment. A worker records only those: torchrun adds variables of its
# own (TORCH_NCCL_ASYNC_ERROR_HANDLING=1) that the user never set.
USER_VARIABLES_ENV = "CCLTUNE_USER_VARIABLES"
# What a launcher sets for its workers when the user did not (torch.distributed.elastic's local agent):
# a run recorded without its parent's names (an older ccltune, or a job the user started with torchrun)
# cannot tell these from the user's, so they are not shown as the user's (report.data.user_variables)
LAUNCHER_DEFAULTS = {"torchrun": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}}
# The folder that stands for / when reading /sys (tests use fake trees); the tuner plugin reads it too.
SYSFS_ROOT_ENV = "CCLTUNE_SYSFS_ROOT"
# Variables that identify how the processes were started (see ccltune.dist for their use).
LAUNCHER_MARKERS = (
    ("torchrun", "TORCHELASTIC_RUN_ID"),
    ("slurm", "SLURM_PROCID"),
    ("mpirun", "OMPI_COMM_WORLD_RANK"),
    ("mpirun", "PMI_RANK"),
)


def comm_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The user's NCCL_*/RCCL_*/TORCH_NCCL_*/... variables: ccltune's own plumbing left out, and in a
    worker that ccltune's parent started, only the names the parent's environment had
    (``USER_VARIABLES_ENV``), so the launcher's additions are not taken for the user's."""
    environ = dict(os.environ if environ is None else environ)
    mine = {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES) and k not in INTERNAL_VARIABLES}
    names = _parent_names(environ.get(USER_VARIABLES_ENV))
    return mine if names is None else {k: v for k, v in mine.items() if k in names}


def parent_names(environ: dict[str, str] | None = None) -> str:
    """``USER_VARIABLES_ENV``'s value for the workers of a parent with this environment."""
    return json.dumps(sorted(comm_env(environ)))


def _parent_names(value: str | None) -> set[str] | None:
    """The names a parent passed (None: no parent, or a value that is not a JSON list of names)."""
    if value is None:
        return None
    try:
        names = json.loads(value)
    except ValueError:
        return None
    return set(names) if isinstance(names, list) and all(isinstance(n, str) for n in names) else None


def detect_launcher(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    for name, marker in LAUNCHER_MARKERS:
        if marker in environ:
            return name
    return None


def _rendezvous() -> str | None:
    """How the job's rendezvous address was chosen when ccltune chose it (mpirun on one node), else None."""
    from ccltune import dist

    try:
        return dist.joined_info().rendezvous
    except Exception:  # noqa: BLE001 - a bad launcher variable is reported where the job joins
        return None


def loaded_library(fragment: str) -> str | None:
    """Absolute path of the first mapped shared object whose file name contains ``fragment``."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and fragment in os.path.basename(parts[-1]):
                    return parts[-1]
    except OSError:
        return None
    return None


def _driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
        for tok in first.split():
            if tok[:1].isdigit() and tok.count(".") >= 1:
                return tok
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def gpu_facts() -> dict[str, Any]:
    """GPUs visible to this process (through torch, if importable)."""
    facts: dict[str, Any] = {"gpus": [], "cuda": None, "hip": None}
    try:
        import torch
    except ImportError:
        return facts
    facts["cuda"] = torch.version.cuda
    facts["hip"] = getattr(torch.version, "hip", None)
    try:
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                facts["gpus"].append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory),
                                      "sm_count": int(p.multi_processor_count),
                                      "pci_bus_id": _pci_bus_id(torch, i)})
    except Exception:  # noqa: BLE001 - a broken driver must not stop the run
        pass
    return facts


def _pci_bus_id(torch: Any, index: int) -> str | None:
    try:
        p = torch.cuda.get_device_properties(index)
        return f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}"
    except Exception:  # noqa: BLE001
        return None


def amd_partitions(root: str | None = None) -> dict[str, str | None]:
    """``compute_partition`` (SPX, DPX, TPX, QPX, CPX) and ``memory_partition`` (NPS1, NPS2, NPS4) of this
    host's AMD GPUs, read as the tuner plugin reads them (plugin/src/platform.c): the first
    ``sys/class/drm/card*/device/current_{compute,memory}_partition`` in sorted order that has a line
    (connectors such as card0-DP-1 skipped), upper-cased; None where no card has the file (NVIDIA, older
    amdgpu). ``root``: the folder standing for / (default $CCLTUNE_SYSFS_ROOT, else /)."""
    base = root if root is not None else (os.environ.get(SYSFS_ROOT_ENV) or "")
    out: dict[str, str | None] = {}
    for key in ("compute_partition", "memory_partition"):
        out[key] = None
        for path in sorted(glob.glob(os.path.join(base or "/", f"sys/class/drm/card*/device/current_{key}"))):
            if "-" in path.split("/drm/card", 1)[1].split("/", 1)[0]:
                continue
            try:  # bounded, never blocking (a device or FIFO under the root is passed over)
                line = (read_system_text(path).splitlines() or [""])[0].strip()
            except (OSError, UsageError):
                continue
            if line:
                out[key] = line.upper()
                break
    return out


def platform_name(gpus: list[dict[str, Any]], world_size: int | None, n_nodes: int | None) -> str:
    """A short platform key such as 'NVIDIA H200 x4' or 'cpu x2'."""
    model = gpus[0]["name"] if gpus else "cpu"
    n = world_size or len(gpus) or 1  # a node-wide command (links, doctor) has no world: its GPUs
    nodes = f" {n_nodes} nodes" if n_nodes and n_nodes > 1 else ""
    return f"{model} x{n}{nodes}"


def collect(*, world_size: int | None = None, n_nodes: int | None = None, engine: str | None = None,
            nccl: dict[str, Any] | None = None, hosts: list[str] | None = None,
            argv: list[str] | None = None) -> dict[str, Any]:
    """The environment record stored with every run."""
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    gpus = gpu_facts()
    env: dict[str, Any] = {
        "ccltune_version": __version__,
        "host": socket.gethostname(),
        "hosts": hosts,
        "os": f"{_platform.system()} {_platform.release()}",
        "python": _platform.python_version(),
        "torch_version": torch_version,
        "cuda_version": gpus["cuda"],
        "hip_version": gpus["hip"],
        "driver_version": _driver_version(),
        "gpus": gpus["gpus"],
        "engine": engine,
        "world_size": world_size,
        "n_nodes": n_nodes,
        "launcher": detect_launcher(),
        "rendezvous": _rendezvous(),
        "command": shlex.join(["ccltune", *(sys.argv[1:] if argv is None else argv)]),
        "variables": comm_env(),
        "variables_from": "parent" if USER_VARIABLES_ENV in os.environ else "process",
        "nccl_version": None,
        "nccl_library": None,
        **amd_partitions(),
    }
    if nccl:
        env["nccl_version"] = nccl.get("version")
        env["nccl_library"] = nccl.get("library")
        if nccl.get("buffers"):
            env["buffers"] = nccl["buffers"]  # where the nccl engine's buffers came from (--buffers)
    env["platform"] = platform_name(env["gpus"], world_size, n_nodes)
    return env
