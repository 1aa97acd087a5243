"""Where the built tuner plugin lives, and checking rule files the way it reads them."""

from __future__ import annotations

import os
from pathlib import Path

from ccltune import builtlib
from ccltune.errors import EngineUnavailable

LIBRARY_NAME = "libnccl-tuner-ccltune.so"


def _candidates() -> list[Path]:
    return builtlib.candidates(LIBRARY_NAME, "plugin")


def library_path() -> Path:
    """Absolute path of the built plugin. Raises EngineUnavailable (with how to build it)."""
    found = builtlib.first_existing(_candidates())
    if found is not None:
        return found
    tried = ", ".join(str(c) for c in _candidates())
    raise EngineUnavailable(
        f"the ccltune tuner plugin is not built (looked for {tried}); "
        "build it with `make -C plugin` in the source tree, or `pip install .` to ship it in the package "
        "(both need a C compiler, gcc or clang: without one pip installs ccltune without it)"
    )


def nccl_env(rule_file: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Environment variables that make NCCL load the plugin (and a rule file)."""
    env = {"NCCL_TUNER_PLUGIN": str(library_path())}
    if rule_file is not None:
        env["NCCL_TUNER_CONFIG_FILE"] = str(Path(rule_file).resolve())
    return env

