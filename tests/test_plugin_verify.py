"""`ccltune plugin verify`: NCCL's TUNING lines against the rules (parser, judge, CLI on fixture logs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.parsers.ncclog import parse_log
from ccltune.rules import PlatformFacts, parse_text
from ccltune.tune.verify import judge, verify

# Real (README there): rank 0 of a 4 x H200 FSDP2 job with the ccltune tuner loaded and the rules
# `ccltune tune --workload` wrote for it (NCCL_DEBUG_SUBSYS=TUNING only: no 'comm ... nRanks' line)
LOG = Path(__file__).parent / "fixtures" / "logs" / "nccl_tuning_rules.log"
REAL_RULES = LOG.with_suffix(".conf")
# rules for the sizes the job ran: all_gather 25169920 B a rank (100679680 B whole buffer for the tuner),
# reduce_scatter 50339840 B a rank (201359360 B), all_reduce 4 B
RULES = """\
allgather,100679680,100679680,ring,simple,-1,-1,-1
allreduce,4,4,default,default,1,-1,-1
allreduce,12,12,tree,ll,-1,-1,-1
reducescatter,201359360,201359360,ring,simple,8,-1,-1
"""


def _ruleset(text: str = RULES):
    return parse_text(text, "rules.conf")


def test_tuning_lines_are_parsed_with_channel_counts_and_plugin_platform():
    log = parse_log(LOG.read_text())
    assert [(c.func, c.nbytes, c.algo, c.proto, c.channels) for c in log.choices][:2] == [
        ("AllGather", 67110912, "RING", "SIMPLE", 24), ("AllGather", 25169920, "RING", "SIMPLE", 24)]
    rs = next(c for c in log.choices if c.func == "ReduceScatter")
    assert rs.tuner_bytes(4) == 4 * 50339840  # per-rank bytes in the log, whole buffer for the tuner
    (load,) = log.plugin_loads
    assert (load.rules, load.applying, load.gpu, load.n_ranks, load.nvl_ranks, load.partition) == (
        2, 2, "NVIDIA H200", 4, (4, 4), None)
    assert log.nranks is None  # TUNING alone: the size comes from the plugin's line


def test_verify_statuses():
    log = parse_log(LOG.read_text())
    checks = {(c.collective, c.size_bytes): c for c in
              verify(_ruleset(), log.choices, n_ranks=4, n_nodes=1, platform=PlatformFacts(gpu="NVIDIA H200"))}
    assert len(checks) == 6
    assert checks[("allgather", 100679680)].status == "APPLIED"
    assert checks[("allreduce", 4)].status == "APPLIED"  # 1 channel, as asked
    assert checks[("allgather", 268443648)].status == "NO RULE"
    assert checks[("allgather", 268443648)].seen == ((("RING", "SIMPLE", 24), 3),)
    assert checks[("allreduce", 12)].status == "NOT APPLIED" and "algorithm RING, not TREE" in checks[("allreduce", 12)].reason
    rs = checks[("reducescatter", 201359360)]
    assert rs.status == "NOT APPLIED" and "24 channels, more than 8" in rs.reason


def test_the_jobs_own_rules_applied_within_nccls_channel_cap():
    # the rules asked 32 channels; NCCL ran 24 (its most on this communicator): applied, and said
    log = parse_log(LOG.read_text())
    checks = verify(parse_text(REAL_RULES.read_text(), str(REAL_RULES)), log.choices, n_ranks=4, n_nodes=1,
                    platform=PlatformFacts(gpu="NVIDIA H200"))
    applied = [c for c in checks if c.status == "APPLIED"]
    assert [(c.collective, c.size_bytes) for c in applied] == [("allgather", 100679680), ("allgather", 268443648)]
    assert all("24 channels" in c.reason and "32" in c.reason for c in applied)


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
    assert rc == 1, text  # the all_reduce 12 B and reduce_scatter rules were not applied
    assert "2 applied, 2 not applied, 2 without a rule" in text
    data = json.loads(out.read_text())
    assert data["plugin_loaded"] is True and data["n_ranks"] == 4 and data["n_nodes"] == 1
    assert {c["status"] for c in data["checks"]} == {"APPLIED", "NOT APPLIED", "NO RULE"}
    assert main(["plugin", "verify", str(REAL_RULES), "--from-log", str(LOG)]) == 0
    assert "# nRanks 4 nNodes 1" in capsys.readouterr().out


def test_cli_log_of_several_communicator_sizes_needs_nproc(tmp_path, capsys):
    text = LOG.read_text()
    load = next(line for line in text.splitlines() if "ccltune tuner: loaded" in line)
    log = tmp_path / "two.log"
    log.write_text(text + load.replace("nRanks=4", "nRanks=2") + "\n")
    assert main(["plugin", "verify", str(REAL_RULES), "--from-log", str(log)]) == 2
    assert "its plugin lines name 2, 4 ranks; pass --nproc N" in capsys.readouterr().err
    assert main(["plugin", "verify", str(REAL_RULES), "--from-log", str(log), "--nproc", "4"]) == 0


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
