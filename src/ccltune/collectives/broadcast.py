"""broadcast: every rank ends with the root's buffer.

busbw = algbw: a pipelined chain moves the whole buffer through every link once.
"""

from ccltune.collectives.base import Collective, NcclOp, arange, input_values, simple_layout, unit_factor


class Broadcast(Collective):
    name = "broadcast"
    nccl_tests_name = "broadcast_perf"
    tuner_func = 0  # ncclFunc_t, as the tuner ABI numbers it
    plugin_name = "broadcast"  # the rule file's and the tuner plugin's name
    nccl_names = ("Broadcast",)  # NCCL's opName in its logs (COLL, TUNING lines)
    torch_in_place_only = True  # torch.distributed's API for it is in-place only
    rooted = True
    formula = "1"

    bus_factor = staticmethod(unit_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return simple_layout(size_bytes, elem)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        return input_values(torch, root, nranks, arange(torch, lay.count, device, part=part), None)

    def nccl_ops(self, lay, root, rank, nranks):
        return [NcclOp("ncclBroadcast", root)]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        dist.broadcast(recv, src=root)  # torch's API is in-place only


COLLECTIVE = Broadcast()
