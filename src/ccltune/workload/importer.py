"""``workload import``: read any mix of the sources :mod:`ccltune.workload.sources` registers (capture
files, ccltune profiler files or folders of them, NCCL Inspector output, PyTorch traces, NCCL COLL logs;
plain or gzipped) into one :class:`Workload`. The only I/O of the package is here.

A file of none of these kinds, a cut gzip, an invalid trace or a trace without
communication events stops the import with an error naming the file (nothing is
written). A COLL line a dying rank left half written is skipped with a warning naming the
file and line; every complete line is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ccltune.errors import UsageError
from ccltune.inputs import MAX_TRACE_BYTES, read_input
from ccltune.workload import compute, profile_file, sameproc, sources
from ccltune.workload.model import RankRecord, Workload, merge

KINDS = sources.KINDS


def read_text(path: Path) -> str:
    # no FIFO on disk, device or folder; a gzip inflated as a stream, at most MAX_TRACE_BYTES out
    return read_input(str(path), "FILE", limit=MAX_TRACE_BYTES, gunzip=True).decode("utf-8", errors="replace")


def load_file(path: Path) -> tuple[sources.Source, list[Any]]:
    """The source that reads one file (or a folder of profiler files) and its items."""
    if path.is_dir():
        return _PROFILE, profile_file.read_dir(path)
    text = read_text(path)
    src = sources.recognise(text, str(path))
    return src, src.parse(text, str(path))


_PROFILE = next(s for s in sources.SOURCES if s.name == "ccltune-profile")


def import_files(paths: Sequence[str | Path], steps: int | None = None) -> Workload:
    """Read every file, then merge (see :mod:`ccltune.workload.model`). Sources describing one process
    are merged first (:mod:`ccltune.workload.sameproc`). ``steps`` (--steps) sets the step count;
    without it, the steps the files found (ProfilerStep spans, the calls' repeating sequence) are used,
    and files that disagree are refused (:func:`ccltune.workload.model.resolve_steps`)."""
    if not paths:
        raise UsageError("workload import: give at least one FILE")
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be >= 1, got {steps}")
    items: dict[str, tuple[sources.Source, list[Any]]] = {}
    for p in paths:
        src, got = load_file(Path(p))
        items.setdefault(src.name, (src, []))[1].extend(got)
    records: list[RankRecord] = []
    warnings: list[str] = []
    for src, got in items.values():
        recs, warns = src.records(got)
        records += recs
        warnings += warns
    if not any(r.calls for r in records):
        why = f" (skipped: {warnings[0]}" + (f"; and {len(warnings) - 1} more)" if len(warnings) > 1 else ")") \
            if warnings else ""
        raise UsageError(f"{', '.join(map(str, paths))}: no collective calls in them{why}")
    beside = compute.pool(r.compute for r in records if r.compute is not None)  # before fold merges traces away
    records, notes = sameproc.fold(records)
    sameproc.unify_keys(records)
    wl = merge(records, warnings + notes, steps)
    wl.compute = beside
    return wl
