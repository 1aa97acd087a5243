"""Which collective an nccl-tests table measured, when no line says so (rccl-tests prints no
``# Collective test starting`` line; a pasted table has none either).

A row's ``busbw / algbw`` is the collective's bus factor at the run's rank count (doc/PERFORMANCE.md of
nccl-tests: 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and alltoall, 1 for
broadcast, reduce and sendrecv; ccltune's registry holds each), the ``redop`` column says whether it
reduces (``none`` when not) and the ``root`` column whether it is rooted (-1 when not). The row with the
largest algbw is used: its two printed decimals give the ratio closest to exact. One collective left:
it is used, and a note says so; several: the error lists them.
"""

from __future__ import annotations

from typing import Any

from ccltune import collectives
from ccltune.errors import UsageError

_TOLERANCE = 0.01  # relative: the ratio of two %.2f figures of tens of GB/s and more


def bus_ratio(table: list[tuple[int, Any]], blocks: list[int]) -> float | None:
    """busbw / algbw of the row with the largest algbw (module doc), None when no row has a bandwidth."""
    best: tuple[float, float] | None = None
    for _, cells in table:
        if not isinstance(cells, list):  # a failure line between the rows
            continue
        for b in blocks:
            try:
                alg, bus = float(cells[b + 1]), float(cells[b + 2])
            except (ValueError, IndexError):
                continue
            if 0 < alg < 1e12 and 0 <= bus < 1e12 and (best is None or alg > best[0]):
                best = (alg, bus)
    return None if best is None else best[1] / best[0]


def fits(coll: str, n_ranks: int, ratio: float) -> bool:
    """Whether ``ratio`` is ``coll``'s bus factor at ``n_ranks`` ranks, within the rounding of two %.2f figures."""
    return abs(collectives.REGISTRY[coll].bus_factor(n_ranks) - ratio) <= _TOLERANCE * max(ratio, 0.1)


def ranks_of_ratio(coll: str, ratio: float, most: int) -> list[int]:
    """The rank counts up to ``most`` at which ``coll``'s bus factor is ``ratio`` (a constant factor: all)."""
    return [n for n in range(1, most + 1) if fits(coll, n, ratio)]


def candidates(table: list[tuple[int, Any]], blocks: list[int], n_ranks: int) -> tuple[list[str], str]:
    """The registry names a run's rows fit, and the evidence (ratio, redop, root) in words."""
    ops = {cells[3] for _, cells in table if isinstance(cells, list)}
    roots = {cells[4] for _, cells in table if isinstance(cells, list)}
    ratio = bus_ratio(table, blocks)
    if ratio is None:
        return [], "no row with a bandwidth"
    reduces = ops - {"none", "-"} != set()
    rooted = roots != {"-1"}
    fit = [c.name for c in collectives.REGISTRY.values()
           if fits(c.name, n_ranks, ratio) and c.op_column == reduces and c.rooted == rooted]
    evidence = (f"busbw/algbw {ratio:.3f} at {n_ranks} ranks, redop {'an op' if reduces else 'none'}, "
                f"{'a root' if rooted else 'no root'}")
    return fit, evidence


def collective(table: list[tuple[int, Any]], blocks: list[int], n_ranks: int, why: str,
               notes: list[str]) -> str:
    """The one collective the rows fit (a note in ``notes`` says how it was told), else a UsageError:
    ``why`` (why the header and file name cannot tell, 'f.txt:3: ...; pass --collective') with the
    collectives the rows could be."""
    fit, evidence = candidates(table, blocks, n_ranks)
    if len(fit) == 1:
        notes.append(f"collective {fit[0]} told from the table ({evidence}): no 'Collective test starting' "
                     "line (rccl-tests prints none); pass --collective to say otherwise")
        return fit[0]
    could = f"it could be {', '.join(fit)}" if fit else "no collective fits"
    head = why.removesuffix("; pass --collective")
    raise UsageError(f"{head}; the table says {evidence}: {could}; pass --collective")
