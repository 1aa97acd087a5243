"""The decision table a rule file gives one communicator, size range by size range (pure).

It runs the rule file through :func:`ccltune.rules.match`, the Python twin of the plugin's
matcher that tests/plugin/test_golden.py proves equal to the C one (same decisions on the
same files and queries). A rule's applicability depends on the size only through its
[min, max] range, so the decision is constant between consecutive rule boundaries: one
query per segment gives the whole table exactly.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from ccltune import rules

MAX_SIZE = (1 << 64) - 1


@dataclass(frozen=True)
class Range:
    collective: str
    min_bytes: int
    max_bytes: int
    decision: rules.Decision   # rule None: NCCL's own choice


def explain(ruleset: rules.RuleSet, collective: str, n_ranks: int, n_nodes: int,
            platform: rules.PlatformFacts = rules.PlatformFacts(), num_pipe_ops: int = 1,
            reg_buff: int | None = 0) -> list[Range]:
    """Consecutive size ranges covering 0..2^64-1, each with the decision the plugin takes
    there (before NCCL's cost table: a rule whose cell NCCL marks IGNORE on the machine
    falls through to the next rule, which the table cannot show)."""
    bounds = {0}
    for r in ruleset.rules:
        if r.collective == collective:
            bounds.add(r.min_bytes)
            if r.max_bytes < MAX_SIZE:
                bounds.add(r.max_bytes + 1)
    edges = sorted(bounds)

    def query(size: int) -> rules.Query:
        return rules.Query(collective, size, n_ranks, n_nodes, num_pipe_ops, reg_buff, platform)

    # Without a cost table the first rule (file order) that applies wins, and a rule applies at a size
    # exactly when it applies alone at its own min_bytes and its range holds the size. So: the rules
    # that apply alone, swept by size with a heap of those whose range has begun, ordered by file
    # position: O(n log n), where one full match per segment was O(n^2) (100,000 rules: > 300 s).
    alone = sorted(((r.min_bytes, i, r) for i, r in enumerate(ruleset.rules)
                    if r.min_bytes <= r.max_bytes
                    and rules.match(rules.RuleSet(rules=[r]), query(r.min_bytes)).rule is not None),
                   key=lambda t: (t[0], t[1]))
    active: list[tuple[int, int, rules.Rule]] = []
    nxt = 0
    out: list[Range] = []
    for i, lo in enumerate(edges):
        hi = edges[i + 1] - 1 if i + 1 < len(edges) else MAX_SIZE
        while nxt < len(alone) and alone[nxt][0] <= lo:
            heapq.heappush(active, (alone[nxt][1], alone[nxt][0], alone[nxt][2]))
            nxt += 1
        while active and active[0][2].max_bytes < lo:  # its range ended before this segment
            heapq.heappop(active)
        d = rules.match(rules.RuleSet(rules=[active[0][2]] if active else []), query(lo))
        if out and out[-1].decision == d:
            out[-1] = Range(collective, out[-1].min_bytes, hi, d)
        else:
            out.append(Range(collective, lo, hi, d))
    return out
