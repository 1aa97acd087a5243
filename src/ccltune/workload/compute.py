"""How much the job computes beside its collectives, from a torch trace's GPU kernels, and the
``--under-load`` matrix that stands for it (pure; docs/workload.md, "Under load, sized from the job").

Per trace (one rank), on each GPU: the NCCL kernels' intervals and every other kernel's (the compute: GEMMs,
elementwise, attention, ...). ``overlap_us`` is the time inside NCCL kernels during which some compute kernel
ran too (the union of the compute intervals cut to the NCCL intervals); ``share`` = overlap_us / nccl_us. Each
compute kernel that overlaps an NCCL kernel weighs by how long it does; ``kernel_us_median`` is the weighted
median of their durations: the typical compute kernel a collective shares the GPU with.

The sweep's load (:class:`ccltune.measure.load.MatrixLoad`) is one square bf16 multiply after another, all the
time. Sized from the job (:func:`load_for`):

- ``share`` below :data:`MIN_SHARE`: the collectives mostly run alone; a job that is still far slower than idle
  is waiting for its peers, which no load reproduces: no load (the sweep stays idle, tune gives those sizes no rule);
- else the matrix ``M`` whose multiply lasts ``kernel_us_median`` at :data:`RATE_FLOPS`: ``2 M^3 / RATE = d``,
  rounded to a multiple of 256 within [256, 16384]. The rate is a fixed reference (the H100's bf16 multiply at
  M = 8192, docs/performance.md); the load's achieved rate is printed with every loaded run.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MIN_SHARE = 0.25        # below: the collectives mostly run without compute beside them
RATE_FLOPS = 500e12     # reference bf16 multiply rate (533 TFLOP/s measured at M = 8192 on an H100)
M_STEP, M_MIN, M_MAX = 256, 256, 16384

Interval = tuple[float, float]  # (start_us, end_us)


@dataclass(frozen=True)
class Overlap:
    """The compute beside the collectives of one trace, or of several pooled (``traces``)."""

    nccl_us: float          # NCCL kernels' time
    overlap_us: float       # of it, with a compute kernel running too
    kernel_us_median: float | None  # overlap-weighted median duration of the overlapping compute kernels
    kernels: int            # compute kernels that overlap an NCCL kernel
    traces: int = 1

    @property
    def share(self) -> float:
        return self.overlap_us / self.nccl_us if self.nccl_us > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "nccl_kernel_us": round(self.nccl_us, 3), "overlap_us": round(self.overlap_us, 3),
                "share": round(self.share, 4), "kernel_us_median": None if self.kernel_us_median is None
                else round(self.kernel_us_median, 3), "kernels": self.kernels}


def _union(intervals: Iterable[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _covered(union: list[Interval], starts: list[float], a: float, b: float) -> float:
    """How much of [a, b] the sorted disjoint ``union`` covers (``starts``: its starts)."""
    i = max(0, bisect.bisect_right(starts, a) - 1)
    got = 0.0
    while i < len(union) and union[i][0] < b:
        got += max(0.0, min(b, union[i][1]) - max(a, union[i][0]))
        i += 1
    return got


def weighted_median(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The value at half the total weight of (value, weight) pairs (the lower one at a tie); None without weight."""
    total = sum(w for _, w in pairs)
    if total <= 0:
        return None
    acc = 0.0
    for v, w in sorted(pairs):
        acc += w
        if acc >= total / 2:
            return v
    return None


def overlap(nccl: dict[Any, list[Interval]], compute: dict[Any, list[Interval]]) -> Overlap | None:
    """One trace: NCCL and compute kernel intervals per GPU (module doc); None without an NCCL kernel, or without
    any other kernel (a trace trimmed to its communication, or a job that computes nothing, sizes no load)."""
    if not any(compute.values()):
        return None
    nccl_us = overlap_us = 0.0
    pairs: list[tuple[float, float]] = []
    for dev, comm in nccl.items():
        nu, cu = _union(comm), _union(compute.get(dev, []))
        ns, cs = [a for a, _ in nu], [a for a, _ in cu]
        nccl_us += sum(b - a for a, b in nu)
        overlap_us += sum(_covered(cu, cs, a, b) for a, b in nu)
        for a, b in compute.get(dev, []):
            w = _covered(nu, ns, a, b)
            if w > 0:
                pairs.append((b - a, w))
    if nccl_us <= 0:
        return None
    return Overlap(nccl_us, overlap_us, weighted_median(pairs), len(pairs))


def pool(parts: Iterable[Overlap]) -> Overlap | None:
    """Traces pooled: times added; the median as the overlap-weighted median of the traces' medians."""
    got = list(parts)
    if not got:
        return None
    med = weighted_median([(p.kernel_us_median, p.overlap_us) for p in got if p.kernel_us_median is not None])
    return Overlap(sum(p.nccl_us for p in got), sum(p.overlap_us for p in got), med, sum(p.kernels for p in got),
                   sum(p.traces for p in got))


def matrix_for(kernel_us: float) -> int:
    """The square bf16 multiply that lasts ``kernel_us`` at RATE_FLOPS, rounded and bounded (module doc)."""
    m = (kernel_us * 1e-6 * RATE_FLOPS / 2) ** (1 / 3)
    return int(min(M_MAX, max(M_MIN, M_STEP * round(m / M_STEP))))


def describe(o: Overlap) -> str:
    med = "-" if o.kernel_us_median is None else f"{o.kernel_us_median:.1f} us"
    return (f"compute kernels run beside {100 * o.share:.0f}% of the NCCL kernels' time ({o.overlap_us:.0f} of "
            f"{o.nccl_us:.0f} us, {o.traces} trace(s)); the overlapping compute kernels' median {med}")


def load_for(o: Overlap | None) -> tuple[int | None, str]:
    """(the --under-load matrix sized from the job, or None for no load; why). ``o`` None: nothing sizes it,
    and the caller keeps its default (said)."""
    if o is None:
        return None, "nothing in the workload sizes the load (no torch trace with NCCL and compute kernels)"
    if o.share < MIN_SHARE or o.kernel_us_median is None:
        like = (f" (a load like its kernels would be --under-load {matrix_for(o.kernel_us_median)})"
                if o.kernel_us_median is not None else "")
        return None, (f"{describe(o)}: under {100 * MIN_SHARE:.0f}%, the collectives mostly run alone, so a job "
                      f"far slower than idle is waiting for its peers, which no load reproduces{like}")
    m = matrix_for(o.kernel_us_median)
    return m, (f"{describe(o)}: --under-load {m}, the square bf16 multiply that lasts as long at "
               f"{RATE_FLOPS / 1e12:.0f} TFLOP/s")


def check(doc: Any, where: str) -> Overlap:
    """A workload file's ``compute_overlap`` object (to_dict's), every number finite and >= 0."""
    from ccltune.errors import UsageError

    def num(name: str, optional: bool = False) -> Any:
        v = doc.get(name) if isinstance(doc, dict) else None
        if v is None and optional:
            return None
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 1e15):
            raise UsageError(f"{where}: compute_overlap.{name} must be a finite number >= 0, got {v!r:.40}")
        return v

    o = Overlap(float(num("nccl_kernel_us")), float(num("overlap_us")), num("kernel_us_median", True),
                int(num("kernels")), int(num("traces")))
    if o.overlap_us > o.nccl_us:
        raise UsageError(f"{where}: compute_overlap.overlap_us {o.overlap_us} is more than nccl_kernel_us {o.nccl_us}")
    return o
