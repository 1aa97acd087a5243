"""Where the built tuner plugin lives, and checking rule files the way it reads them."""

from __future__ import annotations

import os
from pathlib import Path

from ccltune import libraries, rules

LIBRARY_NAME = "libnccl-tuner-ccltune.so"


def library_path() -> Path:
    """Absolute path of the built plugin, wherever the install put it (ccltune.libraries).
    Raises EngineUnavailable (with how to build it)."""
    return libraries.find(LIBRARY_NAME, source_builds=("plugin/build",))


def nccl_env(rule_file: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Environment variables that make NCCL load the plugin (and a rule file)."""
    env = {"NCCL_TUNER_PLUGIN": str(library_path())}
    if rule_file is not None:
        env["NCCL_TUNER_CONFIG_FILE"] = str(Path(rule_file).resolve())
    return env


def check_file(path: str | os.PathLike[str]) -> list[rules.Diagnostic]:
    """Diagnostics the plugin would log as WARN for this file (empty: every line loads).
    Raises RuleFileError when the file cannot be read."""
    return rules.load(path).diagnostics
