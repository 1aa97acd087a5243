"""`ccltune bench` across two torchrun "nodes" joined through torchrun's own c10d rendezvous
(two torchrun processes on this machine, --nnodes 2, one worker each): the multi-node launch
path, on the gloo engine. Both "nodes" run on one host, so it checks the launch, the join and
who writes what, not inter-node figures."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from dist_helpers import only_run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bench_runs_across_two_torchrun_nodes_with_a_rendezvous(tmp_path):
    port = free_port()
    db, js = tmp_path / "m.db", tmp_path / "m.json"
    procs = []
    for node in (0, 1):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                f"--node-rank={node}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                "--rdzv-id=ccltune-multinode-test", "-m", "ccltune", "bench", "all_reduce", "all_gather",
                "-b", "8", "-e", "1K", "-f", "8", "-n", "2", "-w", "1", "--timeout", "60",
                "--db", str(db), "--json", str(js)]
        procs.append(subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    tables = [out for out, _ in outs if "# Collective test starting: all_reduce" in out]
    assert len(tables) == 1, "exactly one node (global rank 0's) prints the table"
    run, rows = only_run(db)
    assert run.world_size == 2 and run.status == "complete"
    assert run.launcher == "torchrun" and run.env["launcher"] == "torchrun"
    ok = [r for r in rows if r.status == "ok"]
    assert {r.collective for r in ok} == {"all_reduce", "all_gather"} and all(r.wrong == 0 for r in ok)
    assert all(r.n_ranks == 2 for r in rows)
    assert len(json.loads(js.read_text())["records"]) == len(rows)
