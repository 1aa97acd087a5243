"""Checks: records in, findings out. ``registry`` lists the checks that ``doctor`` and ``check`` run."""
