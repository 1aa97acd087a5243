"""The GPU step period per arm and per block, from one profiler file's call lines (pure: no I/O).

A *step* is one period of the job's sequence of collectives. Its GPU period is the time from the GPU
start of one call of the step to the GPU start of the same call (the same place in the step's call
sequence) in the next step, from the profiler's kernel-channel timestamps (docs/profiler.md): it needs
nothing from the job, and one rank's GPU timer offset cancels out. The steps are found either

- by an *anchor* (default): a call key that occurs once per step. A key is what the job asked for
  (kind, op, count, datatype, peer), not what NCCL ran (algorithm, protocol, channels, warps), which
  an arm changes. :func:`find_anchor` takes the key that splits the calls into the most steps whose
  consecutive contents agree (see there); or
- by a *period* given in calls (``period=``): steps start every ``period`` call lines from the first.
  A job whose step repeats a single key (the tensor-parallel decode capture: 256 all_reduces of one
  size, a barrier only in some steps) makes the anchor that key and the "steps" its repeats (a note
  says so): each block's mean is then its time over its calls, the same ratio between arms; pass the
  period for the step itself.

A step belongs to an arm when every call in it ran under that arm (the profiler tags each call with the
arm the tuner had in force at the call's start); a step holding an arm switch belongs to no arm and is
counted in :attr:`GpuPeriods.mixed_steps`. When the tuner switches arms at a step edge other than the
anchor, every block loses one step so. A *block* is a run of consecutive steps of one arm; two blocks of
one arm in a row (a round's last arm drawn first in the next round) read as one, unless ``block_steps``
(the arms file's ``block_periods``) cuts runs into blocks of that many steps (from the run's start; the
file's first run from its end, since its start holds the calls before the tuner knew the period).

The collectives' own GPU time per block and arm (the sum of end - start of the steps' calls) is a
diagnostic, never the judge of an arm that changes the SM budget: fewer channels make the collective
slower and the step faster.

In an in-run ``ab`` (:func:`per_block`), each file's blocks are put on the arm logs' blocks (the schedule) by
their order: the file's runs of one arm are the schedule's runs of one arm, one for one, the first (the calls
before the plugin knew the period, then the warm-up blocks) cut from its end. The GPU timer is not the host's
clock, so the blocks cannot be placed by time; a file whose runs stop following the schedule's arms is used up
to there, and a note says so.

Bounds: :func:`find_anchor` tries at most :data:`MAX_ANCHOR_TRIES` keys; the call lines themselves are
bounded by :mod:`ccltune.workload.profile_file`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from ccltune import stats
from ccltune.ab import inrun_judge
from ccltune.ab.blocks import BlockValue, Span
from ccltune.errors import UsageError
from ccltune.workload.profile_file import NO_ARM, ProfileFile

Key = tuple[str, str, int | None, str | None, int | None]  # kind, op, count, datatype, peer

AGREE = 0.9            # consecutive steps agree when their calls' keys overlap this much (multiset Jaccard)
AGREE_SHARE = 0.95     # ... for at least this share of the consecutive pairs
MIN_STEPS = 2          # an anchor splits the calls into at least this many whole steps
MAX_ANCHOR_TRIES = 64  # keys tried as the anchor, most occurrences first


@dataclass(frozen=True)
class PeriodBlock:
    """Consecutive whole steps of one arm. ``first_call``: the index among the file's call lines of its
    first step's first call; ``steps_ns``: each step's GPU period; ``own_ns``: the GPU time of the
    steps' own collectives (end - start summed over ``calls`` calls)."""

    arm: int
    first_call: int
    steps_ns: tuple[int, ...]
    calls: int
    own_ns: int

    @property
    def period_ns(self) -> float:
        """The block's mean step period: its steps' whole time over their number."""
        return sum(self.steps_ns) / len(self.steps_ns)

    @property
    def median_ns(self) -> float:
        return float(statistics.median(self.steps_ns))


@dataclass(frozen=True)
class ArmPeriod:
    """One arm over all its blocks: ``steps`` whole steps in ``blocks`` blocks, their period's median
    and mean (ns), and the collectives' own GPU time per step (ns, the diagnostic)."""

    arm: int
    blocks: int
    steps: int
    median_ns: float
    mean_ns: float
    own_per_step_ns: float


