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


def _ompi(rank: int, size: int, local_size: int, **extra: str) -> dict[str, str]:
    """The variables Open MPI's mpirun gives each rank (and what a user may add with -x)."""
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % local_size), "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size),
            **extra}


def test_open_mpi_on_several_nodes_needs_master_address():
    env = _ompi(1, 4, 2)
    with pytest.raises(UsageError, match="MASTER_ADDR and MASTER_PORT"):
        dist.launch_info(env)
    info = dist.launch_info({**env, "MASTER_ADDR": "h", "MASTER_PORT": "1234"})
    assert (info.rank, info.world_size, info.launcher, info.rendezvous) == (1, 4, "mpirun", None)


@pytest.mark.parametrize("job", [{"PMIX_NAMESPACE": "prterun-vm-8123@1"},  # Open MPI 5
                                 {"OMPI_MCA_orte_hnp_uri": "2118516736.0;tcp://10.0.0.2:41877"},  # Open MPI 4
                                 {}])  # neither: the ranks' common parent, mpirun's daemon
def test_open_mpi_on_one_node_defaults_to_localhost_and_a_port_of_the_job(job):
    infos = [dist.launch_info(_ompi(r, 4, 4, **job)) for r in range(4)]
    assert {(i.master_addr, i.master_port) for i in infos} == {(infos[0].master_addr, infos[0].master_port)}
    info = infos[0]
    assert info.master_addr == "127.0.0.1" and 20000 <= info.master_port < 40000
    assert "every rank is on this node" in info.rendezvous and "OMPI_COMM_WORLD_LOCAL_SIZE" in info.rendezvous
    other = dist.launch_info(_ompi(0, 4, 4, PMIX_NAMESPACE="prterun-vm-9999@1"))
    if "PMIX_NAMESPACE" in job:  # another job, another port
        assert other.master_port != info.master_port
    given = dist.launch_info(_ompi(0, 4, 4, MASTER_PORT="31000", **job))  # what the user set wins
    assert (given.master_addr, given.master_port) == ("127.0.0.1", 31000)


def test_the_derived_rendezvous_is_in_the_runs_environment(monkeypatch):
    from ccltune import environment

    for key, value in _ompi(0, 2, 2, PMIX_NAMESPACE="prterun-vm-1@1").items():
        monkeypatch.setenv(key, value)
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    env = environment.collect(world_size=2, engine="gloo")
    assert env["rendezvous"].startswith("127.0.0.1:")


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
