"""Sources that describe the same calls are merged, never added (pure).

Two cases:

- **One process seen by two sources** (a COLL log and a torch trace of one rank, a log and the
  profiler's files): the records are one rank. Calls come from the source that counted the most
  (the longer span: a log covers the whole run, a trace only its profiled steps) and so do the
  steps; in-job times, waiting and what NCCL ran come from the sources that have them, attached to
  the matching entry. A process is named by its pid and, where the source says, its host (a trace
  names no host: its pid must then be the only match). Without a pid (a trace of an old torch)
  nothing is merged and the step check of :func:`ccltune.workload.model.resolve_steps` applies.
- **One entry seen with more or less detail** (a log with the INIT line knows the node count, a
  trace does not; a capture file has no datatype): a key with unknown fields that matches exactly
  one more detailed key of the same collective, size and ranks is that key.
"""

from __future__ import annotations

from collections import defaultdict

from ccltune.workload.model import TIME_SOURCES, Key, RankRecord, add_counts
from ccltune.workload.timing import Timing

# which kind counts calls when two are equally long: the one that sees every call
_COUNTS_FIRST = ("nccl-log", "ccltune-profile", "inspector", "capture", "torch-trace")


def matches(a: Key, b: Key) -> bool:
    """Two keys that can be one entry: same collective, size and ranks; the rest equal where both know it."""
    return (a.collective, a.size_bytes, a.nranks) == (b.collective, b.size_bytes, b.nranks) and all(
        x is None or y is None or x == y for x, y in ((a.datatype, b.datatype), (a.count, b.count),
                                                      (a.nnodes, b.nnodes), (a.op, b.op)))


def _detail(k: Key) -> int:
    return sum(x is not None for x in (k.datatype, k.count, k.nnodes, k.op))


def _rename(r: RankRecord, old: Key, new: Key) -> None:
    if old in r.calls:
        r.calls[new] += r.calls.pop(old)
    for d in (r.timing, r.wait, r.transfer):
        if old in d:
            d.setdefault(new, Timing()).merge(d.pop(old))
    if old in r.variants:
        add_counts(r.variants, new, r.variants.pop(old))
    if old in r.ran:
        add_counts(r.ran, new, r.ran.pop(old))
    r.order = [(new if k == old else k, comm) for k, comm in r.order]


def unify_keys(records: list[RankRecord]) -> None:
    """Keys with unknown fields folded into the one more detailed key they match (module doc)."""
    keys = {k for r in records for k in r.calls}
    for k in sorted(keys, key=_detail):
        richer = [o for o in keys if o != k and _detail(o) > _detail(k) and matches(k, o)]
        if len(richer) == 1:
            for r in records:
                _rename(r, k, richer[0])
            keys.discard(k)


def fold(records: list[RankRecord]) -> tuple[list[RankRecord], list[str]]:
    """Records of one process from several kinds made one (module doc), and the notes: one line per kind of
    merge (which kinds, which one counted, which one timed) naming its processes, not one per pair of files
    (a clean 4-rank capture of three sources said 8 lines), and a line per process whose entries were left out."""
    groups: dict[int, list[RankRecord]] = defaultdict(list)
    for r in records:
        if r.pid is not None:
            groups[r.pid].append(r)
    merged: dict[tuple[str, ...], list[tuple[int, str, str]]] = defaultdict(list)  # what merged -> (pid, host, files)
    left_out: list[str] = []
    gone: set[int] = set()
    for pid, rs in groups.items():
        hosts = {r.host for r in rs if r.host}
        kinds = {r.kind for r in rs}
        if len(kinds) < 2 or len(hosts) > 1:
            continue  # one kind (ranks of one process merge by rank id), or several hosts: not one process
        counts = max(rs, key=lambda r: (sum(r.calls.values()), -_COUNTS_FIRST.index(r.kind)
                                        if r.kind in _COUNTS_FIRST else -99))
        host = next(iter(hosts)) if len(hosts) == 1 else ""
        counted, others = counts.source.split(", ")[0], []
        for other in rs:
            if other is counts or other.kind == counts.kind:
                continue
            if not counts.steps and other.steps:
                _scale_steps(counts, other)
            others.append((other.kind, other.source))
            left = _attach(counts, other)
            gone.add(id(other))
            if left:
                left_out.append(f"{other.source}: {left} of its entries match none of the calls {counted} "
                                f"counted (pid {pid}) and are left out")
        if others:
            timed = counts.time_kind or (counts.kind if counts.timing else "")
            merged[(counts.kind, timed) + tuple(sorted({k for k, _ in others}))].append(
                (pid, host, " and ".join([s for _, s in others] + [counted])))
    return [r for r in records if id(r) not in gone], [_merged_note(k, v) for k, v in merged.items()] + left_out


