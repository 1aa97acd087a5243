"""ccltune's profiler files (:mod:`ccltune.workload.profile_file`) as workload records (pure).

One record per process (host:pid), its communicators added up. Per entry: the calls NCCL saw, the
algorithm/protocol/channels it ran them with (``ran``), and the GPU time per call: exact over the
``call`` lines when they hold every timed call of the entry, else the file's own summary (p10, median,
p90 from its histogram; :mod:`ccltune.workload.timing` says how summaries pool).

Waiting and transfer (docs/workload.md, "In-job times"): for a collective call of sequence number
``seq`` (NCCL numbers a communicator's calls per function, so a call is its op and ``seq``) on a
communicator whose files of *all* ranks are given, on one node (GPU global timers of
different nodes are not comparable), with ``latest`` the latest start among the ranks:
``wait = latest - own start`` (the time this rank's kernel spent waiting for the last rank to
arrive) and ``transfer = own end - latest`` (the time after everyone arrived). Per rank and call,
``wait + transfer`` is the call's own GPU time. Only collectives without a root are split (no rank
can finish them before all have started); broadcast, reduce and point-to-point calls are not.

The GPUs' global timers are not one clock: in the real 4-rank DDP and TP files of 2026-11-28 they
stood 0.2 to 6 ms apart, constant per GPU, far more than a call lasts, so that one rank always looked
last and the others' calls ended before it "started". A RING call ends on every rank within a few
microseconds (its last chunk goes round the ring), so each rank's offset is the median, over the
communicator's RING calls of the collectives above seen on every rank, of its end minus the calls'
median end; starts and ends are shifted by it before the split. What is left of the clocks' spread
(tens of microseconds) can put a rank's end before the latest start: its wait is then capped at its
own time (transfer 0), never dropped. Without a RING call the clocks are used as they are, and the
import says so.

The ``call`` lines are the first ``CCLTUNE_PROFILE_CALLS`` (4096) timed calls of each file: calls
after them (``# dropped ... calls C``) keep their counts and their place in the entry's summary
times, but have no start to split: an entry whose calls all came later gets no wait figure, and the
import names such entries (:func:`_dropped_lines`).

A collective that does not reduce (all_gather, broadcast, send/recv) reaches the profiler as bytes
(``ncclInt8``, its count in bytes): such an entry keeps its size but not a datatype or count, so it
merges with the COLL log's or the trace's entry of the same size.

Send and Recv lines of one datatype and count are the halves of ``sendrecv`` calls, counted as the
COLL log counts them (:class:`~ccltune.workload.model.Halves`: pairs, plus the halves left over, so
the larger of the two counts); the profiler times each half on its own, so a sendrecv entry carries
no in-job time from these files.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from ccltune import collectives
from ccltune.datatypes import DTYPES
from ccltune.errors import UsageError
from ccltune.files import shown
from ccltune.workload import steps as find_steps
from ccltune.workload.model import Key, RankRecord
from ccltune.workload.profile_file import ProfileEntry, ProfileFile
from ccltune.workload.timing import Timing

# NCCL's kernel stamps a channel's KernelCh stop when that channel's thread 0 is done with the
# operation (NCCL 2.28.9 src/device/common.h:309-310, profiler(): `if (threadIdx.x == 0)`; a kernel's
# last batch breaks out of the loop at line 393, before the __syncthreads, and is stamped by
# profiler(FINI) at line 400: when thread 0 alone is done). Under the algorithms below thread 0 runs
# one part of the channel's work while other threads run another, so the channel can finish after its
# stamp and the call's in-job time can end before the kernel did. Algorithms not named here (RING)
# run every thread of a channel through one loop: the stamp is the channel's end.
THREAD0_PART = {
    # all_reduce.h:149-230 runTreeSplit: on every rank but the tree's root (line 167), thread 0 is in the
    # reduce-up half (line 177); the broadcast-down half (line 207) ends later: in a real 4-rank DDP run
    # the root's times matched the kernel's, the chain's last rank's were about 30% short
    "TREE": "thread 0 reduces up the tree; on every rank but the tree's root the broadcast back down ends later",
    "COLLNET_CHAIN": "thread 0 is in one of two thread groups (up and down the chain)",
    "COLLNET_DIRECT": "thread 0 is in one of four thread groups (gather, broadcast, scatter, reduce)",
    "NVLS": "thread 0 is in the scatter group, one of four",
    "NVLS_TREE": "thread 0 is in the scatter group, one of four",
    "PAT": "thread 0 is one worker group of several",
}


def _key(e: ProfileEntry, f: ProfileFile, nranks: int | None) -> Key | None:
    coll = collectives.REGISTRY.get("sendrecv" if e.op in ("send", "recv") else e.op)
    if coll is None or e.datatype not in DTYPES or e.count is None or nranks is None:
        return None
    size = e.count * DTYPES[e.datatype].size * (nranks if coll.per_rank_count else 1)
    if not coll.reduces and e.datatype == "int8":
        # NCCL hands the profiler a collective that does not reduce as bytes (ncclInt8, count in bytes:
        # a real FSDP2 bf16 all_gather of 16,384,512 elements shows as int8 x 32,769,024): the job's
        # datatype and count are unknown here, its size is right
        return Key(coll.name, size, nranks, None, None, f.nnodes)
    return Key(coll.name, size, nranks, e.datatype, e.count, f.nnodes)


def _nranks(files: list[ProfileFile]) -> dict[str, int]:
    """Communicator -> its rank count, from the files that give it (ABI v1-v3 files do not). Two files of one
    communicator that give two counts contradict each other: refused naming both (issue 41)."""
    out: dict[str, int] = {}
    said: dict[str, str] = {}
    for f in files:
        if f.nranks is None:
            continue
        if f.comm in out and out[f.comm] != f.nranks:
            raise UsageError(f"{shown(f.path)}:2: nranks {f.nranks}, but {shown(said[f.comm])}:2 says nranks "
                             f"{out[f.comm]} for the same communicator {f.comm}: the files contradict each other")
        out.setdefault(f.comm, f.nranks)
        said.setdefault(f.comm, f.path)
    return out


def records(files: list[ProfileFile]) -> tuple[list[RankRecord], list[str]]:
    """One record per process, and warnings (entries skipped, waiting not computed, files cut)."""
    warnings: list[str] = [w for f in files for w in f.warnings]
    out: dict[tuple[str, int], RankRecord] = {}
    keys: dict[int, list[Key | None]] = {}          # id(file) -> key per entry
    sizes = _nranks(files)
    for f in files:
        rec = out.setdefault((f.host, f.pid), RankRecord(f.path, "ccltune-profile", f"{f.host}:{f.pid}",
                                                         host=f.host, pid=f.pid))
        if f.path not in rec.source.split(", "):
            rec.source += f", {f.path}"
        if f.comm not in sizes:
            warnings.append(f"{f.path}: the communicator's rank count is not in the file (profiler ABI v{f.abi} does not "
                            "give it) nor in another rank's: its calls are left out (a COLL log of the job gives them)")
        keys[id(f)] = ks = [_key(e, f, sizes.get(f.comm)) for e in f.entries]
        _add_file(rec, f, ks, warnings, f.comm in sizes)
    _split_waits(files, keys, out, warnings)
    warnings += _dropped_lines(files, keys)
    warnings += thread0_warnings(files)
    for r in out.values():
        if r.order and not r.steps and (got := find_steps.find(r.order)):
            r.steps, r.steps_from = got[0], f"{r.source}: {got[1]}"
    return list(out.values()), warnings


def _add_file(rec: RankRecord, f: ProfileFile, ks: list[Key | None], warnings: list[str], keyed: bool) -> None:
    halves: dict[Key, Counter[str]] = defaultdict(Counter)
    lines_of: Counter[int] = Counter(c[1] for c in f.calls)
    for i, (e, k) in enumerate(zip(f.entries, ks)):
        if k is None:
            if keyed:  # else the file's missing rank count was said once
                warnings.append(f"{f.path}: entry {i} ({e.op} {e.datatype} count {e.count}) skipped: "
                                + ("no element count" if e.count is None else "ccltune has no such collective or datatype"))
            continue
        rec.ran.setdefault(k, Counter())[(e.algo or "-", e.proto or "-", e.nchannels or 0)] += e.calls
        if k.collective == "sendrecv":
            halves[k][e.op] += e.calls
            continue
        rec.calls[k] += e.calls
        if not e.timed or f.timing == "none":
            continue
        t = rec.timing.setdefault(k, Timing())
        if lines_of[i] == e.timed:   # every timed call has its line: exact quantiles
            for _, entry, start, end in f.calls:
                if entry == i:
                    t.add((end - start) / 1000)
        else:
            t.add_summary(e.timed, e.sum_us or 0.0, e.p10_us or 0.0, e.p50_us or 0.0, e.p90_us or 0.0, e.max_us or 0.0)
    for k, c in halves.items():
        rec.calls[k] += max(c["send"], c["recv"])
    if f.timing == "host":
        warnings.append(f"{f.path}: timed with the host clock ({f.timing_note or 'no GPU timer in this profiler ABI'}):"
                        " times include launch and queueing")
    if f.dropped_entries:
        warnings.append(f"{f.path}: the profiler's table of keys was full: {f.dropped_entries} entries dropped "
                        "(their calls are not in the workload)")
    complete = not f.dropped_calls and f.every == 1 and len(f.calls) == sum(e.calls for e in f.entries)
    if complete:  # every call has its line: the issue order, for replay and for finding steps
        rec.order += [(k, f.comm) for _, entry, _, _ in sorted(f.calls, key=lambda c: c[2])
                      if (k := ks[entry]) is not None and k.collective != "sendrecv"]


def _waits_for_all(k: Key) -> bool:
    """Whether no rank can finish the call before every rank has started it: true of the collectives
    without a root (all_reduce, all_gather, reduce_scatter, alltoall); a broadcast's root may finish
    before the others start (real DDP files: the root's 116 B broadcast ended 22 ms before the last
    rank began), so rooted collectives and point-to-point calls are not split."""
    coll = collectives.REGISTRY[k.collective]
    return not coll.rooted and k.collective != "sendrecv"


def _split_waits(files: list[ProfileFile], keys: dict[int, list[Key | None]],
                 out: dict[tuple[str, int], RankRecord], warnings: list[str]) -> None:
    by_comm: dict[str, list[ProfileFile]] = defaultdict(list)
    for f in files:
        by_comm[f.comm].append(f)
    for comm, fs in sorted(by_comm.items()):
        n = fs[0].nranks
        if n is None or n < 2:
            continue
        ranks = {f.rank for f in fs}
        by_rank = {f.rank: f for f in fs}
        if len(ranks) != n or len(fs) != n:
            warnings.append(f"communicator {comm}: files of {len(ranks)} of its {n} ranks given: waiting for the "
                            "last rank not computed (give every rank's file)")
            continue
        if (fs[0].nnodes or 1) > 1:
            warnings.append(f"communicator {comm} spans {fs[0].nnodes} nodes: their GPU clocks are not comparable, "
                            "waiting for the last rank not computed")
            continue
        # NCCL numbers a communicator's calls per function (seqNumber[func]): a call is (op, seq)
        seen: dict[tuple[str, int], dict[int, tuple[int, int, str | None]]] = defaultdict(dict)
        for f in fs:
            for seq, entry, start, end in f.calls:
                k, e = keys[id(f)][entry], f.entries[entry]
                if e.kind == "coll" and k is not None and _waits_for_all(k):
                    seen[(e.op, seq)][f.rank] = (start, end, e.algo)
        both = {call: v for call, v in seen.items() if len(v) == n}
        offset, note = _clock_offsets(both, ranks)
        if note:
            skew = _clock_skew({call: [(st, en, by_rank[r]) for r, (st, en, _) in v.items()] for call, v in both.items()}, n)
            if skew:  # no RING call to line the timers up by, and they disagree by more than a call can
                warnings.append(f"communicator {comm}: {skew}: the ranks' GPU clocks disagree, waiting for the last "
                                "rank not computed")
                continue
            warnings.append(f"communicator {comm}: {note}")
        far = {r: o for r, o in offset.items() if abs(o) > CLOCK_SLACK_NS}
        if far:  # a constant per GPU, so lined up; but say it: a timer this far off is worth knowing
            warnings.append(f"communicator {comm}: the GPU timer of " + ", ".join(
                f"{shown(by_rank[r].path)} (rank {r}) stands {o / 1e9:+.3g} s" for r, o in sorted(far.items()))
                + " from the others'; lined up by the RING calls' ends before the waits were computed")
        latest = {call: max(s - offset.get(r, 0) for r, (s, _, _) in v.items()) for call, v in both.items()}
        for f in fs:
            rec, shift = out[(f.host, f.pid)], offset.get(f.rank, 0)
            for seq, entry, start, end in f.calls:
                k, call = keys[id(f)][entry], (f.entries[entry].op, seq)
                if call not in latest or k is None or not _waits_for_all(k):
                    continue
                wait = min(max(latest[call] - (start - shift), 0), end - start)
                rec.wait.setdefault(k, Timing()).add(wait / 1000)
                rec.transfer.setdefault(k, Timing()).add((end - start - wait) / 1000)


def _clock_offsets(calls: dict[tuple[str, int], dict[int, tuple[int, int, str | None]]],
                   ranks: set[int]) -> tuple[dict[int, int], str]:
    """Each rank's GPU timer minus the communicator's, in ns, from the RING calls' ends (module doc), and
    a note when they cannot be had."""
    diffs: dict[int, list[int]] = defaultdict(list)
    for per_rank in calls.values():
        if any(algo != "RING" for _, _, algo in per_rank.values()):
            continue
        ends = sorted(end for _, end, _ in per_rank.values())
        mid = ends[len(ends) // 2]
        for r, (_, end, _) in per_rank.items():
            diffs[r].append(end - mid)
    if not diffs:
        return {}, ("no RING call seen on every rank to line the GPUs' timers up by: waits are on the raw timers, "
                    "which differ by a constant per GPU (docs/profiler.md, 'Which end, which clock')")
    return {r: sorted(d)[len(d) // 2] for r, d in diffs.items() if r in ranks}, ""


def _dropped_lines(files: list[ProfileFile], keys: dict[int, list[Key | None]]) -> list[str]:
    """One warning per communicator whose files dropped ``call`` lines: how many, and what it costs (module
    doc): the entries left without a wait figure, and those whose wait covers only part of their calls."""
    out = []
    by_comm: dict[str, list[ProfileFile]] = defaultdict(list)
    for f in files:
        if f.dropped_calls:
            by_comm[f.comm].append(f)
    for comm, fs in sorted(by_comm.items()):
        timed: dict[Key, int] = {}
        lines: dict[Key, int] = {}
        for f in fs:
            per_entry = Counter(c[1] for c in f.calls)
            for i, (e, k) in enumerate(zip(f.entries, keys[id(f)])):
                if k is not None and e.timed and k.collective != "sendrecv":
                    timed[k] = max(timed.get(k, 0), e.timed)
                    lines[k] = min(lines.get(k, e.timed), per_entry[i])
        lost = [k for k in timed if lines[k] == 0]
        part = [k for k in timed if 0 < lines[k] < timed[k]]
        kept = max(len(f.calls) for f in fs)
        dropped = max(f.dropped_calls for f in fs)
        out.append(f"communicator {comm}: the profiler wrote a call line for the first {kept} timed calls of each rank "
                   f"and dropped the lines of the {dropped} after them (CCLTUNE_PROFILE_CALLS; nothing was lost from "
                   "the table: every call is counted and in the entries' times)"
                   + (f"; no wait figure for {', '.join(_said(k, timed[k]) for k in lost)} (no call line)" if lost else "")
                   + ("; the wait of " + ", ".join(f"{_said(k, timed[k])} is from {lines[k]} of them" for k in part)
                      if part else "")
                   + f"; CCLTUNE_PROFILE_CALLS={kept + dropped} or more gives every call its line")
    return out


def _said(k: Key, calls: int) -> str:
    return f"{k.collective} {k.size_bytes} B x{calls}"


CLOCK_SLACK_NS = 1_000_000_000  # 1 s: real files of one node show ends and starts a few ms apart (profile-ddp-2: 4 ms)


def _clock_skew(starts: dict[tuple[str, int], list[tuple[int, int, ProfileFile]]], n: int) -> str | None:
    """Why the files' clocks cannot be compared, or None: a call no rank can finish before every rank started
    it (an all_reduce, all_gather, ...) that one rank starts after another rank's end, by more than
    CLOCK_SLACK_NS (a GPU clock far ahead would make every wait 0.0 and every transfer the whole call)."""
    worst: tuple[int, ProfileFile | None, ProfileFile | None] = (0, None, None)
    for got in starts.values():
        if len(got) != n:
            continue
        s, _, late_f = max(got, key=lambda g: g[0])
        _, e, early_f = min(got, key=lambda g: g[1])
        if s - e > worst[0]:
            worst = (s - e, late_f, early_f)
    gap, late, early = worst
    if gap <= CLOCK_SLACK_NS or late is None or early is None:
        return None
    return (f"{shown(late.path)} (rank {late.rank}) starts a call {gap / 1e9:.3g} s after "
            f"{shown(early.path)} (rank {early.rank}) ended it")


def thread0_warnings(files: list[ProfileFile]) -> list[str]:
    """One warning per algorithm of :data:`THREAD0_PART` that timed calls ran with (GPU-timed files only),
    naming its entries: their in-job times can end before NCCL's kernel did."""
    got: dict[str, Counter[tuple[str, int]]] = defaultdict(Counter)
    for f in files:
        if f.timing != "gpu-kernel-channels":
            continue
        for e in f.entries:
            if e.timed and e.algo in THREAD0_PART:
                got[e.algo][(e.op, e.count or 0)] += e.timed
    return [f"{sum(c.values())} timed calls ran {algo} ("
            + ", ".join(f"{op} count {n}" for op, n in sorted(c)[:4]) + (", ..." if len(c) > 4 else "") + "): "
            f"NCCL stamps a channel's end when its thread 0 is done, and under {algo} {THREAD0_PART[algo]}: "
            "their in-job times can be shorter than the kernel (docs/profiler.md, 'Which end')"
            for algo, c in sorted(got.items())]
