"""The ``workload show`` table (pure: a workload and its estimates in, text lines out). Every column
is defined in the heading lines it prints and in docs/workload.md ("Show")."""

from __future__ import annotations

from ccltune import collectives
from ccltune.sizes import format_size
from ccltune.workload import compute, quantities
from ccltune.workload.estimate import IdleTime
from ccltune.workload.model import Entry, Workload

SLOW_RATIO = quantities.SLOW_RATIO


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def job_us(e: Entry) -> float | None:
    """The job's own median time per call of an entry, or None when no source timed it."""
    return e.timing.median_us if e.timing is not None and e.timing.calls else None


def table(wl: Workload, est: dict[int, IdleTime] | None = None, db: str | None = None) -> list[str]:
    """Entries by share of bytes: the job's own time per call (median) and waiting where a source timed
    them; with ``db``, NCCL's default idle time per call, the ratio, and time per step from it."""
    total_bytes = sum(e.bytes_total for e in wl.entries) or 1
    short = quantities.short_unit(wl.steps)
    out = _preamble(wl)
    timed = [e for e in wl.entries if job_us(e) is not None]
    waits = any(e.wait is not None and e.wait.median_us is not None for e in wl.entries)
    ran = any(e.ran for e in wl.entries)
    froms = sorted({e.time_from or "?" for e in timed})
    if timed:
        out.append(f"# job_us: the job's own GPU time per call, median over its timed calls (from {', '.join(froms)}; "
                   "p10/p90/max in the workload file)")
    if waits:
        out.append("# wait_us: median time per call spent waiting for the last rank to start (all ranks' profiler "
                   "files); job_us - wait_us is about the transfer")
    if ran:
        out.append("# ran: what NCCL ran most of the entry's calls with, algorithm/protocol/channels (profiler "
                   "files; +N: N other choices, all in the workload file's 'ran')")
    est = est or {}
    if wl.op_unrecorded and any(_reduces(e) for e in wl.entries):
        out.append("# op: this file was written before workload files recorded the reduction op: reductions show "
                   "'?' and are swept with -o (sum); import the job's files again to record it")
    elif any(_reduces(e) for e in wl.entries):
        out.append("# op: the reduction op NCCL's COLL log gave (sum, prod, max, min, avg, mulsum); '?': the source "
                   "does not say (traces, profiler files, captures); '-': not a reduction")
    head = (f"# {'collective':<15}{'datatype':>10}{'op':>7}{'count':>12}{'size':>10}{'ranks':>6}{'nodes':>6}{'calls':>8}"
            f"{'bytes%':>8}" + (f"{'job_us':>10}" if timed else "") + (f"{'wait_us':>9}" if waits else ""))
    if db is not None:
        out.append(f"# idle_us: NCCL's default per call on an idle GPU in {db} (median; ~ interpolated between "
                   f"measured sizes); ratio: job_us / idle_us; us/{short}: calls x idle_us / "
                   + ("steps" if wl.steps else "1 (steps unknown)") + "; time%: share of that sum")
        head += f"{'idle_us':>10}" + (f"{'ratio':>7}" if timed else "") + f"{f'us/{short}':>11}{'time%':>7}"
    out.append(head + ("  ran" if ran else ""))
    shares = {i: quantities.per_step(e.calls, est[i].time_us, wl.steps) for i, e in enumerate(wl.entries) if i in est}
    total_us = sum(shares.values())
    for i, e in enumerate(wl.entries):
        k = e.key
        row = (f"  {k.collective:<15}{k.datatype or '-':>10}{op_text(e):>7}{k.count if k.count is not None else '-':>12}"
               f"{format_size(k.size_bytes):>10}{k.nranks:>6}{k.nnodes if k.nnodes is not None else '-':>6}"
               f"{e.calls:>8}{100 * e.bytes_total / total_bytes:>8.1f}")
        if timed:
            row += f"{_us(job_us(e)):>10}"
        if waits:
            row += f"{_us(e.wait.median_us if e.wait is not None else None):>9}"
        if db is not None:
            if i in est:
                mark = "~" if est[i].how == "interpolated" else ""
                j = job_us(e)
                ratio = f"{j / est[i].time_us:.2f}" if j is not None and est[i].time_us > 0 else "-"
                row += (f"{mark + format(est[i].time_us, '.1f'):>10}" + (f"{ratio:>7}" if timed else "")
                        + f"{shares[i]:>11.1f}{100 * shares[i] / total_us if total_us else 0:>7.1f}")
            else:
                row += f"{'-':>10}" + (f"{'-':>7}" if timed else "") + f"{'-':>11}{'-':>7}"
        out.append(row + (f"  {_ran(e)}" if ran else ""))
    return out + _totals(wl, timed, est, db, total_us)


