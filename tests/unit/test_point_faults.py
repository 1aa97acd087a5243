"""point.measure on one process: a size that does not fit is skipped, a GPU fault stops the run."""

from __future__ import annotations

import pytest

from ccltune import collectives
from ccltune.datatypes import dtype
from ccltune.engines.base import Engine, Point
from ccltune.errors import DistError
from ccltune.measure import point


class _Ctx:
    rank, world_size, is_root, n_nodes = 0, 1, True, 1
    comm_rank, comm_size, min_comm_size, comm_nodes = 0, 1, 1, 1  # one group: the world

    def allreduce_floats(self, values, op, what):
        return list(values)


class _Engine(Engine):
    """The CPU tensors of the gloo engine, without a process group; fill raises ``fault``."""

    def __init__(self, fault: BaseException):
        super().__init__(_Ctx(), None)
        self.device = "cpu"
        self.fault = fault


def _point() -> Point:
    coll = collectives.REGISTRY["all_reduce"]
    lay = coll.layout(64, 4, 1, 0)
    return Point(coll, lay, dtype("float"), "sum", 0, False, 1, 0, 0)


@pytest.fixture
def failing_fill(monkeypatch):
    def use(fault: BaseException) -> _Engine:
        def fill(*a, **k):
            raise fault
        monkeypatch.setattr(point.buffers, "fill", fill)
        return _Engine(fault)
    return use


def test_out_of_memory_while_filling_is_a_skipped_row(failing_fill):
    eng = failing_fill(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    out = point.measure(eng, _point(), check=True, average="avg", timeout_s=5)
    assert out.status == "skipped" and "out of memory filling the input" in out.note


def test_a_gpu_fault_while_filling_stops_the_run_with_its_message(failing_fill):
    eng = failing_fill(RuntimeError("CUDA error: an illegal memory access was encountered"))
    with pytest.raises(DistError) as err:
        point.measure(eng, _point(), check=True, average="avg", timeout_s=5)
    msg = str(err.value)
    assert "not a lack of memory" in msg and "illegal memory access" in msg and "filling the input" in msg
