"""--under-load: the refusal on the CPU, and the load loop itself (on the CPU: no second stream)."""

from __future__ import annotations

import time

import pytest
import torch

from ccltune.errors import UsageError
from ccltune.measure.load import MatrixLoad, check


def test_gloo_and_bad_sizes_are_refused_clearly() -> None:
    check(None, "gloo")
    check(4096, "nccl")
    with pytest.raises(UsageError, match="gloo engine runs on the CPU"):
        check(4096, "gloo")
    with pytest.raises(UsageError, match="between 1 and 65536, got 0"):
        check(0, "nccl")


def test_load_runs_until_stopped_and_reports_its_rate() -> None:
    load = MatrixLoad(torch, torch.device("cpu"), 16).start()
    time.sleep(0.02)
    got = load.stop()
    assert got["matrix"] == 16 and got["multiplies"] >= 4 and got["tflops"] > 0
    assert not load._thread.is_alive()


def test_loaded_runs_around_a_block_and_stops_when_it_fails() -> None:
    from types import SimpleNamespace

    from ccltune.measure.load import Loaded

    eng = SimpleNamespace(torch=torch, device=torch.device("cpu"))
    with Loaded(eng, None) as got:
        pass
    assert got.result is None
    with Loaded(eng, 16) as got:
        time.sleep(0.01)
    assert got.result["matrix"] == 16 and got.result["multiplies"] >= 4
    with pytest.raises(KeyError):  # the block's error stays the error; the load is stopped anyway
        with Loaded(eng, 16) as got:
            raise KeyError("measuring failed")
    assert got.result is None and not got.load._thread.is_alive()
