"""JUnit XML for CI from a list of findings (FAIL -> <failure>, ERROR -> <error>, WAIVED ->
<skipped>, PASS/WARN -> a plain test case); written by :mod:`ccltune.junit`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ccltune import junit
from ccltune.diagnose.findings import Finding


def to_junit(suite: str, findings: Sequence[Finding], properties: Mapping[str, Any]) -> str:
    """A <testsuites> document with one <testsuite> named ``suite``."""
    cases = []
    for f in findings:
        message = f.evidence + (f"; fix: {f.fix}" if f.fix else "")
        cases.append(junit.Case(suite, f.name, f.status, message, detail=message, out=f"{f.status}: {f.evidence}"))
    return junit.to_junit(suite, cases, properties)
