"""sendrecv: rank r sends its buffer to rank r+1 and receives rank r-1's (a ring shift).

busbw = algbw: every link carries the whole buffer once. In place (nccl-tests' in-place row) a rank
sends from the buffer it receives into: timed, not checked (``checks_in_place``).
"""

from ccltune.collectives.base import Collective, NcclOp, arange, input_values, simple_layout, unit_factor


class SendRecv(Collective):
    name = "sendrecv"
    nccl_tests_name = "sendrecv_perf"
    nccl_names = ("Send", "Recv")  # NCCL's opName in its logs (COLL, TUNING lines)
    formula = "1"
    loops_ops = True  # sendrecv_perf prints the -o op in its redop column
    checks_in_place = False  # its send and receive share one buffer in place (base.Collective)

    bus_factor = staticmethod(unit_factor)

    def layout(self, size_bytes, elem, nranks, rank):
        return simple_layout(size_bytes, elem)

    def expected(self, torch, lay, rank, nranks, op, root, device, part=None):
        return input_values(torch, (rank - 1) % nranks, nranks, arange(torch, lay.count, device, part=part), None)

    def nccl_ops(self, lay, root, rank, nranks):
        return [NcclOp("ncclSend", (rank + 1) % nranks), NcclOp("ncclRecv", (rank - 1) % nranks)]

    def run_torch(self, dist, send, recv, lay, op, root, rank, nranks, in_place):
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % nranks),
               dist.P2POp(dist.irecv, recv, (rank - 1) % nranks)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()


COLLECTIVE = SendRecv()
