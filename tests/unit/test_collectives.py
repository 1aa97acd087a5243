"""The collective registry: busbw factors, layouts (nccl-tests' size/count semantics), and
expected outputs checked against a brute-force simulation of each collective's data movement."""

from __future__ import annotations

import sys

import pytest
import torch

from ccltune import collectives
from ccltune.collectives.base import input_values
from ccltune.errors import UsageError

ALL = list(collectives.REGISTRY)

# nccl-tests' factors (doc/PERFORMANCE.md), pinned by number for n = 2, 4, 8
BUS_FACTORS = {
    "all_reduce": {2: 1.0, 4: 1.5, 8: 1.75},
    "all_gather": {2: 0.5, 4: 0.75, 8: 0.875},
    "reduce_scatter": {2: 0.5, 4: 0.75, 8: 0.875},
    "alltoall": {2: 0.5, 4: 0.75, 8: 0.875},
    "gather": {2: 0.5, 4: 0.75, 8: 0.875},
    "scatter": {2: 0.5, 4: 0.75, 8: 0.875},
    "broadcast": {2: 1.0, 4: 1.0, 8: 1.0},
    "reduce": {2: 1.0, 4: 1.0, 8: 1.0},
    "sendrecv": {2: 1.0, 4: 1.0, 8: 1.0},
}


def test_registry_is_nccl_tests_order_and_every_collective_has_a_factor():
    assert ALL == ["all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall",
                   "scatter", "gather", "sendrecv"]
    assert set(BUS_FACTORS) == set(ALL)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("n", [2, 4, 8])
