"""``ccltune ab``'s rows in the results database: its arms and one sample per run of the job
(tables ``ab_arms`` and ``ab_samples``, schema version 3: :mod:`ccltune.store`). Each sample is
committed as soon as its run ends, so a Ctrl-C keeps every finished run."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ccltune.files import printable
from ccltune.status import SampleStatus
from ccltune.store import Store


@dataclass(frozen=True)
class Sample:
    """One run of the job: ``value`` in ``unit`` (None when the run failed: ``note`` says why)."""

    arm: str
    round: int
    slot: int            # its place in the round (0 = first)
    value: float | None
    unit: str
    status: str          # a SampleStatus
    exit_code: int | None
    wall_s: float
    matches: int = 0     # numbers the metric pattern matched in its output
    note: str = ""


def add_arms(store: Store, run_id: int, arms: Mapping[str, Mapping[str, Any]]) -> None:
    store.conn.executemany("INSERT INTO ab_arms(run_id, name, spec_json) VALUES (?, ?, ?)",
                           [(run_id, name, json.dumps(dict(spec), default=str)) for name, spec in arms.items()])
    store.conn.commit()


def add_sample(store: Store, run_id: int, s: Sample) -> None:
    SampleStatus.parse(s.status, f"ab run {run_id}, arm {s.arm!r} round {s.round}")
    store.conn.execute(
        "INSERT INTO ab_samples(run_id, arm, round, slot, value, unit, status, exit_code, wall_s, matches, note)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, s.arm, s.round, s.slot, s.value, s.unit, s.status, s.exit_code, s.wall_s, s.matches, s.note))
    store.conn.commit()


def _has_tables(store: Store) -> bool:
    """A version-2 file opened read-only has no ab tables: it holds no ab run either."""
    return store.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ab_samples'"
                              ).fetchone() is not None


def arms(store: Store, run_id: int) -> dict[str, dict[str, Any]]:
    if not _has_tables(store):
        return {}
    out = {}
    for r in store.conn.execute("SELECT name, spec_json FROM ab_arms WHERE run_id = ? ORDER BY id", (run_id,)):
        out[str(r["name"])] = store.json_object(r["spec_json"], f"ab_arms row of run {run_id} arm "
                                                                f"{printable(str(r['name']), 40)!r}: spec_json")
    return out


def samples(store: Store, run_id: int) -> list[Sample]:
    if not _has_tables(store):
        return []
    out = []
    for r in store.conn.execute("SELECT * FROM ab_samples WHERE run_id = ? ORDER BY id", (run_id,)):
        store.check_row(r, "ab_samples")  # a number column holding text: an error naming the row
        value = r["value"] if isinstance(r["value"], (int, float)) and math.isfinite(r["value"]) else None
        out.append(Sample(str(r["arm"]), _int(r, "round"), _int(r, "slot"), value, r["unit"] or "",
                          str(r["status"]), r["exit_code"], float(r["wall_s"] or 0.0), _int(r, "matches"),
                          r["note"] or ""))
    return out


def _int(r: sqlite3.Row, col: str) -> int:
    v = r[col]
    return v if isinstance(v, int) else 0


def values_by_arm(rows: list[Sample], names: list[str]) -> tuple[dict[str, list[float]], dict[str, int]]:
    """(arm -> values of its good runs, arm -> its failed runs), every arm of ``names`` present."""
    values: dict[str, list[float]] = {n: [] for n in names}
    failed: dict[str, int] = {n: 0 for n in names}
    for s in rows:
        if s.status == SampleStatus.OK and s.value is not None:
            values.setdefault(s.arm, []).append(s.value)
        else:
            failed[s.arm] = failed.get(s.arm, 0) + 1
    return values, failed
