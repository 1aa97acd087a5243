"""Fixtures of the distributed tier; the helpers live in dist_helpers.py (a unique module
name: tests/plugin has a conftest too, and test modules import helpers by name)."""

import os

import pytest
from dist_helpers import SharedJobs, launcher, run_bench  # noqa: F401  (pytest fixtures)


@pytest.fixture(scope="session", autouse=True)
def _shared_jobs(request, tmp_path_factory):
    """The SHARED_RUNS of the modules whose selected tests read them (dist_helpers.SharedJobs), started
    with this tier's first test so that they run while other tests wait (on torch's import, a --timeout).
    Under pytest-xdist they start at their first reader instead: only the worker that was sent those
    modules (one group: tests/conftest.py, worker_group) runs them."""
    modules = {item.module.__name__: item.module for item in request.session.items
               if "shared" in item.fixturenames and hasattr(item.module, "SHARED_RUNS")}
    jobs = SharedJobs(list(modules.values()), tmp_path_factory.mktemp("shared"))
    if "PYTEST_XDIST_WORKER" not in os.environ:
        jobs.start()
    yield jobs
    jobs.cleanup()


@pytest.fixture(scope="session")
def shared(_shared_jobs):
    """The shared jobs' runs: ``shared.get(__name__, name)`` (dist_helpers.Ran)."""
    return _shared_jobs
