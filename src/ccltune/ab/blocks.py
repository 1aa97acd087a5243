"""In-run arms: from the arm logs and the job's stamped step lines to one value per block (pure).

A block spans, over every arm log (every rank, every communicator), [the latest start of block b, the earliest
start of block b+1]: ranks switch at the same call, not at the same instant. A step line is stamped when it
arrived; a step spans (the previous line, its line]. Kept in block b: steps that lie wholly inside its span; a
step that straddles an edge is in no block (the switch came while it ran), and when no step straddles a block's
first edge (the switch came exactly between two lines), the block's first step is left out instead. This takes a
step line to be printed after the step's GPU work (a loss.item(), a synchronize), as step timers do. Blocks of the warm-up (the first ``warmup_blocks`` and the warm-up round) and the run's last block
(its end is unknown) are not judged. A block's value is the median of its kept steps.

When a communicator's tuner calls stop (its last block starts) while the job's steps go on for more than
``STALL_BLOCKS`` blocks' time, the job most likely replays CUDA graphs: a graph keeps the choice NCCL made when
it was captured, so in-run arms do not apply to those collectives; ``Blocks.notes`` says so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ccltune import stats
from ccltune.ab import schedule
from ccltune.ab.armsfile import ArmLog
from ccltune.ab.steplines import StepLine
from ccltune.errors import DataError

STALL_BLOCKS = 3


@dataclass(frozen=True)
class Span:
    index: int
    arm: int
    round: int          # schedule.round_of: -2 warm-up blocks, -1 warm-up round, then 0, 1, ...
    place: int
    start_ns: int
    end_ns: int | None  # None: the run's last block


@dataclass(frozen=True)
class BlockValue:
    span: Span
    value: float        # median of the kept steps
    steps: int          # steps kept


@dataclass
class Blocks:
    spans: list[Span] = field(default_factory=list)
    values: list[BlockValue] = field(default_factory=list)   # judged blocks only
    dropped_steps: int = 0
    notes: list[str] = field(default_factory=list)
    graphs: bool = False                                     # tuner calls stopped while steps went on


def spans(logs: Sequence[ArmLog], n_arms: int, warmup_blocks: int, seed: int,
          max_blocks: int | None = None) -> tuple[list[Span], list[str]]:
    """Every block of the run, across the logs (module doc); block ``max_blocks``, when logged, is the plugin's
    end-of-schedule mark (arm 0 from there on). A DataError when logs disagree on an arm."""
    starts: dict[int, list[int]] = {}
    arm_of: dict[int, tuple[int, str]] = {}
    notes: list[str] = []
    for log in logs:
        if len(log.arms) not in (0, n_arms):
            raise DataError(f"{log.path}: {len(log.arms)} arms ({','.join(log.arms)}), but the arms file has {n_arms}")
        for b in log.blocks:
            seen = arm_of.setdefault(b.index, (b.arm, log.path))
            if seen[0] != b.arm:
                raise DataError(f"block {b.index} ran arm {seen[0]} in {seen[1]} but arm {b.arm} in {log.path}: the "
                                "ranks disagree on the schedule (a mismatched choice can hang NCCL)")
            starts.setdefault(b.index, []).append(b.t_ns)
    twin = [i for i, (arm, _) in sorted(arm_of.items())
            if arm != (0 if max_blocks is not None and i >= max_blocks else schedule.arm_at(i, n_arms, seed, warmup_blocks))]
    if twin:
        notes.append(f"{len(twin)} block(s) (first: {twin[0]}) ran another arm than ccltune's twin of the plugin's "
                     "schedule computes: the logs' arms are used")
    out = []
    for i in sorted(starts):
        nxt = starts.get(i + 1)
        rnd, place = schedule.round_of(i, n_arms, warmup_blocks)
        out.append(Span(i, arm_of[i][0], rnd, place, max(starts[i]), min(nxt) if nxt else None))
    apart = [s for s in out if s.end_ns is not None and s.end_ns <= s.start_ns]
    if apart:
        comms = len({log.communicator for log in logs})
        notes.append(f"{len(apart)} of {len(out)} blocks (first: {apart[0].index}) have no time common to every arm log: "
                     + (f"the job's {comms} communicators switch arms at different times (the plugin counts each "
                        "communicator's own calls, and finds each one's period after its own 1,024 calls: "
                        "communicators called at different rates, as tensor- and data-parallel ones, start their "
                        "blocks apart); those blocks are not judged: give --workload W.json, whose busiest "
                        "communicator's size then limits the arms to it" if comms > 1 else
                        "the ranks switched that far apart in time; those blocks are not judged"))
    return out, notes


def assign(steps: Sequence[StepLine], spans_: Sequence[Span]) -> tuple[dict[int, list[float]], int]:
    """Block index -> the values of its kept steps (module doc), and how many steps were in no block."""
    kept: dict[int, list[float]] = {}
    first: set[int] = set()
    straddled: set[int] = set()   # blocks whose first edge fell inside a step (that step is dropped)
    starts = sorted((s.start_ns, s.index) for s in spans_)
    dropped = 0
    j = 0
    closed = [s for s in spans_ if s.end_ns is not None]
    for prev, step in zip(steps, steps[1:]):
        while j < len(closed) and closed[j].end_ns < step.t_ns:  # type: ignore[operator]
            j += 1
        if j == len(closed) or not (closed[j].start_ns <= prev.t_ns and step.t_ns <= closed[j].end_ns):  # type: ignore[operator]
            dropped += 1
            straddled.update(i for t, i in starts if prev.t_ns < t <= step.t_ns)
            continue
        idx = closed[j].index
        if idx not in first:
            first.add(idx)
            if idx not in straddled:  # no step took the switch: the first whole step does
                dropped += 1
                continue
        kept.setdefault(idx, []).append(step.value)
    return kept, dropped + (1 if steps else 0)


def block_values(logs: Sequence[ArmLog], steps: Sequence[StepLine], *, n_arms: int, warmup_blocks: int, seed: int,
                 max_blocks: int, end_ns: int) -> Blocks:
    """The judged blocks' values, and what the analysis left out and why (module doc)."""
    out = Blocks()
    out.spans, out.notes = spans(logs, n_arms, warmup_blocks, seed, max_blocks)
    kept, out.dropped_steps = assign(steps, out.spans)
    for s in out.spans:
        # block max_blocks is the plugin's end-of-schedule mark (arm 0 from there on), not a scheduled block
        if s.round >= 0 and s.index < max_blocks and s.end_ns is not None and kept.get(s.index):
            out.values.append(BlockValue(s, stats.median(kept[s.index]), len(kept[s.index])))
    _stalls(out, logs, steps, max_blocks, end_ns)
    return out


