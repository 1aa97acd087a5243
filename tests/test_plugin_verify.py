"""`ccltune plugin verify`: NCCL's TUNING lines against the rules (parser, judge, CLI on fixture logs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.parsers.ncclog import parse_log
from ccltune.rules import PlatformFacts, parse_text
from ccltune.tune.verify import judge, verify

LOG = Path(__file__).parent / "fixtures" / "logs" / "nccl_tuning_rules.log"
RULES = """\
allreduce,64M,64M,ring,ll,-1,-1,-1
allreduce,1M,1M,default,default,2,-1,-1
allgather,4M,4M,ring,ll128,-1,-1,-1
reducescatter,1M,1M,ring,simple,4,-1,-1
"""


def _ruleset(text: str = RULES):
    return parse_text(text, "rules.conf")


def test_tuning_lines_are_parsed_with_channel_counts_and_plugin_platform():
    log = parse_log(LOG.read_text())
    assert [(c.func, c.nbytes, c.algo, c.proto, c.channels) for c in log.choices][:3] == [
        ("AllReduce", 8, "TREE", "LL", 1), ("AllReduce", 8, "TREE", "LL", 1), ("AllReduce", 67108864, "RING", "LL", 24)]
    rs = next(c for c in log.choices if c.func == "ReduceScatter")
    assert rs.tuner_bytes(4) == 1 << 20  # per-rank bytes in the log, whole buffer for the tuner
    (load,) = log.plugin_loads
    assert (load.gpu, load.n_ranks, load.nvl_ranks, load.partition) == ("NVIDIA H200", 4, (4, 4), None)


def test_verify_statuses():
    log = parse_log(LOG.read_text())
    checks = {(c.collective, c.size_bytes): c for c in
              verify(_ruleset(), log.choices, n_ranks=4, n_nodes=1, platform=PlatformFacts(gpu="NVIDIA H200"))}
    assert ("send", 4096) not in checks and len(checks) == 5  # Send never reaches a tuner
    assert checks[("allreduce", 64 << 20)].status == "APPLIED"
    assert checks[("allreduce", 1 << 20)].status == "APPLIED"  # 2 channels, as asked
    assert checks[("allreduce", 8)].status == "NO RULE"
    assert checks[("allreduce", 8)].seen == ((("TREE", "LL", 1), 2),)
    # the all_gather call was 1 MB per rank = 4 MB whole buffer: the ring/LL128 rule, applied
    assert checks[("allgather", 4 << 20)].status == "APPLIED"
    # reduce_scatter 1 MB asked ring/simple/4 channels; NCCL ran 8 channels
    rs = checks[("reducescatter", 1 << 20)]
    assert rs.status == "NOT APPLIED" and "8 channels, more than 4" in rs.reason


def test_judge_fewer_channels_is_applied_with_a_note_and_wrong_algo_is_not():
    assert judge(None, None, 8, ((("RING", "LL", 2), 1),))[0] == "APPLIED"
    assert "NCCL used 2 channels" in judge(None, None, 8, ((("RING", "LL", 2), 1),))[1]
    status, reason = judge("tree", None, 0, ((("RING", "LL", 24), 3), (("TREE", "LL", 24), 1)))
    assert status == "NOT APPLIED" and "algorithm RING, not TREE" in reason


def test_platform_section_for_another_gpu_does_not_match():
    text = "platform,gpu=mi300x\nallreduce,64M,64M,tree,simple,-1,-1,-1\n"
    log = parse_log(LOG.read_text())
    checks = verify(_ruleset(text), log.choices, n_ranks=4, n_nodes=1, platform=PlatformFacts(gpu="NVIDIA H200"))
    assert all(c.status == "NO RULE" for c in checks)


def test_cli_from_log_exit_codes_and_json(tmp_path, capsys):
    rules = tmp_path / "r.conf"
    rules.write_text(RULES)
    out = tmp_path / "v.json"
    rc = main(["plugin", "verify", str(rules), "--from-log", str(LOG), "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 1, text  # the reduce_scatter rule was not applied
    assert "3 applied, 1 not applied, 1 without a rule" in text
    data = json.loads(out.read_text())
    assert data["plugin_loaded"] is True and data["n_ranks"] == 4
    assert {c["status"] for c in data["checks"]} == {"APPLIED", "NOT APPLIED", "NO RULE"}
    rules.write_text(RULES.replace("reducescatter,1M,1M,ring,simple,4", "reducescatter,1M,1M,ring,simple,8"))
    assert main(["plugin", "verify", str(rules), "--from-log", str(LOG)]) == 0


def test_cli_log_without_tuning_lines_is_an_error(tmp_path, capsys):
    rules = tmp_path / "r.conf"
    rules.write_text(RULES)
    log = Path(__file__).parent / "fixtures" / "logs" / "nccl_truncated.log"  # real, cut before any call
    assert main(["plugin", "verify", str(rules), "--from-log", str(log)]) == 1
    assert "no TUNING lines" in capsys.readouterr().err  # an error, on stderr


@pytest.mark.parametrize("argv, message", [
    (["--from-log", "/nonexistent.log"], "does not exist"),
    (["all_to_all"], "not a collective a tuner sees"),
    (["-b", "1G", "-e", "1M"], "larger than"),
])
def test_cli_bad_input_is_a_usage_error(tmp_path, capsys, argv, message):
    rules = tmp_path / "r.conf"
    rules.write_text(RULES)
    assert main(["plugin", "verify", str(rules), *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_missing_rule_file(tmp_path, capsys):
    assert main(["plugin", "verify", str(tmp_path / "nope.conf"), "--from-log", str(LOG)]) == 2
    assert "nope.conf" in capsys.readouterr().err
