"""Rules judged by a workload: only the job's own sizes, weighted by its calls (pure).

``ccltune tune --workload W.json`` first derives as ``tune`` always does
(:func:`ccltune.tune.derive.derive`: per size, the winner must beat NCCL's default, and the
twin, beyond the measured noise and the A/A gap; isolated wins need the isolated margin). Then,
for one GPU model at a time:

1. Each workload entry NCCL passes to a tuner (broadcast, reduce, all_gather, reduce_scatter,
   all_reduce on two ranks or more) is looked up at its *exact* (collective, size, ranks,
   nodes). Entries of one size that differ only in datatype or count are one *point*: the
   tuner sees bytes only. A point nobody measured at that size gets no rule and no
   prediction; it is listed ``unmeasured`` (``ccltune sweep --workload`` measures it).
2. A point keeps the derivation's winner there when its saving per step, ``calls x (t_default
   - t_winner)``, is at least ``NOISE_MULTIPLE`` (2) times its own uncertainty (below): the
   ``+-`` is half the spread seen on each side, so a saving smaller than twice it lies inside the
   spread the sweep itself saw, and becomes no rule (status ``in-noise``; "4696 +- 3918 us" was
   such a saving, and the job got slower with it). Then the rule's saving (its points', point 3) must
   be at least ``min_share`` of the predicted default communication time per step: a rule that
   changes sizes the job hardly uses is risk without reward. Rules are candidates either way: ``ccltune ab --rules R --prune
   KEPT -- <the job>`` is the judge.
3. A rule covers the job's own sizes only: a run of the group's consecutive workload sizes (in size
   order, every point of the group counted) that each pass point 2's noise test with the same winner,
   each at most ``NEAR`` (2x) the one before, from the smallest to the largest (a DDP job's buckets of
   67,108,864 and 67,125,248 B are one rule; sizes between them the job does not issue go with it). A
   point alone covers exactly its size (``min_bytes == max_bytes``). Point 2's share test judges the
   rule: the run's savings together. A size next to a rule (within ``NEAR``) that the rule leaves to
   NCCL is named with the reason (issue 38).
4. The prediction goes through :func:`ccltune.rules.match`, the plugin's own matcher, on the
   rules finally written, and a point where the selected configuration is slower than the
   default beyond noise, or was not measured, is a bug raised as DataError, never a rule.

5. **In the job's conditions** (issue 28): where the workload carries the job's own time per call
   (profiler files, Inspector, trace kernels) and its median is at least
   :data:`ccltune.workload.quantities.SLOW_RATIO` (2x) NCCL's default median measured on an idle
   GPU, an idle winner is no evidence for the job: the point gets no rule (status ``job-slow``) and
   no predicted gain, unless the measurements were taken under load (``under_load``).

Time per step (:mod:`ccltune.workload.quantities`): ``sum(calls x median) / steps`` over the measured
points (per captured run when the workload does not know its steps): each size timed alone by the
sweep, back to back, so the time between the job's calls is not in it. The default's time is the faster of NCCL's default and
its twin (both are NCCL's own choice; a rule must beat the faster). Uncertainty: each point's
half spread (:mod:`ccltune.stats`) times its calls, entries combined as independent
(root of the sum of squares); the gain's uncertainty adds, per point with a rule, both sides'
half spreads.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ccltune import collectives
from ccltune.commconfig import CommConfig
from ccltune.errors import DataError
from ccltune.rules import ANY, NCCL_CHOICE, Query, Rule, RuleSet, match
from ccltune.stats import PointStats, beats
from ccltune.status import PointStatus
from ccltune.tune.derive import Derivation, GroupResult, SizeDecision, nccl_best
from ccltune.workload import quantities
from ccltune.workload.model import Workload

# statuses of a workload point, by their short names here
RULE, DEFAULT_KEPT, SMALL, IN_NOISE, UNMEASURED, UNTUNABLE, ONE_RANK, AMBIGUOUS, JOB_SLOW = (
    PointStatus.RULE, PointStatus.DEFAULT_KEPT, PointStatus.SMALL, PointStatus.IN_NOISE, PointStatus.UNMEASURED,
    PointStatus.UNTUNABLE, PointStatus.ONE_RANK, PointStatus.AMBIGUOUS, PointStatus.JOB_SLOW)

# A rule's saving per step must be at least this many times its own +- (module doc, point 2)
NOISE_MULTIPLE = 2.0
# A rule reaches from one of the job's sizes to the next one of the same winner when the larger is at most this
# many times the smaller (module doc, point 3): a DDP job's buckets of 67,108,864 and 67,125,248 B
NEAR = 2.0


@dataclass(frozen=True)
class WPoint:
    """One workload point: what the tuner can tell apart, with its calls per run."""

    collective: str
    size_bytes: int
    n_ranks: int
    n_nodes: int | None
    calls: int
    datatypes: tuple[str, ...] = ()
    job_us: float | None = None    # the job's own median per call (the entry of most calls), None: not timed
    wait_us: float | None = None   # of it, the median waiting for the last rank (all ranks' profiler files)


@dataclass(frozen=True)
class PointVerdict:
    point: WPoint
    status: PointStatus
    reason: str
    default: PointStats | None = None  # the faster of NCCL's default and its twin
    selected: CommConfig | None = None  # what the written rules select (None: not measured)
    selected_stats: PointStats | None = None
    per_step: float = 1.0              # calls are divided by this (the workload's steps, else 1)

    @property
    def default_us(self) -> float:
        """Default time per step (µs) of this point; 0 when not measured."""
        return self.point.calls * self.default.median_us / self.per_step if self.default else 0.0

    @property
    def rules_us(self) -> float:
        return self.point.calls * self.selected_stats.median_us / self.per_step if self.selected_stats else 0.0

    @property
    def saving_us(self) -> float:
        return self.default_us - self.rules_us

    @property
    def saving_noise_us(self) -> float:
        if self.status != RULE or not (self.default and self.selected_stats):
            return 0.0
        return self.point.calls * (self.default.median_us * self.default.noise
                                   + self.selected_stats.median_us * self.selected_stats.noise) / self.per_step


@dataclass
class WorkloadPlan:
    """The rules and prediction for one GPU model."""

    gpu: str
    verdicts: list[PointVerdict]
    rules: list[Rule]
    steps: int | None
    notes: list[str] = field(default_factory=list)
    under_load: bool = False
    mode: str = ""                     # how the rows were timed: 'CUDA graph', 'eager' (tune's CLI sets it)

    @property
    def measured(self) -> list[PointVerdict]:
        return [v for v in self.verdicts if v.default is not None]

    @property
    def default_us(self) -> float:
        return sum(v.default_us for v in self.measured)

    @property
    def rules_us(self) -> float:
        return sum(v.rules_us for v in self.measured)

    @property
    def default_noise_us(self) -> float:
        return math.sqrt(sum((v.default_us * v.default.noise) ** 2 for v in self.measured if v.default))

    @property
    def rules_noise_us(self) -> float:
        return math.sqrt(sum((v.rules_us * v.selected_stats.noise) ** 2 for v in self.measured if v.selected_stats))

    @property
    def gain_noise_us(self) -> float:
        return math.sqrt(sum(v.saving_noise_us ** 2 for v in self.verdicts))

    def carriers(self) -> list[PointVerdict]:
        """The points with a rule, by saving per step, largest first."""
        return sorted((v for v in self.verdicts if v.status == RULE), key=lambda v: -v.saving_us)


def workload_points(wl: Workload) -> list[WPoint]:
    """The workload's entries merged by what a tuner sees (collective, bytes, ranks, nodes)."""
    calls: dict[tuple[str, int, int, int | None], int] = defaultdict(int)
    dtypes: dict[tuple[str, int, int, int | None], set[str]] = defaultdict(set)
    job: dict[tuple[str, int, int, int | None], tuple[int, float | None, float | None]] = {}
    for e in wl.entries:
        k = (e.key.collective, e.key.size_bytes, e.key.nranks, e.key.nnodes)
        calls[k] += e.calls
        if e.key.datatype:
            dtypes[k].add(e.key.datatype)
        med = e.timing.median_us if e.timing is not None and e.timing.calls else None
        if med is not None and e.calls > job.get(k, (-1, None, None))[0]:
            job[k] = (e.calls, med, e.wait.median_us if e.wait is not None else None)
    return [WPoint(c, s, r, n, calls[(c, s, r, n)], tuple(sorted(dtypes[(c, s, r, n)])),
                   *job.get((c, s, r, n), (0, None, None))[1:])
            for (c, s, r, n) in sorted(calls, key=lambda k: (k[0], k[2], k[3] or 0, k[1]))]


