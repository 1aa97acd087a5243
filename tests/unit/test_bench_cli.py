"""ccltune bench: every bad input is refused before any process is started or file written."""

from __future__ import annotations

import time

import pytest

from ccltune import collectives, dist, launch
from ccltune.cli import main
from ccltune.commands import launching


def _bench(capsys, tmp_path, *args):
    db = tmp_path / "t.db"
    t0 = time.monotonic()
    rc = main(["bench", *args, "--db", str(db), "--json", str(tmp_path / "t.json")])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert not db.exists() and not (tmp_path / "t.json").exists()
    assert not (tmp_path / "ccltune.db").exists()
    assert elapsed < 5
    return rc, err


def _argparse_error(capsys, tmp_path, *args):
    with pytest.raises(SystemExit) as ei:
        _bench(capsys, tmp_path, *args)
    assert ei.value.code == 2
    assert not (tmp_path / "t.db").exists()
    return capsys.readouterr().err


def test_unknown_collective(capsys, no_launch):
    rc, err = _bench(capsys, no_launch, "all_reduse")
    assert rc == 2
    assert err.startswith("ccltune: error: unknown collective 'all_reduse' in COLLECTIVE")
    assert "did you mean 'all_reduce'" in err
    assert all(name in err for name in collectives.REGISTRY) and ", all" in err
    assert "Traceback" not in err


def test_unknown_collective_in_a_comma_list(capsys, no_launch):
    rc, err = _bench(capsys, no_launch, "all_reduce,gathr")
    assert rc == 2 and "unknown collective 'gathr'" in err and "did you mean 'gather'" in err


@pytest.mark.parametrize("args, needle", [
    (["-d", "flaot"], "unknown datatype 'flaot' in -d/--datatype (did you mean 'float'?)"),
    (["-o", "summ"], "unknown op 'summ' in -o/--op (did you mean 'sum'?)"),
    (["-b", "1M", "-e", "1K"], "-b/--minbytes must be <= -e/--maxbytes, got 1048576 > 1024"),
    (["-f", "-3"], "-f/--stepfactor must be >= 2 (or 0 or 1: step by -i), got -3"),
    (["-f", "0", "-i", "0"], "-i/--stepbytes must be > 0, got 0"),
    (["-b", "lots"], "-b/--minbytes: 'lots' is not a size"),
    (["-e", "1.5X"], "-e/--maxbytes: '1.5X' is not a size"),
    (["-a", "median"], "-a/--average must be 0..3 or one of avg, min, max, rank0, got 'median'"),
    (["-n", "0"], "-n/--iters must be >= 1, got 0"),
    (["-w", "-1"], "-w/--warmup_iters must be >= 0, got -1"),
    (["-r", "-1"], "-r/--root must be >= 0, got -1"),
    (["-G", "-2"], "-G/--cudagraph must be >= 0, got -2"),
    (["--timeout", "0"], "--timeout must be > 0 and at most 31536000 seconds (a year), got 0"),
    (["--nproc", "0"], "--nproc must be >= 1, got 0"),
    (["--engine", "gloo", "--algo", "ring"], "--symmetric, --algo, --proto and --channels need --engine nccl"),
    (["--engine", "gloo", "--buffers", "ncclmem-max"], "--buffers ncclmem-max is for the nccl engine, not --engine gloo"),
])
def test_bad_values_are_usage_errors(capsys, no_launch, args, needle):
    rc, err = _bench(capsys, no_launch, "all_reduce", *args)
    assert rc == 2
    assert needle in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("args, needle", [
    (["--engine", "mpi"], "argument --engine: invalid choice: 'mpi'"),
    (["-n", "many"], "error: argument -n/--iters: 'many' is not an integer"),  # the flag named once
    (["-f", "x"], "error: argument -f/--stepfactor: 'x' is not an integer"),
    (["-f", "1.5"], "error: argument -f/--stepfactor: '1.5' is not an integer"),  # nccl-tests' strtol would read 1
    (["-T", "-1"], "error: argument -T/--timeout: must be >= 0 and at most 31536000 seconds (a year; 0: no limit), got '-1'"),
    (["-z", "4"], "argument -z/--blocking: invalid choice: 4"),
    (["--warmup-mode", "all"], "argument --warmup-mode: invalid choice: 'all'"),
    (["--buffers", "pool"], "argument --buffers: invalid choice: 'pool'"),
])
def test_argparse_errors_exit_2(capsys, no_launch, args, needle):
    err = _argparse_error(capsys, no_launch, "all_reduce", *args)
    assert needle in err


