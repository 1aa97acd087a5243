"""nccl-tests' timed schedule (common.cu BenchTime/startColl) as ccltune runs it without the C loop
(engines.base.schedule: torch and gloo engines), the per-iteration times from its events, and -u's
misaligned buffers. The C loop runs the same schedule: tests/plugin/test_series.py."""

from __future__ import annotations

import pytest
import torch

from ccltune import collectives
from ccltune.engines.base import Point, iteration_seconds, schedule
from ccltune.measure import buffers
from ccltune.datatypes import dtype


def _point(iters: int, agg: int = 1, blocking: int = 0) -> Point:
    coll = collectives.REGISTRY["all_reduce"]
    return Point(coll, coll.layout(64, 4, 2, 0), dtype("float"), "sum", 0, False, iters, 0, 0, agg=agg,
                 blocking=blocking, per_iter=True)


@pytest.mark.parametrize("blocking, marks, want", [
    (0, False, "AAA"), (1, False, "AW|AW|AW|"), (2, False, "AWAWAW"), (3, False, "AWW|AWW|AWW|"),
    (0, True, "e0Ae1Ae2Ae3"), (3, True, "e0AWWe1|e2AWWe3|e4AWWe5|"),
])
def test_schedule_waits_meets_and_marks_as_nccl_tests(blocking, marks, want):
    log: list[str] = []
    busy = schedule(_point(3, blocking=blocking), lambda i: log.append("A"), lambda: log.append("W"),
                    lambda: log.append("|"), (lambda k: log.append(f"e{k}")) if marks else None)
    assert "".join(log) == want
    assert (busy > 0) == (blocking == 3)


def test_iteration_seconds_divide_by_agg_and_pair_under_z3():
    t = [0.0, 1.0, 3.0, 6.0, 10.0, 15.0, 21.0]
    assert iteration_seconds(_point(3, agg=2), lambda a, b: t[b] - t[a]) == [0.5, 1.0, 1.5]
    assert iteration_seconds(_point(3, agg=1, blocking=3), lambda a, b: t[b] - t[a]) == [1.0, 3.0, 5.0]


@pytest.mark.parametrize("in_place", [False, True])
def test_unalign_starts_both_buffers_n_elements_in(in_place):
    coll = collectives.REGISTRY["all_gather"]
    lay = coll.layout(64, 4, 2, 1)
    got = buffers.make(torch, lay, dtype("float"), in_place, "cpu", unalign=3)
    plain = buffers.make(torch, lay, dtype("float"), in_place, "cpu")
    for a, b in ((got.send, plain.send), (got.recv, plain.recv)):
        assert a.numel() == b.numel()
        assert a.storage_offset() - b.storage_offset() == 3
    assert got.keep[0].numel() == plain.keep[0].numel() + 3
