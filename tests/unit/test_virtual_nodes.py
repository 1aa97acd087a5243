"""--virtual-nodes: NCCL_HOSTID per group of consecutive ranks, and the job's node count."""

import os
from types import SimpleNamespace

import pytest

from ccltune.commands import launching
from ccltune.dist import DistContext, LaunchInfo
from ccltune.errors import UsageError
from ccltune.measure import session


def ctx(rank, world, hosts=None):
    info = LaunchInfo(rank, world, rank, world, "torchrun", "127.0.0.1", 29500)
    return DistContext(info, 60.0, hosts=hosts or ["h"] * world)


def test_consecutive_ranks_share_a_host_id_and_the_job_counts_k_nodes(monkeypatch):
    ids = []
    for rank in range(4):
        monkeypatch.delenv("NCCL_HOSTID", raising=False)
        c = ctx(rank, 4)
        assert c.n_nodes == 1
        session.apply_virtual_nodes(c, 2)
        assert c.n_nodes == 2
        ids.append(os.environ["NCCL_HOSTID"])
    assert ids[0] == ids[1] != ids[2] == ids[3]


def test_one_virtual_node_changes_nothing(monkeypatch):
    monkeypatch.delenv("NCCL_HOSTID", raising=False)
    c = ctx(0, 4)
    session.apply_virtual_nodes(c, 1)
    assert c.n_nodes == 1 and "NCCL_HOSTID" not in os.environ


def test_k_must_divide_the_ranks_and_split_one_host():
    with pytest.raises(UsageError, match="--virtual-nodes 3 does not divide 4 ranks"):
        session.apply_virtual_nodes(ctx(0, 4), 3)
    with pytest.raises(UsageError, match="already spans 2 hosts"):
        session.apply_virtual_nodes(ctx(0, 4, ["a", "a", "b", "b"]), 2)
    with pytest.raises(UsageError, match="--virtual-nodes must be >= 1, got 0"):
        launching.check_virtual_nodes(SimpleNamespace(virtual_nodes=0, nproc=4), "nccl")


def test_k_is_checked_against_the_job_before_any_process_starts(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(launching, "gpu_count", lambda: 4)  # a 4-GPU node
    with pytest.raises(UsageError, match="--virtual-nodes 3 does not divide the job's 4 processes"):
        launching.check_virtual_nodes(SimpleNamespace(virtual_nodes=3, nproc=4), "nccl")
    launching.check_virtual_nodes(SimpleNamespace(virtual_nodes=2, nproc=4), "nccl")
    with pytest.raises(UsageError, match="does not divide the job's 2 processes"):  # gloo's default: 2
        launching.check_virtual_nodes(SimpleNamespace(virtual_nodes=4, nproc=None), "gloo")


def test_the_run_record_says_the_nodes_were_simulated():
    env = {"platform": "NVIDIA H200 x4"}
    session.mark_virtual_nodes(env, 2)
    assert env == {"platform": "NVIDIA H200 x4 (simulated 2 nodes)", "virtual_nodes": 2}
    same = {"platform": "NVIDIA H200 x4"}
    session.mark_virtual_nodes(same, 1)
    assert same == {"platform": "NVIDIA H200 x4"}
