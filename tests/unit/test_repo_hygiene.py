"""Raw measurement data stays out of git: bench/data is git-ignored, and nothing under it is tracked
(a forced `git add -f` would bring it back unnoticed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_no_measurement_data_is_tracked():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "--", "bench/data"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out == "", f"measurement data tracked in git (git rm --cached it): {out.splitlines()[:5]}"
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench/data/x.json"], cwd=ROOT).returncode
    assert ignored == 0, "bench/data/ is no longer git-ignored"
