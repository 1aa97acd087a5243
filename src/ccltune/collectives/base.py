"""The contract every collective module fills in once (see CONTRIBUTING.md).

Sizes follow nccl-tests: ``size_bytes`` is the largest buffer a rank touches (for
all_gather, reduce_scatter, alltoall, gather, scatter: the whole n-rank buffer), and
``count`` is the element count the API call takes per rank.

Inputs are small integers, exactly representable in every datatype, generated from
(rank, element index) alone, so every rank can compute the exact expected output
without communication. Tolerance is used only for ``avg`` on floating types, where NCCL's
scaling by 1/n rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

# nccl-tests aligns each rank's block of a per-rank-count collective to 16 bytes (Collective.ncclt_size)
NCCLT_BLOCK_ALIGN_BYTES = 16


@dataclass(frozen=True)
class Layout:
    """Buffer shape of one (collective, size, world) point. Element counts, per rank."""

    size_bytes: int      # the 'size' column
    count: int           # the 'count' column: elements the API call takes
    send_elems: int
    recv_elems: int
    # in-place: one allocation of max(send, recv) elements; each buffer's element offset
    # in it. None when the collective has no in-place form.
    inplace_offsets: tuple[int, int] | None


@dataclass(frozen=True)
class NcclOp:
    """One NCCL operation of a collective's call. The datatype, reduction op, element count
    (``Layout.count``), communicator and stream are the whole call's; an operation adds its entry
    point, its root or peer, and where its blocks start in the send and receive buffers."""

    fn: str            # NCCL entry point: ncclAllReduce, ncclAllGather, ncclReduceScatter,
                       # ncclBroadcast, ncclReduce, ncclSend, ncclRecv (NCCL >= 2.28: ncclAlltoAll,
                       # ncclGather, ncclScatter, see Collective.nccl_call)
    peer: int = 0      # root (ncclBroadcast, ncclReduce, ncclGather, ncclScatter) or peer (ncclSend, ncclRecv)
    send_off: int = 0  # bytes from the start of the send buffer
    recv_off: int = 0  # bytes from the start of the receive buffer


def input_values(torch: Any, rank: int, nranks: int, index: Any, op: str | None) -> Any:
    """int64 input of ``rank`` at element indices ``index`` (an int64 tensor)."""
    if op in ("sum", "mulsum", None):
        mod = 8 if op in ("sum", "mulsum") else 101   # data movement: a prime period exposes shifts
        return (index * 3 + rank * 5) % mod
    if op == "avg":                       # multiples of n: the exact average is an integer
        return ((index + rank) % 4) * nranks
    if op == "prod":                      # exactly one rank holds 2 per element: product 2
        return torch.where((index + rank) % nranks == 0, 2, 1)
    return (index * 7 + rank * 3) % 11    # min, max


def reduce_inputs(torch: Any, nranks: int, index: Any, op: str) -> Any:
    """int64 exact reduction over all ranks' inputs at ``index`` (mulsum: each input times its
    rank's scalar, then summed)."""
    from ccltune.datatypes import mulsum_scalar

    acc = input_values(torch, 0, nranks, index, op) * (mulsum_scalar(0) if op == "mulsum" else 1)
    for r in range(1, nranks):
        x = input_values(torch, r, nranks, index, op)
        if op == "mulsum":
            acc = acc + x * mulsum_scalar(r)
        elif op in ("sum", "avg"):
            acc = acc + x
        elif op == "prod":
            acc = acc * x
        elif op == "max":
            acc = torch.maximum(acc, x)
        else:
            acc = torch.minimum(acc, x)
    return acc // nranks if op == "avg" else acc


