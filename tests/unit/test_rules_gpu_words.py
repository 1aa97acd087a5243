"""Issue 41, item 3: a rule section's `gpu=` names the model as whole words (docs/rules.md), not as a substring:
rules written on an H20 (`gpu=h20`) do not apply on an H200, `mi300` does not match an MI300A. The plugin's C
matcher is held to the same by tests/plugin/test_golden.py."""

from __future__ import annotations

import pytest

from ccltune import rules
from ccltune.cli import main

TEXT = "platform,gpu=h20\nallreduce,0,1M,ring,ll,1,-1,-1\nplatform,gpu=mi300\nallreduce,0,1M,ring,simple,2,-1,-1\n"


class TestGpuNamesTheModelExactly:
    @pytest.mark.parametrize("value, model, names", [
        ("h20", "NVIDIA H20", True), ("h20", "NVIDIA H200", False), ("h200", "NVIDIA GH200 480GB", False),
        ("mi300", "AMD Instinct MI300A", False), ("mi300", "AMD Instinct MI300X", False),
        ("mi300x", "AMD Instinct MI300X", True), ("h100 80gb", "NVIDIA H100 80GB HBM3", True),
        ("nvidia h200", "NVIDIA H200", True), ("h200", "NVIDIA H200 NVL", True), ("h100", "NVIDIA H100-SXM", True),
        ("", "anything", True)])
    def test_words(self, value, model, names):
        assert rules.gpu_names(value, model) is names

    def test_a_section_of_another_gpu_does_not_apply(self):
        rs = rules.parse_text(TEXT)
        for model in ("NVIDIA H200", "AMD Instinct MI300A"):
            q = rules.Query("allreduce", 4096, 8, 1, platform=rules.PlatformFacts(gpu=model))
            assert rules.match(rs, q).rule is None, model
        q = rules.Query("allreduce", 4096, 8, 1, platform=rules.PlatformFacts(gpu="NVIDIA H20"))
        assert rules.match(rs, q).line == 2

    def test_rules_explain_on_an_h200_applies_no_h20_rule(self, tmp_path, capsys):
        f = tmp_path / "r.conf"
        f.write_text(TEXT)
        assert main(["rules", "explain", str(f), "--nranks", "8", "--gpu", "NVIDIA H200"]) == 0
        out = capsys.readouterr().out
        assert "line 2:" not in out and "'NVIDIA H200' does not hold it as whole words" in out
