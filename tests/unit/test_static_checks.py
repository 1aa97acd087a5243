"""The static checks CI runs, through the tests (.ci/run runs only the README's test command): ruff on the
whole tree with pyproject.toml's [tool.ruff] config (under a second: the fast tier), and mypy on the whole
package ([tool.mypy] files), which type-checks clean (a few seconds: slow). Both come with the test extra (CI);
without them the tests are skipped."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
needs_mypy = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install '.[test]')")
needs_ruff = pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                                reason="ruff is not installed (pip install '.[test]')")


def _tool(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


@needs_ruff
def test_ruff_finds_nothing_in_the_tree():
    proc = _tool("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_ruff
def test_the_ruff_config_reports_a_finding(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x):\n    return x == None\n")
    proc = _tool("ruff", "check", "--no-cache", "--output-format", "concise", "--config", str(REPO / "pyproject.toml"),
                 str(bad))
    assert proc.returncode == 1 and "bad.py:1:8: F401" in proc.stdout and "E711" in proc.stdout, proc.stdout


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    """One mypy cache for this module's two runs (new to this session: nothing from an earlier run is
    trusted): the second run reads typeshed's stubs from it instead of analysing them again. mypy keys
    the cache by each file's hash and the options, so a changed file is checked afresh."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.slow  # mypy reads typeshed
@needs_mypy
def test_the_typed_modules_type_check(mypy_cache):
    proc = _tool("mypy", "--cache-dir", str(mypy_cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout


@pytest.mark.slow
@needs_mypy
def test_the_config_reports_a_type_error(tmp_path, mypy_cache):
    bad = tmp_path / "bad.py"
    bad.write_text("from ccltune.sizes import format_size\n\nformat_size('8')\n")
    proc = _tool("mypy", "--cache-dir", str(mypy_cache), str(bad))  # files named here replace the config's
    assert proc.returncode == 1 and "bad.py:3: error" in proc.stdout and "format_size" in proc.stdout, proc.stdout
