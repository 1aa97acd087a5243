"""docs/api.md on a GPU machine: every block, the GPU ones (validate) included."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def _doc_runner():
    path = Path(__file__).resolve().parents[1] / "dist" / "test_api_docs.py"
    spec = importlib.util.spec_from_file_location("api_doc_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_of_the_api_doc(n_gpus, tmp_path, monkeypatch):
    runner = _doc_runner()
    ran = runner.run_examples(tmp_path, monkeypatch, {"gpu", "pandas"} if runner._has_pandas() else {"gpu"})
    assert any(tag == "gpu" and line in ran for tag, _, line in runner.doc_blocks())
