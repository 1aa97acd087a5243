"""`pip install .` on a machine without a C compiler (a slim container image): the wheel builds
without the tuner plugin and the launch loop instead of failing, so everything that needs no GPU
installs; `--engine nccl` and the plugin then say they are not built and that building them needs a
compiler. Real: pip and scikit-build-core build the wheel, with CC naming no compiler (CMake's
check_language honours it)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from plugin_build import REPO


@pytest.mark.slow
def test_wheel_builds_without_a_c_compiler(tmp_path: Path) -> None:
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    wheel = next(tmp_path.glob("ccltune-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ccltune/__init__.py" in names and "ccltune/cli/bench.py" in names
    assert not [n for n in names if n.endswith(".so")], names  # neither C library, and no error


def test_missing_c_parts_say_a_compiler_builds_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ccltune import builtlib, profiler_plugin, tuner_plugin
    from ccltune.engines import series
    from ccltune.errors import EngineUnavailable

    monkeypatch.setattr(series, "_loaded", None)
    monkeypatch.setattr(builtlib, "candidates", lambda name, folder: [tmp_path / name])
    for load in (series.library, tuner_plugin.library_path, profiler_plugin.library_path):
        with pytest.raises(EngineUnavailable, match=r"need a C compiler, gcc or clang"):
            load()
