"""Compare repeated, interleaved runs of nccl-tests and `ccltune bench` (phase `inter` of
scripts/device.sh), size by size, with each program's own run-to-run spread.

    python bench/compare_repeated.py DIR

DIR holds ``ncclt-R-COLL.txt`` (nccl-tests stdout of repeat R) and ``ccl-R.json`` (`ccltune bench
--json` of repeat R). For every (collective, placement, size): the median time of each program
over its repeats, each program's spread (slowest / fastest repeat - 1), whether the two programs' ranges of
repeats overlap, and the ratio of the medians (ccltune / nccl-tests; busbw is the inverse, both programs use the same factor).

The targets (docs/performance.md): busbw within 2% from 1 MB, time within 5% below. A size is
``outside`` when the medians differ by more than that; ``outside, beyond spread`` when, in
addition, the two programs' ranges of repeats do not overlap (every ccltune repeat is faster, or
every one slower, than every nccl-tests repeat), i.e. the difference is not run-to-run variation
of either program.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from compare_reference import load_any

from ccltune.stats import median

Key = tuple[str, bool, int]  # collective, in_place, size


def load(d: Path) -> tuple[dict[Key, list[float]], dict[Key, list[float]], int]:
    ref: dict[Key, list[float]] = defaultdict(list)
    ours: dict[Key, list[float]] = defaultdict(list)
    reps = set()
    for p in sorted(d.glob("ncclt-*-*.txt")):
        m = re.match(r"ncclt-(\d+)-", p.name)
        reps.add(int(m.group(1)) if m else 0)
        for coll, in_place, rows in load_any(str(p)):
            for size, (t, _bw) in rows.items():
                ref[(coll, in_place, size)].append(t)
    for p in sorted(d.glob("ccl-*.json")):
        for r in json.loads(p.read_text())["records"]:
            if r["status"] == "ok" and r["time_us"]:
                ours[(r["collective"], bool(r["in_place"]), int(r["size_bytes"]))].append(float(r["time_us"]))
    return ref, ours, len(reps)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    ref, ours, reps = load(Path(argv[0]))
    rows = []
    for key in sorted(set(ref) & set(ours)):
        coll, in_place, size = key
        r, o = ref[key], ours[key]
        ratio = median(o) / median(r) if median(r) else float("inf")  # a 0.00 us nccl-tests row
        limit = 0.02 if size >= 1 << 20 else 0.05
        outside = abs(ratio - 1) > limit
        apart = max(o) < min(r) or min(o) > max(r)  # every run of one program faster than every run of the other
        beyond = outside and apart
        rows.append((coll, in_place, size, median(r), max(r) / min(r) - 1, len(r), median(o), max(o) / min(o) - 1,
                     len(o), ratio, outside, beyond, not apart))
    print(f"# {reps} repeats of nccl-tests, interleaved with ccltune bench; times in us (medians over repeats)")
    print("# overlap: yes when the two programs' ranges of runs (fastest..slowest) overlap")
    print(f"# {'collective':<15} {'place':<6} {'size':>11} {'ncclt_us':>10} {'spread':>7} {'ccl_us':>10} {'spread':>7}"
          f" {'overlap':>7} {'ratio':>7}  verdict")
    for coll, ip, size, rt, rs, _rn, ot, os_, _on, ratio, outside, beyond, overlap in rows:
        verdict = "outside, beyond spread" if beyond else "outside (within spread)" if outside else ""
        print(f"  {coll:<15} {'in' if ip else 'out':<6} {size:>11} {rt:>10.2f} {100 * rs:>6.1f}% {ot:>10.2f}"
              f" {100 * os_:>6.1f}% {'yes' if overlap else 'no':>7} {ratio:>7.3f}  {verdict}")
    print("#")
    print(f"# {'collective':<15} {'place':<6} {'sizes':>5} {'outside':>7} {'beyond':>6} {'max|d| >=1MB':>12}"
          f" {'max|d| <1MB':>11} {'ncclt spread max':>16} {'ccl spread max':>14}")
    groups: dict[tuple[str, bool], list[tuple]] = defaultdict(list)
    for row in rows:
        groups[(row[0], row[1])].append(row)
    tot = [0, 0, 0]
    for (coll, ip), rs in sorted(groups.items()):
        big = [abs(r[9] - 1) for r in rs if r[2] >= 1 << 20]
        small = [abs(r[9] - 1) for r in rs if r[2] < 1 << 20]
        out, beyond = sum(r[10] for r in rs), sum(r[11] for r in rs)
        tot[0] += len(rs)
        tot[1] += out
        tot[2] += beyond
        print(f"  {coll:<15} {'in' if ip else 'out':<6} {len(rs):>5} {out:>7} {beyond:>6}"
              f" {100 * max(big, default=0):>11.1f}% {100 * max(small, default=0):>10.1f}%"
              f" {100 * max(r[4] for r in rs):>15.1f}% {100 * max(r[7] for r in rs):>13.1f}%")
    print(f"# {tot[1]} of {tot[0]} sizes outside the targets on medians; {tot[2]} of them beyond both programs'"
          " run-to-run spread")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
