"""reduce: the root ends with the reduction of all ranks' buffers.

busbw = algbw: a pipelined chain moves the whole buffer through every link once.
"""

from ccltune.collectives.base import Collective, arange, reduce_inputs, simple_layout, unit_factor


class Reduce(Collective):
    name = "reduce"
    nccl_tests_name = "reduce_perf"
    tuner_func = 1
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

    def run_nccl(self, lib, comm, send, recv, lay, dt, op, root, stream, rank, nranks):
        lib.call("ncclReduce", send, recv, lay.count, dt, op, root, comm, stream)

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        dist.reduce(recv, dst=root, op=op)  # torch's API is in-place only


COLLECTIVE = Reduce()
