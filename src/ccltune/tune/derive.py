"""Measurements -> tuner rules: per group, the winner at each size, merged into size ranges.

A *group* is what one rule line can be keyed on: (GPU model, ranks per NVLink domain, and on AMD
GPUs the compute and memory partition modes the sweep ran in) for the ``platform`` section, then
(collective, nRanks, nNodes). Each size of a group was measured in one datatype, op and graph mode; different
sizes may differ (``sweep --workload`` measures each point as the job issues it), one size in two is an error
naming it. Inside a group:

1. Rows with ``status != 'ok'`` are dropped (an unavailable configuration never wins), and only
   the chosen placement is kept (out-of-place by default).
2. The measured sizes are the sizes where NCCL's default has samples. A candidate *qualifies*
   at a size when it beats the default by more than the noise (:mod:`ccltune.stats`),
   floored at ``min_margin``, and, when it is *isolated* there, by more than
   ``isolated_margin`` too. A candidate is isolated at a size when it does not beat the default
   (by the noise, floored at ``min_margin``) at either neighbouring measured size: a win seen at
   one size only must be large to be believed (docs/tuning.md, "Why an isolated win needs 10%").
   A group measured at one size has no neighbours: every candidate there is isolated. Whatever the percentages, a win must save at least
   ``min_gain_us`` (0.5 µs) per call: below that, two communicators of the same configuration
   differ by as much (launch and synchronisation jitter). The winner is chosen among the qualifying candidates
   (``objective``); none qualifies -> no rule at that size and NCCL stays in charge.
3. Consecutive measured sizes with the same winner merge. Between measured sizes ``a < b`` the
   boundary is ``m = isqrt(a*b)`` (the geometric midpoint, rounded down): ``a``'s range ends at
   ``m`` inclusive, ``b``'s starts at ``m + 1``. The first range starts at the smallest measured
   size and the last ends at the largest one: nothing outside the measured range gets a rule.
   A group measured at one size only gets rules covering exactly that size.

The *twin* (``config`` 'default-twin', measured by ``ccltune sweep`` unless ``--no-twin``) is
NCCL's default again, on a second communicator, interleaved like every candidate. Two
communicators of the same configuration do not time alike at latency-bound sizes (docs/tuning.md,
"The A/A gap"), and every candidate runs on a communicator of its own, so that difference is noise a candidate must beat
too. At each size the *A/A gap* is ``|median(twin) / median(default) - 1|``, and the part of it
beyond both points' own noise (:func:`aa_margin`) is a steady difference between communicators;
the margin a candidate must beat there is at least the largest such part at that size and its
two neighbouring sizes, and it must beat the faster of the default and the twin by that margin.
(A gap inside the noise is a transient in one side's rounds, which the noise term of every
comparison already covers.)
The twin never makes a rule.

A *0-byte* size (a layout rounding a tiny size down: 8 B of float all_gather on 4 ranks is 0 B
a rank) moves no data: NCCL launches nothing that an algorithm, protocol or channel count could
change (its candidates time like the default), and its time sits on no
alpha-beta line. Candidates there make no rule and corroborate none; the default and the twin
still count (the twin's A/A gap enters its neighbour's margin).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccltune import collectives
from ccltune.commconfig import BASELINE, TWIN, TWIN_LABEL, CommConfig
from ccltune.errors import DataError, UsageError
from ccltune.rules import ANY, NCCL_CHOICE, Platform, PlatformFacts, Query, Rule, RuleSet, match
from ccltune.stats import PointStats, beats, point_stats
from ccltune.status import RowStatus
from ccltune.store import as_record

OBJECTIVES = ("time", "sm")
# A win at a size where no neighbouring size corroborates it must exceed this (docs/tuning.md).
ISOLATED_MARGIN = 0.10
# A win must save at least this much time per call: differences of a few hundred nanoseconds are
# launch and synchronisation jitter between communicators, not a property of a configuration.
MIN_GAIN_US = 0.5
PLACEMENTS = ("out-of-place", "in-place", "both")
# Row fields that must be uniform at each size of a group: the tuner ABI cannot tell them apart (sizes apart it can).
_UNIFORM = ("dtype", "op", "graph")


@dataclass(frozen=True, order=True)
class GroupKey:
    """What one rule line can be keyed on: the platform section, then the communicator."""

    gpu: str
    nvlranks: int | None  # ranks per NVLink domain (n_ranks / n_nodes); None when uneven
    collective: str
    n_ranks: int
    n_nodes: int
    partition: str = ""  # AMD compute partition (CPX, ...) the rows were measured in; "" when none recorded
    nps: str = ""  # AMD memory partition (NPS4, ...)

    @property
    def platform(self) -> Platform:
        # The plugin matches gpu as whole lower-case words of the model name (rules.gpu_names).
        return Platform(gpu=self.gpu.lower(), nvl_ranks=self.nvlranks, partition=self.partition or None,
                        nps=self.nps or None)

    @property
    def facts(self) -> PlatformFacts:
        """The machine facts under which the plugin applies this group's section."""
        return PlatformFacts(gpu=self.gpu, partition=self.partition or None, nps=self.nps or None)

    def __str__(self) -> str:
        modes = "".join(f" {k}={v}" for k, v in (("partition", self.partition), ("nps", self.nps)) if v)
        return f"{self.collective} nranks={self.n_ranks} nnodes={self.n_nodes} gpu={self.gpu}{modes}"


