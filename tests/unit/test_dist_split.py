"""dist.split and GroupCalls without a process group: a stand-in torch.distributed that records calls."""

from __future__ import annotations

import pytest

from ccltune import dist
from ccltune.dist import DistContext, GroupCalls, LaunchInfo
from ccltune.errors import UsageError


class _Dist:
    """The torch.distributed calls the collectives make, with torch's parameter names."""

    def __init__(self):
        self.calls = []

    def new_group(self, ranks=None, timeout=None, backend=None):
        self.calls.append(("new_group", tuple(ranks)))
        return f"pg{tuple(ranks)}"

    def broadcast(self, tensor, src=None, group=None, async_op=False):
        self.calls.append(("broadcast", src, group))

    def reduce(self, tensor, dst=None, op=None, group=None, async_op=False):
        self.calls.append(("reduce", dst, group))

    def all_reduce(self, tensor, op=None, group=None, async_op=False):
        self.calls.append(("all_reduce", group))

    def isend(self, tensor, dst=None, group=None, tag=0):
        raise AssertionError("P2POp passes isend itself, not a call of it")

    class P2POp:
        def __init__(self, op, tensor, peer=None, group=None, tag=0):
            self.op, self.peer, self.group = op, peer, group


def _ctx(rank: int) -> DistContext:
    ctx = DistContext(LaunchInfo(rank, 4, rank, 4, "torchrun", "127.0.0.1", 29500), 30.0, hosts=["a", "a", "b", "b"])
    ctx.dist = _Dist()
    return ctx


def test_every_rank_creates_every_group_in_color_order_and_keeps_its_own():
    ctx = _ctx(3)
    dist.split(ctx, (1, 0, 1, 0))
    assert ctx.dist.calls == [("new_group", (1, 3)), ("new_group", (0, 2))]
    assert (ctx.color, ctx.members, ctx.comm_group) == (0, (1, 3), "pg(1, 3)")
    assert (ctx.comm_rank, ctx.comm_size, ctx.min_comm_size, ctx.comm_nodes) == (1, 2, 2, 2)


def test_one_color_is_the_world_under_that_color():
    ctx = _ctx(2)
    dist.split(ctx, (7, 7, 7, 7))
    assert ctx.dist.calls == [] and ctx.members is None and ctx.color == 7
    assert (ctx.comm_rank, ctx.comm_size, ctx.calls) == (2, 4, ctx.dist)


def test_group_calls_run_on_the_group_with_roots_and_peers_as_world_ranks():
    d = _Dist()
    calls = GroupCalls(d, "pg", (1, 3))
    calls.broadcast("t", src=1)
    calls.reduce("t", 0, op="sum")   # dst given by position
    calls.all_reduce("t", op="sum")
    assert d.calls == [("broadcast", 3, "pg"), ("reduce", 1, "pg"), ("all_reduce", "pg")]
    p2p = calls.P2POp(calls.isend, "t", 1)
    assert (p2p.op, p2p.peer, p2p.group) == (d.isend, 3, "pg")  # torch's own isend: P2POp checks it by identity


def test_a_split_must_color_every_rank():
    with pytest.raises(UsageError, match="3 colors for a job of 4 ranks"):
        dist.split(_ctx(0), (0, 1, 0))
