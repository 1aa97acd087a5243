"""JUnit XML for CI from a list of findings (stdlib ElementTree; FAIL -> <failure>,
ERROR -> <error>, WAIVED -> <skipped>, PASS/WARN -> a plain test case)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from ccltune.diagnose.findings import Finding


def to_junit(suite: str, findings: Sequence[Finding], properties: Mapping[str, Any]) -> str:
    """A <testsuites> document with one <testsuite> named ``suite``."""
    root = ET.Element("testsuites")
    counts = {s: sum(f.status == s for f in findings) for s in ("FAIL", "ERROR", "WAIVED")}
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(findings)), failures=str(counts["FAIL"]),
                       errors=str(counts["ERROR"]), skipped=str(counts["WAIVED"]))
    props = ET.SubElement(ts, "properties")
    for key, value in properties.items():
        ET.SubElement(props, "property", name=str(key), value="" if value is None else str(value))
    for f in findings:
        case = ET.SubElement(ts, "testcase", classname=suite, name=f.name)
        message = f.evidence + (f"; fix: {f.fix}" if f.fix else "")
        if f.status == "FAIL":
            ET.SubElement(case, "failure", message=message, type="FAIL").text = message
        elif f.status == "ERROR":
            ET.SubElement(case, "error", message=message, type="ERROR").text = message
        elif f.status == "WAIVED":
            ET.SubElement(case, "skipped", message=message)
        ET.SubElement(case, "system-out").text = f"{f.status}: {f.evidence}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
