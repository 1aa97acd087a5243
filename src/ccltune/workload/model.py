"""The workload file: what collectives a job issues, how often, and (from traces) how long.

Pure: records, merging and the JSON form (schema documented in docs/workload.md). One
:class:`Entry` per (collective, datatype, count, size_bytes, nranks, nnodes). ``calls``
counts the calls of one rank: each source rank (a log's process, a trace, a capture
file's process) is counted on its own, and ranks are combined by the maximum per entry,
since every rank of a communicator issues the same collective once (adding ranks up would
count one collective nranks times).
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ccltune.datatypes import OPS
from ccltune.errors import UsageError
from ccltune.files import read_bytes
from ccltune.workload.checks import MAX_WORKLOAD_BYTES, _check_doc, _check_entry, _not_finite
from ccltune.workload.compute import Overlap
from ccltune.workload.compute import check as check_compute
from ccltune.workload.timing import Timing

SCHEMA = "ccltune-workload"
VERSION = 1


K = TypeVar("K", bound=Hashable)
T = TypeVar("T", bound=Hashable)


def add_counts(into: dict[K, Counter[T]], key: K, counts: Counter[T]) -> None:
    """``counts`` added to ``into[key]`` (a new counter there when it has none)."""
    into.setdefault(key, Counter()).update(counts)


@dataclass(frozen=True, order=True)
class Key:
    """What makes two calls the same point for tuning. ``size_bytes`` is ccltune's size
    (nccl-tests' 'size', the tuner's nBytes: the whole buffer for all_gather and
    reduce_scatter); ``count`` is the element count the API call takes per rank. None:
    the source does not say (a capture file has neither datatype nor count; traces and
    COLL logs do not give the node count)."""

    collective: str             # ccltune's registry name: all_reduce, all_gather, ...
    size_bytes: int
    nranks: int
    datatype: str | None = None  # ccltune's spelling (datatypes.DTYPES), or NCCL's enum as 'nccl:N'
    count: int | None = None
    nnodes: int | None = None
    # the reduction op (datatypes.OPS' names: sum, prod, max, min, avg, mulsum) of a reducing collective,
    # from NCCL's COLL log; None: not a reduction, or the source does not say (traces, profiler files, captures)
    op: str | None = None


@dataclass
class RankRecord:
    """What one source rank issued: calls per key, the timings it has, and the capture
    extras (numPipeOps/regBuff per key) when it came from the plugin."""

    source: str                  # the file(s) it came from
    kind: str                    # capture | nccl-log | torch-trace
    rank_id: str                 # host:pid, or the trace's rank: records with one id are one rank
    calls: Counter[Key] = field(default_factory=Counter)
    timing: dict[Key, Timing] = field(default_factory=dict)
    variants: dict[Key, Counter[tuple[int, int]]] = field(default_factory=dict)
    steps: int | None = None     # ProfilerStep annotations seen (traces)
    overflow_calls: int = 0      # capture: calls the plugin's table could not key
    overflow_bytes: int = 0
    order: list[tuple[Key, str]] = field(default_factory=list)  # (key, communicator) per call, in issue order
    # in-job sources (profiler files, Inspector): what NCCL ran per key, (algo, proto, nchannels) -> calls,
    # and per call the time spent waiting for the last rank and transferring after it (all ranks' files)
    ran: dict[Key, Counter[tuple[str, str, int]]] = field(default_factory=dict)
    wait: dict[Key, Timing] = field(default_factory=dict)
    transfer: dict[Key, Timing] = field(default_factory=dict)
    host: str | None = None      # the process, when the source names it: a log and a trace of one
    pid: int | None = None       # process are one rank seen twice (model.same_process)
    steps_from: str | None = None  # how ``steps`` was found (ProfilerStep spans, the log's period)
    time_kind: str | None = None   # the kind its timing came from, when another source's (sameproc.fold)
    compute: Overlap | None = None  # a trace's compute kernels beside its NCCL kernels (workload.compute)
    comm: str | None = None        # the communicator (id.seq), when the record is one communicator's (captures)


class Halves(Generic[T]):
    """Send and Recv are two API calls (NCCL's ncclSend/ncclRecv, c10d's send/recv) of one ccltune
    call: sendrecv is a ring shift, each rank sending to r+1 and receiving from r-1
    (collectives/sendrecv.py), so one exchange shows a Send and a Recv on every rank (two COLL
    lines, two record_param_comms events). Per rank and communicator (``scope``), a Send and a
    Recv of one key (datatype and count) pair up, in the order they come (their peers may differ:
    they do in a ring of 3 or more), and the pair is one call, counted at its first half. A half
    that finds no other half is a call of its own (a one-way transfer: a pipeline stage that only
    sends). Every importer that reads Send/Recv counts through this one rule. ``T``: the callers'
    token of an API call."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[Hashable, Key], dict[str, deque[T]]] = {}

    def call_of(self, scope: Hashable, key: Key, half: str, halves: Sequence[str], call: T) -> T:
        """The call this API call is part of: ``call`` (a token the caller chose, unique per API
        call) when it begins one, else the token of the waiting other half it completes.
        ``halves``: the names of the collective's halves (fewer than two: it has none, and every
        API call is a call)."""
        if len(halves) < 2:
            return call
        waiting = self.waiting.setdefault((scope, key), {})
        other = next((h for h in halves if h != half and waiting.get(h)), None)
        if other is not None:
            return waiting[other].popleft()
        waiting.setdefault(half, deque()).append(call)
        return call


