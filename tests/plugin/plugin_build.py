"""Helpers shared by the plugin tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
LIB = "libnccl-tuner-ccltune.so"
PROFILER = REPO / "profiler"
PROFILER_LIB = "libnccl-profiler-ccltune.so"


def make(build: Path, *targets: str, folder: Path = PLUGIN, **variables: str) -> Path:
    """`make -C folder BUILD=build targets...` (folder: plugin or profiler); fails the test with
    make's output."""
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("gcc and make are needed to build the C plugin")
    jobs = [] if any(t.startswith("-j") for t in targets) else [f"-j{os.cpu_count() or 1}"]  # the harnesses build apart
    args = ["make", "-C", str(folder), f"BUILD={build}", "CC=gcc", *jobs, *targets]
    args += [f"{k}={v}" for k, v in variables.items()]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return build


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


def sanitizer_works(flag: str, tmp: Path) -> bool:
    """gcc can build and run a program with -fsanitize=flag here (the runtime is installed and
    the kernel lets it map its shadow memory)."""
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp / f"probe-{flag}"
    built = subprocess.run(["gcc", f"-fsanitize={flag}", "-o", str(exe), str(src)], capture_output=True)
    return built.returncode == 0 and subprocess.run([str(exe)], capture_output=True).returncode == 0
