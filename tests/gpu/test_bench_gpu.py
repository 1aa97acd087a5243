"""On the GPU machine (pytest -m gpu tests/gpu): bench on the nccl and torch engines, symmetric
buffers, forced candidates NCCL refuses, and a tiny sweep -> tune -> validate through the plugin.

Correctness only: figures come from scripts/device.sh and go to docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def ccltune(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    # the environment carries conftest's NVLink-multicast-off variables
    return subprocess.run([sys.executable, "-m", "ccltune", *args], capture_output=True, text=True, timeout=timeout)


def records(path: Path) -> list[dict]:
    return json.loads(path.read_text())["records"]


@pytest.mark.parametrize("extra", [[], ["-G", "5"], ["-G", "5", "--symmetric"],
                                   ["-G", "5", "--buffers", "ncclmem-max", "--warmup-mode", "series"],
                                   ["-G", "5", "--warmup-mode", "nccl-tests"]],
                         ids=["eager", "graph", "symmetric", "nccl-tests-layout", "nccl-tests-procedure"])
def test_nccl_engine_every_collective_is_exact(tmp_path, gpus, extra, exact):
    n_gpus = gpus
    js = tmp_path / "b.json"
    proc = ccltune("bench", "all", "-b", "8", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", *extra,
                   "--nproc", str(n_gpus), "--db", str(tmp_path / "b.db"), "--json", str(js))
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(js)
    ok = [r for r in recs if r["status"] == "ok"]
    assert {r["collective"] for r in ok} == {"all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce",
                                             "alltoall", "scatter", "gather", "sendrecv"}
    assert all(exact(r) and r["time_us"] > 0 for r in ok)


@pytest.mark.parametrize("dtype,op", [("half", "max"), ("bfloat16", "sum"), ("int8", "prod"), ("float", "avg"),
                                      ("int64", "min")])
def test_nccl_engine_datatypes_and_ops(tmp_path, n_gpus, dtype, op):
    js = tmp_path / "b.json"
    proc = ccltune("bench", "all_reduce", "reduce_scatter", "-b", "1K", "-e", "1M", "-f", "32", "-d", dtype, "-o", op,
                   "-n", "2", "-w", "1", "--nproc", str(n_gpus), "--db", str(tmp_path / "b.db"), "--json", str(js))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(r["wrong"] == 0 for r in records(js) if r["status"] == "ok")


def test_torch_engine_graph(tmp_path, n_gpus):
    js = tmp_path / "b.json"
    proc = ccltune("bench", "all_reduce", "all_gather", "-b", "8", "-e", "1M", "-f", "32", "-G", "3",
                   "--engine", "torch", "--nproc", str(n_gpus), "--db", str(tmp_path / "b.db"), "--json", str(js))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(r["status"] == "ok" for r in records(js))


def test_refused_candidate_is_a_row_not_an_error(tmp_path, n_gpus):
    js = tmp_path / "b.json"
    proc = ccltune("bench", "all_gather", "-b", "1M", "-e", "1M", "--algo", "tree", "--proto", "LL",
                   "--nproc", str(n_gpus), "--db", str(tmp_path / "b.db"), "--json", str(js))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {r["status"] for r in records(js)} == {"unavailable"}


def test_sweep_tune_validate(tmp_path, n_gpus):
    if not (ROOT / "plugin" / "build" / "libnccl-tuner-ccltune.so").exists():
        subprocess.run(["make", "-C", str(ROOT / "plugin")], check=True, capture_output=True)
    db, rules = tmp_path / "t.db", tmp_path / "rules.conf"
    proc = ccltune("sweep", "all_gather", "reduce_scatter", "-b", "2M", "-e", "8M", "-f", "2", "--reps", "3",
                   "--nproc", str(n_gpus), "--db", str(db))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = ccltune("tune", "--db", str(db), "--out", str(rules))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ccltune("plugin", "check", str(rules)).returncode == 0
    vj = tmp_path / "v.json"
    proc = ccltune("validate", str(rules), "all_gather", "reduce_scatter", "-b", "2M", "-e", "8M", "-f", "2",
                   "--reps", "3", "--nproc", str(n_gpus), "--db", str(db), "--json", str(vj))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]   # the verdict is data; a crash is not
    verdict = json.loads(vj.read_text())
    assert verdict["status"] in ("PASS", "FAIL") and len(verdict["sizes"]) == 6


def test_sweep_tries_a_refused_candidate_once_per_collective(tmp_path, n_gpus):
    import sqlite3

    db = tmp_path / "s.db"
    proc = ccltune("sweep", "all_gather", "-b", "1M", "-e", "4M", "-f", "2", "--algos", "tree", "--protos", "ll",
                   "--channels", "", "--reps", "2", "--nproc", str(n_gpus), "--db", str(db))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sqlite3.connect(db).execute(
        "select size_bytes, status, note from measurements where config = 'tree/ll/default' order by size_bytes").fetchall()
    assert [r[1] for r in rows] == ["unavailable"] * 3
    assert "not tried again" not in rows[0][2] and all("not tried again" in r[2] for r in rows[1:])


def test_full_grid_measures_pairs_with_channel_counts_and_skips_a_refused_pairs(tmp_path, n_gpus):
    import sqlite3

    db = tmp_path / "s.db"
    proc = ccltune("sweep", "broadcast", "-b", "64K", "-e", "128K", "-f", "2", "--algos", "tree,ring", "--protos",
                   "ll128", "--channels", "8", "--grid", "full", "--reps", "2", "--nproc", str(n_gpus), "--db", str(db))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sqlite3.connect(db).execute("select config, status, note, wrong from measurements").fetchall()
    by = {}
    for config, status, note, wrong in rows:
        by.setdefault(config, []).append((status, note, wrong))
    assert set(by) == {"default", "default-twin", "tree/ll128/default", "ring/ll128/default", "default/default/8",
                       "tree/ll128/8", "ring/ll128/8"}
    assert all(st == "ok" and w == 0 for st, _, w in by["ring/ll128/8"]) and len(by["ring/ll128/8"]) == 4
    # broadcast has no tree: the pair is refused once, and its channel count is never tried
    assert all(st == "unavailable" for st, _, _ in by["tree/ll128/8"] + by["tree/ll128/default"])
    assert all("the tree/ll128/default pair" in note for _, note, _ in by["tree/ll128/8"])
    assert "communicator abort" not in proc.stdout  # a refused communicator is set aside, not aborted


def test_plugin_verify_sees_a_forced_rule_in_nccls_log(tmp_path, n_gpus):
    rules = tmp_path / "r.conf"
    rules.write_text("allreduce,1M,1M,ring,ll,-1,-1,-1\nallreduce,4M,4M,default,default,2,-1,-1\n")
    out = tmp_path / "v.json"
    proc = ccltune("plugin", "verify", str(rules), "all_reduce", "-b", "1M", "-e", "4M", "-f", "2",
                   "--nproc", str(n_gpus), "--json", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    checks = {c["size_bytes"]: c for c in json.loads(out.read_text())["checks"]}
    assert checks[1 << 20]["status"] == "APPLIED" and checks[1 << 20]["nccl"][0]["proto"] == "LL"
    assert checks[2 << 20]["status"] == "NO RULE"
    assert checks[4 << 20]["status"] == "APPLIED" and checks[4 << 20]["nccl"][0]["channels"] <= 2


@pytest.mark.parametrize("graph", [0, 3], ids=["eager", "graph"])
def test_timed_calls_step_through_the_largest_buffers_as_nccl_tests_does(gpus, graph):
    """--buffers ncclmem-max (bench's default): timed call i writes its output i sizes into the
    receive buffer, wrapping after the last whole size that fits; the checked call uses the start."""
    import torch

    from ccltune import collectives, dist
    from ccltune.datatypes import dtype
    from ccltune.engines.base import EngineOptions, Point
    from ccltune.engines.nccl import NcclEngine
    from ccltune.measure import point

    ctx = dist.init(30.0)
    assert ctx.world_size == 1  # one process, one GPU: NCCL's single-rank all_reduce is a copy
    eng = NcclEngine(ctx, EngineOptions(shared_buffers=True))
    try:
        size, steps, iters = 4096, 3, 5                     # bytes; calls 3 and 4 wrap to slots 0 and 1
        eng.reserve(size * steps + size // 2)               # room for 3 whole sizes, not 4
        coll = collectives.REGISTRY["all_reduce"]
        pt = Point(coll, coll.layout(size, 4, 1, 0), dtype("float"), "sum", 0, False, iters, 0, graph)
        bufs, skipped = point.allocate(eng, pt)
        assert skipped is None and bufs is not None
        assert (bufs.shift_bytes, bufs.steps) == (size, steps)
        send, recv = eng._pool
        send.fill_(7)
        eng.launch(pt, bufs)  # the first call (it makes the communicator), at the start, as bench's is
        eng.sync()
        recv.fill_(0)
        torch.cuda.synchronize()
        eng.time_point(pt, bufs)
        torch.cuda.synchronize()
        got = recv.view(-1)
        assert (got[: size * steps] == 7).all(), "every whole size that fits was written"
        assert (got[size * steps:] == 0).all(), "nothing past the last whole size"
        if graph:  # -G: captured and launched by the launch loop, not PyTorch's graph object
            from ccltune.engines.series import Graph
            g = eng.capture(pt, bufs, None)
            assert isinstance(g, Graph) and g.exec
            recv.fill_(0)
            torch.cuda.synchronize()
            g.launch(2)
            eng.sync()
            g.close()
            assert (got[: size * steps] == 7).all() and (got[size * steps:] == 0).all()
        # a pair of the point's own (--buffers ncclmem: no pool) is used from its start by every call
        eng.buffers, eng._pool = "ncclmem", []
        own, _ = point.allocate(eng, pt)
        assert own is not None and own.steps == 1 and own.shift(4) == 0
    finally:
        eng.close()


def test_validate_measures_a_failing_size_again_and_reports_both(tmp_path, n_gpus):
    """ring/LL forced at 64 MB is several times slower than NCCL's choice: it fails, is measured
    again (--retest 1), fails again, and the JSON keeps the first judgement beside the second."""
    rules = tmp_path / "slow.conf"
    rules.write_text("allreduce,0,16T,ring,ll,-1,-1,-1\n")
    js = tmp_path / "v.json"
    proc = ccltune("validate", str(rules), "all_reduce", "-b", "64M", "-e", "64M", "--reps", "3",
                   "--nproc", str(n_gpus), "--db", str(tmp_path / "v.db"), "--json", str(js))
    assert proc.returncode != 0 and "FAIL" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    (size,) = json.loads(js.read_text())["sizes"]
    assert size["status"] == "FAIL" and size["reason"].startswith("again on retest: ")
    assert size["first"]["status"] == "FAIL" and size["speedup"] < 0.9


def test_validate_times_the_sweeps_best_candidate_as_a_third_arm(tmp_path, n_gpus):
    """A sweep database naming ring/LL128 the winner at 4 MB makes validate time it beside the
    default and the rules (here the same ring/LL128) and report the capture from those three."""
    import torch

    from ccltune.store import Measurement, Store

    db = tmp_path / "sweep.db"
    # the machine's own GPU model: validate takes the sweep's candidates of that model only (the test named
    # H200 and failed on 4 x H100, 2026-11-27)
    gpu = torch.cuda.get_device_name(0)
    with Store(db) as st:
        run = st.begin_run("sweep", command="test", env={"gpus": [{"name": gpu}] * n_gpus})
        m = dict(collective="all_gather", size_bytes=4 << 20, count=(4 << 20) // 4, dtype="float", op=None,
                 root=None, in_place=False, n_ranks=n_gpus)
        st.add_measurements(run, [Measurement(**m, rep=r, time_us=t) for r, t in enumerate((100, 101, 99))]
                            + [Measurement(**m, rep=r, time_us=t, algo="ring", proto="ll128",
                                           config="ring/ll128/default") for r, t in enumerate((60, 61, 59))])
        st.finish_run(run, "complete")
    rules = tmp_path / "r.conf"
    rules.write_text("allgather,0,16T,ring,ll128,-1,-1,-1\n")
    js = tmp_path / "v.json"
    proc = ccltune("validate", str(rules), "all_gather", "-b", "4M", "-e", "4M", "--reps", "5", "--best-from",
                   str(db), "--nproc", str(n_gpus), "--db", str(tmp_path / "v.db"), "--json", str(js))
    assert "# capture:" in proc.stdout, proc.stderr[-3000:]
    (size,) = json.loads(js.read_text())["capture"]["sizes"]
    assert size["candidate"] == "ring/ll128/default" and size["size_bytes"] == 4 << 20
    assert size["best_time_us"] > 0 and size["rules_time_us"] > 0
    # the rules select the same configuration as the arm: their times agree within a few percent
    assert abs(size["rules_time_us"] / size["best_time_us"] - 1) < 0.05