@dataclass(frozen=True)
class SizeDecision:
    """What was decided at one measured size."""

    size_bytes: int
    default: PointStats
    candidates: Mapping[CommConfig, PointStats]
    winner: CommConfig | None  # None: no rule, NCCL's default stays
    qualifying: frozenset[CommConfig] = frozenset()  # the candidates the winner was chosen from

    @property
    def best(self) -> tuple[CommConfig, PointStats] | None:
        """The fastest candidate measured here, whether or not it beat the noise."""
        real = {c: p for c, p in self.candidates.items() if not c.twin}
        if not real:
            return None
        return min(real.items(), key=lambda kv: (kv[1].median_us, kv[0].sort_key()))


@dataclass
class GroupResult:
    key: GroupKey
    decisions: list[SizeDecision]
    rules: list[Rule]


@dataclass
class Derivation:
    groups: list[GroupResult]
    notes: list[str] = field(default_factory=list)

    def sections(self) -> dict[Platform, list[Rule]]:
        """Rules per platform section, in group order (sections never merge)."""
        out: dict[Platform, list[Rule]] = {}
        for g in self.groups:
            out.setdefault(g.key.platform, []).extend(g.rules)
        return out


def gpu_model(env: Mapping[str, Any], platform: str | None = None) -> str:
    """The GPU model a run ran on, as the plugin's ``gpu=`` key spells it ('H200').

    From the run's environment record (``env['gpus'][*]['name']``), else from ``runs.platform``
    ('NVIDIA H200 x4'). Raises DataError when neither says, or the run mixed GPU models.
    """
    names = {str(g.get("name")) for g in env.get("gpus") or [] if g.get("name")}
    if len(names) > 1:
        raise DataError(f"the run mixed GPU models ({', '.join(sorted(names))}); rules cannot name one platform")
    name = names.pop() if names else None
    if name == "unknown" or (platform or "").startswith("unknown"):
        raise DataError("the run records no GPU model (imported output that names none); import it again"
                        " with --gpu NAME")
    if name is None and platform and not platform.startswith("cpu"):
        name = platform.rsplit(" x", 1)[0] if " x" in platform else platform
    if not name and platform and platform.startswith("cpu"):
        raise DataError(f"the run records no GPU model: it was measured on the CPU ({platform!r}), where a sweep "
                        "times only the library's default, so it has no rules to give; sweep on GPUs with the "
                        "nccl engine")
    if not name:
        raise DataError("the run records no GPU model (env gpus, runs.platform); cannot place its rules"
                        " under a platform section")
    for vendor in ("NVIDIA ", "AMD "):
        if name.startswith(vendor):
            name = name[len(vendor):]
    if "," in name or "=" in name:
        raise DataError(f"GPU model {name!r} contains ',' or '=', which a platform line cannot hold")
    return name.strip()


