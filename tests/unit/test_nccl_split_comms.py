"""The nccl engine's communicators under NCCL_TESTS_SPLIT, without a GPU: which NCCL calls make them
(a recording stand-in for NcclLib; the engine is built without its CUDA set-up). The real calls run in
the GPU tier (>= 2 GPUs)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from ccltune.commconfig import ALIGN, BASELINE
from ccltune.dist import DistContext, LaunchInfo
from ccltune.engines import library
from ccltune.engines.nccl import NcclEngine


class _Lib:
    """Records comm_init / comm_split; ``split`` says whether the library exports ncclCommSplit."""

    def __init__(self, split: bool):
        self.split, self.calls = split, []

    def has(self, name: str) -> bool:
        return name != "ncclCommSplit" or self.split

    def unique_id(self) -> bytes:
        return b"mine"

    def config(self, **kw):
        return kw

    def comm_init(self, nranks, uid, rank, cfg):
        self.calls.append(("init", nranks, uid, rank, cfg["name"]))
        return f"comm-{cfg['name']}"

    def comm_split(self, parent, color, key, cfg):
        self.calls.append(("split", parent, color, key, cfg["name"]))
        return f"split-{cfg['name']}"


def _engine(lib: _Lib, members: tuple[int, ...] | None, rank: int = 3, color: int = 1) -> NcclEngine:
    ctx = DistContext(LaunchInfo(rank, 4, rank, 4, "torchrun", "127.0.0.1", 29500), 30.0, hosts=["h"] * 4)
    ctx.members, ctx.color = members, color
    ctx.broadcast_bytes = lambda data, what: b"rank0's"  # type: ignore[method-assign]
    ctx.gather_bytes = lambda data, what: [b"u0", b"u1", None, None]  # type: ignore[method-assign]
    eng = NcclEngine.__new__(NcclEngine)  # no CUDA: only what making a communicator reads
    eng.ctx, eng.lib, eng.plugin, eng.cta_policy, eng.empty_rules = ctx, lib, None, None, None
    eng.comm_env = library.CommEnv(library.LibraryFacts("nccl", "2.28.9"))
    eng.torch = SimpleNamespace(cuda=SimpleNamespace(device=lambda d: contextlib.nullcontext()))
    eng.device, eng.comms = None, {}
    eng.comm_time = {"init": [0.0, 0], "abort": [0.0, 0]}
    return eng


def test_a_group_is_split_from_the_world_alignment_communicator_where_nccl_can():
    lib = _Lib(split=True)
    eng = _engine(lib, (1, 3))
    assert eng.comm(BASELINE) == "split-ccltune-default"
    assert lib.calls == [("init", 4, b"rank0's", 3, f"ccltune-{ALIGN.label}"),   # the world, rank 3 of 4
                         ("split", f"comm-ccltune-{ALIGN.label}", 1, 3, "ccltune-default")]  # color 1, key: world rank
    # the alignment communicator (start_together's) is the world's: made once, reused
    assert eng._align_comm() == f"comm-ccltune-{ALIGN.label}" and len(lib.calls) == 2


def test_without_ncclcommsplit_each_group_inits_from_its_first_ranks_unique_id():
    lib = _Lib(split=False)
    eng = _engine(lib, (1, 3))
    eng.comm(BASELINE)
    assert lib.calls == [("init", 2, b"u1", 1, "ccltune-default")]  # rank 3 is rank 1 of group (1, 3)


@pytest.mark.parametrize("split", [True, False])
def test_without_groups_one_communicator_spans_the_world(split):
    lib = _Lib(split=split)
    _engine(lib, None, rank=2, color=0).comm(BASELINE)
    assert lib.calls == [("init", 4, b"rank0's", 2, "ccltune-default")]
