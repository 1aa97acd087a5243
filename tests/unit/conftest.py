"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from ccltune import dist, launch


@pytest.fixture
def no_launch(monkeypatch, tmp_path):
    """Fail loudly if the command gets as far as starting torchrun or joining a job; run as a plain
    process (no launcher variables), in ``tmp_path``."""
    def boom(*a, **k):
        raise AssertionError("a process was started or a job joined before the input was checked")

    monkeypatch.setattr(launch.subprocess, "Popen", boom)
    monkeypatch.setattr(dist, "init", boom)
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path
