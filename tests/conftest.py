"""Fixtures shared by every test tier."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

SYSFS = Path(__file__).parent / "fixtures" / "sysfs"


@pytest.fixture(scope="session")
def amd_cpx_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sysfs root of 8 x MI300X in CPX/NPS4: a copy of ``fixtures/sysfs/amd-mi300x-cpx`` (the DRM cards) with the
    KFD topology (64 GPU nodes, 64 io_links each) written into it by ``fixtures/sysfs/kfd_cpx.py``; once per
    session. Tests read it and must not change it."""
    spec = importlib.util.spec_from_file_location("kfd_cpx", SYSFS / "kfd_cpx.py")
    kfd_cpx = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kfd_cpx)
    root = tmp_path_factory.mktemp("sysfs") / "amd-mi300x-cpx"
    shutil.copytree(SYSFS / "amd-mi300x-cpx", root)
    kfd_cpx.write(root)
    return root
