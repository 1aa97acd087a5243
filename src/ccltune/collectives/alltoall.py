"""alltoall: rank r sends block p of its buffer to rank p and receives block p from rank p.

size = the whole buffer (n * count * elem). busbw = algbw * (n-1)/n: n-1 of the n blocks
leave each rank. Run as nccl-tests runs it: ncclAlltoAll on NCCL >= 2.28, grouped send/recv before;
no in-place form.
"""

from ccltune.collectives.base import Collective, NcclOp, arange, blocked_layout, input_values, ring_factor


class AllToAll(Collective):
    name = "alltoall"
    nccl_tests_name = "alltoall_perf"
    nccl_names = ("AlltoAll",)  # NCCL's opName in its logs (COLL, TUNING lines)
    per_rank_count = True
    formula = "(n-1)/n"
    nccl_call = "ncclAlltoAll"

    bus_factor = staticmethod(ring_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return blocked_layout(size_bytes, elem, nranks, nranks, nranks)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        j = arange(torch, lay.recv_elems, device, part=part)
        c = max(lay.count, 1)
        return input_values(torch, j // c, nranks, rank * lay.count + j % c, None)

    def nccl_ops(self, lay, root, rank, nranks):
        nbytes = lay.size_bytes // nranks
        ops = []
        for p in range(nranks):
            ops += [NcclOp("ncclSend", p, send_off=p * nbytes), NcclOp("ncclRecv", p, recv_off=p * nbytes)]
        return ops

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        dist.all_to_all_single(recv, send)


COLLECTIVE = AllToAll()
