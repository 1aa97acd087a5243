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


def candidates(table: list[tuple[int, Any]], blocks: list[int], n_ranks: int) -> tuple[list[str], str]:
    """The registry names a run's rows fit, and the evidence (ratio, redop, root) in words."""
    best: tuple[float, float] | None = None
    ops, roots = set(), set()
    for _, cells in table:
        if not isinstance(cells, list):  # a failure line between the rows
            continue
        ops.add(cells[3])
        roots.add(cells[4])
        for b in blocks:
            try:
                alg, bus = float(cells[b + 1]), float(cells[b + 2])
            except (ValueError, IndexError):
                continue
            if 0 < alg < 1e12 and 0 <= bus < 1e12 and (best is None or alg > best[0]):
                best = (alg, bus)
    if best is None:
        return [], "no row with a bandwidth"
    ratio = best[1] / best[0]
    reduces = ops - {"none", "-"} != set()
    rooted = roots != {"-1"}
    fit = [c.name for c in collectives.REGISTRY.values()
           if abs(c.bus_factor(n_ranks) - ratio) <= _TOLERANCE * max(ratio, 0.1)
           and c.op_column == reduces and c.rooted == rooted]
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
