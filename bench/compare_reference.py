"""Compare `ccltune bench --json` records with a reference: NVIDIA's nccl-tests (``*_perf``
stdout, read by ccltune's own importer) or our reference program's output (bench/reference).

    python bench/compare_reference.py BENCH.json all_reduce_perf.txt [...]       # nccl-tests
    python bench/compare_reference.py BENCH.json REF_all_reduce.txt [...]        # bench/reference

Prints, per collective and size, both times and busbw and the ratio; flags sizes >= 1 MB where
busbw differs by more than 2% and sizes below where time differs by more than 5% (the targets
of docs/performance.md). nccl-tests files are compared out-of-place and in-place, the
reference program's out-of-place only (all it measures).
"""

from __future__ import annotations

import json
import sys


def load_ref(path: str) -> tuple[str, dict[int, tuple[float, float]]]:
    coll, rows = "?", {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("# ref"):
                coll = dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv).get("collective", "?")
            elif line[:1].isdigit() or line.startswith(" "):
                parts = line.split()
                if len(parts) == 4 and parts[0].isdigit():
                    rows[int(parts[0])] = (float(parts[1]), float(parts[3]))
    return coll, rows


def load_any(path: str) -> list[tuple[str, bool, dict[int, tuple[float, float]]]]:
    """[(collective, in_place, {size: (time_us, busbw)})] of one reference file."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if "# ref" in text:
        coll, rows = load_ref(path)
        return [(coll, False, rows)]
    from ccltune.ncclt import parse  # nccl-tests' own output

    out = []
    for parsed in parse(text, path):  # a file may hold several runs, each of its own collective
        for in_place in (False, True):
            rows = {r.size_bytes: (r.time_us, r.busbw_gbps) for r in parsed.rows
                    if bool(r.in_place) == in_place and r.status == "ok" and r.time_us}
            out.append((parsed.collective, in_place, rows))
    return out


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as fh:
        recs = json.load(fh)["records"]
    ours = {(r["collective"], bool(r["in_place"]), r["size_bytes"]): (r["time_us"], r["busbw_gbps"])
            for r in recs if r["status"] == "ok"}
    misses = compared = 0
    for path, coll, in_place, ref in ((p, *x) for p in argv[1:] for x in load_any(p)):
        print(f"# {coll}: ccltune (nccl engine) vs {path}, {'in-place' if in_place else 'out-of-place'}")
        print(f"# {'size':>12} {'ccl_us':>9} {'ref_us':>9} {'t_ratio':>8} {'ccl_bus':>8} {'ref_bus':>8} {'bw_ratio':>8}")
        for size in sorted(ref):
            if (coll, in_place, size) not in ours or size == 0:
                continue
            (t, bw), (rt, rbw) = ours[(coll, in_place, size)], ref[size]
            compared += 1
            tr, br = t / rt, (bw / rbw if rbw else float("nan"))
            bad = (size >= 1 << 20 and abs(br - 1) > 0.02) or (size < 1 << 20 and abs(tr - 1) > 0.05)
            misses += bad
            print(f"  {size:>12} {t:9.2f} {rt:9.2f} {tr:8.3f} {bw:8.2f} {rbw:8.2f} {br:8.3f}{'  <-- outside target' if bad else ''}")
    print(f"# {misses} of {compared} sizes outside the targets (busbw within 2% from 1 MB, time within 5% below)")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
