"""Proof that rules fired (issue 29): the profiler's record of a real job against the rule file it ran with
(tests/fixtures/workload/profile-ddp-tree-4, README there), and the same rules against the same job run
without them (profile-ddp-4)."""

from __future__ import annotations

from pathlib import Path

from ccltune import rules
from ccltune.ab import fired
from ccltune.cli import main
from ccltune.workload import profile_file

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
FORCED, PLAIN = FIX / "profile-ddp-tree-4", FIX / "profile-ddp-4"
FORCE = FORCED / "force.conf"


def _fire(rs: rules.RuleSet, folder: Path) -> tuple[list[fired.RuleFiring], fired.Tally]:
    t = fired.tally(rs, profile_file.read_dir(folder))
    return fired.firings(rs, t), t


def test_the_forced_job_applied_line_1_and_line_2_never_fired() -> None:
    f, t = _fire(rules.load(FORCE), FORCED)
    assert [(x.rule.line, x.status, x.calls) for x in f] == [(1, fired.Fired.APPLIED, 144),
                                                             (2, fired.Fired.NEVER_FIRED, 0)]
    assert f[0].ran == ((("TREE", "SIMPLE", 4), 144),)          # 36 all_reduces on each of 4 ranks
    assert "went to line 1 first" in f[1].reason
    assert sum(t.unruled.values()) == 20 and {c for c, _, _ in t.unruled} == {"all_gather", "broadcast"}
    assert fired.statuses(f) == ["APPLIED", "NEVER FIRED"]


def test_the_same_rules_against_the_job_run_without_them_are_not_applied() -> None:
    f, _ = _fire(rules.load(FORCE), PLAIN)
    assert f[0].status is fired.Fired.NOT_APPLIED and f[0].ran == ((("RING", "SIMPLE", 24), 144),)
    assert "NCCL ran RING/SIMPLE/24ch x144 on 144 of the 144 calls" in f[0].reason


def test_a_later_rule_takes_the_calls_the_first_could_not_and_a_rule_beside_the_job_never_fires() -> None:
    """The plugin skips a rule whose cell NCCL marks IGNORE and goes on: the rule that agrees with what ran fired."""
    top = "18446744073709551615"
    rs = rules.parse_text(f"allreduce,0,1000,ring,ll,-1,-1,-1\nallreduce,0,{top},ring,ll128,2,-1,-1\n"
                          f"allreduce,0,{top},tree,simple,8,-1,-1\nreducescatter,0,{top},ring,simple,-1,-1,-1\n")
    assert not rs.diagnostics
    f, _ = _fire(rs, FORCED)
    assert [(x.rule.line, x.status, x.calls) for x in f] == [
        (1, fired.Fired.NEVER_FIRED, 0), (2, fired.Fired.NEVER_FIRED, 0), (3, fired.Fired.APPLIED, 144),
        (4, fired.Fired.NEVER_FIRED, 0)]
    assert "no call of the job fell in this rule" in f[0].reason   # DDP's all_reduces are all above 1000 B
    assert "ran a later rule's choice (144 to line 3)" in f[1].reason
    assert "NCCL used 4 channel(s), within the rule's 8" in f[2].reason
    assert "no call of the job fell" in f[3].reason                # DDP reduce-scatters nothing


def test_plugin_verify_profile_prints_the_table_and_fails_when_nothing_was_applied(capsys) -> None:
    assert main(["plugin", "verify", str(FORCE), "--profile", str(FORCED)]) == 0
    out = capsys.readouterr().out
    assert "APPLIED      NCCL ran TREE/SIMPLE/4ch x144" in out and "1 applied, 0 not applied, 1 never fired" in out
    assert main(["plugin", "verify", str(FORCE), "--profile", str(PLAIN)]) == 1
    assert "NOT APPLIED  NCCL ran RING/SIMPLE/24ch x144" in capsys.readouterr().out
