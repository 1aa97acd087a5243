"""`pip install -e .` (the usual developer install): the tuner plugin that scikit-build-core
built into site-packages is found, though the package itself runs from the source tree.

Real and slow (a fresh venv, a CMake build): run with `-m slow` or the full suite. The lookup
itself is tested on hand-made layouts in tests/unit/test_libraries.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
from plugin_build import LIB, REPO

# what the build needs from the checkout (no plugin/build: that would hide the bug)
SOURCES = ["pyproject.toml", "CMakeLists.txt", "README.md", "src", "plugin"]


@pytest.mark.slow
def test_editable_install_finds_its_plugin_in_site_packages(tmp_path: Path) -> None:
    if shutil.which("cmake") is None and shutil.which("gcc") is None:
        pytest.skip("cmake and a C compiler are needed to build the plugin")
    repo = tmp_path / "repo"
    for name in SOURCES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("build", "__pycache__", "*.o", "*.so"))
        else:
            repo.mkdir(exist_ok=True)
            shutil.copy2(src, repo / name)
    venv.create(tmp_path / "venv", with_pip=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # the venv's ccltune, not this tree's
    py = tmp_path / "venv" / "bin" / "python"
    pip = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", repo], capture_output=True, text=True,
                         timeout=600, env=env)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-4000:]
    got = subprocess.run([py, "-c", "from ccltune import tuner_plugin; print(tuner_plugin.library_path())"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert got.returncode == 0, got.stderr[-2000:]
    lib = Path(got.stdout.strip())
    assert lib.name == LIB and lib.is_file()
    assert (tmp_path / "venv") in lib.parents and "site-packages" in lib.parts   # where the editable build put it
    assert not (repo / "plugin" / "build").exists()