@dataclass
class Entry:
    key: Key
    calls: int
    timing: Timing | None = None
    variants: Counter[tuple[int, int]] | None = None  # (num_pipe_ops, reg_buff) -> calls
    ran: Counter[tuple[str, str, int]] | None = None  # in-job: (algo, proto, nchannels) -> calls
    wait: Timing | None = None       # in-job: per call, latest start among the ranks - own start
    transfer: Timing | None = None   # in-job: per call, own end - latest start among the ranks
    time_from: str | None = None     # the source of ``timing``: 'ccltune-profile', 'inspector', 'torch-trace'

    @property
    def bytes_total(self) -> int:
        return self.key.size_bytes * self.calls


@dataclass
class Workload:
    entries: list[Entry]
    sources: list[dict[str, Any]]
    steps: int | None = None
    warnings: list[str] = field(default_factory=list)
    overflow_calls: int = 0
    overflow_bytes: int = 0
    # the calls of one source rank in issue order, run-length encoded: (entry index, communicator
    # index, repeat); empty when no source gives an order (capture files count, they keep no order)
    order: list[tuple[int, int, int]] = field(default_factory=list)
    steps_note: str | None = None  # where ``steps`` came from when --steps set it (the file's "steps_from")
    op_unrecorded: bool = False    # read from a file written before entries carried their reduction op
    compute: Overlap | None = None  # the traces' compute beside the collectives: sizes --under-load (workload.compute)

    def by_bytes(self) -> list[Entry]:
        """Entries by share of bytes moved, largest first (then by key, an unknown field before a known one: two
        keys that differ only there, a trace's op None beside a log's, must not compare None with a string)."""
        return sorted(self.entries, key=lambda e: (-e.bytes_total, tuple((v is not None, v or 0) if not isinstance(
            v, str) else (True, v) for v in (e.key.collective, e.key.size_bytes, e.key.nranks, e.key.datatype,
                                               e.key.count, e.key.nnodes, e.key.op))))


def combine(records: list[RankRecord]) -> list[RankRecord]:
    """Records of one (kind, rank id) added up: a process's capture files (one per
    communicator) or its lines spread over several log files become one rank."""
    out: dict[tuple[str, str], RankRecord] = {}
    for r in records:
        acc = out.get((r.kind, r.rank_id))
        if acc is None:
            acc = out[(r.kind, r.rank_id)] = RankRecord(r.source, r.kind, r.rank_id, steps=r.steps, host=r.host,
                                                         pid=r.pid, steps_from=r.steps_from,
                                                         time_kind=r.time_kind)
        elif r.source not in acc.source.split(", "):
            acc.source += f", {r.source}"
        acc.calls.update(r.calls)
        for mine, theirs in ((acc.timing, r.timing), (acc.wait, r.wait), (acc.transfer, r.transfer)):
            for k, t in theirs.items():
                mine.setdefault(k, Timing()).merge(t)
        for k, v in r.variants.items():
            add_counts(acc.variants, k, v)
        for k, ran in r.ran.items():
            add_counts(acc.ran, k, ran)
        if r.steps and (acc.steps or 0) < r.steps:
            acc.steps, acc.steps_from = r.steps, r.steps_from
        acc.overflow_calls += r.overflow_calls
        acc.overflow_bytes += r.overflow_bytes
        if acc is not r:
            acc.order += r.order  # one rank's lines spread over files: in the order the files were given
    return list(out.values())


