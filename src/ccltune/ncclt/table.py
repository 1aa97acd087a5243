"""nccl-tests' text table, byte for byte as nccl-tests 2.19.6 prints it (src/util.cu:
writeDeviceReport, writeResultHeader, writeBenchmarkLine*, writeResultFooter), so existing parsers
keep working. Pure string functions; ccltune's own facts ride on the version line and on
``# ccltune:`` lines that appear only when there is something to say."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ccltune.periter import IterStats
from ccltune.status import RowStatus
from ccltune.store import Measurement

NCCL_TESTS_VERSION = "2.19.6"  # the nccl-tests whose output this module reproduces
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # -S timestamps (util.cu TIME_STRING_FORMAT)
_NO_OOP = " " * 32  # writeBenchMarkLineNullBody: a row without its out-of-place block


@dataclass
class Device:
    """One '#  Rank' line."""

    rank: int
    pid: int
    host: str
    device: int
    bus_id: str  # '0000:18:00' (domain:bus:device, as nccl-tests prints it)
    name: str
    group: int = 0


@dataclass
class Header:
    """What nccl-tests' preamble says: the run's shape and options."""

    program: str  # 'all_reduce_perf'
    min_bytes: int
    max_bytes: int
    step_factor: int  # > 1: multiply; else step_bytes are added
    step_bytes: int
    warmup: int
    iters: int
    agg_iters: int = 1
    check: int = 1
    graph: int = 0
    unalign: int = 0
    threads: int = 1
    gpus: int = 1
    blocking: int = 0
    per_iter: bool = False
    per_iter_skip: int = 0
    parallel_init: bool = False
    nccl_code: int = 0  # NCCL_VERSION_CODE (22809), 0 when no NCCL (then left out of the header)
    tool: str = "ccltune"  # our name and version, beside nccl-tests'
    gpu_timing: bool = True  # times from CUDA events; False: the host's clock (the CPU engine)
    devices: list[Device] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # '# ccltune: ...' lines


def program(collective: str) -> str:
    """nccl-tests' program name for a collective: 'all_reduce' -> 'all_reduce_perf'."""
    return f"{collective}_perf"


def preamble(h: Header) -> list[str]:
    """writeDeviceReport: version, 'Collective test starting', shape and option lines, the devices."""
    step = f"{h.step_factor}(factor)" if h.step_factor > 1 else f"{h.step_bytes}(bytes)"
    # NCCL's version codes as nccl-tests prints them; none without NCCL (the CPU engine): h.tool names the engine
    lib = f" nccl-headers={h.nccl_code} nccl-library={h.nccl_code}" if h.nccl_code else ""
    lines = [f"# nccl-tests version {NCCL_TESTS_VERSION}{lib} {h.tool}",
             f"# Collective test starting: {h.program}",
             f"# nThread {h.threads} nGpus {h.gpus} minBytes {h.min_bytes} maxBytes {h.max_bytes} step: {step}"
             f" warmup iters: {h.warmup} iters: {h.iters} agg iters: {h.agg_iters} validation: {h.check}"
             f" graph: {h.graph} unalign: {h.unalign}"]
    lines += {1: ["# Blocking Enabled: wait and barrier after each inner iteration (-m) "],
              2: ["# Blocking Enabled: wait after each inner iteration (-m), no barrier "],
              3: ["# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier "]
              }.get(h.blocking, [])
    if h.per_iter:
        skip = f"; summary skips first {h.per_iter_skip} iterations" if h.per_iter_skip else ""
        clock = "CUDA event timing" if h.gpu_timing else "host clock timing (no GPU)"
        lines.append(f"# Per-Iteration Report: {clock}; i_* uses max over process rows{skip} ")
    if h.parallel_init:
        lines.append("# Parallel Init Enabled: threads call into NcclInitRank concurrently ")
    lines += ["#", "# Using devices"]
    lines += [f"#  Rank {d.rank:2d} Group {d.group:2d} Pid {d.pid:6d} on {d.host:>10} device {d.device:2d}"
              f" [{d.bus_id}] {d.name}" for d in h.devices]
    lines += [f"# ccltune: {n}" for n in h.notes]
    return lines


