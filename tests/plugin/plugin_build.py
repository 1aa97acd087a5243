"""Helpers shared by the plugin tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
LIB = "libnccl-tuner-ccltune.so"


def make(build: Path, *targets: str, **variables: str) -> Path:
    """`make -C plugin BUILD=build targets...`; fails the test with make's output."""
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("gcc and make are needed to build the C plugin")
    args = ["make", "-C", str(PLUGIN), f"BUILD={build}", "CC=gcc", *targets]
    args += [f"{k}={v}" for k, v in variables.items()]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return build


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
