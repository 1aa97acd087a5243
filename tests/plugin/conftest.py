"""Builds of the C plugin and its harnesses, once per session, into temporary folders
(tests never depend on `pip install` or on a checked-in build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugin_build import make


@pytest.fixture(scope="session")
def c_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plain -O2 build: the library, the white-box, loader and golden harnesses."""
    return make(tmp_path_factory.mktemp("plugin-build"), "tests")


@pytest.fixture(scope="session")
def san_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same harnesses (and the corpus replay driver) under ASan + UBSan."""
    return make(tmp_path_factory.mktemp("plugin-asan"), "tests", "fuzz-replay", SAN="1", OPT="-O1")
