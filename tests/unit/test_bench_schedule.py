"""nccl-tests' timed schedule (common.cu BenchTime/startColl) as ccltune runs it without the C loop
(engines.base.schedule: torch and gloo engines), the per-iteration times from its events, and -u's
misaligned buffers. The C loop runs the same schedule: tests/plugin/test_series.py."""

from __future__ import annotations

import pytest
import torch

from ccltune import collectives
from ccltune.datatypes import dtype
from ccltune.engines.base import Point, iteration_seconds, schedule
from ccltune.measure import buffers


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


def _plan(mode: str, sizes: list[int], max_bytes: int):
    from ccltune.measure.bench import BenchPlan
    return BenchPlan([collectives.get("all_reduce")], sizes, dtype("float"), "sum", 0, iters=20, warmup=5, graph=10,
                     check=1, average="avg", timeout_s=30.0, warmup_mode=mode, max_bytes=max_bytes)


@pytest.mark.parametrize("mode, warmup, ncclt", [("point", 5, False), ("series", 5, False), ("nccl-tests", 0, True)])
def test_each_size_warms_up_as_its_mode_says(mode, warmup, ncclt):
    """--warmup-mode nccl-tests follows nccl-tests' BenchTime: no warm-up of a size's own (its first
    call is the only untimed one), the graph's first launch timed and the check through a graph."""
    from types import SimpleNamespace

    from ccltune.measure.bench import point_at
    engine = SimpleNamespace(ctx=SimpleNamespace(comm_size=2, comm_rank=0))
    pt = point_at(engine, _plan(mode, [8, 256], 1 << 20), collectives.get("all_reduce"), 256, False)
    assert (pt.warmup, pt.ncclt) == (warmup, ncclt)


def test_series_warmup_runs_from_b_to_e(monkeypatch):
    """nccl-tests' TimeTest warms up at every size from -b to -e doubling, also where the last measured
    size is smaller than -e (-b 8 -e 1M -f 32 ends at 256 KB): 8 B .. 1 MB, -w calls each."""
    from types import SimpleNamespace

    from ccltune.measure import bench, point
    warmed: list[tuple[int, int]] = []
    engine = SimpleNamespace(ctx=SimpleNamespace(comm_size=1, comm_rank=0), waive_reason=lambda pt: None,
                             release=lambda pt, bufs: None)
    big = buffers.Buffers(torch.zeros(1 << 18), torch.zeros(1 << 18), [])
    monkeypatch.setattr(point, "allocate", lambda eng, pt: (big, None))
    monkeypatch.setattr(point, "warm", lambda eng, pt, view, calls, t: warmed.append((pt.lay.size_bytes, calls)) or True)
    bench.warm_series(engine, _plan("nccl-tests", [8, 256, 8192, 262144], 1 << 20), collectives.get("all_reduce"))
    assert warmed == [(8 << k, 5) for k in range(18)]  # 8 B, 16 B, ..., 1 MB
