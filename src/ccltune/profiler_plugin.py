"""Where the built profiler plugin (libnccl-profiler-ccltune.so, profiler/) lives, and the
environment that makes NCCL load it. Its files are read by ccltune.workload.profile_file."""

from __future__ import annotations

import os
from pathlib import Path

from ccltune import builtlib

LIBRARY_NAME = "libnccl-profiler-ccltune.so"


def library_path() -> Path:
    """Absolute path of the built profiler plugin. Raises EngineUnavailable (with how to build it)."""
    return builtlib.require(LIBRARY_NAME, "profiler", "the ccltune profiler plugin")


def nccl_env(profile_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Environment variables that make NCCL load the profiler and write its files into profile_dir."""
    return {"NCCL_PROFILER_PLUGIN": str(library_path()), "CCLTUNE_PROFILE": str(Path(profile_dir).resolve())}
