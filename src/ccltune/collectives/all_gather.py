"""all_gather: every rank ends with all ranks' buffers concatenated in rank order.

size = the whole output (n * count * elem). busbw = algbw * (n-1)/n: each rank receives
the n-1 blocks it did not have.
"""

from ccltune.collectives.base import Collective, NcclOp, arange, blocked_layout, input_values, ring_factor


class AllGather(Collective):
    name = "all_gather"
    nccl_tests_name = "all_gather_perf"
    tuner_func = 2  # ncclFunc_t, as the tuner ABI numbers it
    plugin_name = "allgather"  # the rule file's and the tuner plugin's name
    nccl_names = ("AllGather",)  # NCCL's opName in its logs (COLL, TUNING lines)
    per_rank_count = True
    formula = "(n-1)/n"

    ring_bound = True  # busbw bounded by the slowest-link ceiling
    bus_factor = staticmethod(ring_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return blocked_layout(size_bytes, elem, nranks, 1, nranks, (rank, 0))

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        j = arange(torch, lay.recv_elems, device, part=part)
        c = max(lay.count, 1)
        return input_values(torch, j // c, nranks, j % c, None)

    def nccl_ops(self, lay, root, rank, nranks):
        return [NcclOp("ncclAllGather")]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        # torch 2.12 renamed it; the GPU machines run 2.11
        (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(recv, send)


COLLECTIVE = AllGather()