def header(*, cputime: bool = False, timestamps: bool = False, per_iter: bool = False) -> list[str]:
    """writeResultHeader: '#', then the three column-header lines."""
    t = "cputime" if cputime else "time"
    ts_label, ts_fmt = ("timestamp", TIME_FORMAT) if timestamps else ("", "")
    pad = 19 if timestamps else 0
    lead = "# %10s  %12s  %8s  %6s  %6s" % ("", "", "", "", "")
    if per_iter:
        block = "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s"
        return ["#",
                lead + "              out-of-place (+ per-iteration)                                in-place (+ per-iteration)",
                "# %10s  %12s  %8s  %6s  %6s" % ("size", "count", "type", "redop", "root")
                + block % (t, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%") * 2
                + " %*s" % (pad, ts_label),
                "# %10s  %12s  %8s  %6s  %6s" % ("(B)", "(elements)", "", "", "")
                + block % ("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)") * 2
                + " %*s" % (pad, ts_fmt)]
    block = "  %7s  %6s  %6s  %6s"
    return ["#", lead + "           out-of-place                       in-place          ",
            "# %10s  %12s  %8s  %6s  %6s" % ("size", "count", "type", "redop", "root")
            + block % (t, "algbw", "busbw", "#wrong") * 2 + " %*s" % (pad, ts_label),
            "# %10s  %12s  %8s  %6s  %6s" % ("(B)", "(elements)", "", "", "")
            + block % ("(us)", "(GB/s)", "(GB/s)", "") * 2 + " %*s" % (pad, ts_fmt)]


def float_cell(value: float, width: int) -> str:
    """getFloatStr: two decimals if they fit in ``width``, else one, else none, else an exponent
    (so 1000 GB/s and more shrink their decimals instead of widening the column)."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return ((("%*.1e" if width >= 7 else "%*.0e") % (width, value)))[:width]


def _wrong_cell(m: Measurement) -> str:
    if m.wrong is None:  # '    N/A' after busbw: one column narrower than a count (util.cu)
        return "  N/A"
    return "%6s" % ("%g" % m.wrong)


# the cell of a row without a time, by its status (an error's: "err")
_NOT_TIMED: dict[str, str] = {RowStatus.WAIVED: "N/A", RowStatus.SKIPPED: "skip", RowStatus.UNAVAILABLE: "N/A"}


def _half(m: Measurement) -> str:
    if m.status != RowStatus.OK or m.time_us is None:  # nccl-tests never prints this: ccltune's own cells
        label = _NOT_TIMED.get(m.status, "err")
        return f"  {label:>7}  {label:>6}  {label:>6}  {label:>6}"
    return (f"  {float_cell(m.time_us, 7)}  {float_cell(m.algbw_gbps or 0.0, 6)}"
            f"  {float_cell(m.busbw_gbps or 0.0, 6)}  {_wrong_cell(m)}")


def _per_iter(s: IterStats | None) -> str:
    """writePerIterReport: i_min, i_max, i_p99 (us) and i_cv% after a placement's block."""
    if s is None:  # a placement not measured: blanks keep the columns
        return "  %7s  %7s  %7s  %7s" % ("", "", "", "")
    return "".join("  " + float_cell(v, 7) for v in (s.min_us, s.max_us, s.p99_us, s.cv_pct))


def row(oop: Measurement | None, ip: Measurement, *, timestamp: str | None = None,
        per_iter: tuple[IterStats | None, IterStats | None] | None = None) -> str:
    """writeBenchmarkLinePreamble + one body per placement (+ with -I its per-iteration cells,
    + the -S timestamp after in-place)."""
    m = oop or ip
    redop = m.op if m.op else "none"
    root = m.root if m.root is not None else -1
    line = "%12d  %12d  %8s  %6s  %6s" % (m.size_bytes, m.count, m.dtype, redop, "%6i" % root)
    line += _half(oop) if oop is not None else _NO_OOP
    if per_iter is not None and oop is not None:
        line += _per_iter(per_iter[0])
    line += _half(ip)
    if per_iter is not None:
        line += _per_iter(per_iter[1])
    if timestamp is not None:
        line += "%21s" % timestamp
    return line


def notes(oop: Measurement, ip: Measurement) -> list[str]:
    """Comment lines explaining N/A or skipped cells (once per distinct reason)."""
    seen: list[str] = []
    for m, where in ((oop, "out-of-place"), (ip, "in-place")):
        if m.status != RowStatus.OK and m.note:
            seen.append(f"#  from {m.size_bytes} B, {where}: {m.status.upper()}: {m.note}")
        elif m.wrong is None and m.note:  # timed, its check left out (in-place sendrecv; out of memory)
            seen.append(f"#  from {m.size_bytes} B, {where}: #wrong N/A: {m.note}")
    return seen


def avg_busbw(rows: Sequence[Measurement]) -> float:
    """nccl-tests' 'Avg bus bandwidth': the mean busbw over every timed cell (both placements)."""
    ok = [m.busbw_gbps for m in rows if m.status == RowStatus.OK and m.busbw_gbps is not None]
    return sum(ok) / len(ok) if ok else 0.0


def min_bw_ok(avg: float, min_bw: float | None) -> bool | None:
    """NCCL_TESTS_MIN_BW: the run fails when the average busbw is below 0.9 x it (None: unchecked)."""
    return None if min_bw is None else not avg < min_bw * 0.9


def footer(rows: Sequence[Measurement], program_name: str, *, min_bw: float | None = None,
           memory: str | None = None, avg: float | None = None) -> list[str]:
    """writeResultFooter (+ writeMemInfo with -M, + finalizeFooter). ``avg``: the average bus
    bandwidth when known better than from ``rows`` (an imported table's rounded cells)."""
    wrong = sum(m.wrong or 0 for m in rows if m.status == RowStatus.OK)
    avg = avg_busbw(rows) if avg is None else avg
    verdict = {None: "", True: "OK", False: "FAILED"}[min_bw_ok(avg, min_bw)]
    lines = ["# %-20s : %d %s" % ("Out of bounds values", wrong, "FAILED" if wrong else "OK"),
             "# %-20s : %s %s" % ("Avg bus bandwidth", _g(avg), verdict),
             "#", f"# Collective test concluded: {program_name}"]
    if memory is not None:
        lines.append("# %-20s : %s" % ("GPU memory usage", memory))
    return lines + ["#"]


def _g(value: float) -> str:
    """C's %g (Python's agrees, but prints 'nan' for NaN as C does: 'nan' or '-nan')."""
    return "nan" if math.isnan(value) else "%g" % value


def memory_string(amount: int) -> str:
    """getMemString: B/KB/MB/GB with 2, 1 or 0 decimals below 10, 100 and above."""
    value, unit = float(amount), " B"
    for limit, name in ((1 << 30, " GB"), (1 << 20, " MB"), (1 << 10, " KB")):
        if abs(value) >= limit:
            value, unit = value / limit, name
            break
    decimals = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:.{decimals}f}{unit}"


def memory_line(init: int, user: int, collective: int) -> str:
    """writeMemInfo's value: 'Initialization X | User-Allocated Y | Collective Z | Total  T'."""
    parts = [f"{name} {memory_string(v)} " for name, v in
             (("Initialization", init), ("User-Allocated", user), ("Collective", collective))]
    return "| ".join(parts) + f"| Total  {memory_string(init + user + collective)}"
