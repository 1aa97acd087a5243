"""The A/B verdict of ``ccltune validate``: NCCL's default vs the rules, size by size.

Input rows carry ``config`` 'default' or 'rules' (reps interleaved by the measuring side), with
``collective``, ``size_bytes``, ``n_ranks``, ``n_nodes``, ``time_us``, ``status``, ``in_place``.
Per (collective, nRanks, nNodes, size): speedup = median default time / median rules time, and the
ratio rules / default with its 95% interval from :func:`ccltune.stats.unpaired` (Mann-Whitney U,
Hodges-Lehmann, Moses: the repetitions of the two sides are independent draws; 4 of each reach 95%).

A size FAILs when the rules are slower than the default by the test (the interval above 1 and the
ratio beyond ``stats.MIN_EFFECT``, 1%: ``stats.judge``), and always when their median is slower by more
than ``hard_slowdown`` (2%), whatever the test. A size missing a side is an ERROR. The verdict is FAIL
if any size fails, else ERROR if any size errs, else PASS.

A size that fails can be measured again (``ccltune validate --retest``): :func:`retested` then
judges it by the new measurement alone and keeps the first judgement beside it. A real slowdown
fails again; a transient that hit one side's rounds does not (docs/tuning.md, "Validate verdict").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ccltune import stats
from ccltune.errors import DataError
from ccltune.stats import PointStats, point_stats
from ccltune.status import ArmStatus
from ccltune.status import Verdict as Status  # ValidateVerdict is the whole judgement
from ccltune.store import as_record
from ccltune.tune.derive import usable

HARD_SLOWDOWN = 0.02
SIDES = ("default", "rules")


@dataclass(frozen=True)
class SizeVerdict:
    collective: str
    n_ranks: int
    n_nodes: int
    size_bytes: int
    status: Status  # PASS, FAIL or ERROR
    reason: str
    default: PointStats | None
    rules: PointStats | None
    first: SizeVerdict | None = None  # the judgement this one replaced after a retest
    estimate: stats.Estimate | None = None  # rules / default, the test's ratio and interval

    @property
    def speedup(self) -> float | None:
        """Median default time / median rules time (> 1: the rules are faster)."""
        return self.default.median_us / self.rules.median_us if self.default and self.rules else None

    @property
    def noise(self) -> float | None:
        return self.default.noise + self.rules.noise if self.default and self.rules else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "collective": self.collective, "n_ranks": self.n_ranks, "n_nodes": self.n_nodes,
            "size_bytes": self.size_bytes, "status": self.status, "reason": self.reason,
            "speedup": self.speedup, "noise": self.noise,
            "default_time_us": self.default.median_us if self.default else None,
            "rules_time_us": self.rules.median_us if self.rules else None,
            "default_reps": self.default.n if self.default else 0,
            "rules_reps": self.rules.n if self.rules else 0,
            **({"ratio": self.estimate.ratio, "ratio_interval": [self.estimate.low, self.estimate.high]
                if self.estimate.bounded else None, "level": self.estimate.level, "p_value": self.estimate.p_value,
                "test": self.estimate.test} if self.estimate else {}),
            **({"first": self.first.to_dict()} if self.first else {}),
        }


@dataclass(frozen=True)
class ValidateVerdict:
    sizes: list[SizeVerdict]
    hard_slowdown: float = HARD_SLOWDOWN

    @property
    def status(self) -> Status:
        statuses = {s.status for s in self.sizes}
        return Status.FAIL if Status.FAIL in statuses else Status.ERROR if Status.ERROR in statuses else Status.PASS

    @property
    def geomean_speedup(self) -> float | None:
        ups = [s.speedup for s in self.sizes if s.speedup]
        return math.exp(sum(map(math.log, ups)) / len(ups)) if ups else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "hard_slowdown": self.hard_slowdown,
            "geomean_speedup": self.geomean_speedup,
            "counts": {st: sum(s.status == st for s in self.sizes) for st in (Status.PASS, Status.FAIL, Status.ERROR)},
            "sizes": [s.to_dict() for s in self.sizes],
        }


def retested(first: ValidateVerdict, again: ValidateVerdict) -> ValidateVerdict:
    """``first`` with every size that ``again`` measured anew judged by that measurement (its
    first judgement kept in ``first``)."""
    new = {(s.collective, s.n_ranks, s.n_nodes, s.size_bytes): s for s in again.sizes}
    out = []
    for s in first.sizes:
        r = new.get((s.collective, s.n_ranks, s.n_nodes, s.size_bytes))
        if r is None:
            out.append(s)
        else:
            lead = "on retest: " if r.status == Status.PASS else "again on retest: "
            out.append(replace(r, reason=f"{lead}{r.reason}; first: {s.reason}", first=s.first or s))
    return ValidateVerdict(out, first.hard_slowdown)


def judge(default: Sequence[float], rules: Sequence[float], hard_slowdown: float = HARD_SLOWDOWN
          ) -> tuple[Status, str, stats.Estimate]:
    """(status, reason, the test's estimate) for one size, from both sides' times (us)."""
    e = stats.unpaired(rules, default)
    slowdown = stats.median(rules) / stats.median(default) - 1.0
    if slowdown > hard_slowdown:
        return Status.FAIL, f"rules {100 * slowdown:.1f}% slower than default (hard limit {100 * hard_slowdown:g}%)", e
    if stats.judge(e, stats.MIN_EFFECT) is ArmStatus.SLOWER:
        return Status.FAIL, f"rules slower than default: {e.said}", e
    return Status.PASS, f"speedup {1 / e.ratio:.3f}x: {e.said}", e


def verdict(rows: Iterable[Any], *, hard_slowdown: float = HARD_SLOWDOWN,
            placement: str = "out-of-place", covered: Callable[[str, int, int, int], bool] | None = None) -> ValidateVerdict:
    """The verdict over rows of configs 'default' and 'rules'. Raises DataError when there are none.

    ``covered(collective, n_ranks, n_nodes, size_bytes)`` says whether a rule applies there.
    Where none does, the plugin changes nothing (it touches NCCL's outputs only on a match),
    so both sides ran NCCL's own choice: such a size is PASS ("no rule applies") and its
    measured ratio is shown as a noise reference, never judged."""
    samples: dict[tuple[str, int, int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        row = as_record(row)
        if row.get("config") not in SIDES:
            continue
        key = (row["collective"], int(row["n_ranks"]), int(row.get("n_nodes") or 1), int(row["size_bytes"]))
        side = samples[key][row["config"]]
        if usable(row, placement):
            side.append(float(row["time_us"]))
    if not samples:
        raise DataError("no measurements of config 'default' or 'rules' to compare")
    out = []
    for key in sorted(samples):
        stats = {side: point_stats(t) if t else None for side, t in samples[key].items()}
        d, r = stats.get("default"), stats.get("rules")
        if d is None or r is None:
            missing = " and ".join(s for s in SIDES if stats.get(s) is None)
            out.append(SizeVerdict(*key, Status.ERROR, f"no usable {missing} samples", d, r))
            continue
        if covered is not None and not covered(*key):
            ratio = d.median_us / r.median_us
            out.append(SizeVerdict(*key, Status.PASS, f"no rule applies: NCCL's own choice on both sides "
                                                 f"(measured ratio {ratio:.3f}, i.e. the noise)", d, r))
            continue
        status, why, e = judge(samples[key]["default"], samples[key]["rules"], hard_slowdown)
        out.append(SizeVerdict(*key, status, why, d, r, estimate=e))
    return ValidateVerdict(out, hard_slowdown)