def test_bus_factor(name, n):
    assert collectives.get(name).bus_factor(n) == pytest.approx(BUS_FACTORS[name][n], abs=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_every_module_states_its_formula_and_nccl_tests_name(name):
    c = collectives.get(name)
    assert c.formula in ("2(n-1)/n", "(n-1)/n", "1")
    assert c.nccl_tests_name == f"{name}_perf"
    assert "busbw" in sys.modules[type(c).__module__].__doc__   # each module starts with its formula


# -- names -------------------------------------------------------------------------------

@pytest.mark.parametrize("alias, name", [("allreduce", "all_reduce"), ("all-gather", "all_gather"),
                                         ("all_reduce_perf", "all_reduce"), ("A2A", "alltoall"),
                                         ("reducescatter", "reduce_scatter"), ("send_recv", "sendrecv")])
def test_aliases(alias, name):
    assert collectives.get(alias).name == name


def test_select_all_and_comma_lists_keep_order_without_duplicates():
    assert [c.name for c in collectives.select("all")] == ALL
    assert [c.name for c in collectives.select(["gather,all_reduce", "gather"])] == ["gather", "all_reduce"]
    assert [c.name for c in collectives.select(["sendrecv", "all"])] == ["sendrecv", *ALL[:-1]]


def test_unknown_collective_names_value_valid_ones_and_suggestion():
    with pytest.raises(UsageError) as ei:
        collectives.get("all_reduc")
    msg = str(ei.value)
    assert "'all_reduc'" in msg and "did you mean 'all_reduce'" in msg
    assert all(name in msg for name in ALL) and "all" in msg.split("valid:")[1]


# -- layouts -------------------------------------------------------------------------------

FLOAT = 4


@pytest.mark.parametrize("name", ["all_reduce", "broadcast", "reduce", "sendrecv"])
def test_layout_whole_buffer_per_rank(name):
    lay = collectives.get(name).layout(1002, FLOAT, 4, 1)
    assert (lay.size_bytes, lay.count, lay.send_elems, lay.recv_elems) == (1000, 250, 250, 250)


def test_layout_all_gather_count_is_per_rank_size_is_whole_output():
    lay = collectives.get("all_gather").layout(1000, FLOAT, 4, 3)
    # 1000 B rounds down to n * elem: 62 floats per rank, 248 in all
    assert (lay.size_bytes, lay.count, lay.send_elems, lay.recv_elems) == (992, 62, 62, 248)
    assert lay.inplace_offsets == (3 * 62, 0)   # NCCL: sendbuff == recvbuff + rank * count


def test_layout_reduce_scatter_count_is_per_rank_size_is_whole_input():
    lay = collectives.get("reduce_scatter").layout(1000, FLOAT, 4, 2)
    assert (lay.size_bytes, lay.count, lay.send_elems, lay.recv_elems) == (992, 62, 248, 62)
    assert lay.inplace_offsets == (0, 2 * 62)   # NCCL: recvbuff == sendbuff + rank * count


@pytest.mark.parametrize("name, send, recv", [("alltoall", 248, 248), ("gather", 62, 248), ("scatter", 248, 62)])
def test_layout_per_rank_count_collectives_without_in_place(name, send, recv):
    lay = collectives.get(name).layout(1000, FLOAT, 4, 0)
    assert (lay.size_bytes, lay.count, lay.send_elems, lay.recv_elems) == (992, 62, send, recv)
    assert lay.inplace_offsets is None


def test_sendrecv_in_place_shares_one_buffer_and_is_not_checked():
    # nccl-tests' sendrecv.cu: in-place offsets 0 and 0 (the send buffer is the receive buffer), timed,
    # reportErrors = 0 (#wrong N/A); all_reduce's in-place form is checked
    assert collectives.get("sendrecv").layout(64, FLOAT, 2, 0).inplace_offsets == (0, 0)
    assert not collectives.get("sendrecv").checks_in_place
    assert collectives.get("all_reduce").layout(64, FLOAT, 2, 0).inplace_offsets == (0, 0)
    assert collectives.get("all_reduce").checks_in_place


@pytest.mark.parametrize("name", ALL)
def test_size_smaller_than_one_element_per_rank_gives_zero_count(name):
    c = collectives.get(name)
    lay = c.layout(8, 4, 4, 0)
    assert lay.size_bytes == lay.count * 4 * (4 if c.per_rank_count else 1)
    assert lay.count == (0 if c.per_rank_count else 2)


# -- expected values vs a brute-force simulation --------------------------------------------

def _inputs(c, n, count, op):
    """Each rank's send buffer, as Python ints, exactly as buffers.fill writes it."""
    lay = c.layout(count * FLOAT * (n if c.per_rank_count else 1), FLOAT, n, 0)
    return [input_values(torch, r, n, torch.arange(lay.send_elems, dtype=torch.int64), c.input_op(op)).tolist()
            for r in range(n)]


def _reduce(values, op, n):
    if op in ("sum", "avg"):
        total = sum(values)
        return total // n if op == "avg" else total
    if op == "prod":
        out = 1
        for v in values:
            out *= v
        return out
    return max(values) if op == "max" else min(values)


def _simulate(name, ins, n, c, op, root):
    """Per-rank output lists (None where the rank's output is undefined)."""
    if name == "all_reduce":
        red = [_reduce([ins[p][j] for p in range(n)], op, n) for j in range(c)]
        return [red] * n
    if name == "reduce":
        red = [_reduce([ins[p][j] for p in range(n)], op, n) for j in range(c)]
        return [red if r == root else None for r in range(n)]
    if name == "reduce_scatter":
        return [[_reduce([ins[p][r * c + j] for p in range(n)], op, n) for j in range(c)] for r in range(n)]
    if name == "all_gather":
        return [[v for p in range(n) for v in ins[p]]] * n
    if name == "gather":
        return [[v for p in range(n) for v in ins[p]] if r == root else None for r in range(n)]
    if name == "broadcast":
        return [list(ins[root])] * n
    if name == "scatter":
        return [ins[root][r * c:(r + 1) * c] for r in range(n)]
    if name == "alltoall":
        return [[ins[p][r * c + j] for p in range(n) for j in range(c)] for r in range(n)]
    if name == "sendrecv":
        return [list(ins[(r - 1) % n]) for r in range(n)]
    raise AssertionError(name)


CASES = [(name, op) for name in ALL
         for op in (("sum", "prod", "min", "max", "avg") if collectives.get(name).reduces else ("sum",))]


@pytest.mark.parametrize("name, op", CASES)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_expected_matches_simulation(name, op, n):
    coll = collectives.get(name)
    count = 13  # prime: shifted or swapped blocks do not line up by accident
    ins = _inputs(coll, n, count, op)
    for root in ([0, n - 1] if coll.rooted else [0]):
        outs = _simulate(name, ins, n, count, op, root)
        for r in range(n):
            lay = coll.layout(count * FLOAT * (n if coll.per_rank_count else 1), FLOAT, n, r)
            assert lay.count == count
            exp = coll.expected(torch, lay, r, n, op, root, "cpu")
            if outs[r] is None:
                assert exp is None
            else:
                assert exp.dtype == torch.int64
                assert exp.tolist() == outs[r], f"{name} {op} n={n} rank {r} root {root}"


@pytest.mark.parametrize("name", ["all_gather", "alltoall", "sendrecv", "broadcast", "scatter", "gather"])
def test_data_movement_inputs_differ_between_ranks_and_elements(name):
    """A simulation proves nothing if every rank sends the same values."""
    coll = collectives.get(name)
    ins = _inputs(coll, 4, 13, "sum")
    assert len({tuple(x) for x in ins}) == 4
    assert all(len(set(x)) > 1 for x in ins)


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
def test_reduction_inputs_differ_between_ranks(op):
    ins = _inputs(collectives.get("all_reduce"), 4, 13, op)
    assert len({tuple(x) for x in ins}) > 1
