"""Where the built tuner plugin lives, and checking rule files the way it reads them."""

from __future__ import annotations

import os
from pathlib import Path

from ccltune import builtlib

LIBRARY_NAME = "libnccl-tuner-ccltune.so"


def library_path() -> Path:
    """Absolute path of the built plugin. Raises EngineUnavailable (with how to build it)."""
    return builtlib.require(LIBRARY_NAME, "plugin", "the ccltune tuner plugin")


def nccl_env(rule_file: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Environment variables that make NCCL load the plugin (and a rule file)."""
    env = {"NCCL_TUNER_PLUGIN": str(library_path())}
    if rule_file is not None:
        env["NCCL_TUNER_CONFIG_FILE"] = str(Path(rule_file).resolve())
    return env

