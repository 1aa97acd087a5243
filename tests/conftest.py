"""Fixtures shared by every test tier."""

from __future__ import annotations

import functools
import importlib.util
import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
SYSFS = TESTS / "fixtures" / "sysfs"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of tests/dist is marked ``dist`` (the fast tier leaves them out: README)."""
    for item in items:
        if item.path.relative_to(TESTS).parts[0] == "dist":
            item.add_marker(pytest.mark.dist)


@functools.lru_cache(maxsize=None)
def worker_group(path: str) -> str:
    """Which tests pytest-xdist sends to one worker together (the README's `-n 2`), by the test's file
    (relative to the checkout): a module's tests (its module fixtures run once); tests/plugin with the
    plugin's verify test (the session's C builds run once, and no test reads a library while another
    builds it); the modules of tests/dist that declare SHARED_RUNS (each shared gloo job runs once); the
    modules that scan the source tree through tests/unit/source_trees.py (each file parsed once)."""
    rel = path.removeprefix("tests/")
    if rel.startswith("plugin/") or rel == "test_plugin_verify.py":
        return "plugin"
    text = (TESTS / rel).read_text(encoding="utf-8")
    if rel.startswith("dist/") and "\nSHARED_RUNS = " in text:
        return "dist-shared"
    if "\nimport source_trees\n" in text:
        return "source-scan"
    return path


@functools.lru_cache(maxsize=None)
def _module_cost(path: str) -> tuple[float, float]:
    """Rough seconds on 2 cores of the module ``path``: (per test, once for the module). A module of
    tests/dist starts gloo jobs (seconds of torch imports each); tests/plugin builds C and installs;
    a Chromium page takes seconds; other modules run in this process or start ccltune at most."""
    rel = path.removeprefix("tests/")
    text = (TESTS / rel).read_text(encoding="utf-8")
    once = 10.0 * text.count("mark.slow")
    if rel.startswith("dist/"):
        return 3.0, 20.0 + once
    if worker_group(path) == "plugin":
        return 1.0, once
    return (3.0 if "chromium" in text else 0.3 if "subprocess" in text else 0.05), once


# Modules whose seconds the estimate above misses by far (in-process runs of fake jobs, statistics over many
# simulated runs), as they took in a whole-suite run on the 2-core development VM (2026-11-28): started last,
# test_search.py ran 11 s on one worker after the other had finished.
MEASURED_S = {"tests/unit/test_search.py": 11.0, "tests/unit/test_ab_cli.py": 10.0, "tests/unit/test_ab_inrun.py": 6.0,
              "tests/unit/test_stats.py": 5.0, "tests/unit/test_report_cli.py": 3.0}


def _cost_s(nodeids) -> float:
    """A group's rough seconds: each test's, and each module's once (or the module's MEASURED_S)."""
    modules = [nodeid.split("::", 1)[0] for nodeid in nodeids]
    return (sum(_module_cost(m)[0] for m in modules if m not in MEASURED_S)
            + sum(MEASURED_S.get(m) or _module_cost(m)[1] for m in set(modules)))

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:   # pytest-xdist (the test extra) not installed: one process runs every test
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class _Groups(LoadScopeScheduling):
        """xdist's --dist loadscope with worker_group as the scope (its loadgroup marks tests through the
        node id, which pytest 9 no longer lets a plugin change)."""

        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid.split("::", 1)[0])

        def _assign_work_unit(self, node) -> None:
            # xdist queues the groups by their number of tests, so the gloo jobs and builds (a few long
            # tests each) came last and one worker ran them while the other had finished: the longest
            # first, then the many short ones fill in, and the two workers end together
            if not getattr(self, "_ordered", False):
                self._ordered = True
                for scope in sorted(self.workqueue, key=lambda s: -_cost_s(self.workqueue[s])):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling:
        return _Groups(config, log)


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
