"""nccl-tests' text table, so existing parsers keep working. Pure string functions."""

from __future__ import annotations

from collections.abc import Sequence

from ccltune.store import Measurement

_HEAD = (
    "#                                                              out-of-place                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
)


def preamble(*, nranks: int, min_bytes: int, max_bytes: int, step: str, warmup: int, iters: int,
             check: bool, graph: int, engine: str, devices: Sequence[str], extra: Sequence[str] = ()) -> list[str]:
    lines = [
        f"# ccltune bench: engine {engine}, {nranks} process{'es' if nranks != 1 else ''}"
        f"{' (one per GPU)' if engine != 'gloo' else ' (CPU)'}",
        f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: {step} warmup iters: {warmup} "
        f"iters: {iters} agg iters: 1 validation: {int(check)} graph: {graph}",
        "#",
        "# Using devices",
        *[f"#  {d}" for d in devices],
        *[f"# {e}" for e in extra],
        "#",
    ]
    return lines


def header(collective: str) -> list[str]:
    return [f"# Collective test starting: {collective}", *_HEAD]


def _time(us: float) -> str:
    if us >= 10000:
        return f"{us:7.0f}"
    if us >= 100:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def _half(m: Measurement) -> str:
    if m.status != "ok" or m.time_us is None:
        label = {"waived": "N/A", "skipped": "skip", "unavailable": "N/A"}.get(m.status, "err")
        return f"  {label:>7}  {label:>6}  {label:>6}  {label:>5}"
    wrong = f"{m.wrong:5d}" if m.wrong is not None else "  N/A"  # not checked (-c 0), as nccl-tests prints it
    return f"  {_time(m.time_us)}  {m.algbw_gbps:6.2f}  {m.busbw_gbps:6.2f}  {wrong}"


def row(oop: Measurement, ip: Measurement) -> str:
    m = oop
    redop = m.op if m.op else "none"
    root = m.root if m.root is not None else -1
    return (f"{m.size_bytes:12d}  {m.count:12d}  {m.dtype:>8}  {redop:>6}  {root:6d}"
            f"{_half(oop)}{_half(ip)}")


def notes(oop: Measurement, ip: Measurement) -> list[str]:
    """Comment lines explaining N/A or skipped cells (once per distinct reason)."""
    seen: list[str] = []
    for m, where in ((oop, "out-of-place"), (ip, "in-place")):
        if m.status != "ok" and m.note:
            line = f"#  from {m.size_bytes} B, {where}: {m.status.upper()}: {m.note}"
            seen.append(line)
    return seen


def footer(rows: Sequence[Measurement]) -> list[str]:
    ok = [m for m in rows if m.status == "ok" and m.busbw_gbps is not None]
    wrong = sum(m.wrong or 0 for m in ok)
    avg = sum(m.busbw_gbps for m in ok) / len(ok) if ok else 0.0  # type: ignore[misc]
    return [
        f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
        f"# Avg bus bandwidth    : {avg:g} ",
        "#",
    ]
