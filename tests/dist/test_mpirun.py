"""ccltune under a real mpirun on one node: no MASTER_ADDR/MASTER_PORT needed (skipped where mpirun is missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ccltune.store import Store

MPIRUN = shutil.which("mpirun")


@pytest.mark.slow
@pytest.mark.skipif(MPIRUN is None, reason="mpirun is not installed")
def test_bench_under_mpirun_on_one_node_needs_no_master_address(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    db = tmp_path / "m.db"
    argv = [MPIRUN, "-np", "2", "--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
            "-x", "PYTHONPATH", sys.executable, "-m", "ccltune", "bench", "all_reduce", "-b", "8", "-e", "64",
            "-n", "2", "-w", "1", "--engine", "gloo", "--db", str(db)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with Store(db) as st:
        run = st.runs("bench")[0]
        assert run.status == "complete" and run.env["launcher"] == "mpirun"
        assert run.env["rendezvous"].startswith("127.0.0.1:") and "every rank is on this node" in run.env["rendezvous"]
