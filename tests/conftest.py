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


@pytest.fixture(scope="session")
def amd_cpx_topology(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``amd-smi topology --json`` of the same 8 x MI300X in CPX/NPS4 (64 x 64 links), written by
    ``fixtures/amd-smi/cpx_topology.py`` once per session (not committed: 1.6 MB of repeated links)."""
    spec = importlib.util.spec_from_file_location("cpx_topology", Path(__file__).parent / "fixtures" / "amd-smi" / "cpx_topology.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.write(tmp_path_factory.mktemp("amd-smi"))