@dataclass(frozen=True)
class GpuPeriods:
    """One file's steps: how they were found (``anchor`` or ``period``), the blocks in file order, per arm
    (ascending), the steps that held an arm switch, and notes (what the file leaves out)."""

    path: str
    anchor: Key | None
    period: int | None
    blocks: tuple[PeriodBlock, ...]
    arms: tuple[ArmPeriod, ...]
    mixed_steps: int
    notes: tuple[str, ...]

    def arm(self, arm: int) -> ArmPeriod | None:
        return next((a for a in self.arms if a.arm == arm), None)


def call_keys(f: ProfileFile) -> list[Key]:
    """The key of each call line: what the job asked for, the same under every arm."""
    keys = [(e.kind, e.op, e.count, e.datatype, e.peer) for e in f.entries]
    return [keys[entry] for _, entry, _, _ in f.calls]


def _jaccard(a: Counter[Hashable], b: Counter[Hashable]) -> float:
    union = sum((a | b).values())
    return sum((a & b).values()) / union if union else 1.0


def _agree(keys: Sequence[Hashable], starts: Sequence[int]) -> bool:
    contents = [Counter(keys[s:e]) for s, e in zip(starts, starts[1:])]
    pairs = [_jaccard(x, y) for x, y in zip(contents, contents[1:])]
    return not pairs or sum(p >= AGREE for p in pairs) >= AGREE_SHARE * len(pairs)


def find_anchor(keys: Sequence[Hashable]) -> Hashable | None:
    """The key that occurs once per step: of the keys occurring at least ``MIN_STEPS + 1`` times, the one
    with the most occurrences whose steps (the calls from one occurrence to the next) agree, consecutive
    ones sharing at least :data:`AGREE` of their calls' keys in :data:`AGREE_SHARE` of the pairs (a key
    occurring twice per step makes halves that differ; a step with an extra call, a barrier, still
    agrees); ties: the earliest first occurrence. None when no key qualifies."""
    where: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        where.setdefault(k, []).append(i)
    tries = sorted((k for k, at in where.items() if len(at) > MIN_STEPS), key=lambda k: (-len(where[k]), where[k][0]))
    for k in tries[:MAX_ANCHOR_TRIES]:
        if _agree(keys, where[k]):
            return k
    return None


def _usable(f: ProfileFile) -> None:
    if f.timing != "gpu-kernel-channels":
        raise UsageError(f"{f.path}: {f.timing} timing (profiler ABI v{f.abi}): no GPU timestamps, so no GPU step "
                         "period (NCCL 2.27+ gives them)")
    if f.every != 1:
        raise UsageError(f"{f.path}: every {f.every}th call timed: the GPU step period needs every call's start "
                         "(CCLTUNE_PROFILE_EVERY=1)")


def _starts(f: ProfileFile, keys: list[Key], anchor: Key | None, period: int | None) -> tuple[list[int], Key | None]:
    if period is not None:
        if period < 1:
            raise UsageError(f"{f.path}: period {period}: a step has at least 1 call")
        return list(range(0, len(keys), period)), None
    if anchor is None:
        found = find_anchor(keys)
        if found is None:
            raise UsageError(f"{f.path}: no call occurs once per step in its {len(keys)} call lines (no anchor; a "
                             "step that repeats one collective needs its period in calls)")
        anchor = found  # type: ignore[assignment]
    starts = [i for i, k in enumerate(keys) if k == anchor]
    if len(starts) <= MIN_STEPS:
        raise UsageError(f"{f.path}: the anchor {anchor} occurs {len(starts)} time(s): fewer than {MIN_STEPS} whole steps")
    return starts, anchor


def _runs(steps: list[tuple[int, int, int, int, int]]) -> list[list[tuple[int, int, int, int, int]]]:
    """Steps (arm, first call, period, calls, own) into runs of consecutive steps of one arm."""
    runs: list[list[tuple[int, int, int, int, int]]] = []
    for s in steps:
        if runs and runs[-1][-1][0] == s[0] and runs[-1][-1][1] + runs[-1][-1][3] == s[1]:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def _cut(run: list, size: int, from_end: bool) -> list[list]:
    if from_end:
        head = len(run) % size
        return ([run[:head]] if head else []) + [run[i:i + size] for i in range(head, len(run), size)]
    return [run[i:i + size] for i in range(0, len(run), size)]