def size_ranges(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Inclusive byte range per measured size: boundaries at isqrt(a*b), see the module doc."""
    s = sorted(set(sizes))
    if not s:
        return []
    mids = [math.isqrt(a * b) for a, b in zip(s, s[1:])]
    lows = [s[0], *(m + 1 for m in mids)]
    highs = [*mids, s[-1]]
    return list(zip(lows, highs))


def qualifying(default: PointStats, candidates: Mapping[CommConfig, PointStats], *, min_margin: float = 0.02,
               isolated_margin: float = ISOLATED_MARGIN,
               corroborated: Collection[CommConfig] = frozenset()) -> dict[CommConfig, PointStats]:
    """The candidates that may make a rule at one size (see the module doc).

    Each must beat the default beyond the noise floored at ``min_margin``; one not in
    ``corroborated`` (it does not beat the default at a neighbouring size) must also beat it by
    more than ``isolated_margin``.
    """
    out = {}
    for c, s in candidates.items():
        if c.is_default or c.twin:
            continue
        floor = min_margin if c in corroborated else max(min_margin, isolated_margin)
        if beats(default, s, floor):
            out[c] = s
    return out


def decide(default: PointStats, candidates: Mapping[CommConfig, PointStats], *, objective: str = "time",
           sm_tolerance: float = 0.02, min_margin: float = 0.02, isolated_margin: float = ISOLATED_MARGIN,
           corroborated: Collection[CommConfig] = frozenset()) -> CommConfig | None:
    """The winner at one size among the :func:`qualifying` candidates, or None when none qualifies.

    ``time``: the fastest of them. ``sm``: among them, the ones within ``sm_tolerance`` of the
    fastest; the fewest channels wins (a candidate leaving channels to NCCL counts as more than
    any fixed count), then the fastest. With ``corroborated`` left empty every candidate counts
    as isolated: the decision for a size measured alone.
    """
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    good = list(qualifying(default, candidates, min_margin=min_margin, isolated_margin=isolated_margin,
                           corroborated=corroborated).items())
    if not good:
        return None
    fastest = min(good, key=lambda cs: (cs[1].median_us, cs[0].sort_key()))
    if objective == "time":
        return fastest[0]
    limit = fastest[1].median_us * (1.0 + sm_tolerance)
    near = [(c, s) for c, s in good if s.median_us <= limit]
    return min(near, key=lambda cs: (cs[0].channels or math.inf, cs[1].median_us, cs[0].sort_key()))[0]


SizePoints = tuple[PointStats, Mapping[CommConfig, PointStats]]  # (default, candidates) at one size


def decide_sizes(points: Mapping[int, SizePoints], *, objective: str = "time", sm_tolerance: float = 0.02,
                 min_margin: float = 0.02, isolated_margin: float = ISOLATED_MARGIN,
                 min_gain_us: float = MIN_GAIN_US) -> dict[int, tuple[CommConfig | None, frozenset[CommConfig]]]:
    """size -> (winner, qualifying candidates) for one group's measured sizes.

    ``points`` maps every measured size (the default measured there) to its (default,
    candidates). A candidate is corroborated at a size when it beats the default (noise floored
    at ``min_margin``) at the next smaller or the next larger measured size; the decision is
    :func:`decide`'s. ``derive`` and the model-guided planner both decide through this function.
    """
    sizes = sorted(points)
    gaps = [aa_margin(*points[s]) for s in sizes]
    out: dict[int, tuple[CommConfig | None, frozenset[CommConfig]]] = {}
    for i, size in enumerate(sizes):
        default, cands = points[size]
        near = [g for g in gaps[max(0, i - 1):i + 2] if g is not None]
        floor = max([min_margin, *near, min_gain_us / default.median_us])
        default = nccl_best(default, cands)
        corroborated = set()
        for j in (i - 1, i + 1):
            if 0 <= j < len(sizes):
                nd, nc = points[sizes[j]]
                nd = nccl_best(nd, nc)
                corroborated |= {c for c, p in nc.items() if not (c.is_default or c.twin) and beats(nd, p, floor)}
        winner = decide(default, cands, objective=objective, sm_tolerance=sm_tolerance, min_margin=floor,
                        isolated_margin=isolated_margin, corroborated=corroborated)
        out[size] = (winner, frozenset(qualifying(default, cands, min_margin=floor,
                                                  isolated_margin=isolated_margin, corroborated=corroborated)))
    return out


def nccl_best(default: PointStats, candidates: Mapping[CommConfig, PointStats]) -> PointStats:
    """What a candidate must beat at one size: NCCL's default, or its twin where that was faster.
    Both are NCCL's own choice; a candidate only as fast as the faster of them shows that one
    communicator was slow, not that NCCL chose badly (docs/tuning.md, "The A/A gap")."""
    twin = candidates.get(TWIN)
    return twin if twin is not None and twin.median_us < default.median_us else default


def aa_gap(default: PointStats, candidates: Mapping[CommConfig, PointStats]) -> float | None:
    """|median(twin) / median(default) - 1| at one size; None when the twin was not measured."""
    twin = candidates.get(TWIN)
    return abs(twin.median_us / default.median_us - 1.0) if twin else None


def aa_margin(default: PointStats, candidates: Mapping[CommConfig, PointStats]) -> float | None:
    """The part of the A/A gap beyond both points' own noise (0 when the gap is inside it); None
    when the twin was not measured. A steady difference between two communicators has a small
    spread and counts whole (latency-bound sizes); a gap made by a transient in one side's rounds
    comes with that side's spread and counts only beyond it: counted whole, such transients bar
    real wins (docs/tuning.md, "The A/A gap")."""
    gap = aa_gap(default, candidates)
    return None if gap is None else max(0.0, gap - (candidates[TWIN].noise + default.noise))


def merge_ranges(sizes: Sequence[int], winners: Sequence[CommConfig | None]) -> list[tuple[int, int, CommConfig]]:
    """(min_bytes, max_bytes, winner) for runs of consecutive sizes with the same winner."""
    out: list[tuple[int, int, CommConfig]] = []
    prev: CommConfig | None = None
    for (lo, hi), w in zip(size_ranges(sizes), winners):
        if w is not None and w == prev:
            out[-1] = (out[-1][0], hi, w)
        elif w is not None:
            out.append((lo, hi, w))
        prev = w
    return out


def tunable(size_bytes: int, cand: CommConfig) -> bool:
    """Whether ``cand`` is worth timing at ``size_bytes``: NCCL's default and its twin always; a candidate
    only where bytes move (at 0 B NCCL launches nothing a choice could change; module doc)."""
    return size_bytes > 0 or cand.is_default or cand.twin


def candidate_of(row: Mapping[str, Any]) -> CommConfig:
    if row.get("config") == TWIN_LABEL:
        return TWIN
    return CommConfig(row.get("algo") or None, row.get("proto") or None, row.get("channels") or None)


def usable(row: Mapping[str, Any], placement: str = "out-of-place") -> bool:
    """An 'ok' row with a time, in the chosen placement."""
    if placement not in PLACEMENTS:
        raise UsageError(f"--placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    if row.get("status", RowStatus.OK) != RowStatus.OK or not row.get("time_us") or row["time_us"] <= 0:
        return False
    in_place = bool(row.get("in_place"))
    return placement == "both" or in_place == (placement == "in-place")


def samples_by_size(rows: Iterable[Any], placement: str = "out-of-place") -> dict[int, dict[CommConfig, list[float]]]:
    """size -> candidate -> times (µs) of the usable rows (one group's rows)."""
    out: dict[int, dict[CommConfig, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in map(as_record, rows):
        if usable(row, placement):
            out[int(row["size_bytes"])][candidate_of(row)].append(float(row["time_us"]))
    return out


def derive(rows: Iterable[Any], *, objective: str = "time", sm_tolerance: float = 0.02,
           min_margin: float = 0.02, isolated_margin: float = ISOLATED_MARGIN, min_gain_us: float = MIN_GAIN_US,
           placement: str = "out-of-place", exclude: Collection[tuple[str, int, int, int]] = ()) -> Derivation:
    """Rules from measurement rows (dicts or Measurements), each carrying a ``gpu`` model.

    ``exclude``: (collective, n_ranks, n_nodes, size_bytes) where no rule may be placed (NCCL
    decides there), e.g. the sizes where ``ccltune validate`` found the rules slower.

    Raises DataError for a group with candidates but no default, rows without a GPU model, or a
    size of a group measured in two datatypes, ops or graph modes (the rule file cannot tell them apart;
    different sizes measured in different ones it can, by their size ranges).
    """
    notes: list[str] = []
    grouped: dict[GroupKey, list[Mapping[str, Any]]] = defaultdict(list)
    skipped: dict[str, int] = defaultdict(int)
    for row in map(as_record, rows):
        coll = row["collective"]
        if coll not in collectives.PLUGIN_NAMES:
            skipped[coll] += 1
            continue
        if not row.get("gpu"):
            raise DataError(f"a {coll} row of run {row.get('run_id', '?')} has no GPU model; cannot tell its platform")
        n_ranks, n_nodes = int(row["n_ranks"]), int(row.get("n_nodes") or 1)
        nvl = n_ranks // n_nodes if n_ranks % n_nodes == 0 else None
        grouped[GroupKey(row["gpu"], nvl, coll, n_ranks, n_nodes, row.get("partition") or "",
                         row.get("nps") or "")].append(row)
    for coll, n in sorted(skipped.items()):
        notes.append(f"{n} {coll} rows skipped: NCCL does not pass {coll} to a tuner")

    opts = {"objective": objective, "sm_tolerance": sm_tolerance, "min_margin": min_margin,
            "isolated_margin": isolated_margin, "min_gain_us": min_gain_us}
    excluded = {(c, int(r), int(n), int(s)) for c, r, n, s in exclude}
    groups = [_derive_group(key, grouped[key], opts, placement, notes, excluded) for key in sorted(grouped)]
    return Derivation(groups, notes)


def _check_uniform(key: GroupKey, rows: Iterable[Mapping[str, Any]]) -> None:
    """Each size of a group measured in one datatype, op and graph mode (``_UNIFORM``). Different sizes may
    differ (a job's 4 B barrier in float and op sum, its 40 B all_reduce in max, its buckets in bfloat16:
    ``sweep --workload`` measures each point as the job issues it): a rule's size range tells them apart.
    Two values at one size are a real conflict: a rule there would apply to both, measured as one."""
    seen: dict[str, dict[int, dict[str, set[str]]]] = {col: defaultdict(lambda: defaultdict(set)) for col in _UNIFORM}
    for r in rows:
        for col in _UNIFORM:
            seen[col][int(r["size_bytes"])][str(r.get(col))].add(str(r.get("run_id", "?")))
    for col in _UNIFORM:
        mixed = {size: v for size, v in sorted(seen[col].items()) if len(v) > 1}
        if mixed:
            shown = "; ".join(f"{size} B: " + ", ".join(f"{value} (run {', '.join(sorted(runs))})"
                                                        for value, runs in sorted(v.items()))
                              for size, v in list(mixed.items())[:3])
            more = f" (and {len(mixed) - 3} more sizes)" if len(mixed) > 3 else ""
            raise DataError(f"group {key} mixes {col} values at one size ({shown}{more}); one rule covers them all"
                            " and the tuner cannot tell them apart: pick the runs of one with --runs")


def _derive_group(key: GroupKey, rows: list[Mapping[str, Any]], opts: dict[str, Any], placement: str,
                  notes: list[str], excluded: Collection[tuple[str, int, int, int]] = ()) -> GroupResult:
    _check_uniform(key, rows)
    by_size = samples_by_size(rows, placement)
    sizes = sorted(s for s, c in by_size.items() if BASELINE in c)
    if not sizes:
        raise DataError(f"group {key} has no usable {placement} measurements of NCCL's default"
                        " (config 'default'); measure it alongside the candidates")
    orphans = sorted(set(by_size) - set(sizes))
    if orphans:
        notes.append(f"{key}: {len(orphans)} sizes have candidates but no default; no rule there")
    if len(sizes) == 1:
        notes.append(f"{key}: only one size measured ({sizes[0]} B); a rule there covers that size only and"
                     " needs the isolated margin")
    points = {}
    for size in sizes:
        stats = {c: point_stats(t) for c, t in by_size[size].items() if tunable(size, c)}
        points[size] = (stats.pop(BASELINE), stats)
    gaps = {s: g for s in sizes if (g := aa_gap(*points[s])) is not None}
    if gaps:
        worst = max(gaps, key=lambda s: gaps[s])
        notes.append(f"{key}: A/A gap (NCCL's default on two communicators) median "
                     f"{100 * sorted(gaps.values())[len(gaps) // 2]:.1f}%, largest {100 * gaps[worst]:.1f}% at "
                     f"{worst} B: a candidate must beat that (and its neighbours') too")
    decided = decide_sizes(points, **opts)
    dropped = [s for s in sizes if (key.collective, key.n_ranks, key.n_nodes, s) in excluded and decided[s][0]]
    for s in dropped:
        decided[s] = (None, frozenset())
    if dropped:
        notes.append(f"{key}: no rule at {', '.join(map(str, dropped))} B (excluded: failed validate)")
    decisions = [SizeDecision(s, *points[s], *decided[s]) for s in sizes]
    coll = collectives.PLUGIN_NAMES[key.collective]
    rules = [Rule(coll, lo, hi, w.algo or NCCL_CHOICE, w.proto or NCCL_CHOICE, w.channels or ANY,
                  key.n_nodes, key.n_ranks, platform=key.platform)
             for lo, hi, w in merge_ranges(sizes, [d.winner for d in decisions])]
    return GroupResult(key, decisions, rules)


@dataclass(frozen=True)
class SizeGain:
    size_bytes: int
    available: float  # time saving of the fastest qualifying candidate (else the fastest) over the default
    significant: bool  # some candidate qualifies (beats the default beyond noise; isolated: beyond the margin)
    selected: CommConfig  # what the rules select here (BASELINE when no rule matches)
    captured: float  # the selected configuration's time saving over the default
    slower: bool  # the selected configuration is slower than the default beyond noise


@dataclass(frozen=True)
class GainReport:
    sizes: list[SizeGain]

    @property
    def capture(self) -> float | None:
        """Share of the significant available saving the rules capture (None: nothing to capture)."""
        avail = sum(s.available for s in self.sizes if s.significant)
        if avail <= 0:
            return None
        return sum(s.captured for s in self.sizes if s.significant) / avail

    @property
    def slower_sizes(self) -> list[int]:
        return [s.size_bytes for s in self.sizes if s.slower]


def account_gain(group: GroupResult, rules: Sequence[Rule] | None = None) -> GainReport:
    """Per measured size: the available saving vs the saving the rules capture.

    The available saving is the fastest *qualifying* candidate's (``SizeDecision.qualifying``:
    what ``derive`` may make a rule of, under the settings the group was derived with), so an
    isolated small win the rules deliberately leave alone is not counted as missed.

    What the rules select is decided by :func:`ccltune.rules.match` (the plugin's first-match
    semantics), so rules read back from a file are accounted as the plugin would apply them.

    Savings are ``1 - t/t_default`` (fractions), so sizes weigh alike whatever their time.
    ``rules`` defaults to the group's own; a rule selecting a configuration not measured at a
    size counts as capturing nothing there.
    """
    ruleset = RuleSet(list(group.rules if rules is None else rules))
    key = group.key
    out = []
    for d in group.decisions:
        q = Query(key.collective, d.size_bytes, key.n_ranks, key.n_nodes, platform=key.facts)
        m = match(ruleset, q)
        selected = CommConfig(m.algo, m.proto, m.channels or None)
        significant = bool(d.qualifying)
        pool = {c: d.candidates[c] for c in d.qualifying} if significant else d.candidates
        best = min(pool.values(), key=lambda p: p.median_us, default=None)
        available = 1.0 - best.median_us / d.default.median_us if best else 0.0
        sel = d.default if selected.is_default else d.candidates.get(selected)
        captured = 1.0 - sel.median_us / d.default.median_us if sel else 0.0
        slower = sel is not None and beats(sel, d.default)
        out.append(SizeGain(d.size_bytes, available, significant, selected, captured, slower))
    return GainReport(out)
