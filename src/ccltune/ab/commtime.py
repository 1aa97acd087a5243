"""One run's communication time from ccltune's profiler files (``ccltune ab --metric comm``).

The files are the profiler plugin's, one per communicator and rank, in the folder ``CCLTUNE_PROFILE``
names, read by :mod:`ccltune.workload.profile_file` (strict: a file cut short fails the run). Each
entry carries the GPU time of its timed calls; with sampling (``CCLTUNE_PROFILE_EVERY=N``) only every
Nth call is timed, so an entry counts ``sum_us x calls / timed``. The run's value is that summed over
every entry of every file: the GPU time of all ranks' collectives, in microseconds.

Two kinds of file give no such figure, and the run is then kept out of the comparison with the file
named (its value None, the reason beside it: ``ab`` records the run as failed, never as a sample):

- host timing (profiler ABI v1-v3, NCCL before 2.27): the times are the host's, from a call's start
  to its enqueue, not GPU time; adding them to other runs' GPU times would compare two clocks;
- dropped entries: keys that found no room in the profiler's table have their calls counted nowhere
  (and untimed), so the run's sum would miss them: an arm that makes more distinct keys (more
  algorithms or channel counts) would look faster for it.
"""

from __future__ import annotations

from pathlib import Path

from ccltune.errors import UsageError
from ccltune.workload import profile_file


def _incomplete(f: profile_file.ProfileFile) -> str:
    """Why ``f`` cannot count in a comparison of GPU time, or ''."""
    if f.timing != "gpu-kernel-channels":
        return (f"{f.path}: {f.timing} timing (profiler ABI v{f.abi}: NCCL before 2.27 gives no GPU timer): its "
                "times are launch times, not GPU time; the comm metric needs GPU times")
    no_entry = sum(a.no_entry or 0 for a in f.arm_sums)
    if f.dropped_entries:
        calls = f" ({no_entry} call(s))" if no_entry else ""
        return (f"{f.path}: {f.dropped_entries} key(s){calls} found no room in the profiler's table (dropped "
                "entries): their calls are in no sum, so this run's figure would be low; kept out of the comparison")
    return ""


def comm_time_us(folder: Path) -> tuple[float | None, str]:
    """(GPU time of the run's collectives in us, '') or (None, why not: a file named)."""
    try:
        files = profile_file.read_dir(folder, strict=True)
    except UsageError as exc:
        return None, str(exc)
    for f in files:
        why = _incomplete(f)
        if why:
            return None, why
    total = sum(e.sum_us * e.calls / e.timed for f in files for e in f.entries if e.timed and e.sum_us is not None)
    return (total, "") if total > 0 else (None, "the profiler files time no collective")
