"""reduce: the root ends with the reduction of all ranks' buffers.

busbw = algbw: a pipelined chain moves the whole buffer through every link once.
"""

from ccltune.collectives.base import Collective, NcclOp, arange, reduce_inputs, simple_layout, unit_factor


class Reduce(Collective):
    name = "reduce"
    nccl_tests_name = "reduce_perf"
    tuner_func = 1  # ncclFunc_t, as the tuner ABI numbers it
    plugin_name = "reduce"  # the rule file's and the tuner plugin's name
    nccl_names = ("Reduce",)  # NCCL's opName in its logs (COLL, TUNING lines)
    torch_in_place_only = True  # torch.distributed's API for it is in-place only
    reduces = True
    rooted = True
    formula = "1"

    bus_factor = staticmethod(unit_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return simple_layout(size_bytes, elem)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        if rank != root:
            return None
        return reduce_inputs(torch, nranks, arange(torch, lay.count, device, part=part), op)

    def nccl_ops(self, lay, root, rank, nranks):
        return [NcclOp("ncclReduce", root)]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        dist.reduce(recv, dst=root, op=op)  # torch's API is in-place only


COLLECTIVE = Reduce()
