"""The tuning section's view of a workload: its sizes weighted by their share of the job (pure).

A ``tune --workload`` run stores its prediction per point (summary ``predictions``: calls, NCCL's
default and the rules' time per step, docs/workload.md); a ``replay`` run stores each replayed
entry timed alone (summary ``entries``, with the workload's ``steps``). Either gives each size's
share of the job's communication time under NCCL's default, so the sizes that matter to the job
come first, whatever the rule zones or speedup curves say about the sizes it never sends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ccltune.report.axes import size_label
from ccltune.report.data import canonical
from ccltune.report.model import Table

_COLUMNS = ["collective", "size", "calls", "share of the job", "default us/step", "rules us/step", "saves us/step",
            "what"]


Point = tuple[str, int, int, "float | None", "float | None", str, "str | None"]


def _table(caption: str, points: Sequence[Point]) -> Table:
    """points: (collective, size, calls, default us/step, rules us/step, what, row class or None:
    by the sign of the saving), sorted here by share."""
    total = sum(p[3] for p in points if p[3])
    t = Table(list(_COLUMNS), [], caption=caption)
    for coll, size, calls, d, r, what, cls in sorted(points, key=lambda p: -(p[3] or 0.0)):
        saves = d - r if d is not None and r is not None else None
        t.rows.append([coll, size_label(size), str(calls), f"{100 * d / total:.1f}%" if d and total else "-",
                       _us(d), _us(r), _us(saves), what])
        t.row_class.append(cls if cls is not None else
                           "" if saves is None or abs(saves) < 1e-9 else "good" if saves > 0 else "bad")
    return t


def _judged(e: Mapping[str, Any]) -> tuple[str, str]:
    """(what, row class) of a replayed entry: the rules' time against the default's beyond both
    arms' noise (as the replay verdict judges the whole job), else 'within the noise'."""
    d, r = e.get("default_us"), e.get("rules_us")
    if not (isinstance(d, Mapping) and isinstance(r, Mapping) and d.get("median_us")):
        return "replayed", ""
    ratio = float(r["median_us"]) / float(d["median_us"])
    noise = float(d.get("noise") or 0) + float(r.get("noise") or 0)
    if ratio > 1 + noise:
        return f"slower beyond the noise (x{ratio:.3f}, +-{100 * noise:.1f}%)", "bad"
    if ratio < 1 - noise:
        return f"faster beyond the noise (x{ratio:.3f}, +-{100 * noise:.1f}%)", "good"
    return f"within the noise (x{ratio:.3f}, +-{100 * noise:.1f}%)", ""


def _us(v: float | None) -> str:
    """One decimal; three significant digits below 10 us (a small size's saving is not 0.0)."""
    return "-" if v is None else f"{v:.1f}" if abs(v) >= 10 or v == 0 else f"{v:.3g}"


def _in_job(q: Mapping[str, Any]) -> str:
    """' (in the job: 41.0 us/call, 1.0 us waiting)' from a point's job_us/wait_us, or ''."""
    job, wait = q.get("job_us"), q.get("wait_us")
    if not isinstance(job, (int, float)):
        return ""
    return f" (in the job: {_us(float(job))} us/call" + (f", {_us(float(wait))} us of it waiting for the last rank"
                                                        if isinstance(wait, (int, float)) else "") + ")"


def tune_tables(run: Any) -> list[Table]:
    """One table per GPU model a ``tune --workload`` run predicted for (none for another run)."""
    out = []
    for p in run.summary.get("predictions") or []:
        if not isinstance(p, Mapping):
            continue
        pts = []
        for q in p.get("points") or []:
            if isinstance(q, Mapping):
                d = q.get("default_us_per_step") or None  # 0: not measured (weighted.summary)
                pts.append((canonical(str(q.get("collective"))), int(q.get("size_bytes") or 0), int(q.get("calls") or 0), d,
                            q.get("rules_us_per_step") if d else None,
                            str(q.get("config") or q.get("status") or "") + _in_job(q), None))
        unit = "step" if p.get("steps") else "captured run"
        out.append(_table(f"run {run.id}: workload {run.summary.get('workload', '')} on {p.get('gpu')}, predicted: the "
                          f"sizes by their share of NCCL's default communication time per {unit}", pts))
    return out


def replay_table(run: Any) -> Table | None:
    """A ``replay`` run's entries timed alone, by their share of the job (None without entries)."""
    entries = [e for e in run.summary.get("entries") or [] if isinstance(e, Mapping)]
    if not entries:
        return None
    per = float(run.summary.get("steps") or 1)

    def step(e: Mapping[str, Any], arm: str) -> float | None:
        s = e.get(f"{arm}_us")
        return int(e.get("calls") or 0) * float(s["median_us"]) / per if isinstance(s, Mapping) else None

    pts = [(canonical(str(e.get("collective"))), int(e.get("size_bytes") or 0), int(e.get("calls") or 0),
            step(e, "default"), step(e, "rules"), *_judged(e)) for e in entries]
    unit = "step" if run.summary.get("steps") else "captured run"
    return _table(f"run {run.id}: each replayed entry timed alone, by its share of NCCL's default communication "
                  f"time per {unit}", pts)
