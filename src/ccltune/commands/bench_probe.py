"""The ``ccltune bench`` line that doctor, check and plugin verify start under torchrun (run by
``ccltune.diagnose.probes.benchrun``), built from ``BenchOptions``: the workers' parser reads back
the options meant, and a new bench option needs no second spelling here."""

from __future__ import annotations

from ccltune.commands.bench_options import BenchOptions
from ccltune.diagnose.probes.benchrun import Probe
from ccltune.sizes import format_size


def bench_args(probe: Probe) -> list[str]:
    """``bench COLLECTIVES --minbytes=... --engine=nccl --db=... --json=...``: the probe as bench's options."""
    return probe_options(probe).to_argv()


def probe_options(probe: Probe) -> BenchOptions:
    """The bench options a probe stands for: NCCL's engine, its sizes, iterations, database and JSON file."""
    return BenchOptions(collective=probe.collectives, minbytes=format_size(probe.min_bytes),
                        maxbytes=format_size(probe.max_bytes), stepfactor=probe.step_factor, iters=probe.iters,
                        warmup_iters=probe.warmup, engine="nccl", db=probe.db, json=probe.json_path)