def _stalls(out: Blocks, logs: Sequence[ArmLog], steps: Sequence[StepLine], max_blocks: int, end_ns: int) -> None:
    for log in logs:
        if log.period is None:
            out.notes.append(f"communicator {log.comm_id} (pid {log.pid}): the plugin found no period in its "
                             f"{log.calls} tuner call(s): no blocks, it ran NCCL's default throughout")
            continue
        if len(log.blocks) < 2 or len(log.blocks) >= max_blocks:
            continue
        gaps = [b.t_ns - a.t_ns for a, b in zip(log.blocks, log.blocks[1:])]
        block_ns = stats.median(gaps)
        last = log.blocks[-1].t_ns
        after = [s for s in steps if s.t_ns > last + block_ns]
        if after and after[-1].t_ns - last > STALL_BLOCKS * block_ns:
            out.graphs = True
            out.notes.append(
                f"communicator {log.comm_id} (pid {log.pid}): its tuner calls stopped at block {log.blocks[-1].index} "
                f"while {len(after)} step line(s) followed over {(after[-1].t_ns - last) / 1e9:.1f} s: its "
                "collectives are most likely replayed from CUDA graphs, which keep the choice made at capture; "
                "in-run arms do not apply to those collectives (judge them with whole-run ab: --rules without "
                "--in-run)")
