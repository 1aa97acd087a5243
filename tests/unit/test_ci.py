""".ci/run runs the README's own install, main and test commands: it reads them from the
blocks marked `<!-- ci: NAME` in README.md, so the README and CI cannot drift apart."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / ".ci" / "run"


def _blocks() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^<!-- ci: (\w+)[^\n]*\n```\w*\n(.*?)\n```", text,
                                                                  re.M | re.S)}


def test_readme_marks_the_install_main_and_test_commands():
    blocks = _blocks()
    assert blocks["install"] == "pip install torch==2.13.0 && pip install ."   # no test extras
    assert blocks["main"] == "ccltune bench all"
    assert "python -m pytest" in blocks["test"] and ".[test]" in blocks["test"]


def test_ci_reads_the_commands_from_the_readme():
    code = [line for line in CI.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(code)
    for name in ("install", "main", "test"):
        assert f"readme_block {name}" in text
    # nothing installed or tested by a line of its own that the README does not show
    assert "pip install" not in text and "pytest" not in text.replace("pytest collected no tests", "")
    # the install and main command run before the test extras are installed
    assert text.index('-c "$install"') < text.index('-c "$main"') < text.index('-c "$tests"')


@pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk")
def test_ci_extracts_the_same_blocks_as_this_test():
    """The awk in .ci/run and the parser above agree on README.md."""
    script = CI.read_text(encoding="utf-8")
    func = script[script.index("readme_block() {"):script.index("\n}\n", script.index("readme_block() {")) + 3]
    for name, block in _blocks().items():
        got = subprocess.run(["bash", "-c", f"set -euo pipefail\n{func}\nreadme_block {name}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert got.returncode == 0 and got.stdout.strip() == block, (name, got.stdout, got.stderr)
    got = subprocess.run(["bash", "-c", f"{func}\nreadme_block nosuch"], cwd=ROOT, capture_output=True, text=True,
                         timeout=30)
    assert got.returncode != 0 and "no command block marked '<!-- ci: nosuch'" in got.stderr
