"""Fuzzing the rule parser: libFuzzer for a short run when clang is present, and always a
sanitized replay of every file of the committed seed corpus."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from plugin_build import PLUGIN, make, run

CORPUS = PLUGIN / "fuzz" / "corpus"


def test_corpus_has_valid_and_bad_seeds() -> None:
    names = {p.name for p in CORPUS.iterdir()}
    assert {"valid_basic.conf", "valid_platform.conf", "bad_nul.conf", "bad_longline.conf"} <= names
    assert len(names) >= 10


def test_replay_corpus_under_sanitizers(san_build) -> None:
    files = sorted(CORPUS.iterdir())
    proc = run([san_build / "fuzz_replay", *files])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"replayed {len(files)} inputs" in proc.stdout


@pytest.mark.slow
def test_libfuzzer_short_run(tmp_path) -> None:
    if shutil.which("clang") is None:
        pytest.skip("clang not installed: the sanitized corpus replay above still ran")
    build = make(tmp_path / "build", "fuzz")
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)  # libFuzzer writes new inputs into its first corpus folder
    try:
        proc = subprocess.run(
            [str(build / "fuzz_rules"), "-max_total_time=5", "-timeout=10", "-rss_limit_mb=2048",
             f"-artifact_prefix={tmp_path}/", str(corpus)],
            capture_output=True, text=True, timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("libFuzzer did not stop after -max_total_time")
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("leak-*")) + list(tmp_path.glob("timeout-*"))
    assert proc.returncode == 0 and not crashes, proc.stderr[-4000:]
    assert "Done" in proc.stderr
