"""scatter: rank r ends with block r of the root's buffer.

size = the root's whole input (n * count * elem). busbw = algbw * (n-1)/n: the root
sends the n-1 blocks it does not keep. As nccl-tests: ncclScatter on NCCL >= 2.28, grouped
send/recv before; no in-place.
"""

from ccltune.collectives.base import Collective, NcclOp, arange, blocked_layout, input_values, ring_factor


class Scatter(Collective):
    name = "scatter"
    nccl_tests_name = "scatter_perf"
    nccl_names = ("Scatter",)  # NCCL's opName in its logs (COLL, TUNING lines)
    rooted = True
    per_rank_count = True
    formula = "(n-1)/n"
    nccl_call = "ncclScatter"

    bus_factor = staticmethod(ring_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return blocked_layout(size_bytes, elem, nranks, nranks, 1)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        return input_values(torch, root, nranks, arange(torch, lay.count, device, rank * lay.count, part), None)

    def nccl_ops(self, lay, root, rank, nranks):
        nbytes = lay.size_bytes // nranks
        sends = [NcclOp("ncclSend", p, send_off=p * nbytes) for p in range(nranks)] if rank == root else []
        return [*sends, NcclOp("ncclRecv", root)]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        chunks = list(send.chunk(nranks)) if rank == root else None
        dist.scatter(recv, scatter_list=chunks, src=root)


COLLECTIVE = Scatter()