# Which source's times an entry keeps when several timed it (never pooled across kinds: a profiler
# file and a trace of one rank time the same calls)
TIME_SOURCES = ("ccltune-profile", "inspector", "torch-trace")


def merge(ranks: list[RankRecord], warnings: list[str] | None = None, steps: int | None = None) -> Workload:
    """Combine source ranks: per key the largest call count (see the module doc); timings
    of every rank of the best-timed kind pooled (TIME_SOURCES); steps as :func:`resolve_steps`
    decides (``steps``: the user's --steps)."""
    ranks = combine(ranks)
    steps, steps_note = resolve_steps(ranks, steps)
    calls: dict[Key, int] = {}
    variants: dict[Key, Counter[tuple[int, int]]] = {}
    ran: dict[Key, Counter[tuple[str, str, int]]] = {}
    for r in ranks:
        for k, n in r.calls.items():
            if n > calls.get(k, 0):
                calls[k] = n
                if k in r.variants:
                    variants[k] = Counter(r.variants[k])
        for k, v in r.ran.items():
            ran.setdefault(k, Counter()).update(v)
    entries = [Entry(k, n, variants=variants.get(k), ran=ran.get(k)) for k, n in calls.items()]
    by_key = {e.key: e for e in entries}
    for kind in reversed(TIME_SOURCES):  # the best kind last: it overwrites
        pooled: dict[str, dict[Key, Timing]] = {"timing": {}, "wait": {}, "transfer": {}}
        for r in ranks:
            if (r.time_kind or r.kind) == kind:
                for what, got in pooled.items():
                    for k, t in getattr(r, what).items():
                        got.setdefault(k, Timing()).merge(t)
        for k, t in pooled["timing"].items():
            if k in by_key and t.calls:
                e = by_key[k]
                e.timing, e.time_from = t, kind
                e.wait, e.transfer = pooled["wait"].get(k), pooled["transfer"].get(k)
    sources = [{"path": r.source, "kind": r.kind, "rank": r.rank_id, "calls": sum(r.calls.values()),
                **({"steps": r.steps} if r.steps else {})} for r in ranks]
    wl = Workload(entries, sources, steps, list(warnings or []),
                  overflow_calls=max((r.overflow_calls for r in ranks), default=0),
                  overflow_bytes=max((r.overflow_bytes for r in ranks), default=0))
    wl.steps_note = steps_note
    wl.entries = wl.by_bytes()
    wl.order = encode_order(wl.entries, max((r.order for r in ranks), key=len, default=[]))
    return wl


def _step_counts(ranks: list[RankRecord]) -> str:
    return "; ".join(f"{r.source}: {f'{r.steps} step' + 's' * (r.steps != 1) if r.steps else 'steps not known'}"
                     f" ({r.kind})" for r in ranks)


def resolve_steps(ranks: list[RankRecord], steps: int | None) -> tuple[int | None, str | None]:
    """The steps the merged calls cover, and a note saying where that number came from.

    Calls are merged as the largest count per entry, so the sources must cover the same span:
    a trace knows its steps (ProfilerStep annotations), a COLL log or capture file does not
    (it counts the whole run, often more steps than a trace profiled). Sources that know their
    step count merged with sources that do not, or that disagree, would make every per-step
    figure silently wrong: refused unless ``steps`` (the user's --steps) says what they cover."""
    known = {r.steps for r in ranks if r.steps}
    mixed = len(known) > 1 or bool(known and any(not r.steps for r in ranks))
    if steps is not None:
        said = f" (the files: {_step_counts(ranks)})" if mixed or known != {steps} else ""
        return steps, f"steps: {steps}, from --steps{said}"
    if mixed:
        raise UsageError(f"the files do not cover the same steps: {_step_counts(ranks)}. Calls are combined "
                         "as the largest count per entry, so every per-step figure would be wrong; import "
                         "files of one span together, or give --steps N (the steps the largest counts cover)")
    if not known:
        return None, None
    found = known.pop()
    how = [r.steps_from for r in ranks if r.steps_from]
    more = f" ({len(how) - 1} other source(s) give the same count)" if len(how) > 1 else ""
    return found, (f"steps: {found}, from {how[0]}{more}" if how else None)


