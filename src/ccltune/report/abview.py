"""The report's section for ``ccltune ab`` runs: per arm, its runs (with --in-run: its blocks of the one run) as
a strip with box and median,
the effect against default with its interval, and the verdict (pure: runs and samples in)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ccltune.report.model import Block, Note, StripChart, StripRow, Table
from ccltune.status import ArmStatus, RunStatus
from ccltune.store import AbSample, Run

_LEVEL: dict[str, str] = {ArmStatus.SLOWER: "bad", ArmStatus.FASTER: "good", ArmStatus.FAILED: "bad"}  # by the text a sample holds


def _iv(a: Mapping[str, object]) -> str:
    lo, hi = a.get("ratio_lo"), a.get("ratio_hi")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        return "interval unbounded (too few runs)"
    level = a.get("level", 0.95)   # runs stored before the level was recorded: 95%
    return f"[{lo:.4f}, {hi:.4f}]" + (f" at {100 * level:.4g}%" if isinstance(level, (int, float)) else "")


def blocks(run: Run, samples: Sequence[AbSample], title: str) -> list[Block]:
    """A note with the verdict, the strip chart and the table of one ab run."""
    arms = [a for a in run.summary.get("arms", []) if isinstance(a, dict) and isinstance(a.get("arm"), str)]
    unit = str(run.summary.get("unit") or "")
    slower = [a["arm"] for a in arms if a.get("status") == ArmStatus.SLOWER and not a.get("control")]
    level = "bad" if slower else ("warn" if run.status != RunStatus.COMPLETE else "good")
    in_run = bool(run.summary.get("in_run"))
    head = (f"{title}: " + (f"slower: {', '.join(slower)}" if slower else "no arm slower")
            + f"; metric: {run.summary.get('metric', '?')}; {run.summary.get('rounds', '?')} round(s)"
            + (" of blocks inside one run of the job" if in_run else "") + f", seed {run.summary.get('seed', '?')}"
            + (f" ({run.status})" if run.status != RunStatus.COMPLETE else ""))
    out: list[Block] = [Note(head, level)]
    if not arms:
        return out + [Note(f"run {run.id} recorded no verdict.", "warn")]
    counts = ["blocks"] if in_run else ["runs", "failed"]
    rows, table = [], Table(["arm", *counts, "median", "ratio", "interval", "verdict"], [],
                            caption=str(run.summary.get("method") or ""))
    for a in arms:
        name = a["arm"]
        vals = [s.value for s in samples if s.arm == name and s.value is not None]
        status = str(a.get("status", ""))
        ratio = a.get("ratio")
        effect = "" if not isinstance(ratio, (int, float)) else f"x{ratio:.4f} {_iv(a)} {status}"
        if a.get("control"):
            effect += " (A/A)"
        rows.append(StripRow(name, vals, a.get("median") if isinstance(a.get("median"), (int, float)) else None,
                             effect if name != "default" else "baseline", _LEVEL.get(status, "")))
        table.rows.append([name, *(str(a.get(c, "")) for c in counts),
                           "-" if a.get("median") is None else f"{a['median']:.5g}",
                           "-" if not isinstance(ratio, (int, float)) else f"{ratio:.4f}",
                           "-" if not isinstance(ratio, (int, float)) else _iv(a),
                           status + (" (A/A control)" if a.get("control") else "")])
        table.row_class.append(_LEVEL.get(status, ""))
    what = "blocks inside one run of the job" if in_run else "runs"
    out.append(StripChart(f"run {run.id}: each arm's {what} (box: quartiles; tick: median)", unit, rows,
                          "block" if in_run else "run"))
    out.append(table)
    return out
