"""The status vocabulary, its exit codes, the text table and JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ccltune.diagnose.findings import Finding, exit_code, format_findings, overall
from ccltune.diagnose.junit import to_junit


def _f(status: str, name: str = "x") -> Finding:
    return Finding(name, status, f"{name} evidence", f"{name} fix")


@pytest.mark.parametrize("statuses, worst, code", [
    (["PASS", "WAIVED"], "PASS", 0), (["PASS", "WARN"], "WARN", 0), (["WARN", "FAIL"], "FAIL", 1),
    (["FAIL", "ERROR"], "ERROR", 1), (["WAIVED"], "WAIVED", 0), ([], "WAIVED", 0),
])
def test_overall_and_exit_code(statuses, worst, code):
    found = [_f(s) for s in statuses]
    assert overall(found) == worst and exit_code(found) == code


def test_unknown_status_is_rejected():
    with pytest.raises(ValueError, match="INFO"):
        Finding("x", "INFO", "e")


def test_text_table_shows_fix_only_where_there_is_something_to_do():
    text = format_findings([_f("PASS", "a"), _f("WARN", "b")], title="t")
    assert "fix: b fix" in text and "fix: a fix" not in text and "# overall: WARN (1 PASS, 1 WARN)" in text


def test_junit_maps_statuses():
    xml = to_junit("suite", [_f("PASS", "p"), _f("FAIL", "f"), _f("ERROR", "e"), _f("WAIVED", "w")], {"world_size": 4})
    suite = ET.fromstring(xml).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("4", "1", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["f"].find("failure").get("message") == "f evidence; fix: f fix"
    assert cases["e"].find("error") is not None and cases["w"].find("skipped") is not None
    assert cases["p"].find("failure") is None
    assert suite.find("properties/property").get("value") == "4"


def test_doctor_prints_the_ab_line_that_proves_its_fix_on_a_real_shm_log(tmp_path, capsys):
    """The real 4 x H200 log of a job run with NCCL_P2P_DISABLE=1 (tests/fixtures/logs/README.md): doctor's fix
    (unset it) comes with the `ccltune ab` line that measures it on the user's own job; on the RCCL fixture
    whose fix exports NCCL_P2P_LEVEL=SYS, an --env arm."""
    from pathlib import Path

    from ccltune.cli import main

    logs = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
    for name, fix, proof in (
            ("nccl_4gpu_shm.log", "fix: unset NCCL_P2P_DISABLE",
             "ccltune ab --arm fix:unset:NCCL_P2P_DISABLE -- <your job>"),
            ("rccl_mi210_pcie_2.16.5.log", "fix: export NCCL_P2P_LEVEL=SYS",
             "ccltune ab --env NCCL_P2P_LEVEL=SYS -- <your job>")):
        main(["doctor", "--nccl-log", str(logs / name), "--db", str(tmp_path / "d.db")])
        lines = capsys.readouterr().out.splitlines()
        i = next(i for i, line in enumerate(lines) if "log:transport" in line)
        assert fix in lines[i + 1]
        assert lines[i + 2].strip() == f"prove it on your job: {proof}"


def test_proof_command_combines_several_settings_into_one_arm_and_skips_fixes_without_one():
    from ccltune.diagnose.findings import proof_command

    assert proof_command("export NCCL_MIN_NCHANNELS=16 NCCL_MAX_NCHANNELS=16 for jobs on 4 GPUs") == (
        "ccltune ab --arm fix:env:NCCL_MIN_NCHANNELS=16 --arm fix:env:NCCL_MAX_NCHANNELS=16 -- <your job>")
    assert proof_command("export NCCL_MIN_NCHANNELS=32; measure the gain") == (
        "ccltune ab --env NCCL_MIN_NCHANNELS=32 -- <your job>")
    assert proof_command("sudo sysctl -w kernel.numa_balancing=0") == ""
    assert proof_command("unset NCCL_P2P_LEVEL (or set SYS)") == "ccltune ab --arm fix:unset:NCCL_P2P_LEVEL -- <your job>"
    assert proof_command("set NCCL_BUFFSIZE to an integer, or unset it") == ""
