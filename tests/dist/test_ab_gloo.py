"""ccltune ab end to end on a real job: ccltune's own gloo bench, one process, wall time, one round (the order of
arms over rounds is tested on a job without torch: tests/unit/test_ab_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ccltune.store import Store

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.slow
def test_ab_runs_a_gloo_bench_job_and_stores_every_run(tmp_path) -> None:
    db = tmp_path / "ab.db"
    job = [sys.executable, "-m", "ccltune", "bench", "all_reduce", "-b", "8", "-e", "64K", "--engine", "gloo",
           "--nproc", "1", "-n", "2", "-w", "1", "--db", str(tmp_path / "job.db")]
    res = subprocess.run([sys.executable, "-m", "ccltune", "ab", "--db", str(db), "--env", "NCCL_P2P_LEVEL=SYS",
                          "--no-aa", "--metric", "wall", "--rounds", "1", "--seed", "1", "--", *job],
                         capture_output=True, text=True, timeout=120, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert "metric: wall time of each run (s)" in res.stdout and "too few rounds for a 95% interval" in res.stdout
    with Store(db, readonly=True) as st:
        run = st.runs("ab")[-1]
        samples = st.ab_samples(run.id)
        assert len(st.runs()) == 1  # the job's own runs went to its own database
    assert run.status == "complete" and len(samples) == 2
    assert all(s.status == "ok" and s.exit_code == 0 and s.unit == "s" and s.value > 0 for s in samples)
    with Store(tmp_path / "job.db", readonly=True) as st:
        assert len(st.runs("bench")) == 2  # the job ran once per arm and round