def _preamble(wl: Workload) -> list[str]:
    """The table's first lines: the workload's size, its steps, its sources, the calls it lost."""
    out = [f"# workload: {len(wl.entries)} entries, {sum(e.calls for e in wl.entries)} calls, "
           + (f"{wl.steps} steps" if wl.steps else "steps unknown (times are per captured run; import --steps N)")]
    if wl.steps_note:
        out.append(f"# {wl.steps_note}")
    for s in wl.sources:
        out.append(f"# source: {s.get('kind')} {s.get('path')} ({s.get('calls')} calls)")
    if wl.overflow_calls:
        out.append(f"# WARNING: {wl.overflow_calls} captured calls ({wl.overflow_bytes} bytes) did not fit the "
                   "plugin's table and are not in the entries")
    return out


def _totals(wl: Workload, timed: list[Entry], est: dict[int, IdleTime], db: str | None, total_us: float) -> list[str]:
    """The lines under the rows: the job's and the estimated time per step, the entries far slower than
    idle, the load sized from the job, the import's warnings."""
    unit = quantities.unit(wl.steps)
    out = []
    if timed:
        job_total = quantities.total(((e.calls, job_us(e) or 0.0) for e in timed), wl.steps)
        out.append(f"# in-job communication time per {unit}: {job_total:.1f} us = sum of calls x job_us"
                   f"{'' if wl.steps is None else ' / steps'} over the {len(timed)} of {len(wl.entries)} entries timed "
                   "(calls back to back: overlap with compute not counted)")
    if db is not None:
        if est:
            out.append(f"# estimated communication time per {unit}: {total_us:.1f} us from NCCL-default rows of {db} "
                       f"(idle GPU; {len(est)} of {len(wl.entries)} entries measured; - = no measurement at or around "
                       "that size)")
        else:
            out.append(f"# no estimate: {db} has no NCCL-default measurement at or around any of these sizes "
                       "(run `ccltune sweep --workload`)")
        slow = slow_entries(wl, est)
        if slow:
            out.append(f"# the job's calls are far slower than idle (ratio >= {SLOW_RATIO:g} at the median) for "
                       + ", ".join(f"{wl.entries[i].key.collective} {format_size(wl.entries[i].key.size_bytes)} "
                                   f"(x{r:.1f})" for i, r in slow)
                       + ": tune under load (`sweep --workload` does so by default, docs/workload.md)")
    if wl.compute is not None:
        m, why = compute.load_for(wl.compute)
        out.append(f"# under load, sized from the job: {why}" + ("" if m is not None else ": no load"))
    for w in wl.warnings:
        out.append(f"# warning: {w}")
    return out


def _reduces(e: Entry) -> bool:
    c = collectives.REGISTRY.get(e.key.collective)
    return c is not None and c.reduces


def op_text(e: Entry) -> str:
    """The op column: the entry's reduction op, '?' for a reduction whose op no source gave, '-' otherwise."""
    return e.key.op or ("?" if _reduces(e) else "-")


def _ran(e: Entry) -> str:
    if not e.ran:
        return "-"
    (algo, proto, ch), _ = max(e.ran.items(), key=lambda kv: (kv[1], kv[0]))
    more = f" +{len(e.ran) - 1}" if len(e.ran) > 1 else ""
    return f"{algo}/{proto}/{ch or '-'}{more}"


def slow_entries(wl: Workload, est: dict[int, IdleTime]) -> list[tuple[int, float]]:
    """(entry index, job_us / idle_us) of the entries at or over :data:`SLOW_RATIO`, largest first."""
    got = []
    for i, e in enumerate(wl.entries):
        j = job_us(e)
        if i in est and j is not None and est[i].time_us > 0 and j / est[i].time_us >= SLOW_RATIO:
            got.append((i, j / est[i].time_us))
    return sorted(got, key=lambda x: -x[1])
