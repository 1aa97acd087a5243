"""mypy on the modules of pyproject.toml's [tool.mypy] files, which type-check clean today: a change that
breaks their types fails here. mypy comes with the test extra (CI); without it the test is skipped."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
needs_mypy = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install '.[test]')")
pytestmark = pytest.mark.slow  # a few seconds each: mypy reads typeshed


def _mypy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


@needs_mypy
def test_the_typed_modules_type_check(tmp_path):
    proc = _mypy(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout


@needs_mypy
def test_the_config_reports_a_type_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ccltune.sizes import format_size\n\nformat_size('8')\n")
    proc = _mypy(tmp_path, str(bad))  # files named here replace the config's
    assert proc.returncode == 1 and "bad.py:3: error" in proc.stdout and "format_size" in proc.stdout, proc.stdout
