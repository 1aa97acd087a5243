"""docs/api.md works as written: every ```python block is run, in order, in one namespace (as a
notebook runs its cells), on the gloo engine: two torchrun launches in all (bench, sweep).

A block's info string says where it runs: ``python`` here; ``python pandas`` where pandas is
installed; ``python gpu`` on a GPU machine (tests/gpu/test_api_gpu.py runs every block there)."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
SWEEP_DB = ROOT / "tests" / "fixtures" / "bench" / "h200x2-flow.sqlite"   # the doc's sweep.db
# the other files the doc's examples read, copied as it says (import, export, rule files)
DOC_FILES = {"nccl-tests/ag-mpi-v2.19.6.txt": "all_gather.txt", "logs/nccl_tuning_rules.log": "job.log",
             "logs/nccl_tuning_rules.conf": "job-rules.conf"}
_BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def doc_blocks() -> list[tuple[str, str, int]]:
    """(tag, code, line) of every python block of docs/api.md; tag '' for the blocks that run anywhere."""
    text = DOC.read_text(encoding="utf-8")
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 2) for m in _BLOCK.finditer(text)]


def run_examples(folder: Path, monkeypatch: pytest.MonkeyPatch, tags: set[str]) -> list[int]:
    """Run the blocks tagged ``tags`` (and untagged ones) in ``folder``; returns their lines."""
    shutil.copy(SWEEP_DB, folder / "sweep.db")
    for source, name in DOC_FILES.items():  # what the doc says to copy first
        shutil.copy(ROOT / "tests" / "fixtures" / source, folder / name)
    monkeypatch.chdir(folder)
    scope: dict = {"__name__": "__api_doc__"}
    ran = []
    for tag, code, line in doc_blocks():
        if tag and tag not in tags:
            continue
        exec(compile("\n" * (line - 1) + code, str(DOC), "exec"), scope)  # noqa: S102 - the doc's own examples
        ran.append(line)
    return ran


def test_every_block_parses_and_has_a_known_tag():
    blocks = doc_blocks()
    assert len(blocks) >= 8
    for tag, code, line in blocks:
        assert tag in ("", "gpu", "pandas"), f"docs/api.md:{line}: unknown tag {tag!r}"
        ast.parse(code)


def test_the_examples_run_on_gloo(tmp_path, monkeypatch):
    tags = {"pandas"} if _has_pandas() else set()
    ran = run_examples(tmp_path, monkeypatch, tags)
    assert len(ran) == sum(1 for tag, _, _ in doc_blocks() if not tag or tag in tags)
    assert (tmp_path / "api-report.html").is_file() and (tmp_path / "rules.conf").is_file()


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True
