"""Estimated time of a workload's entries from measurements of NCCL's default (pure).

An entry's time per call is the median of the default-configuration rows measured at its
exact (collective, size, ranks, nodes), or, between two measured sizes, the log-log
interpolation of their medians (marked ``interpolated``). Outside the measured range
there is no estimate: extrapolating would invent a number nobody measured. The caller passes
rows measured on an idle GPU: ``workload show --db`` leaves out the runs made ``--under-load``
(a sweep's or a replay's), whose times are those of a GPU busy with other work.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median

from ccltune.status import RowStatus
from ccltune.store import Measurement
from ccltune.workload.model import Entry, Workload


@dataclass(frozen=True)
class IdleTime:
    """An entry's time on an idle GPU, from a sweep's rows (us), measured or interpolated."""
    time_us: float
    how: str                  # 'measured' or 'interpolated'


def _medians(rows: Iterable[Measurement]) -> dict[tuple[str, int, int], dict[int, float]]:
    by: dict[tuple[str, int, int], dict[int, list[float]]] = {}
    for m in rows:
        if m.config != "default" or m.status != RowStatus.OK or m.time_us is None:
            continue
        by.setdefault((m.collective, m.n_ranks, m.n_nodes), {}).setdefault(m.size_bytes, []).append(m.time_us)
    return {k: {s: median(v) for s, v in sizes.items()} for k, sizes in by.items()}


def estimate(wl: Workload, rows: Iterable[Measurement]) -> dict[int, IdleTime]:
    """Index into ``wl.entries`` -> estimate, for the entries the rows cover."""
    med = _medians(rows)
    out: dict[int, IdleTime] = {}
    for i, e in enumerate(wl.entries):
        est = _one(e, med)
        if est is not None:
            out[i] = est
    return out


def idle_estimates(db: str, wl: Workload) -> dict[int, IdleTime]:
    """:func:`estimate` from the idle runs of the database ``db`` (runs made under load left out); a
    missing or wrong file is an error naming it. The one read of this module."""
    from ccltune.store import Store

    with Store(db, readonly=True) as st:
        idle = [r.id for r in st.runs() if not (r.summary or {}).get("under_load")]
        return estimate(wl, st.measurements(idle) if idle else [])


def _one(e: Entry, med: dict[tuple[str, int, int], dict[int, float]]) -> IdleTime | None:
    sizes = med.get((e.key.collective, e.key.nranks, e.key.nnodes if e.key.nnodes is not None else 1))
    if not sizes:
        return None
    s = e.key.size_bytes
    if s in sizes:
        return IdleTime(sizes[s], "measured")
    below = [x for x in sizes if 0 < x < s]
    above = [x for x in sizes if x > s]
    if not below or not above or s <= 0:
        return None
    lo, hi = max(below), min(above)
    f = (math.log(s) - math.log(lo)) / (math.log(hi) - math.log(lo))
    t = math.exp(math.log(sizes[lo]) + f * (math.log(sizes[hi]) - math.log(sizes[lo])))
    return IdleTime(t, "interpolated")
