"""buffers: exact inputs, poisoned outputs, and a checker that counts every wrong element."""

from __future__ import annotations

import pytest
import torch

from ccltune import collectives, datatypes
from ccltune.measure import buffers

ALL = list(collectives.REGISTRY)
N = 4


def _point(name, rank, dtype="float", count=7):
    coll = collectives.get(name)
    dt = datatypes.dtype(dtype)
    lay = coll.layout(count * dt.size * (N if coll.per_rank_count else 1), dt.size, N, rank)
    return coll, dt, lay


def _correct(coll, dt, lay, rank, op="sum", root=0, in_place=False):
    """Buffers whose output holds exactly what the collective should have produced."""
    bufs = buffers.make(torch, lay, dt, in_place, "cpu")
    buffers.fill(torch, bufs, coll, rank, N, op)
    exp = coll.expected(torch, lay, rank, N, op, root, "cpu")
    bufs.recv.copy_(exp.to(bufs.recv.dtype))
    return bufs


def _checked_rank(coll):
    return 0 if coll.rooted and coll.name in ("gather", "reduce") else 1   # root 0 holds the output


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", ["float", "half", "bfloat16", "int8", "int32", "uint8", "double"])
def test_correct_output_has_no_wrong_element(name, dtype):
    rank = _checked_rank(collectives.get(name))
    coll, dt, lay = _point(name, rank, dtype)
    bufs = _correct(coll, dt, lay, rank)
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0) == 0


@pytest.mark.parametrize("name", ALL)
def test_kept_expected_values_check_the_next_configuration_as_fresh_ones_would(name):
    # a sweep checks every configuration of a size against one set of expected values
    rank = _checked_rank(collectives.get(name))
    coll, dt, lay = _point(name, rank)
    bufs = _correct(coll, dt, lay, rank)
    kept: dict = {}
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0, kept) == 0
    assert (0 in kept) == (lay.recv_elems > 0)
    first = kept.get(0)
    if lay.recv_elems:
        bufs.recv[lay.recv_elems - 1] += 1  # the next configuration got one element wrong
    got = buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0, kept)
    assert got == buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0)
    assert kept.get(0) is first  # not computed again


@pytest.mark.parametrize("name", ALL)
def test_one_corrupted_element_is_counted(name):
    rank = _checked_rank(collectives.get(name))
    coll, dt, lay = _point(name, rank)
    bufs = _correct(coll, dt, lay, rank)
    bufs.recv[lay.recv_elems - 1] += 1
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0) == 1
    bufs.recv[0] -= 1
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0) == 2


@pytest.mark.parametrize("name", ALL)
def test_unwritten_poisoned_element_is_counted(name):
    rank = _checked_rank(collectives.get(name))
    coll, dt, lay = _point(name, rank)
    bufs = _correct(coll, dt, lay, rank)
    bufs.recv[lay.recv_elems // 2] = buffers.POISON
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, "sum", 0) == 1


CASES = [(name, op) for name in ALL
         for op in (("sum", "prod", "min", "max", "avg") if collectives.get(name).reduces else ("sum",))]


@pytest.mark.parametrize("name, op", CASES)
def test_output_left_as_filled_is_entirely_wrong(name, op):
    """fill() poisons the whole output: a collective that writes nothing fails every element."""
    coll = collectives.get(name)
    rank = _checked_rank(coll)
    coll, dt, lay = _point(name, rank, "int32")
    bufs = buffers.make(torch, lay, dt, False, "cpu")
    buffers.fill(torch, bufs, coll, rank, N, op)
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, rank, N, op, 0) == lay.recv_elems


@pytest.mark.parametrize("name", ["gather", "reduce"])
def test_non_root_output_is_not_checked(name):
    coll, dt, lay = _point(name, 2)
    bufs = buffers.make(torch, lay, dt, False, "cpu")
    buffers.fill(torch, bufs, coll, 2, N, "sum")
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, 2, N, "sum", 0) == 0


def test_avg_on_half_tolerates_rounding_but_not_a_wrong_value():
    coll, dt, lay = _point("all_reduce", 0, "half")
    bufs = _correct(coll, dt, lay, 0, op="avg")
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, 0, N, "avg", 0) == 0
    bufs.recv[3] += 1
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, 0, N, "avg", 0) == 1