def _merged_note(what: tuple[str, ...], procs: list[tuple[int, str, str]]) -> str:
    """One line for the processes merged alike (``what``: the counting kind, the timing kind, the kinds merged
    into it): which, and where calls and times came from; one process is named by its files."""
    counted, timed, *others = what
    if len(procs) == 1:
        pid, host, files = procs[0]
        who = f"{files} are one process (pid {pid}{f' on {host}' if host else ''})"
    else:
        hosts = sorted({h for _, h, _ in procs if h})
        who = (f"{len(procs)} processes (pids {', '.join(str(p) for p, _, _ in sorted(procs))}"
               f"{' on ' + ', '.join(hosts) if hosts else ''}) are each in files of {', '.join(others)} and {counted}")
    return (f"{who}: merged, not added: calls and steps from the {counted} (the longer span)"
            + (f", in-job times from the {timed}" if timed else ""))


def _scale_steps(counts: RankRecord, spans: RankRecord) -> None:
    """The counting source's steps from a source that knows its own (a trace's ProfilerStep spans): when
    every shared entry is called ``calls x spans.steps / spans' calls`` times, one whole number, that is
    the counting source's step count (a TP decode's log: 512 all_reduces, its trace 128 in 2 steps: 8)."""
    if not spans.steps:  # the caller's check, for the product below
        return
    ratios = set()
    for k, n in spans.calls.items():
        hit = [c for c in counts.calls if matches(k, c)]
        if len(hit) != 1 or n == 0:
            return
        got = counts.calls[hit[0]] * spans.steps
        if got % n:
            return
        ratios.add(got // n)
    if len(ratios) == 1 and (steps := ratios.pop()) >= 1:
        counts.steps = steps
        counts.steps_from = (f"{counts.source.split(', ')[0]}: {steps} steps, its calls of each entry scaled by "
                             f"{spans.source}'s {spans.steps} ProfilerStep#N spans")


def _rank(kind: str | None) -> int:
    """A timing source's preference (model.TIME_SOURCES: lower is better; a kind that times nothing last)."""
    return TIME_SOURCES.index(kind) if kind in TIME_SOURCES else len(TIME_SOURCES)


def _attach(into: RankRecord, other: RankRecord) -> int:
    """``other``'s times, waiting and what NCCL ran, on ``into``'s matching keys; how many keys matched none.
    Times are never pooled across kinds (they time the same calls): the better-ranked source's are kept."""
    left = 0
    take_times = bool(other.timing) and (not into.timing or _rank(other.kind) < _rank(into.time_kind or into.kind))
    if take_times:
        into.timing, into.time_kind = {}, other.kind
    take_waits = not into.wait   # decided once: the first key's wait must not shut out the others'
    for k in other.calls:
        hit = [c for c in into.calls if matches(k, c)]
        if len(hit) != 1:
            left += 1
            continue
        target = hit[0]
        pairs = [(other.wait, into.wait), (other.transfer, into.transfer)] if take_waits else []
        for src, dst in ([(other.timing, into.timing)] if take_times else []) + pairs:
            if k in src:
                dst.setdefault(target, Timing()).merge(src[k])
        if k in other.ran:
            add_counts(into.ran, target, other.ran[k])
        if k in other.variants:
            add_counts(into.variants, target, other.variants[k])
    into.source += f", {other.source}"
    return left
