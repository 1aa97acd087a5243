"""The profiler plugin's GPU time per call against torch.profiler's NCCL kernel time, call by call, in one run.

    python bench/profiler_vs_trace.py PROFILE_DIR TRACE_DIR

PROFILE_DIR holds ccltune-profile.*.txt files (CCLTUNE_PROFILE=...), TRACE_DIR the same run's Chrome traces
(trace_rank<R>.json[.gz], examples/train_transformer.py --profile-dir). Both clocks are absolute: the
profiler's `call` lines carry GPU globaltimer ns, a torch trace's kernel `ts` is microseconds after its
`baseTimeNanoseconds`. The two clocks of one rank differ by a constant (CUPTI's conversion of GPU time to the
host clock against the GPU's globaltimer: 150-480 us on 4 x H200): it is estimated per rank as the median
offset from each traced kernel to the nearest profiled call, removed, and each traced NCCL kernel is then
paired with the profiled call of the same rank and collective whose start is nearest (within --window-us).
The table prints, per (collective, count), the medians of both over the paired calls and their ratio; a
second, per rank, the median and least ratio and the median gap from the profiled end to the kernel's end.
Prints a table; asserts nothing.
"""
from __future__ import annotations

import argparse
import bisect
import gzip
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ccltune.workload import profile_file  # noqa: E402


def trace_kernels(path: Path) -> list[tuple[int, float, str]]:
    """(start ns absolute, duration us, NCCL function as the kernel names it) of every NCCL kernel of a torch trace."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        t = json.load(f)
    base = int(t.get("baseTimeNanoseconds", 0))
    out = []
    for e in t["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("name", "").startswith("ncclDevKernel"):
            func = re.match(r"ncclDevKernel_([A-Za-z]+)", e["name"])
            out.append((base + round(float(e["ts"]) * 1000), float(e["dur"]), func.group(1) if func else "?"))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile_dir", type=Path)
    p.add_argument("trace_dir", type=Path)
    p.add_argument("--window-us", type=float, default=50.0)
    a = p.parse_args(argv)
    rows: dict[tuple[str, int], list[tuple[float, float]]] = {}
    by_rank: dict[int, list[tuple[float, float]]] = {}   # rank -> (profiler/torch, kernel end - profiled end us)
    unmatched = 0
    offsets: dict[int, float] = {}
    for pf in profile_file.read_dir(a.profile_dir):
        traces = [t for t in a.trace_dir.glob(f"trace_rank{pf.rank}.json*")]
        if not traces:
            continue
        calls = sorted((c[2], c[3], pf.entries[c[1]]) for c in pf.calls)
        starts = [c[0] for c in calls]
        kernels = trace_kernels(traces[0])
        if not calls or not kernels:
            continue
        offset = statistics.median(min((s - k[0] for s in starts), key=abs) for k in kernels)
        for start, dur_us, func in kernels:
            start += offset
            i = bisect.bisect_left(starts, start)
            near = [j for j in (i - 1, i) if 0 <= j < len(calls) and abs(calls[j][0] - start) <= a.window_us * 1000
                    and calls[j][2].op.replace("_", "") == func.lower()]
            if not near:
                unmatched += 1
                continue
            s, e, entry = calls[min(near, key=lambda j: abs(calls[j][0] - start))]
            rows.setdefault((entry.op, entry.count), []).append(((e - s) / 1000, dur_us))
            by_rank.setdefault(pf.rank, []).append(((e - s) / 1000 / dur_us, (start + dur_us * 1000 - e) / 1000))
            offsets.setdefault(pf.rank, round(offset / 1000, 1))
    print(f"# {'collective':<15} {'count':>10} {'pairs':>5} {'profiler_us':>11} {'torch_us':>9} {'ratio':>6}")
    for (op, count), pairs in sorted(rows.items(), key=lambda kv: -len(kv[1])):
        mp = statistics.median(x for x, _ in pairs)
        mt = statistics.median(y for _, y in pairs)
        print(f"  {op:<15} {count:>10} {len(pairs):>5} {mp:>11.1f} {mt:>9.1f} {mp / mt:>6.3f}")
    # per rank: where the profiler's end falls short of the kernel's (NCCL stamps a channel's end when its
    # thread 0 is done: under TREE, before the broadcast back down on every rank but the root; docs/profiler.md)
    print(f"# {'rank':>4} {'pairs':>5} {'ratio_p50':>9} {'ratio_min':>9} {'end_gap_us_p50':>14}")
    for rank, pairs in sorted(by_rank.items()):
        print(f"  {rank:>4} {len(pairs):>5} {statistics.median(r for r, _ in pairs):>9.3f} "
              f"{min(r for r, _ in pairs):>9.3f} {statistics.median(g for _, g in pairs):>14.1f}")
    print(f"# {sum(map(len, rows.values()))} traced kernels paired with profiled calls, {unmatched} not paired; "
          f"clock offset per rank (us): {dict(sorted(offsets.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
