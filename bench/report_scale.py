#!/usr/bin/env python3
"""How ``ccltune report`` scales: a database of N runs built from small real-format imports
(tests/unit/report_db.py: an nccl-tests result and a TransferBench matrix through
``ccltune import``, copied by SQL), then the report of the whole database, in a fresh
process each time so its peak memory (ru_maxrss) is the report's own.

    PYTHONPATH=src python bench/report_scale.py [--runs 1000 100] [--latest 12]

Prints a table; exits 1 when a run of 1,000 or more misses the targets of issue 22
(page < 10 MB, < 5 s, peak memory < 300 MB).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CHILD = """
import json, resource, sys, time
from ccltune.cli import main
t = time.perf_counter()
rc = main(["report", "--db", sys.argv[1], "--out", sys.argv[2]] + sys.argv[3:])
print(json.dumps({"rc": rc, "s": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
TARGETS = {"mb": 10.0, "s": 5.0, "rss_mb": 300.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1000, 100])
    ap.add_argument("--latest", type=int, default=None, help="report --latest N (default: the report's)")
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "unit")]
    from report_db import many_store

    env = {"PYTHONPATH": f"{ROOT / 'src'}"}
    print(f"# {'runs':>6} {'build_s':>8} {'report_s':>9} {'page_MB':>8} {'peak_rss_MB':>12} {'verdict':>8}")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.runs:
            db, page = Path(tmp) / f"r{n}.db", Path(tmp) / f"r{n}.html"
            t = time.perf_counter()
            many_store(db, n)
            build = time.perf_counter() - t
            extra = ["--latest", str(args.latest)] if args.latest else []
            out = subprocess.run([sys.executable, "-c", _CHILD, str(db), str(page), *extra], capture_output=True,
                                 text=True, env={**env, "PATH": "/usr/bin:/bin"}, check=True)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            mb = page.stat().st_size / 1e6
            ok = got["rc"] == 0 and (n < 1000 or (mb < TARGETS["mb"] and got["s"] < TARGETS["s"]
                                                 and got["rss_mb"] < TARGETS["rss_mb"]))
            failed |= not ok
            print(f"  {n:>6} {build:>8.2f} {got['s']:>9.2f} {mb:>8.2f} {got['rss_mb']:>12.0f} "
                  f"{'PASS' if ok else 'FAIL':>8}")
    print(f"# targets for 1,000 runs: page < {TARGETS['mb']:g} MB, report < {TARGETS['s']:g} s, "
          f"peak memory < {TARGETS['rss_mb']:g} MB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