def op_notes(wl: Workload, rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """A reduction the job issues in one op measured only in another (issue 30): the sweep's rows at its collective,
    size and ranks carry no row in the job's op (a sweep before ops were carried, or with -o)."""
    measured: dict[tuple[str, int, int], set[str]] = {}
    for r in rows:
        if r.get("op"):
            measured.setdefault((r["collective"], int(r["size_bytes"]), int(r["n_ranks"])), set()).add(r["op"])
    out = []
    for e in wl.entries:
        got = measured.get((e.key.collective, e.key.size_bytes, e.key.nranks))
        if e.key.op and got and e.key.op not in got:
            out.append(f"{e.key.collective} {e.key.size_bytes} B on {e.key.nranks} ranks: the job reduces with "
                       f"{e.key.op}, measured with {', '.join(sorted(got))} (sweep --workload measures in the job's op)")
    return list(dict.fromkeys(out))


def plan(wl: Workload, derivation: Derivation, *, min_share: float = 0.0,
         dtypes: Mapping[tuple[str, str, int, int, int], Iterable[str]] | None = None,
         under_load: bool = False) -> list[WorkloadPlan]:
    """One :class:`WorkloadPlan` per GPU model the derivation measured (module doc).

    ``dtypes``: (gpu, collective, n_ranks, n_nodes, size_bytes) -> datatypes measured there, to note a
    workload datatype the measurements did not use. ``under_load``: the derivation's rows were
    measured under load (rule 5 then lets a point the job runs slowly have its rule).
    """
    if not 0 <= min_share < 1:
        raise DataError(f"min_share must be in [0, 1), got {min_share}")
    by_gpu: dict[tuple[str, str, str], dict[tuple[str, int, int], GroupResult]] = defaultdict(dict)
    for g in derivation.groups:  # one plan per platform section: GPU model and AMD partition modes
        by_gpu[(g.key.gpu, g.key.partition, g.key.nps)][(g.key.collective, g.key.n_ranks, g.key.n_nodes)] = g
    points = workload_points(wl)
    per_step = float(wl.steps or 1)
    return [_plan_gpu(gpu, groups, points, per_step, wl.steps, min_share, dtypes or {}, modes=(part, nps),
                      under_load=under_load)
            for (gpu, part, nps), groups in sorted(by_gpu.items())]


def _first_verdicts(gpu: str, groups: dict[tuple[str, int, int], GroupResult], points: list[WPoint],
                    per_step: float, dtypes: Mapping[tuple[str, str, int, int, int], Iterable[str]]
                    ) -> tuple[list[PointVerdict], dict[int, tuple[GroupResult, CommConfig]], list[str]]:
    """Each point judged on the sweep alone (``_judge``), before noise and share weigh in; the points
    whose size a configuration won, by index: (group, winner); and the notes on datatypes the job
    issues that were not measured."""
    first: list[PointVerdict] = []
    winners: dict[int, tuple[GroupResult, CommConfig]] = {}
    notes: list[str] = []
    for p in points:
        v, hit = _judge(p, groups, per_step)
        if hit is not None:
            g, d = hit
            measured = set(dtypes.get((gpu, g.key.collective, g.key.n_ranks, g.key.n_nodes, p.size_bytes), ()))
            if measured and p.datatypes and not set(p.datatypes) <= measured:
                notes.append(f"{p.collective} {p.size_bytes} B on {p.n_ranks} ranks: the job issues "
                             f"{', '.join(p.datatypes)}, measured with {', '.join(sorted(measured))}")
            if d.winner is not None:
                winners[len(first)] = (g, d.winner)
        first.append(v)
    return first, winners, notes


def _plan_gpu(gpu: str, groups: dict[tuple[str, int, int], GroupResult], points: list[WPoint], per_step: float,
              steps: int | None, min_share: float, dtypes: Mapping[tuple[str, str, int, int, int], Iterable[str]],
              modes: tuple[str, str] = ("", ""), under_load: bool = False) -> WorkloadPlan:
    first, winners, notes = _first_verdicts(gpu, groups, points, per_step, dtypes)
    total = sum(v.default_us for v in first)
    passing: dict[int, tuple[GroupResult, CommConfig, float]] = {}  # beyond twice the noise: (group, winner, saving)
    for i, (g, w) in list(winners.items()):
        v = first[i]
        slow = _job_slow(v)
        if slow is not None and not under_load:
            first[i] = PointVerdict(v.point, JOB_SLOW, slow, v.default, CommConfig(), v.default, per_step)
            notes.append(f"{v.point.collective} {v.point.size_bytes} B: {slow}")
            continue
        base = v.default
        assert base is not None, "a winner's point has NCCL's default measured (_judge)"
        won = g.decisions[_index(g, v.point.size_bytes)].candidates[w]
        saving = v.point.calls * (base.median_us - won.median_us) / per_step
        noise = v.point.calls * (base.median_us * base.noise + won.median_us * won.noise) / per_step
        if saving < NOISE_MULTIPLE * noise:
            first[i] = PointVerdict(v.point, IN_NOISE, f"saves {saving:.1f} +- {noise:.1f} us per step: under "
                                    f"{NOISE_MULTIPLE:g} x its own noise, no rule", v.default, v.selected,
                                    v.selected_stats, per_step)
            continue
        passing[i] = (g, w, saving)
    rules: list[Rule] = []
    for key, run in _runs(points, groups, passing):
        g, w, _ = passing[run[0]]
        saving = sum(passing[i][2] for i in run)
        if total > 0 and saving < min_share * total:
            for i in run:
                v = first[i]
                together = (f" with {', '.join(f'{first[j].point.size_bytes} B' for j in run if j != i)} (one rule: "
                            "the same winner)" if len(run) > 1 else "")
                first[i] = PointVerdict(v.point, SMALL, f"saves {saving:.2f} us per step{together}, under "
                                        f"{100 * min_share:g}% of the {total:.1f} us default", v.default, v.selected,
                                        v.selected_stats, per_step)
            continue
        rules.append(Rule(collectives.PLUGIN_NAMES[key[0]], points[run[0]].size_bytes, points[run[-1]].size_bytes,
                          w.algo or NCCL_CHOICE, w.proto or NCCL_CHOICE, w.channels or ANY, key[2], key[1],
                          platform=g.key.platform))
        notes.extend(_left_beside(first, winners, _members(points, key), run, w))
    if not under_load:  # say so where no rule was at stake too: the prediction is an idle GPU's
        slow_at = [(v, ratio) for v in first if v.status != JOB_SLOW and _job_slow(v) is not None
                   and (ratio := _job_ratio(v)) is not None]
        if slow_at:
            notes.append("the job's calls take at least x" + f"{quantities.SLOW_RATIO:g} the idle time at "
                         + ", ".join(f"{v.point.collective} {v.point.size_bytes} B (x{ratio:.1f})" for v, ratio in slow_at)
                         + ": the predicted times are an idle GPU's, not the job's")
    verdicts = [_apply(v, RuleSet(rules), groups, per_step) for v in first]
    label = gpu + "".join(f" {k}={m}" for k, m in zip(("partition", "nps"), modes) if m)
    return WorkloadPlan(label, verdicts, rules, steps, notes, under_load)


def _members(points: list[WPoint], key: tuple[str, int, int]) -> list[int]:
    """The indices of the points one rule of ``key`` (collective, ranks, nodes) could reach, by size: those of its
    collective and ranks on its node count or on an unknown one."""
    c, r, n = key
    return sorted((i for i, p in enumerate(points) if p.collective == c and p.n_ranks == r and p.n_nodes in (None, n)),
                  key=lambda i: points[i].size_bytes)


def _runs(points: list[WPoint], groups: Mapping[tuple[str, int, int], GroupResult],
          passing: Mapping[int, tuple[GroupResult, CommConfig, float]]) -> list[tuple[tuple[str, int, int], list[int]]]:
    """The points one rule covers (module doc, point 3): per group, runs of the job's consecutive sizes that all pass
    the noise test with the same winner, each within ``NEAR`` of the one before; any other point of the group
    between them (unmeasured, NCCL's default kept, in the noise, another winner) ends the run."""
    out: list[tuple[tuple[str, int, int], list[int]]] = []
    for key in sorted(groups):
        run: list[int] = []
        for i in _members(points, key):
            hit = passing.get(i)
            if hit is None or hit[0].key != groups[key].key:
                run = []
                continue
            if run and passing[run[-1]][1] == hit[1] and points[i].size_bytes <= NEAR * points[run[-1]].size_bytes:
                run.append(i)
            else:
                run = [i]
                out.append((key, run))
    return out


def _left_beside(first: list[PointVerdict], winners: Mapping[int, tuple[GroupResult, CommConfig]],
                 members: list[int], run: list[int], w: CommConfig) -> list[str]:
    """Why the job's sizes next to a rule (within ``NEAR``) are left to NCCL (issue 38: the 64 MiB rule beside the
    job's main 67,125,248 B bucket, which it did not cover, without a word)."""
    at = members.index(run[0]), members.index(run[-1])
    lo, hi = first[run[0]].point.size_bytes, first[run[-1]].point.size_bytes
    rule = f"{lo} B" if lo == hi else f"{lo}-{hi} B"
    out = []
    for k, edge in ((at[0] - 1, lo), (at[1] + 1, hi)):
        if not 0 <= k < len(members) or members[k] in run:
            continue
        v = first[members[k]]
        size = v.point.size_bytes
        if v.status == RULE or max(size, edge) > NEAR * max(1, min(size, edge)):
            continue
        same = (f"; its own winner is the same ({w.label})"
                if members[k] in winners and winners[members[k]][1] == w else "")
        out.append(f"{v.point.collective} {size} B ({v.point.calls} calls) is left to NCCL beside the rule for {rule} "
                   f"({w.label}): {v.status}: {v.reason}{same}")
    return out


def _job_ratio(v: PointVerdict) -> float | None:
    """The job's time per call over NCCL's default's idle one at this point; None where either is not known."""
    p = v.point
    if p.job_us is None or v.default is None or v.default.median_us <= 0:
        return None
    return p.job_us / v.default.median_us


def _job_slow(v: PointVerdict) -> str | None:
    """Why an idle winner is no evidence for the job at this point (rule 5), or None."""
    p = v.point
    if p.job_us is None or v.default is None or v.default.median_us <= 0:
        return None
    ratio = p.job_us / v.default.median_us
    if ratio < quantities.SLOW_RATIO:
        return None
    waiting = f", {p.wait_us:.1f} us of it waiting for the last rank" if p.wait_us is not None else ""
    return (f"in the job a call takes {p.job_us:.1f} us (median{waiting}), x{ratio:.1f} NCCL's default idle "
            f"({v.default.median_us:.1f} us): the idle winner is no evidence for the job; no rule, no gain "
            "predicted. Sweep and tune under load (`sweep --workload` does so by default, `tune --under-load M`)")


def _index(g: GroupResult, size: int) -> int:
    return next(i for i, d in enumerate(g.decisions) if d.size_bytes == size)


def _judge(p: WPoint, groups: Mapping[tuple[str, int, int], GroupResult], per_step: float
           ) -> tuple[PointVerdict, tuple[GroupResult, SizeDecision] | None]:
    if p.collective not in collectives.PLUGIN_NAMES:
        return PointVerdict(p, UNTUNABLE, f"NCCL does not pass {p.collective} to a tuner", per_step=per_step), None
    if p.n_ranks < 2:
        return PointVerdict(p, ONE_RANK, "NCCL does not consult a tuner with one rank", per_step=per_step), None
    nodes = sorted(n for (c, r, n) in groups if c == p.collective and r == p.n_ranks)
    if p.n_nodes is None and len(nodes) > 1:
        return PointVerdict(p, AMBIGUOUS, f"node count unknown (import the log with NCCL_DEBUG_SUBSYS=INIT,COLL) "
                            f"and {p.n_ranks} ranks were measured on {'/'.join(map(str, nodes))} nodes",
                            per_step=per_step), None
    n_nodes = p.n_nodes if p.n_nodes is not None else (nodes[0] if nodes else 1)
    g = groups.get((p.collective, p.n_ranks, n_nodes))
    d = next((d for d in g.decisions if d.size_bytes == p.size_bytes), None) if g else None
    if g is None or d is None:
        return PointVerdict(p, UNMEASURED, f"no measurement of NCCL's default at exactly {p.size_bytes} B on "
                            f"{p.n_ranks} ranks, {n_nodes} node(s): run `ccltune sweep --workload`",
                            per_step=per_step), None
    base = nccl_best(d.default, d.candidates)
    if d.winner is None:
        why = "no configuration beat NCCL's default beyond the noise"
        return PointVerdict(p, DEFAULT_KEPT, why, base, CommConfig(), base, per_step), (g, d)
    return PointVerdict(p, RULE, f"{d.winner.label} beats NCCL's default beyond the noise", base, d.winner,
                        d.candidates[d.winner], per_step), (g, d)


def _apply(v: PointVerdict, ruleset: RuleSet, groups: Mapping[tuple[str, int, int], GroupResult],
           per_step: float) -> PointVerdict:
    """What the plugin selects for this point under the final rules, and its measured time (a point
    whose default was not measured as it was)."""
    if v.default is None:
        return v
    p = v.point
    n_nodes = next(n for (c, r, n), g in groups.items() if c == p.collective and r == p.n_ranks
                   and (p.n_nodes is None or n == p.n_nodes))
    g = groups[(p.collective, p.n_ranks, n_nodes)]
    d = g.decisions[_index(g, p.size_bytes)]
    m = match(ruleset, Query(p.collective, p.size_bytes, p.n_ranks, n_nodes, platform=g.key.facts))
    sel = CommConfig(m.algo, m.proto, m.channels or None)
    if sel.is_default:
        status = v.status if v.status != RULE else DEFAULT_KEPT
        return PointVerdict(p, status, v.reason, v.default, sel, v.default, per_step)
    stats = d.candidates.get(sel)
    if stats is None or beats(stats, v.default):
        raise DataError(f"{p.collective} {p.size_bytes} B on {p.n_ranks} ranks: the rules select {sel.label}, "
                        + ("never measured there" if stats is None else "slower than NCCL's default beyond noise")
                        + " (a bug in tune --workload)")
    return PointVerdict(p, RULE, v.reason, v.default, sel, stats, per_step)


def summary(p: WorkloadPlan) -> dict[str, object]:
    """Plain numbers for the tune run's record and the report."""
    return {"gpu": p.gpu, "steps": p.steps, "default_us_per_step": round(p.default_us, 3),
            "default_noise_us": round(p.default_noise_us, 3), "rules_us_per_step": round(p.rules_us, 3),
            "rules_noise_us": round(p.rules_noise_us, 3), "gain_noise_us": round(p.gain_noise_us, 3),
            "rules": len(p.rules),
            "points": [{"collective": v.point.collective, "size_bytes": v.point.size_bytes,
                        "n_ranks": v.point.n_ranks, "n_nodes": v.point.n_nodes, "calls": v.point.calls,
                        "status": v.status, "config": v.selected.label if v.selected else None,
                        "job_us": None if v.point.job_us is None else round(v.point.job_us, 3),
                        "wait_us": None if v.point.wait_us is None else round(v.point.wait_us, 3),
                        "default_us_per_step": round(v.default_us, 3), "rules_us_per_step": round(v.rules_us, 3)}
                       for v in p.verdicts]}


def lines(p: WorkloadPlan) -> list[str]:
    """The prediction as text: totals with their uncertainty, the sizes that carry the gain, every point."""
    unit = "step" if p.steps else "captured run (steps unknown)"
    gain = p.default_us - p.rules_us
    pct = f" ({100 * gain / p.default_us:.1f}%)" if p.default_us else ""
    out = [f"# gpu {p.gpu}: predicted communication time per {unit}: NCCL default {p.default_us:.1f} "
           f"+- {p.default_noise_us:.1f} us, with the rules {p.rules_us:.1f} +- {p.rules_noise_us:.1f} us; "
           f"saves {gain:.1f} +- {p.gain_noise_us:.1f} us{pct}",
           f"# (sum of calls x the sweep's median per call, each size timed alone{', ' + p.mode if p.mode else ''}"
           f"{', under load' if p.under_load else ', idle GPU'}, "
           f"back to back{' / steps' if p.steps else ''}: the time between the job's calls is not in it; "
           "`ccltune replay` times the captured order)"]
    measured = len(p.measured)
    if measured < len(p.verdicts):
        out.append(f"# {measured} of {len(p.verdicts)} points measured; the others are not in the prediction")
    carriers = p.carriers()
    if carriers:
        out.append("# the gain is carried by: " + ", ".join(
            f"{v.point.collective} {v.point.size_bytes} B ({v.selected.label if v.selected else v.reason}, {v.saving_us:.1f} us/{'step' if p.steps else 'run'}"
            f"{f', {100 * v.saving_us / gain:.0f}%' if gain > 0 else ''})" for v in carriers))
    out.append(f"# {'collective':<15}{'size_bytes':>12}{'ranks':>6}{'nodes':>6}{'calls':>8} {'status':<11}"
               f"{'default_us':>11}{'rules_us':>10}  config / reason")
    for v in p.verdicts:
        q = v.point
        times = (f"{v.default_us:>11.1f}{v.rules_us:>10.1f}" if v.default else f"{'-':>11}{'-':>10}")
        what = v.selected.label if v.status == RULE and v.selected else v.reason
        out.append(f"  {q.collective:<15}{q.size_bytes:>12}{q.n_ranks:>6}{q.n_nodes if q.n_nodes is not None else '-':>6}"
                   f"{q.calls:>8} {v.status:<11}{times}  {what}")
    out.extend(f"# note: {n}" for n in p.notes)
    return out
