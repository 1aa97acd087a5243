"""ccltune sweep: one rank is refused before any work; a CPU sweep says up front what it can give."""

from __future__ import annotations

import pytest

from ccltune.cli import main
from ccltune.commands import launching
from ccltune.errors import DataError
from ccltune.tune.derive import gpu_model


@pytest.mark.parametrize("flags", [[], ["--nproc", "1"]])
def test_sweep_on_one_gpu_is_refused_before_any_work(capsys, no_launch, monkeypatch, flags):
    monkeypatch.setattr(launching, "gpu_count", lambda: 1)
    rc = main(["sweep", "all_reduce", "--engine", "nccl", *flags, "--db", str(no_launch / "s.db")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "a sweep needs at least 2 ranks" in err and "1 rank" in err and "Traceback" not in err
    assert "ccltune bench" in err  # what one GPU can do instead
    assert not (no_launch / "s.db").exists()


def test_cpu_sweep_with_candidates_says_what_it_can_and_cannot_do(capsys, no_launch):
    rc = main(["sweep", "all_reduce", "--engine", "gloo", "--db", str(no_launch / "s.db")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "only the library's default" in err and "no rules" in err and "nccl engine" in err
    assert "--algos '' --protos '' --channels ''" in err
    assert not (no_launch / "s.db").exists()


def test_tune_on_a_cpu_run_says_why_there_is_nothing_to_tune():
    with pytest.raises(DataError, match="no GPU model") as err:
        gpu_model({"gpus": []}, "cpu x2")
    assert "CPU" in str(err.value) and "nccl engine" in str(err.value)
