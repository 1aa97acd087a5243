"""How many training steps a source's calls cover, found from the calls themselves (pure).

A training job repeats one step's communication: the same collectives, of the same sizes, on the
same communicators, in the same order. The calls of one rank in issue order, run-length encoded
(consecutive calls of one entry on one communicator are one run), are scanned for the shortest
period ``p`` (in runs) such that the tail of the sequence repeats with that period at least twice
and the repeats hold at least half of all calls: the repeats are the steps, and what comes before
them (initialisation, a first step that differs, as DDP's bucket rebuild does) is named in the note.

Not found (None) when no such period exists: a job whose every call is one entry (a TP decode
issuing only all_reduces of one size) has no structure to tell steps apart, and a capture of less
than two steps has no repeat. Bounds: at most :data:`MAX_RUNS` runs are scanned (the last ones) and
periods of at most :data:`MAX_PERIOD` runs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

MAX_RUNS = 200_000
MAX_PERIOD = 5_000
MAX_AFTER = 8  # runs after the last repeat that may be left out (a final barrier, a last all_reduce)


def runs(order: Sequence[Hashable]) -> list[tuple[Hashable, int]]:
    """Consecutive equal items as (item, repeat)."""
    out: list[tuple[Hashable, int]] = []
    for item in order:
        if out and out[-1][0] == item:
            out[-1] = (item, out[-1][1] + 1)
        else:
            out.append((item, 1))
    return out


def find(order: Sequence[Hashable]) -> tuple[int, str] | None:
    """(steps, how they were found) from one rank's calls in issue order, or None (module doc)."""
    tokens = runs(order)[-MAX_RUNS:]
    total = sum(r for _, r in tokens)
    for after in range(0, min(MAX_AFTER, len(tokens)) + 1):
        got = _find(tokens[:len(tokens) - after], total, tokens[len(tokens) - after:])
        if got is not None:
            return got
    return None


def _count(tokens: list[tuple[Hashable, int]], p: int, reps: int, after: list[tuple[Hashable, int]]
           ) -> tuple[int, str]:
    """Steps: the repeats, or more when the calls before them are steps too. The call most frequent in
    one repeat is counted over the whole sequence: when its total is a whole multiple of its calls per
    repeat, that multiple is the step count (earlier steps may lack a call the later ones make, such as
    a barrier only the timed steps issue)."""
    per: dict[Hashable, int] = {}
    for item, r in tokens[len(tokens) - p:]:
        per[item] = per.get(item, 0) + r
    anchor = max(per, key=lambda k: per[k])
    seen = sum(r for item, r in tokens + after if item == anchor)
    if seen % per[anchor] == 0 and seen // per[anchor] > reps:
        return seen // per[anchor], (f"the most frequent call of a repeat, {per[anchor]} per repeat, "
                                     f"occurs {seen} times in all: {seen // per[anchor]} steps")
    return reps, "a step per repeat"


def _find(tokens: list[tuple[Hashable, int]], total: int, after_runs: list[tuple[Hashable, int]]
          ) -> tuple[int, str] | None:
    after = sum(r for _, r in after_runs)
    n = len(tokens)
    for p in range(2, min(MAX_PERIOD, n // 2) + 1):
        i = n - 1 - p
        while i >= 0 and tokens[i] == tokens[i + p]:
            i -= 1
        periodic = n - 1 - i          # runs in the periodic tail
        reps = periodic // p
        if reps < 2:
            continue
        covered = sum(r for _, r in tokens[n - reps * p:])
        if 2 * covered < total:
            continue
        per_step = covered // reps
        before = total - covered - after
        steps, how = _count(tokens, p, reps, after_runs)
        note = (f"the calls' repeating sequence ({reps} repeats of {per_step} calls at the end"
                + (f", {before} calls before them" if before else "") + (f", {after} after them" if after else "")
                + f"; {how})")
        return steps, note
    return None
