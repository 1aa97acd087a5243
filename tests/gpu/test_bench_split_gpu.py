"""On the GPU machine (pytest -m gpu tests/gpu, >= 2 GPUs): NCCL_TESTS_SPLIT="MOD 2" on the nccl engine,
each group's communicator split from the world's (ncclCommSplit) or made from the group's own unique id
(ncclCommSplit hidden: no_commsplit.py). Correctness only: every measured row exact, laid out for a group."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
ARGS = ["all_reduce,all_gather,broadcast,reduce_scatter,sendrecv", "-b", "8", "-e", "1M", "-f", "32", "-n", "3",
        "-w", "1", "--engine", "nccl"]


@pytest.mark.parametrize("commsplit", [True, False], ids=["ncclCommSplit", "unique-id-per-group"])
def test_two_groups_on_the_nccl_engine_are_exact(tmp_path, n_gpus, commsplit, exact):
    js, env = tmp_path / "b.json", {**os.environ, "NCCL_TESTS_SPLIT": "MOD 2"}
    files = ["--db", str(tmp_path / "b.db"), "--json", str(js)]
    if commsplit:
        cmd = [sys.executable, "-m", "ccltune", "bench", *ARGS, "--nproc", str(n_gpus), *files]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n_gpus}",
               str(HERE / "no_commsplit.py"), "bench", *ARGS, *files]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for rank in range(n_gpus):
        assert re.search(rf"#  Rank {rank:2d} Group {rank % 2:2d} Pid", proc.stdout), proc.stdout[:3000]
    data = json.loads(js.read_text())
    size = (n_gpus + 1) // 2  # rank 0's group: ranks 0, 2, 4, ...
    assert data["env"]["groups"]["colors"] == [r % 2 for r in range(n_gpus)]
    assert all(r["n_ranks"] == size for r in data["records"])
    ok = [r for r in data["records"] if r["status"] == "ok"]
    assert ok and all(exact(r) and r["time_us"] > 0 for r in ok)
