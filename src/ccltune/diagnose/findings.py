"""The result of every diagnose check: a Finding with a status (a :class:`ccltune.status.Verdict`: PASS,
WARN, FAIL, WAIVED or ERROR, whose meanings and exit codes that class lists), its evidence and its fix."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ccltune.errors import verdict_exit_code
from ccltune.files import escape
from ccltune.status import VERDICT_SEVERITY, Verdict


@dataclass
class Finding:
    """One check's verdict. ``evidence`` says what was seen, ``fix`` what to do about it."""

    name: str
    status: Verdict
    evidence: str
    fix: str = ""
    value: float | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = Verdict.parse(self.status, f"finding {self.name!r}")

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


# 'export A=1 B=2' in a fix: the settings it recommends (a value up to a blank, ';' or ','); 'unset A'
_EXPORT = re.compile(r"\bexport((?: +[A-Z_][A-Z0-9_]{0,127}=[^\s;,`]+)+)")
_UNSET = re.compile(r"\bunset ([A-Z_][A-Z0-9_]{0,127})\b")


def recommended_settings(fix: str) -> list[tuple[str, str]]:
    """The variables a fix tells the user to export, in order: what ``ccltune ab`` can prove."""
    out: list[tuple[str, str]] = []
    for m in _EXPORT.finditer(fix[:4096]):
        for pair in m.group(1).split():
            name, _, value = pair.partition("=")
            out.append((name, value))
    return out


def proof_command(fix: str) -> str:
    """The ``ccltune ab`` line that measures a fix on the user's own job ('' when the fix sets or unsets
    no variable): one setting is an --env arm; several, or a variable to unset, are one --arm."""
    settings = recommended_settings(fix)
    unset = [] if settings else _UNSET.findall(fix[:4096])[:1]  # 'unset X (or set it to Y)': the first
    if len(settings) == 1:
        return f"ccltune ab --env {settings[0][0]}={settings[0][1]} -- <your job>"
    arms = [f"--arm fix:env:{k}={v}" for k, v in settings] + [f"--arm fix:unset:{k}" for k in unset]
    return f"ccltune ab {' '.join(arms)} -- <your job>" if arms else ""


def overall(findings: Iterable[Finding]) -> Verdict:
    """The worst status of ``findings``; WAIVED when all were waived or there are none."""
    seen = {f.status for f in findings}
    return next((s for s in VERDICT_SEVERITY if s in seen), Verdict.WAIVED)


def exit_code(findings: Iterable[Finding]) -> int:
    """1 when any finding FAILed or ERRORed, else 0 (WARN and WAIVED do not fail CI)."""
    return verdict_exit_code(f.status for f in findings)


def format_findings(findings: Iterable[Finding], *, title: str) -> str:
    """Fixed-width text: one line per finding, its fix indented below it."""
    findings = list(findings)
    width = max((len(f.name) for f in findings), default=4)
    lines = [f"# {escape(title)}", f"# {'status':<7} {'check':<{width}}  evidence"]
    for f in findings:  # evidence quotes what was read (sysfs, logs, variables): never a raw control byte
        lines.append(f"  {f.status:<7} {escape(f.name):<{width}}  {escape(f.evidence)}")
        if f.fix and f.status not in (Verdict.PASS, Verdict.WAIVED):
            lines.append(f"  {'':<7} {'':<{width}}  fix: {escape(f.fix)}")
            proof = proof_command(f.fix)
            if proof:  # the job is the judge: what the fix does to the user's job, with its interval
                lines.append(f"  {'':<7} {'':<{width}}  prove it on your job: {escape(proof)}")
    counts = {s: sum(f.status == s for f in findings) for s in Verdict}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines.append(f"# overall: {overall(findings)} ({summary or 'no checks'})")
    return "\n".join(lines)