def test_int8_results_compare_after_wrapping():
    """A sum past 127 wraps in int8 as NCCL's arithmetic does; the exact value is not expected."""
    coll, dt, lay = _point("all_reduce", 0, "int8")
    bufs = buffers.make(torch, lay, dt, False, "cpu")
    exp = torch.full((lay.count,), 200, dtype=torch.int64)
    bufs.recv.copy_(exp.to(torch.int8))
    fake = type("C", (), {"expected": lambda self, *a, **k: exp, "reduces": True})()
    assert buffers.count_wrong(torch, bufs, fake, lay, dt, 0, N, "sum", 0) == 0


@pytest.mark.parametrize("name", ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce"])
def test_in_place_buffers_are_views_of_one_allocation_at_nccl_offsets(name):
    coll, dt, lay = _point(name, 2)
    bufs = buffers.make(torch, lay, dt, True, "cpu")
    assert len(bufs.keep) == 1
    base = bufs.keep[0]
    so, ro = lay.inplace_offsets
    elem = base.element_size()
    assert bufs.send.data_ptr() == base.data_ptr() + so * elem
    assert bufs.recv.data_ptr() == base.data_ptr() + ro * elem
    assert (bufs.send.numel(), bufs.recv.numel()) == (lay.send_elems, lay.recv_elems)


def test_fill_writes_rank_specific_inputs_and_poison():
    coll, dt, lay = _point("all_gather", 1)
    bufs = buffers.make(torch, lay, dt, False, "cpu")
    buffers.fill(torch, bufs, coll, 1, N, "sum")
    assert set(bufs.recv.tolist()) == {float(buffers.POISON)}
    other = buffers.make(torch, lay, dt, False, "cpu")
    buffers.fill(torch, other, coll, 2, N, "sum")
    assert bufs.send.tolist() != other.send.tolist()


def test_checking_in_pieces_finds_errors_in_every_piece(monkeypatch):
    """count_wrong compares CHUNK elements at a time; errors in the first and last piece count."""
    import torch

    from ccltune import collectives
    from ccltune.datatypes import dtype
    from ccltune.measure import buffers

    monkeypatch.setattr(buffers, "CHUNK", 7)   # several pieces on a small buffer, the last one short
    coll, dt = collectives.get("all_gather"), dtype("float")
    lay = coll.layout(4 * 2 * 25, 4, 2, 0)   # 25 elements per rank, 50 in the output
    bufs = buffers.make(torch, lay, dt, False, torch.device("cpu"))
    buffers.fill(torch, bufs, coll, 0, 2, "sum")
    exp = torch.cat([coll.expected(torch, lay, 0, 2, "sum", 0, None, part=(lo, lo + 7)) for lo in range(0, 50, 7)])
    bufs.recv.copy_(exp.to(bufs.recv.dtype))
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, 0, 2, "sum", 0) == 0
    bufs.recv[0] += 1
    bufs.recv[49] += 1
    assert buffers.count_wrong(torch, bufs, coll, lay, dt, 0, 2, "sum", 0) == 2
    # the pieces are the whole buffer's expected values, in order
    assert torch.equal(exp, coll.expected(torch, lay, 0, 2, "sum", 0, None))


def test_calls_step_through_the_buffers_and_wrap_like_nccl_tests():
    bufs = buffers.Buffers(torch.zeros(4), torch.zeros(4))
    assert [bufs.shift(i) for i in range(3)] == [0, 0, 0]  # a pair of its own: always the start
    bufs.shift_bytes, bufs.steps = 4096, 3
    assert [bufs.shift(i) for i in range(7)] == [0, 4096, 8192, 0, 4096, 8192, 0]


def test_bench_lays_buffers_out_as_nccl_tests_and_the_sweep_does_not():
    from ccltune.cli import build_parser
    from ccltune.commands import launching
    from ccltune.commands.bench import engine_options
    from ccltune.commands.bench_options import BenchOptions
    from ccltune.commands.options import from_fields

    def bench(*argv: str) -> BenchOptions:
        return from_fields(BenchOptions, vars(build_parser().parse_args(["bench", "all", *argv])))

    assert engine_options(bench()).shared_buffers
    assert not launching.engine_options(build_parser().parse_args(["sweep"])).shared_buffers
    assert engine_options(bench("--buffers", "torch")).buffers == "torch"
