"""Fuzzing the rule parser and the arms file parser (CCLTUNE_ARMS): libFuzzer for a short run when clang is
present, and always a sanitized replay of every file of the committed seed corpora."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from plugin_build import PLUGIN, make, run

CORPUS = PLUGIN / "fuzz" / "corpus"
ARMS_CORPUS = PLUGIN / "fuzz" / "arms_corpus"


def test_corpus_has_valid_and_bad_seeds() -> None:
    names = {p.name for p in CORPUS.iterdir()}
    assert {"valid_basic.conf", "valid_platform.conf", "bad_nul.conf", "bad_longline.conf"} <= names
    assert len(names) >= 10


def test_replay_corpus_under_sanitizers(san_build) -> None:
    files = sorted(CORPUS.iterdir())
    proc = run([san_build / "fuzz_replay", *files])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"replayed {len(files)} inputs" in proc.stdout


def test_replay_arms_corpus_under_sanitizers(san_build) -> None:
    files = sorted(ARMS_CORPUS.iterdir())
    assert {"valid_auto.txt", "valid_keys.txt", "bad_values.txt", "bad_lines.txt"} <= {f.name for f in files}
    proc = run([san_build / "fuzz_arms_replay", *files])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"replayed {len(files)} inputs" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("target", "seeds"), [("fuzz_rules", CORPUS), ("fuzz_arms", ARMS_CORPUS)])
def test_libfuzzer_short_run(tmp_path, target, seeds) -> None:
    if shutil.which("clang") is None:
        pytest.skip("clang not installed: the sanitized corpus replay above still ran")
    build = make(tmp_path / "build", f"{tmp_path / 'build'}/{target}")
    corpus = tmp_path / "corpus"
    shutil.copytree(seeds, corpus)  # libFuzzer writes new inputs into its first corpus folder
    try:
        proc = subprocess.run(
            [str(build / target), "-max_total_time=5", "-timeout=10", "-rss_limit_mb=2048",
             f"-artifact_prefix={tmp_path}/", str(corpus)],
            capture_output=True, text=True, timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("libFuzzer did not stop after -max_total_time")
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("leak-*")) + list(tmp_path.glob("timeout-*"))
    assert proc.returncode == 0 and not crashes, proc.stderr[-4000:]
    assert "Done" in proc.stderr
