"""gather: the root ends with all ranks' buffers concatenated in rank order.

size = the root's whole output (n * count * elem). busbw = algbw * (n-1)/n: the root
receives the n-1 blocks it did not have. As nccl-tests: ncclGather on NCCL >= 2.28, grouped
send/recv before; no in-place.
"""

from ccltune.collectives.base import Collective, NcclOp, arange, blocked_layout, input_values, ring_factor


class Gather(Collective):
    name = "gather"
    nccl_tests_name = "gather_perf"
    nccl_names = ("Gather",)  # NCCL's opName in its logs (COLL, TUNING lines)
    rooted = True
    per_rank_count = True
    formula = "(n-1)/n"
    nccl_call = "ncclGather"

    bus_factor = staticmethod(ring_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return blocked_layout(size_bytes, elem, nranks, 1, nranks)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        if rank != root:
            return None
        j = arange(torch, lay.recv_elems, device, part=part)
        c = max(lay.count, 1)
        return input_values(torch, j // c, nranks, j % c, None)

    def nccl_ops(self, lay, root, rank, nranks):
        nbytes = lay.size_bytes // nranks
        recvs = [NcclOp("ncclRecv", p, recv_off=p * nbytes) for p in range(nranks)] if rank == root else []
        return [*recvs, NcclOp("ncclSend", root)]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        chunks = list(recv.chunk(nranks)) if rank == root else None
        dist.gather(send, gather_list=chunks, dst=root)


COLLECTIVE = Gather()
