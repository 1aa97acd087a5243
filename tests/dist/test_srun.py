"""ccltune under a real Slurm srun on this node (skipped where srun is missing or no slurmctld answers):
the job joins with no MASTER_ADDR/MASTER_PORT (the first node of SLURM_JOB_NODELIST, a port from the job
id), and scancel's SIGTERM to every task ends the run `interrupted` with its rows, exit code 130."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from ccltune.store import Store

SRUN = shutil.which("srun")


def _cluster() -> bool:
    if SRUN is None or shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _cluster(), reason="no Slurm cluster answers here (srun, sinfo)")]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}


def test_bench_under_srun_joins_without_a_master_address(tmp_path):
    db = tmp_path / "s.db"
    proc = subprocess.run([SRUN, "-n", "2", sys.executable, "-m", "ccltune", "bench", "all_reduce", "-b", "8", "-e", "64",
                           "-n", "2", "-w", "1", "--engine", "gloo", "--db", str(db)],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with Store(db) as st:
        run = st.runs("bench")[0]
        assert run.status == "complete" and run.env["launcher"] == "slurm" and len(run.env["hosts"]) == 2


def test_scancel_ends_the_run_interrupted_with_its_rows(tmp_path):
    db = tmp_path / "c.db"
    name = f"ccltune-test-{os.getpid()}"
    job = subprocess.Popen([SRUN, "-J", name, "-n", "2", sys.executable, "-m", "ccltune", "bench", "all", "-b", "8",
                            "-e", "64M", "-n", "50", "--engine", "gloo", "--db", str(db)],
                           cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until some rows are stored
            if db.exists():
                with Store(db) as st:
                    runs = st.runs("bench")
                    if runs and st.measurements([runs[0].id]):
                        break
            time.sleep(0.5)
        subprocess.run(["scancel", "-n", name], check=True, timeout=30)
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0
    assert "ccltune: interrupted;" in err and "rows kept in" in err, err
    with Store(db) as st:
        run = st.runs("bench")[0]
        assert run.status == "interrupted" and st.measurements([run.id])