class Collective:
    """One collective. Subclasses set the class attributes and override the methods."""

    name: ClassVar[str]
    nccl_tests_name: ClassVar[str]      # e.g. all_reduce_perf
    tuner_func: ClassVar[int | None] = None  # ncclFunc_t id seen by a tuner plugin, if tuned
    plugin_name: ClassVar[str | None] = None  # its name in rule files and the tuner plugin, if tuned
    nccl_names: ClassVar[tuple[str, ...]] = ()  # NCCL's opName(s) in its INFO logs (AllReduce; Send, Recv)
    reduces: ClassVar[bool] = False     # takes a reduction op
    # nccl-tests runs it once per -o op and prints the op (sendrecv), though nothing is reduced
    loops_ops: ClassVar[bool] = False
    rooted: ClassVar[bool] = False      # takes a root
    per_rank_count: ClassVar[bool] = False  # size = count * nranks * elem
    formula: ClassVar[str] = ""         # busbw formula, for --help and docs
    # NCCL >= 2.28's one entry point for the whole call (ncclAlltoAll, ncclGather, ncclScatter, each
    # with ncclBroadcast's or ncclAllGather's arguments), which nccl-tests 2.19 calls when built
    # against it; ``nccl_ops`` then give the grouped send/recv of older NCCL (engines/series.py)
    nccl_call: ClassVar[str | None] = None
    torch_in_place_only: ClassVar[bool] = False  # torch.distributed's API for it is in-place only
    # In place its send and receive blocks overlap while peers write them (sendrecv: a rank sends the
    # buffer its peer is receiving into), so the result depends on timing: timed, not checked, as
    # nccl-tests does (its InitData sets reportErrors = 0 in place; its table prints #wrong N/A)
    checks_in_place: ClassVar[bool] = True
    # Its busbw is what a ring moves over each GPU's links (all_reduce, all_gather, reduce_scatter), so
    # a node's slowest-link ceiling (slowest link x peers, ccltune.diagnose.checks.linkmath) bounds it;
    # a chain (broadcast, reduce) or a rooted or pairwise pattern is bounded otherwise
    ring_bound: ClassVar[bool] = False

    def bus_factor(self, nranks: int) -> float:
        raise NotImplementedError

    def ncclt_size(self, size_bytes: int, elem: int, nranks: int) -> int:
        """The size nccl-tests 2.19 measures when asked for ``size_bytes`` (bench's size list): a
        per-rank-count collective rounds each rank's count down to a multiple of
        ``NCCLT_BLOCK_ALIGN_BYTES`` (its ``GetCollByteCount``: ``(count/nranks) & ~(16/eltSize - 1)``),
        so on 4 ranks float all_gather at 32 B is 0 B, not 32. Exact sizes (a workload's, a sweep's)
        use ``layout`` alone: NCCL itself takes any count."""
        if not self.per_rank_count:
            return size_bytes
        per_rank = size_bytes // elem // max(nranks, 1)
        per_rank -= per_rank % max(1, NCCLT_BLOCK_ALIGN_BYTES // elem)
        return per_rank * max(nranks, 1) * elem

    def layout(self, size_bytes: int, elem: int, nranks: int, rank: int) -> Layout:
        raise NotImplementedError

    @property
    def op_column(self) -> bool:
        """The table's redop column names the op (else 'none'), and '-o all' loops over ops."""
        return self.reduces or self.loops_ops

    def input_op(self, op: str) -> str | None:
        return op if self.reduces else None

    def expected(self, torch: Any, lay: Layout, rank: int, nranks: int, op: str, root: int,
                 device: Any, part: tuple[int, int] | None = None) -> Any | None:
        """int64 expected content of the receive buffer (elements ``part`` = [start, stop) of
        it, so large buffers are checked in pieces), or None if unchecked on this rank."""
        raise NotImplementedError

    # how each engine runs it ------------------------------------------------------
    def nccl_ops(self, lay: Layout, root: int, rank: int, nranks: int) -> list[NcclOp]:
        """The NCCL operations of one call on ``rank`` (the nccl engine's launch loop issues them,
        inside one group when there are several or they are send/recv)."""
        raise NotImplementedError

    def run_torch(self, dist: Any, send: Any, recv: Any, lay: Layout, op: Any, root: int,
                  rank: int, nranks: int, in_place: bool) -> None:
        raise NotImplementedError


def all_reduce_factor(nranks: int) -> float:
    """2(n-1)/n: a reduce-scatter then an all-gather, each (n-1)/n of the buffer per link."""
    return 2 * (nranks - 1) / nranks


def ring_factor(nranks: int) -> float:
    """(n-1)/n: each rank sends (or receives) the n-1 blocks that are not its own."""
    return (nranks - 1) / nranks


def unit_factor(nranks: int) -> float:
    """1: every link carries the whole buffer once (chains, ring shifts)."""
    return 1.0


def blocked_layout(size_bytes: int, elem: int, nranks: int, send_blocks: int, recv_blocks: int,
                   inplace_blocks: tuple[int, int] | None = None) -> Layout:
    """Buffers made of per-rank blocks of ``count`` elements; ``size`` is the whole n-block
    buffer, rounded down to whole blocks. ``inplace_blocks``: the send and receive buffers'
    offsets inside the shared in-place allocation, in blocks (None: no in-place form)."""
    c = size_bytes // (elem * nranks)
    offsets = None if inplace_blocks is None else (inplace_blocks[0] * c, inplace_blocks[1] * c)
    return Layout(c * nranks * elem, c, c * send_blocks, c * recv_blocks, offsets)


def simple_layout(size_bytes: int, elem: int, in_place: bool = True) -> Layout:
    """Send and receive buffers of the same count (all_reduce, broadcast, reduce, sendrecv)."""
    count = size_bytes // elem
    return Layout(count * elem, count, count, count, (0, 0) if in_place else None)


def arange(torch: Any, n: int, device: Any, start: int = 0, part: tuple[int, int] | None = None) -> Any:
    """int64 ``start + i`` for the element indices i of a buffer of ``n`` elements (those of
    ``part`` = [lo, hi) only, when given)."""
    lo, hi = (0, n) if part is None else (min(part[0], n), min(part[1], n))
    return torch.arange(start + lo, start + hi, dtype=torch.int64, device=device)
