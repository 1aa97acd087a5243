"""One run's communication time from ccltune's profiler files (``ccltune ab --metric comm``).

The files are the profiler plugin's, one per communicator and rank, in the folder ``CCLTUNE_PROFILE``
names, read by :mod:`ccltune.workload.profile_file` (strict: a file cut short fails the run). Each
entry carries the GPU time of its timed calls; with sampling (``CCLTUNE_PROFILE_EVERY=N``) only every
Nth call is timed, so an entry counts ``sum_us x calls / timed``. The run's value is that summed over
every entry of every file: the GPU time of all ranks' collectives, in microseconds.
"""

from __future__ import annotations

from pathlib import Path

from ccltune.errors import UsageError
from ccltune.workload import profile_file


def comm_time_us(folder: Path) -> tuple[float | None, str]:
    """(GPU time of the run's collectives in us, '') or (None, why not)."""
    try:
        files = profile_file.read_dir(folder, strict=True)
    except UsageError as exc:
        return None, str(exc)
    total = sum(e.sum_us * e.calls / e.timed for f in files for e in f.entries if e.timed and e.sum_us is not None)
    return (total, "") if total > 0 else (None, "the profiler files time no collective")