def gpu_periods(f: ProfileFile, anchor: Key | None = None, period: int | None = None,
                block_steps: int | None = None) -> GpuPeriods:
    """The GPU step period per block and per arm of one file (one rank of one communicator); see the
    module doc. Refused (UsageError naming the file) when the file has no GPU timestamps, timed only
    every Nth call, or has no anchor."""
    _usable(f)
    if block_steps is not None and block_steps < 1:
        raise UsageError(f"{f.path}: block_steps {block_steps}: a block has at least 1 step")
    keys = call_keys(f)
    starts, used = _starts(f, keys, anchor, period)
    arms = f.call_arms
    steps, mixed = [], 0
    for s, e in zip(starts, starts[1:]):
        in_step = set(arms[s:e])
        if len(in_step) != 1:
            mixed += 1
            continue
        own = sum(end - start for _, _, start, end in f.calls[s:e])
        steps.append((in_step.pop(), s, f.calls[e][2] - f.calls[s][2], e - s, own))
    blocks = []
    for i, run in enumerate(_runs(steps)):
        for part in (_cut(run, block_steps, i == 0 and run[0][1] == starts[0]) if block_steps else [run]):
            blocks.append(PeriodBlock(part[0][0], part[0][1], tuple(p[2] for p in part), sum(p[3] for p in part),
                                sum(p[4] for p in part)))
    per_arm = []
    for arm in sorted({b.arm for b in blocks}):
        mine = [b for b in blocks if b.arm == arm]
        periods = [p for b in mine for p in b.steps_ns]
        per_arm.append(ArmPeriod(arm, len(mine), len(periods), float(statistics.median(periods)),
                                 sum(periods) / len(periods), sum(b.own_ns for b in mine) / len(periods)))
    return GpuPeriods(f.path, used, period, tuple(blocks), tuple(per_arm), mixed, tuple(_notes(f, used, starts)))


def _notes(f: ProfileFile, anchor: Key | None, starts: list[int]) -> list[str]:
    notes = []
    if f.arm_source != "tuner":
        notes.append(f"no arms ({f.arm_note or 'none'}): every step is arm {NO_ARM}")
    if f.dropped_calls:
        notes.append(f"the call lines stop after {len(f.calls)} calls ({f.dropped_calls} more timed calls have no "
                     "line, CCLTUNE_PROFILE_CALLS): steps after them are not seen")
    ones = sum(b - a == 1 for a, b in zip(starts, starts[1:]))
    if anchor is not None and 2 * ones >= len(starts) - 1:
        notes.append(f"{ones} of the {len(starts) - 1} steps found are one call of {anchor}: the job's step repeats "
                     "that collective, so these are its repeats, not its steps (a block's mean is still its time "
                     "over its calls; for the step itself give its period in calls)")
    return notes


def _arm_runs(items: Sequence[PeriodBlock]) -> list[list[PeriodBlock]]:
    runs: list[list[PeriodBlock]] = []
    for b in items:
        if runs and runs[-1][-1].arm == b.arm:
            runs[-1].append(b)
        else:
            runs.append([b])
    return runs


def _span_runs(spans: Sequence[Span]) -> list[list[Span]]:
    runs: list[list[Span]] = []
    for s in sorted(spans, key=lambda s: s.index):
        if runs and runs[-1][-1].arm == s.arm and runs[-1][-1].index + 1 == s.index:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def per_block(files: Sequence[ProfileFile], spans: Sequence[Span], block_steps: int
              ) -> tuple[dict[int, list[PeriodBlock]], list[str]]:
    """Each schedule block's GPU step periods, one :class:`PeriodBlock` per file that has it (block index ->
    blocks), and notes: the files left out and why (module doc, "In an in-run ab")."""
    out: dict[int, list[PeriodBlock]] = {}
    notes: list[str] = []
    sched = _span_runs(spans)
    for f in files:
        if f.arm_source != "tuner":
            notes.append(f"{f.path}: no arms ({f.arm_note or 'the tuner shared none'}): left out")
            continue
        try:
            got = gpu_periods(f, block_steps=block_steps)
        except UsageError as exc:
            notes.append(f"{exc}: left out")
            continue
        for i, (mine, theirs) in enumerate(zip(_arm_runs(got.blocks), sched)):
            if mine[0].arm != theirs[0].arm:
                notes.append(f"{f.path}: its run {i + 1} of steps ran arm {mine[0].arm}, the schedule's arm "
                             f"{theirs[0].arm} (block {theirs[0].index}): its blocks from there on are left out")
                break
            pairs = zip(reversed(mine), reversed(theirs)) if i == 0 else zip(mine, theirs)
            for b, s in pairs:
                out.setdefault(s.index, []).append(b)
    return out, notes