def test_nccl_engine_without_gpu_is_engine_unavailable(capsys, no_launch, monkeypatch):
    monkeypatch.setattr(launching, "gpu_count", lambda: 0)
    rc, err = _bench(capsys, no_launch, "all_reduce", "--engine", "nccl")
    assert rc == 4 and "--engine nccl needs a CUDA/ROCm GPU" in err and "use --engine gloo" in err


def test_root_beyond_world_is_refused_before_the_db(capsys, no_launch, monkeypatch):
    """-r is checked against the world size once the job is known, still before the db."""
    monkeypatch.setattr(dist, "init", lambda *a, **k: dist.DistContext(info=dist.launch_info({}), timeout_s=5))
    rc, err = _bench(capsys, no_launch, "broadcast", "-r", "3", "--nproc", "1")
    assert rc == 2 and "-r/--root must be < the number of ranks (1), got 3" in err


def test_relaunch_passes_the_engine_and_drops_nproc(monkeypatch):
    """What the parent hands to torchrun: the user's arguments, the engine resolved once."""
    seen = {}

    class FakeProc:
        pid = -1

        def wait(self, timeout=None):
            return 0

        def poll(self):
            return 0

    def popen(cmd, env, **kw):
        seen["cmd"], seen["env"], seen["kw"] = cmd, env, kw
        return FakeProc()

    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(var, raising=False)
    args = type("A", (), {"nproc": 3})()
    argv = ["bench", "all", "--nproc", "3", "--engine=torch", "-n", "2"]
    assert launching.relaunch(args, argv, "gloo") == 0
    cmd = seen["cmd"]
    assert "--nproc-per-node=3" in cmd and "--standalone" in cmd
    assert cmd[cmd.index("ccltune"):] == ["ccltune", "bench", "all", "-n", "2", "--engine", "gloo"]
    assert seen["env"]["CCLTUNE_COMMAND"] == "ccltune " + " ".join(argv)
    # the job is one unit, apart from the terminal; its output goes where ccltune's does (stdout/stderr None)
    assert seen["kw"] == {"start_new_session": True, "stdout": None, "stderr": None}


@pytest.mark.parametrize("rc, code", [(0, 0), (1, 1), (-2, 130), (-15, 143), (3, 3)])
def test_exit_code_of_a_signalled_launcher(rc, code):
    assert launch._exit_code(rc) == code


def test_no_gpu_notice_is_said_before_the_job_starts_and_not_by_its_workers(monkeypatch, tmp_path, capsys):
    """Without a GPU the parent says the CPU engine was chosen (and the notes it knows) before torchrun
    starts (seconds on a laptop); the workers, rank 0 included, do not say it again."""
    for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", launch.PARENT_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("ccltune.commands.launching.default_engine", lambda: "gloo")
    said = []
    monkeypatch.setattr(launch, "relaunch", lambda *a, **k: said.append(capsys.readouterr().err) or 0)
    assert main(["bench", "all_reduce", "-G", "2", "--db", str(tmp_path / "t.db")]) == 0
    assert said == [f"ccltune: {launching.NO_GPU_NOTE}; -G 2 ignored: the gloo engine runs eagerly\n"]

    monkeypatch.setenv(launch.PARENT_ENV, "1")  # a worker relaunch() started: its parent said it
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    launching.announce("x")
    monkeypatch.delenv(launch.PARENT_ENV)  # the user's own torchrun: rank 0 says it, once
    launching.announce("y")
    monkeypatch.setenv("RANK", "1")
    launching.announce("z")
    assert capsys.readouterr().err == "ccltune: y\n"
