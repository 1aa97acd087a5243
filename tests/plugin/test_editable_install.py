"""`pip install -e .` (the usual developer install): the tuner plugin that scikit-build-core
built into site-packages is found, though the package itself runs from the source tree.

Real and slow (a fresh venv, a CMake build): run with `-m slow` or the full suite. The lookup
itself is tested on hand-made layouts in tests/unit/test_builtlib.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from plugin_build import LIB, REPO

# the checkout without what the build does not read, and without any build folder (a
# plugin/build from `make -C plugin` would hide the bug)
SKIP = {"tests", "docs", "bench", "examples", "scripts", "build", "dist"}


@pytest.mark.slow
def test_editable_install_finds_its_plugin_in_site_packages(tmp_path: Path) -> None:
    if shutil.which("cmake") is None and shutil.which("gcc") is None:
        pytest.skip("cmake and a C compiler are needed to build the plugin")
    repo = tmp_path / "repo"
    repo.mkdir()
    for src in REPO.iterdir():
        if src.name.startswith(".") or src.name in SKIP:
            continue
        if src.is_dir():
            shutil.copytree(src, repo / src.name,
                            ignore=shutil.ignore_patterns("build", "build-*", "__pycache__", "*.o", "*.so"))
        else:
            shutil.copy2(src, repo / src.name)
    # a venv without pip of its own (ensurepip takes seconds): this interpreter's pip installs into it
    venv.create(tmp_path / "venv", with_pip=False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # the venv's ccltune, not this tree's
    py = tmp_path / "venv" / "bin" / "python"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "-e", repo],
                         capture_output=True, text=True, timeout=600, env=env)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-4000:]
    code = ("from ccltune import builtlib, profiler_plugin, tuner_plugin; print(tuner_plugin.library_path()); "
            "print(builtlib.first_existing(builtlib.candidates('libccltune-series.so', 'native'))); "
            "print(profiler_plugin.library_path())")
    got = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert got.returncode == 0, got.stderr[-2000:]
    plugin, series, profiler = (Path(line) for line in got.stdout.split())
    assert plugin.name == LIB and series.name == "libccltune-series.so"
    assert profiler.name == "libnccl-profiler-ccltune.so"
    for lib in (plugin, series, profiler):   # all where the editable build put them
        assert lib.is_file() and (tmp_path / "venv") in lib.parents and "site-packages" in lib.parts
    assert not (repo / "plugin" / "build").exists()
