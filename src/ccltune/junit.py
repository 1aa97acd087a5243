"""JUnit XML for CI (Jenkins, GitLab, GitHub read it unchanged), written with the stdlib's
ElementTree: one <testsuite> of test cases, each PASS, FAIL (<failure>), ERROR (<error>) or
WAIVED (<skipped>). ``ccltune check``/``doctor`` write their findings and ``ccltune validate`` its
verdict through :func:`to_junit`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccltune.status import Verdict


@dataclass(frozen=True)
class Case:
    """One test case."""

    classname: str
    name: str
    status: Verdict              # PASS, FAIL, ERROR or WAIVED (WARN counts as a pass)
    message: str = ""            # the <failure>/<error>/<skipped> message
    kind: str | None = None      # the <failure>/<error> type attribute (default: the status)
    detail: str | None = None    # the <failure>/<error> text
    out: str | None = None       # <system-out>
    time_s: float | None = None  # the case's time attribute


def to_junit(suite: str, cases: Sequence[Case], properties: Mapping[str, Any] | None = None) -> str:
    """A <testsuites> document with one <testsuite> named ``suite``."""
    counts = {s: sum(c.status == s for c in cases) for s in (Verdict.FAIL, Verdict.ERROR, Verdict.WAIVED)}
    totals = dict(tests=str(len(cases)), failures=str(counts[Verdict.FAIL]), errors=str(counts[Verdict.ERROR]))
    root = ET.Element("testsuites", {"name": suite, **totals})
    ts = ET.SubElement(root, "testsuite", {"name": suite, **totals, "skipped": str(counts[Verdict.WAIVED])})
    if properties is not None:
        props = ET.SubElement(ts, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=str(key), value="" if value is None else str(value))
    for c in cases:
        attrs = {"classname": c.classname, "name": c.name}
        if c.time_s is not None:
            attrs["time"] = f"{c.time_s:.9f}"
        case = ET.SubElement(ts, "testcase", attrs)
        if c.status in (Verdict.FAIL, Verdict.ERROR):
            tag = "failure" if c.status == Verdict.FAIL else "error"
            ET.SubElement(case, tag, message=c.message, type=c.kind or c.status).text = c.detail
        elif c.status == Verdict.WAIVED:
            ET.SubElement(case, "skipped", message=c.message)
        if c.out is not None:
            ET.SubElement(case, "system-out").text = c.out
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
