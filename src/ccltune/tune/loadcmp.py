"""How the winners of a sweep under load (``--under-load M``) differ from an idle sweep's (pure).

Both derivations come from :func:`ccltune.tune.derive.derive` with the same settings; at every
(group, size) both measured, the winner (or NCCL's default where nothing beat it) is compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccltune.tune.derive import Derivation


@dataclass(frozen=True)
class Change:
    group: str
    size_bytes: int
    idle: str      # the winner's label, or 'default' (no rule)
    loaded: str


def winner_changes(idle: Derivation, loaded: Derivation) -> tuple[list[Change], int]:
    """(the sizes whose winner differs, how many (group, size) points both measured)."""
    before = {(g.key, d.size_bytes): d.winner for g in idle.groups for d in g.decisions}
    out: list[Change] = []
    common = 0
    for g in loaded.groups:
        for d in g.decisions:
            if (g.key, d.size_bytes) not in before:
                continue
            common += 1
            a, b = before[(g.key, d.size_bytes)], d.winner
            if a != b:
                out.append(Change(str(g.key), d.size_bytes, a.label if a else "default", b.label if b else "default"))
    return out, common


def lines(changes: list[Change], common: int, m: int) -> list[str]:
    head = (f"# under load (matrix {m}) vs idle: the winner differs at {len(changes)} of {common} sizes both "
            "measured")
    return [head, *(f"  {c.group} {c.size_bytes} B: idle {c.idle}, under load {c.loaded}" for c in changes)]
