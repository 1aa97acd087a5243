"""``workload import``: read any mix of the sources :mod:`ccltune.workload.sources` registers (capture
files, ccltune profiler files or folders of them, NCCL Inspector output, PyTorch traces, NCCL COLL logs;
plain or gzipped) into one :class:`Workload`. The only I/O of the package is here.

A file of none of these kinds, a cut gzip, an invalid trace or a trace without
communication events stops the import with an error naming the file (nothing is
written). A COLL line a dying rank left half written is skipped with a warning naming the
file and line; every complete line is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ccltune.errors import UsageError
from ccltune.files import shown
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


def _texts(path: Path) -> Iterator[tuple[str, str, sources.Source | None]]:
    """(name, decoded text, the source when the place decides it) of a file, or of each profiler file of a
    folder."""
    if path.is_dir():
        for p in profile_file.names_in(path):
            yield str(p), read_text(p), _PROFILE
    else:
        yield str(path), read_text(path), None


def _read_once(paths: Sequence[str | Path]) -> tuple[dict[str, tuple[sources.Source, list[Any]]], list[str]]:
    """Every file's items by source, each content read once: a file given twice, under two names (a copy, a
    folder and its file) or gzipped and not, is left out the second time; and what was left out."""
    items: dict[str, tuple[sources.Source, list[Any]]] = {}
    first: dict[bytes, str] = {}
    left_out: list[str] = []
    for p in paths:
        for name, text, src in _texts(Path(p)):
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
            if digest in first:
                left_out.append(f"{shown(name)} (the same content as {shown(first[digest])})")
                continue
            first[digest] = name
            src = src or sources.recognise(text, name)
            items.setdefault(src.name, (src, []))[1].extend(src.parse(text, name))
    return items, left_out


def _same_process(items: list[Any], left_out: list[str]) -> list[Any]:
    """Per-file (records, warnings) items less each record of a process another file already gave (a log glued
    from every rank's output and that rank's own log; a copy edited on the way): one process's capture of one
    communicator, or a process's same calls in the same order. A record naming no process (a trace) is kept."""
    seen: dict[Hashable, str] = {}
    out = []
    for recs, warns in items:
        kept = []
        for r in recs:
            if r.host is None or r.pid is None:
                kept.append(r)
                continue
            who: Hashable = ((r.kind, r.rank_id, r.comm) if r.comm is not None else
                             (r.kind, r.rank_id, tuple(sorted(r.calls.items())), tuple(r.order)))
            if who in seen:
                left_out.append(f"{shown(r.source)}'s process {r.rank_id} (the same calls as in {shown(seen[who])})")
                continue
            seen[who] = r.source
            kept.append(r)
        out.append((kept, warns))
    return out


def import_files(paths: Sequence[str | Path], steps: int | None = None) -> Workload:
    """Read every file, then merge (see :mod:`ccltune.workload.model`). The same data given twice is read once
    (:func:`_read_once`, :func:`_same_process`, :func:`ccltune.workload.profile_file.unique`), with one
    warning naming what was left out. Sources describing one process
    are merged first (:mod:`ccltune.workload.sameproc`). ``steps`` (--steps) sets the step count;
    without it, the steps the files found (ProfilerStep spans, the calls' repeating sequence) are used,
    and files that disagree are refused (:func:`ccltune.workload.model.resolve_steps`)."""
    if not paths:
        raise UsageError("workload import: give at least one FILE")
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be >= 1, got {steps}")
    items, left_out = _read_once(paths)
    for name, (src, got) in items.items():
        if name == _PROFILE.name:
            kept, more = profile_file.unique(got)
            left_out += more
            items[name] = (src, kept)
        else:
            items[name] = (src, _same_process(got, left_out))
    records: list[RankRecord] = []
    warnings: list[str] = [profile_file.left_out_line(left_out)] if left_out else []
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
