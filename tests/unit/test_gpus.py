"""The parent's GPU count without importing torch (ccltune.gpus)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ccltune import gpus


@pytest.mark.parametrize("value,devices,expected", [
    (None, 4, 4),            # unset: every device
    ("", 4, 0),              # set but empty: none
    ("0,1", 4, 2),
    ("2", 4, 1),
    (" 1 , 3 ", 4, 2),
    ("0,7,1", 4, 1),         # CUDA stops at the first index that is not a device
    ("0,0,1", 4, 1),         # a repeated index ends the list too
    ("-1", 4, 0),
    ("0,1,2,3", 2, 2),
    ("GPU-5c9f0e6a-aaaa-bbbb-cccc-0123456789ab", 4, None),  # UUIDs: torch decides
    ("MIG-0f1e2d3c-aaaa-bbbb-cccc-0123456789ab", 4, None),
])
def test_cuda_visible_devices_as_cuda_reads_a_list_of_indices(value, devices, expected):
    assert gpus.cuda_visible(value, devices) == expected


@pytest.mark.parametrize("text,expected", [
    ("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n", "cuda"),
    ("__version__ = '2.5.1+rocm6.2'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.2.41133'\n", "hip"),
    ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n", "cpu"),
    ("cuda = '12.4'\nhip = None\n", "cuda"),
    ("__version__ = '9.9'\n", None),   # says nothing about the build
    ("cuda = (\n", None),             # not Python
])
def test_torch_build_is_read_from_version_py(tmp_path, text, expected):
    f = tmp_path / "version.py"
    f.write_text(text)
    assert gpus.torch_build(f) == expected


def test_a_missing_version_file_says_nothing(tmp_path):
    assert gpus.torch_build(tmp_path / "nope.py") is None


def test_this_machines_count_matches_torch_and_imports_no_torch():
    # run in a fresh interpreter: whether torch got imported is the point
    code = ("import json, sys; from ccltune import gpus; n = gpus.visible_count(); "
            "print(json.dumps([n, 'torch' in sys.modules, gpus.torch_build()]))")
    n, imported, build = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                   check=True).stdout)
    import torch

    assert n == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert build == ("cuda" if torch.version.cuda else "hip" if torch.version.hip else "cpu")
    if build == "cpu":
        assert not imported  # a CPU build is known from its version file alone
