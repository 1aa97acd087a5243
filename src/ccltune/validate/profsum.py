"""One run's communication time from ccltune's profiler files (``ccltune ab --metric comm``).

The files are the profiler plugin's, one per communicator and rank, in the folder ``CCLTUNE_PROFILE``
names (format version 1: docs/ab.md points to it; /work/notes/profile-format.md fixed it). Each
entry line ``coll|p2p op count datatype algo proto nchannels nwarps peer calls timed sum_us ...``
carries the GPU time of its timed calls; with sampling (``CCLTUNE_PROFILE_EVERY=N``) only every Nth
call is timed, so an entry counts ``sum_us x calls / timed``. The run's value is that summed over
every entry of every file: the GPU time of all ranks' collectives, in microseconds.

Only the sum is read here; ``ccltune workload import`` reads the files whole.
"""

from __future__ import annotations

from pathlib import Path

from ccltune import files
from ccltune.errors import UsageError

HEADER = "# ccltune-profile 1"
MAX_FILES = 4096      # files read from one run's folder (one per communicator and rank)
_SUM_US, _CALLS, _TIMED = 11, 9, 10   # columns of an entry line (0-based)


def _file_us(path: Path) -> tuple[float | None, str]:
    try:
        text = files.read_text(path, "CCLTUNE_PROFILE file")
    except UsageError as exc:
        return None, str(exc)
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        return None, f"{path.name}: not a ccltune profile file of version 1 (first line {lines[0][:40]!r})" \
            if lines else f"{path.name}: empty"
    if lines[-1].strip() != "# end":
        return None, f"{path.name}: truncated (no '# end' line): the job ended before the profiler wrote it"
    total = 0.0
    for n, line in enumerate(lines, 1):
        f = line.split()
        if not f or f[0] not in ("coll", "p2p"):
            continue
        try:
            calls, timed = int(f[_CALLS]), int(f[_TIMED])
            if timed > 0:
                total += float(f[_SUM_US]) * calls / timed
        except (IndexError, ValueError):
            return None, f"{path.name}:{n}: not an entry line of the profile format ({line[:60]!r})"
    return total, ""


def comm_time_us(folder: Path) -> tuple[float | None, str]:
    """(GPU time of the run's collectives in us, '') or (None, why not)."""
    paths = sorted(folder.glob("ccltune-profile.*.txt"))[:MAX_FILES] if folder.is_dir() else []
    if not paths:
        return None, f"no profiler file in {folder} (was NCCL_PROFILER_PLUGIN loaded by the job's NCCL?)"
    total = 0.0
    for p in paths:
        us, why = _file_us(p)
        if us is None:
            return None, why
        total += us
    return (total, "") if total > 0 else (None, "the profiler files time no collective")
