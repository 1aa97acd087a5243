"""Who we are, read from each launcher's variables (no process group is started)."""

from __future__ import annotations

import pytest

from ccltune import dist
from ccltune.errors import UsageError


def test_torchrun():
    info = dist.launch_info({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4",
                             "MASTER_ADDR": "n0", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x"})
    assert (info.rank, info.world_size, info.local_rank, info.launcher, info.n_nodes) == (3, 8, 3, "torchrun", 2)
    assert (info.master_addr, info.master_port) == ("n0", 29500)


def test_slurm_derives_address_and_port(monkeypatch):
    monkeypatch.setattr(dist.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no scontrol")))
    info = dist.launch_info({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
                             "SLURM_NTASKS_PER_NODE": "8(x2)", "SLURM_JOB_NODELIST": "gpu07", "SLURM_JOB_ID": "1234"})
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (5, 16, 1, 8)
    assert info.launcher == "slurm" and info.master_addr == "gpu07" and info.master_port == 21234
    assert info.n_nodes == 2


def test_slurm_bracketed_nodelist_without_scontrol_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(dist.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no scontrol")))
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST='gpu\\[01-04\\]'.*MASTER_ADDR"):
        dist.launch_info({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "gpu[01-04]"})


def test_open_mpi_needs_master_address():
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    with pytest.raises(UsageError, match="MASTER_ADDR and MASTER_PORT"):
        dist.launch_info(env)
    info = dist.launch_info({**env, "MASTER_ADDR": "h", "MASTER_PORT": "1234"})
    assert (info.rank, info.world_size, info.launcher) == (1, 2, "mpirun")


def test_no_launcher_is_a_single_process():
    info = dist.launch_info({})
    assert (info.rank, info.world_size, info.launcher) == (0, 1, "single")


def test_a_non_integer_rank_names_the_variable():
    with pytest.raises(UsageError, match="RANK='x'"):
        dist.launch_info({"RANK": "x", "WORLD_SIZE": "2"})


@pytest.mark.parametrize("env, needle", [
    ({"RANK": "5", "WORLD_SIZE": "2"}, "RANK=5 is not a rank of a job of WORLD_SIZE=2 (0 to 1)"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1 is not a rank"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1"),
    ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
     "LOCAL_RANK=2 and LOCAL_WORLD_SIZE=2 do not make a local rank"),
    ({"SLURM_PROCID": "16", "SLURM_NTASKS": "16", "MASTER_ADDR": "h"}, "SLURM_PROCID=16 is not a rank"),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "OMPI_COMM_WORLD_RANK=2 is not a rank"),
])
def test_numbers_that_make_no_job_are_refused_naming_the_variable(env, needle):
    # set by hand, a wrong RANK would otherwise wait out the whole rendezvous timeout
    with pytest.raises(UsageError) as ei:
        dist.launch_info(env)
    assert needle in str(ei.value)
