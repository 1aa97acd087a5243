"""``workload import``: read any mix of capture files, NCCL COLL logs and PyTorch traces
(plain or gzipped) into one :class:`Workload`. The only I/O of the package is here.

A file of none of the three kinds, a cut gzip, an invalid trace or a trace without
communication events stops the import with an error naming the file (nothing is
written). A COLL line a dying rank left half written is skipped with a warning naming the
file and line; every complete line is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ccltune.errors import UsageError
from ccltune.inputs import MAX_TRACE_BYTES, load_json, read_input
from ccltune.workload import capture, nccl_log, torch_trace
from ccltune.workload.model import RankRecord, Workload, merge

KINDS = "a ccltune capture file, an NCCL COLL log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL), a PyTorch profiler trace"


def read_text(path: Path) -> str:
    # no FIFO on disk, device or folder; a gzip inflated as a stream, at most MAX_TRACE_BYTES out
    return read_input(str(path), "FILE", limit=MAX_TRACE_BYTES, gunzip=True).decode("utf-8", errors="replace")


def load_file(path: Path) -> tuple[list[RankRecord], list[str]]:
    """The records of one file and the warnings reading it gave."""
    text = read_text(path)
    if capture.is_capture(text):
        return [capture.parse(text, str(path))], []
    if text.lstrip()[:1] in ("{", "["):
        try:
            doc = load_json(text, str(path), what="invalid JSON (not a complete PyTorch profiler trace: cut short?)")
        except UsageError:
            if not nccl_log.has_nccl_lines(text):  # a log line may start with '[' (a timestamp)
                raise
        else:
            if isinstance(doc, list):  # the Chrome trace 'array format'
                doc = {"traceEvents": doc}
            if not torch_trace.is_trace(doc):
                raise UsageError(f"{path}: JSON, but not a Chrome trace (no \"traceEvents\" list); expected {KINDS}")
            rec, warnings = torch_trace.parse(doc, str(path))
            return [rec], warnings
    if nccl_log.has_coll_lines(text):
        return nccl_log.parse(text, str(path))
    if nccl_log.has_nccl_lines(text):
        raise UsageError(f"{path}: an NCCL log without COLL lines (run the job with NCCL_DEBUG=INFO "
                         "NCCL_DEBUG_SUBSYS=COLL)")
    raise UsageError(f"{path}: none of: {KINDS}")


def import_files(paths: Sequence[str | Path], steps: int | None = None) -> Workload:
    """Read every file, then merge (see :mod:`ccltune.workload.model`). ``steps`` (--steps) sets
    the step count; without it, files that know their steps (traces) and files that do not (logs,
    captures) or that disagree are refused (:func:`ccltune.workload.model.resolve_steps`)."""
    if not paths:
        raise UsageError("workload import: give at least one FILE")
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be >= 1, got {steps}")
    records: list[RankRecord] = []
    warnings: list[str] = []
    for p in paths:
        recs, warns = load_file(Path(p))
        records += recs
        warnings += warns
    if not any(r.calls for r in records):
        why = f" (skipped: {warnings[0]}" + (f"; and {len(warnings) - 1} more)" if len(warnings) > 1 else ")") \
            if warnings else ""
        raise UsageError(f"{', '.join(map(str, paths))}: no collective calls in them{why}")
    return merge(records, warnings, steps)
