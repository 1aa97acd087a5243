"""reduce_scatter: rank r ends with block r of the reduction of all ranks' buffers.

size = the whole input (n * count * elem). busbw = algbw * (n-1)/n: each rank sends the
n-1 blocks that others own (a ring moves them through every link once).
"""

from ccltune.collectives.base import Collective, NcclOp, arange, blocked_layout, reduce_inputs, ring_factor


class ReduceScatter(Collective):
    name = "reduce_scatter"
    nccl_tests_name = "reduce_scatter_perf"
    tuner_func = 3  # ncclFunc_t, as the tuner ABI numbers it
    plugin_name = "reducescatter"  # the rule file's and the tuner plugin's name
    nccl_names = ("ReduceScatter",)  # NCCL's opName in its logs (COLL, TUNING lines)
    reduces = True
    per_rank_count = True
    formula = "(n-1)/n"

    ring_bound = True  # busbw bounded by the slowest-link ceiling
    bus_factor = staticmethod(ring_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return blocked_layout(size_bytes, elem, nranks, nranks, 1, (0, rank))

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        return reduce_inputs(torch, nranks, arange(torch, lay.count, device, rank * lay.count, part), op)

    def nccl_ops(self, lay, root, rank, nranks):
        return [NcclOp("ncclReduceScatter")]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        # torch 2.12 renamed it; the GPU machines run 2.11
        (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(recv, send, op=op)


COLLECTIVE = ReduceScatter()