@dataclass(frozen=True)
class ArmGpuPeriod:
    """One arm's GPU step period over its judged blocks: the median of its blocks' periods (ms), and its ratio
    to default's, paired by round (None: no round holds a block of both)."""

    name: str
    blocks: int
    median_ms: float | None
    estimate: stats.Estimate | None

    def to_dict(self) -> dict[str, object]:
        e = self.estimate
        out: dict[str, object] = {"arm": self.name, "blocks": self.blocks, "median_ms": self.median_ms}
        if e is not None:
            out.update(ratio=e.ratio, ratio_lo=e.low if e.bounded else None, ratio_hi=e.high if e.bounded else None,
                       level=e.level, pairs=e.n, p_value=e.p_value, test=e.test)
        return out


@dataclass
class GpuDiagnostic:
    """ab --in-run's GPU step period per arm (a diagnostic beside the verdict, never the judge): from ``files``
    profiler files, per judged block the median over the files of the block's mean step period."""

    files: int
    arms: list[ArmGpuPeriod] = field(default_factory=list)
    values: list[BlockValue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"files": self.files, "blocks": len(self.values), "arms": [a.to_dict() for a in self.arms],
                "notes": self.notes, "what": "the GPU step period per block (ms), paired by round with default's "
                                             "(stats.paired, 95%, no correction): a diagnostic, not the verdict"}

    def lines(self) -> list[str]:
        head = (f"# GPU step period per block, from {self.files} profiler file(s) (the same call of consecutive "
                "steps on the GPU's timer): a diagnostic, the verdict above is the job's own metric")
        if not self.values:
            return [head, *[f"#   {n}" for n in self.notes or ["no judged block has a GPU step period"]]]
        out = [head, f"# {'arm':<24} {'blocks':>6} {'median_ms':>11}  {'ratio':>7} {'95% interval':>18} {'p':>8}"]
        for a in self.arms:
            med = "-" if a.median_ms is None else f"{a.median_ms:.5g}"
            e = a.estimate
            if e is None:
                cols = f"{'-':>7} {'-':>18} {'-':>8}"
            else:
                iv = f"[{e.low:.4f}, {e.high:.4f}]" if e.bounded else "[unbounded]"
                cols = f"{e.ratio:7.4f} {iv:>18} {e.p_value:8.3g}"
            out.append(f"  {a.name:<24} {a.blocks:>6} {med:>11}  {cols}")
        out.append("# ratio = arm / default of the GPU step period, paired by round (< 1: shorter steps)")
        out += [f"#   note: {n}" for n in self.notes]
        return out


def diagnostic(files: Sequence[ProfileFile], judged: Sequence[BlockValue], names: Sequence[str],
               block_steps: int, spans: Sequence[Span]) -> GpuDiagnostic:
    """The GPU step period of the blocks ``judged`` by the step metric, per arm against arm 0 (``names[0]``)
    paired by round (module doc, "In an in-run ab")."""
    periods, notes = per_block(files, spans, block_steps)
    values = []
    for v in judged:
        got = periods.get(v.span.index)
        if got:
            values.append(BlockValue(v.span, statistics.median(b.period_ns for b in got) / 1e6,
                                     min(len(b.steps_ns) for b in got)))
    ests = inrun_judge.paired_by_round(values, names) if values else {}
    arms = []
    for i, name in enumerate(names):
        mine = [v.value for v in values if v.span.arm == i]
        arms.append(ArmGpuPeriod(name, len(mine), statistics.median(mine) if mine else None, ests.get(name)))
    if files and not values and not notes:
        notes.append("no judged block of the step metric was found in the profiler files")
    return GpuDiagnostic(len(files), arms, values, notes)
