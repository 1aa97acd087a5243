"""The registry of workload sources: what ``workload import`` can read. Adding a source is one reader
module (text in, :class:`~ccltune.workload.model.RankRecord` out) and one line in :data:`SOURCES`.

Each source says how its files are recognised (from their decoded text, in the order of
:data:`SOURCES`: the first that claims a file reads it) and turns a file into records. A source whose
files only make sense together (the profiler's files: waiting needs every rank's) reads them all at
once: ``parse`` returns items, ``records`` turns all items of that source into records.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ccltune.errors import UsageError
from ccltune.inputs import load_json
from ccltune.workload import capture, inprofile, inspector, nccl_log, profile_file, steps, torch_trace
from ccltune.workload.model import RankRecord

Records = tuple[list[RankRecord], list[str]]


@dataclass(frozen=True)
class Source:
    name: str                                  # the records' kind
    what: str                                  # for messages: what such a file is
    recognise: Callable[[str], bool]           # on the file's decoded text
    parse: Callable[[str, str], list[Any]]     # (text, path) -> items
    records: Callable[[list[Any]], Records]    # every item of this source -> records, warnings


def _each(items: list[Any]) -> Records:
    """Items that are already (records, warnings) per file."""
    return [r for recs, _ in items for r in recs], [w for _, ws in items for w in ws]


def _process(r: RankRecord) -> RankRecord:
    """A record named host:pid (logs, captures) knows its process."""
    host, _, pid = r.rank_id.rpartition(":")
    if host and pid.isdigit():
        r.host, r.pid = host, int(pid)
    return r


def _log(text: str, path: str) -> list[Any]:
    recs, warnings = nccl_log.parse(text, path)
    for r in recs:
        _process(r)
        if (got := steps.find(r.order)) is not None:
            r.steps, r.steps_from = got[0], f"{path} ({r.rank_id}): {got[1]}"
    return [(recs, warnings)]


def _is_trace(text: str) -> bool:
    # a log line may start with '[' (a timestamp): a file with NCCL's prefix near its start is a log
    return text.lstrip()[:1] in ("{", "[") and not nccl_log.has_nccl_lines(text[:65536])


def _trace(text: str, path: str) -> list[Any]:
    # inputs.load_json: a cut trace, deep nesting, huge integers or NaN are errors naming the file
    doc = load_json(text, path, what="invalid JSON (not a complete PyTorch profiler trace: cut short?)")
    if isinstance(doc, list):  # the Chrome trace 'array format'
        doc = {"traceEvents": doc}
    if not torch_trace.is_trace(doc):
        raise UsageError(f"{path}: JSON, but not a Chrome trace (no \"traceEvents\" list) nor NCCL Inspector's "
                         f"output; expected {KINDS}")
    rec, warnings = torch_trace.parse(doc, path)
    return [([rec], warnings)]


def _capture(text: str, path: str) -> list[Any]:
    rec, notes = capture.parse_noted(text, path)
    return [([_process(rec)], notes)]


def _profile(text: str, path: str) -> list[Any]:
    return [profile_file.parse(text.encode("utf-8", "surrogateescape"), path)]


SOURCES: tuple[Source, ...] = (
    Source("capture", "a ccltune capture file (CCLTUNE_CAPTURE)", capture.is_capture,
           _capture, _each),
    Source("ccltune-profile", "a ccltune profiler file or folder of them (CCLTUNE_PROFILE)",
           lambda text: text.startswith("# ccltune-profile "), _profile, inprofile.records),
    Source("inspector", "NCCL Inspector's JSON output (NCCL_INSPECTOR_ENABLE)", inspector.is_inspector,
           lambda text, path: [inspector.parse(text, path)], _each),
    Source("torch-trace", "a PyTorch profiler trace", _is_trace, _trace, _each),
    Source("nccl-log", "an NCCL COLL log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL)", nccl_log.has_coll_lines,
           _log, _each),
)
KINDS = ", ".join(s.what for s in SOURCES)


def recognise(text: str, path: str) -> Source:
    """The source that reads this file, or a UsageError saying what it is not."""
    for s in SOURCES:
        if s.recognise(text):
            return s
    if nccl_log.has_nccl_lines(text):
        ranks = {int(n) for n in re.findall(r"ncclCommInitRank\w* comm \S+ rank \d+ nranks (\d+)", text)}
        one = ("; or the job issued no collective: every communicator in it has one rank, where a framework may "
               "issue none (PyTorch's FSDP2 on one GPU does)" if ranks == {1} else "")
        raise UsageError(f"{path}: an NCCL log without COLL lines (run the job with NCCL_DEBUG=INFO "
                         f"NCCL_DEBUG_SUBSYS=COLL){one}")
    raise UsageError(f"{path}: none of: {KINDS}")