def encode_order(entries: list[Entry], order: list[tuple[Key, str]]) -> list[tuple[int, int, int]]:
    """One rank's calls as (entry index, communicator index, repeat) runs. Communicators are
    numbered by first appearance (a log's comm pointer, a trace's process group name: labels
    of one process, meaningless to another)."""
    index = {e.key: i for i, e in enumerate(entries)}
    comms: dict[str, int] = {}
    out: list[tuple[int, int, int]] = []
    for key, comm in order:
        item = (index[key], comms.setdefault(comm, len(comms)))
        if out and out[-1][:2] == item:
            out[-1] = (*item, out[-1][2] + 1)
        else:
            out.append((*item, 1))
    return out


def to_json(wl: Workload, header: dict[str, Any], where: str = "the workload to write") -> str:
    """The workload file's text (schema in docs/workload.md), checked by the reader's own checks
    (:func:`from_doc`) before it is returned: a value the reader would refuse (calls past 2^40, nnodes
    beyond the entry's ranks, a time of 10^16 us) is refused here, naming ``where`` (the files read) and
    the entry, so import never writes a file every later command refuses."""
    entries = []
    for e in wl.entries:
        d: dict[str, Any] = {"collective": e.key.collective, "datatype": e.key.datatype, "count": e.key.count,
                             "op": e.key.op, "size_bytes": e.key.size_bytes, "nranks": e.key.nranks,
                             "nnodes": e.key.nnodes, "calls": e.calls}
        if e.timing is not None and e.timing.calls:
            d.update(e.timing.to_dict())
            d["time_from"] = e.time_from
        for name, t in (("wait_us", e.wait), ("transfer_us", e.transfer)):
            if t is not None and t.calls:
                d.update(t.to_dict(name))
        if e.ran:
            d["ran"] = [{"algo": a, "proto": p, "nchannels": c, "calls": n} for (a, p, c), n in sorted(e.ran.items())]
        if e.variants:
            d["tuner_calls"] = [{"num_pipe_ops": p, "reg_buff": r, "calls": n}
                                for (p, r), n in sorted(e.variants.items())]
        entries.append(d)
    doc = {"schema": SCHEMA, "version": VERSION, **header, "steps": wl.steps,
           **({"steps_from": wl.steps_note} if wl.steps_note else {}), "sources": wl.sources,
           "warnings": wl.warnings, "overflow_calls": wl.overflow_calls, "overflow_bytes": wl.overflow_bytes,
           **({"compute_overlap": wl.compute.to_dict()} if wl.compute is not None else {}),
           "entries": entries, **({"order": [list(o) for o in wl.order]} if wl.order else {})}
    try:
        from_doc(doc, where, describe=True)
    except UsageError as exc:
        raise UsageError(f"{exc}; nothing was written (a workload file holding it would be refused by every "
                         "command that reads it)") from None
    return json.dumps(doc, indent=1) + "\n"


def _need(d: dict[str, Any], name: str, kinds: type | tuple[type, ...], where: str) -> Any:
    if name not in d:
        raise UsageError(f"{where}: missing field {name!r}")
    v = d[name]
    if not isinstance(v, kinds) or isinstance(v, bool):
        raise UsageError(f"{where}: field {name!r} has the wrong type ({type(v).__name__}: {v!r})")
    return v


def load(path: str) -> Workload:
    """Read a workload file; an unreadable or wrong file is a UsageError naming it."""
    raw = read_bytes(path, "W.json", limit=MAX_WORKLOAD_BYTES)  # no FIFO on disk, device or folder: a clear error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a workload file (not UTF-8 text)") from None
    return from_json(text, path)


def from_json(text: str, path: str) -> Workload:
    """Parse a workload file; a wrong schema, version or field names the file and entry."""
    try:
        doc = json.loads(text, parse_constant=_not_finite)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: not a workload file (invalid JSON: {exc.msg})") from None
    except (RecursionError, ValueError) as exc:  # nested past the parser's guard, NaN, a 4,300-digit number
        raise UsageError(f"{path}: not a workload file ({str(exc) or 'nested too deeply'})") from None
    return from_doc(doc, path)


