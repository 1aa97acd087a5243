"""The ``workload show`` table (pure: a workload and its estimates in, text lines out)."""

from __future__ import annotations

from ccltune.sizes import format_size
from ccltune.workload.estimate import Estimate
from ccltune.workload.model import Workload


def table(wl: Workload, est: dict[int, Estimate] | None = None, db: str | None = None) -> list[str]:
    """Entries by share of bytes; with estimates, time per step (per captured run when the
    workload does not know its steps) and share of the estimated time."""
    total_bytes = sum(e.bytes_total for e in wl.entries) or 1
    per = wl.steps or 1
    unit = "step" if wl.steps else "run"
    out = [f"# workload: {len(wl.entries)} entries, {sum(e.calls for e in wl.entries)} calls, "
           + (f"{wl.steps} steps" if wl.steps else "steps unknown (times are per captured run; import --steps N)")]
    if wl.steps_note:
        out.append(f"# {wl.steps_note}")
    for s in wl.sources:
        out.append(f"# source: {s.get('kind')} {s.get('path')} ({s.get('calls')} calls)")
    if wl.overflow_calls:
        out.append(f"# WARNING: {wl.overflow_calls} captured calls ({wl.overflow_bytes} bytes) did not fit the "
                   "plugin's table and are not in the entries")
    est = est or {}
    timed = {i: e.calls * est[i].time_us / per for i, e in enumerate(wl.entries) if i in est}
    total_us = sum(timed.values())
    head = (f"# {'collective':<15}{'datatype':>10}{'count':>12}{'size':>10}{'ranks':>6}{'nodes':>6}{'calls':>8}"
            f"{'bytes%':>8}{'trace_us':>10}")
    if db is not None:
        head += f"{'est_us':>10}{f'us/{unit}':>11}{'time%':>7}"
    out.append(head)
    for i, e in enumerate(wl.entries):
        k = e.key
        row = (f"  {k.collective:<15}{k.datatype or '-':>10}{k.count if k.count is not None else '-':>12}"
               f"{format_size(k.size_bytes):>10}{k.nranks:>6}{k.nnodes if k.nnodes is not None else '-':>6}"
               f"{e.calls:>8}{100 * e.bytes_total / total_bytes:>8.1f}"
               f"{f'{e.timing.mean_us:.1f}' if e.timing and e.timing.calls else '-':>10}")
        if db is not None:
            if i in est:
                mark = "~" if est[i].how == "interpolated" else ""
                row += (f"{mark + format(est[i].time_us, '.1f'):>10}{timed[i]:>11.1f}"
                        f"{100 * timed[i] / total_us if total_us else 0:>7.1f}")
            else:
                row += f"{'-':>10}{'-':>11}{'-':>7}"
        out.append(row)
    if db is not None:
        covered = len(est)
        out.append(f"# estimated communication time per {unit}: {total_us:.1f} us from NCCL-default rows of {db} "
                   f"({covered} of {len(wl.entries)} entries measured; ~ = interpolated between measured sizes; "
                   "- = no measurement at or around that size)")
    for w in wl.warnings:
        out.append(f"# warning: {w}")
    return out
