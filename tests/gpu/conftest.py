"""Shared by the GPU tier: NVLink multicast stays off in every process a test starts (the
project's machines require it), and the number of GPUs, or a skip when there are fewer than 2 (``gpus``: than 1)."""

from __future__ import annotations

import pytest

NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.fixture(autouse=True)
def _nvls_off(monkeypatch):
    for k, v in NVLS_OFF.items():
        monkeypatch.setenv(k, v)


def _count(least: int) -> int:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < least:
        pytest.skip(f"needs at least {least} CUDA GPU{'s' if least > 1 else ''}")
    return torch.cuda.device_count()


@pytest.fixture(scope="module")
def n_gpus() -> int:
    return _count(2)


@pytest.fixture(scope="module")
def gpus() -> int:
    """The number of GPUs, at least 1 (tests that also mean something on one GPU)."""
    return _count(1)


def _exact(record: dict) -> bool:
    """A measured row was checked exactly and found right, or is one nccl-tests does not check either: an
    in-place sendrecv (send and receive buffers are one, written while read: #wrong N/A in both programs)."""
    if record["collective"] == "sendrecv" and record.get("in_place") and record["wrong"] is None:
        return True
    return record["wrong"] == 0


@pytest.fixture
def exact():
    return _exact
