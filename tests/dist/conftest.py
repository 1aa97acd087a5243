"""Fixtures of the distributed tier; the helpers live in dist_helpers.py (a unique module
name: tests/plugin has a conftest too, and test modules import helpers by name)."""

from dist_helpers import launcher, run_bench  # noqa: F401  (pytest fixtures)