def from_doc(doc: Any, path: str, *, describe: bool = False) -> Workload:
    """A workload file's parsed JSON checked field by field (the one set of checks :func:`from_json`
    applies on reading and :func:`to_json` before writing); errors name ``path`` and the entry (with
    ``describe``, also its collective, size and ranks: an entry made by import has no line to point at)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UsageError(f"{path}: not a workload file (no \"schema\": \"{SCHEMA}\"; "
                         "write one with `ccltune workload import`)")
    if doc.get("version") != VERSION:
        raise UsageError(f"{path}: workload schema version {doc.get('version')!r}, this ccltune reads {VERSION}")
    raw = _need(doc, "entries", list, path)
    entries = []
    for i, d in enumerate(raw):
        where = f"{path}: entries[{i}]"
        if describe and isinstance(d, dict):
            where += f" ({d.get('collective')}, {d.get('size_bytes')} B, {d.get('nranks')} ranks)"
        if not isinstance(d, dict):
            raise UsageError(f"{where}: not an object")
        opt_int = (int, type(None))
        key = Key(_need(d, "collective", str, where), _need(d, "size_bytes", int, where),
                  _need(d, "nranks", int, where), _need(d, "datatype", (str, type(None)), where),
                  _need(d, "count", opt_int, where), _need(d, "nnodes", opt_int, where),
                  _op(d, where))
        calls = _need(d, "calls", int, where)
        if calls < 0 or key.size_bytes < 0 or key.nranks < 1:
            raise UsageError(f"{where}: impossible values (calls {calls}, size_bytes {key.size_bytes}, "
                             f"nranks {key.nranks})")
        timing = None
        timing = _timing(d, where, "time_us")
        wait, transfer = _timing(d, where, "wait_us"), _timing(d, where, "transfer_us")
        _check_entry(d, key, calls, where)
        variants = None
        if "tuner_calls" in d:
            variants = Counter({(int(v["num_pipe_ops"]), int(v["reg_buff"])): int(v["calls"])
                                for v in _need(d, "tuner_calls", list, where)})
        ran = None
        if "ran" in d:
            try:
                ran = Counter({(str(v["algo"]), str(v["proto"]), int(v["nchannels"])): int(v["calls"])
                               for v in _need(d, "ran", list, where)})
            except (KeyError, TypeError, ValueError):
                raise UsageError(f"{where}: field 'ran' must be a list of {{algo, proto, nchannels, calls}}") from None
        from_ = d.get("time_from")
        entries.append(Entry(key, calls, timing, variants, ran, wait, transfer,
                             from_ if isinstance(from_, str) else None))
    _check_doc(doc, entries, path)
    steps, note = doc.get("steps"), doc.get("steps_from")
    return Workload(entries, list(doc.get("sources") or []), steps if isinstance(steps, int) else None,
                    list(doc.get("warnings") or []), int(doc.get("overflow_calls") or 0),
                    int(doc.get("overflow_bytes") or 0), _order(doc.get("order") or [], len(entries), path),
                    note if isinstance(note, str) else None,
                    op_unrecorded=any(isinstance(d, dict) and "op" not in d for d in raw),
                    compute=check_compute(doc["compute_overlap"], path) if doc.get("compute_overlap") is not None
                    else None)


def _op(d: dict[str, Any], where: str) -> str | None:
    """An entry's reduction op: one of datatypes.OPS or null; absent (a file written before ccltune recorded
    it) reads as unknown, and ``workload show`` says so."""
    op = d.get("op")
    if op is not None and op not in OPS:
        raise UsageError(f"{where}: field 'op' must be one of {', '.join(OPS)} or null, got {str(op)[:40]!r}")
    return op


def _timing(d: dict[str, Any], where: str, prefix: str) -> Timing | None:
    """An entry's timing fields (``time_us_*``, ``wait_us_*``, ``transfer_us_*``), or None when absent."""
    if f"{prefix}_max" not in d:
        return None
    num = (int, float)
    for q in ("p10", "median", "p90", "max", *(("mean", "min") if prefix == "time_us" else ())):
        if f"{prefix}_{q}" in d or q in ("max", "mean", "min"):
            _need(d, f"{prefix}_{q}", num, where)
    calls = _need(d, "timed_calls", int, where) if prefix == "time_us" else 1
    return Timing.from_dict(d, calls, prefix)


def _order(raw: Any, n_entries: int, path: str) -> list[tuple[int, int, int]]:
    ok = isinstance(raw, list) and all(
        isinstance(o, list) and len(o) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in o)
        and 0 <= o[0] < n_entries and o[1] >= 0 and o[2] >= 1 for o in raw)
    if not ok:
        raise UsageError(f"{path}: field 'order' must be a list of [entry index < {n_entries}, communicator >= 0, "
                         "repeat >= 1]")
    return [tuple(o) for o in raw]
