"""all_reduce: every rank ends with the reduction of all ranks' buffers.

busbw = algbw * 2(n-1)/n: a ring reduce-scatter then all-gather moves 2(n-1)/n of the
buffer through each rank's slowest link (docs/busbw.md derives it).
"""

from ccltune.collectives.base import Collective, NcclOp, all_reduce_factor, arange, reduce_inputs, simple_layout


class AllReduce(Collective):
    name = "all_reduce"
    nccl_tests_name = "all_reduce_perf"
    tuner_func = 4  # ncclFunc_t, as the tuner ABI numbers it
    plugin_name = "allreduce"  # the rule file's and the tuner plugin's name
    nccl_names = ("AllReduce",)  # NCCL's opName in its logs (COLL, TUNING lines)
    torch_in_place_only = True  # torch.distributed's API for it is in-place only
    reduces = True
    formula = "2(n-1)/n"

    ring_bound = True  # busbw bounded by the slowest-link ceiling
    bus_factor = staticmethod(all_reduce_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return simple_layout(size_bytes, elem)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        return reduce_inputs(torch, nranks, arange(torch, lay.count, device, part=part), op)

    def nccl_ops(self, lay, root, rank, nranks):
        return [NcclOp("ncclAllReduce")]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        dist.all_reduce(recv, op=op)  # torch's API is in-place only


COLLECTIVE = AllReduce()
