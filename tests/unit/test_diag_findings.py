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
