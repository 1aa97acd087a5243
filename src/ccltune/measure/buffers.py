"""Buffers for one measurement point: allocate, fill with exact inputs, check results.

Works on any torch device (CUDA tensors for nccl/torch engines, CPU for gloo).
"""

from __future__ import annotations

from typing import Any

from ccltune.collectives.base import Collective, Layout, input_values
from ccltune.datatypes import DType
from ccltune.engines.base import Alloc, Buffers  # noqa: F401 - what engines take, laid out here

POISON = 123  # not an input value, exact in every datatype: unwritten output shows up


def make(torch: Any, lay: Layout, dt: DType, in_place: bool, device: Any, alloc: Alloc | None = None,
         unalign: int = 0) -> Buffers:
    """Send/recv tensors for ``lay``. In place: both are views of one allocation. ``unalign`` (-u):
    both start that many elements into their allocation (nccl-tests' misaligned buffers)."""
    tdt = getattr(torch, dt.torch_name)
    if alloc is None:
        def alloc(n: int) -> Any:
            return torch.empty(max(n, 1), dtype=tdt, device=device)
    u = unalign
    if in_place:
        assert lay.inplace_offsets is not None
        base = alloc(max(lay.send_elems, lay.recv_elems) + u)
        so, ro = lay.inplace_offsets
        return Buffers(base[u + so:u + so + lay.send_elems], base[u + ro:u + ro + lay.recv_elems], (base,))
    send, recv = alloc(lay.send_elems + u), alloc(lay.recv_elems + u)
    return Buffers(send[u:u + lay.send_elems], recv[u:u + lay.recv_elems], (send, recv))


CHUNK = 1 << 24  # elements per piece when filling and checking: bounds the int64 temporaries


def fill(torch: Any, bufs: Buffers, coll: Collective, rank: int, nranks: int, op: str) -> None:
    """Poison the output, then write this rank's exact input (in pieces of CHUNK elements)."""
    bufs.recv.fill_(POISON)
    n = bufs.send.numel()
    for lo in range(0, n, CHUNK):
        j = torch.arange(lo, min(lo + CHUNK, n), dtype=torch.int64, device=bufs.send.device)
        bufs.send[lo:lo + len(j)].copy_(input_values(torch, rank, nranks, j, coll.input_op(op)).to(bufs.send.dtype))


def count_wrong(torch: Any, bufs: Buffers, coll: Collective, lay: Layout, dt: DType, rank: int,
                nranks: int, op: str, root: int, expected: dict[int, Any] | None = None) -> int:
    """Elements of the output that differ from the exact expected value (checked in pieces
    of CHUNK elements, so the check needs little memory beyond the buffers). ``expected``, when
    given, keeps each piece's expected values for the next check of the same point (a sweep checks
    every configuration of a size against the same values)."""
    n, wrong = bufs.recv.numel(), 0
    for lo in range(0, n, CHUNK):
        if expected is not None and lo in expected:
            exp = expected[lo]
        else:
            exp = coll.expected(torch, lay, rank, nranks, op, root, bufs.recv.device, part=(lo, lo + CHUNK))
            if expected is not None:
                expected[lo] = exp
        if exp is None:
            return 0
        wrong += _wrong(torch, bufs.recv[lo:lo + len(exp)], exp, coll, dt, op, nranks)
    return wrong


# FP8 keeps 3 (e4m3) or 2 (e5m2) mantissa bits: small integer sums are not all exact, and NCCL rounds
# each partial sum to the datatype, so a result may be off by half an ulp per reduction step
_F8_EPS = {"f8e4m3": 2.0 ** -3, "f8e5m2": 2.0 ** -2}


def _wrong(torch: Any, got: Any, exp: Any, coll: Collective, dt: DType, op: str, nranks: int = 1) -> int:
    if dt.is_float:
        got64, exp64 = got.to(torch.float64), exp.to(torch.float64)
        if dt.name in _F8_EPS and coll.reduces:
            bad = (got64 - exp64).abs() > max(nranks - 1, 1) * _F8_EPS[dt.name] / 2 * exp64.abs() + 1e-12
        elif dt.name in _F8_EPS:  # moved, not reduced: the input's own rounding, exactly
            bad = got64 != exp64.to(got.dtype).to(torch.float64)
        elif op == "avg" and coll.reduces:  # NCCL scales by 1/n: rounding is unavoidable
            rtol = {"half": 1e-3, "bfloat16": 8e-3}.get(dt.name, 1e-6)
            bad = (got64 - exp64).abs() > rtol * exp64.abs() + 1e-12
        else:
            bad = got64 != exp64
    else:
        # the exact result wrapped to the datatype's width, as NCCL's integer arithmetic does
        bad = got.to(torch.int64) != exp.to(got.dtype).to(torch.int64)
    return int(bad.sum().item())
