"""NCCL's default at the first sizes of each collective in sweep databases: is it steady there?

    python bench/first_size.py DB [DB ...] [--sizes 4]

Per database and collective, for the smallest ``--sizes`` sizes (out-of-place rows of the first
sweep run): NCCL's default median (us) and its spread ((max - min) / median), the A/A ratio
(median of the twin / median of the default: 1.00 when two communicators of NCCL's own choice
agree) and the best forced candidate's median over the default's. A first size paying one-time
costs shows as a large spread, an A/A ratio far from 1 and candidates that "beat" the default
there by as much as the twin does (the sweeps of 2026-11-22 01:53, bench/data/iters in git
history: ``git archive da923a0 bench/data/iters | tar x``).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
from collections import defaultdict


def rows(db: str) -> dict[str, dict[int, dict[str, list[float]]]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        run = con.execute("select min(id) from runs where kind = 'sweep'").fetchone()[0]
        out: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for coll, size, config, t in con.execute(
                "select collective, size_bytes, config, time_us from measurements where run_id = ? and status = 'ok'"
                " and in_place = 0 and time_us > 0", (run,)):
            out[coll][size][config].append(t)
        return out
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dbs", nargs="+")
    p.add_argument("--sizes", type=int, default=4, help="how many of the smallest sizes to show")
    args = p.parse_args(argv)
    print(f"{'db':<24} {'collective':<14} {'size':>6} {'default_us':>10} {'spread_%':>8} {'twin/def':>8} {'best/def':>8}")
    for db in args.dbs:
        try:
            data = rows(db)
        except sqlite3.Error as exc:
            print(f"first_size: {db}: {exc}", file=sys.stderr)
            return 2
        for coll in sorted(data):
            for size in sorted(data[coll])[:args.sizes]:
                cfg = data[coll][size]
                if "default" not in cfg:
                    continue
                d = statistics.median(cfg["default"])
                spread = (max(cfg["default"]) - min(cfg["default"])) / d
                twin = statistics.median(cfg["default-twin"]) / d if "default-twin" in cfg else float("nan")
                others = [statistics.median(v) for c, v in cfg.items() if c not in ("default", "default-twin")]
                best = min(others) / d if others else float("nan")
                print(f"{db.rsplit('/', 1)[-1]:<24} {coll:<14} {size:>6} {d:>10.2f} {100 * spread:>8.0f} "
                      f"{twin:>8.2f} {best:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
