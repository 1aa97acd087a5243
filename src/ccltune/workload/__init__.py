"""Workload: capture, import and show the collectives a job issues (docs/workload.md)."""
