"""nccl-tests' loops inside one run on gloo (one command line of the shared job of 2 processes): -o all,
-r all, -N 2, -c 2, and -J written with nccl-tests' own JSON writer; NCCL_TESTS_MIN_BW exits 7 as
nccl-tests does."""

from __future__ import annotations

import json
from pathlib import Path

from ccltune.ncclt import parse
from dist_helpers import checked


def _loops(folder: Path) -> list[str]:
    return ["bench", "all_reduce,broadcast,sendrecv", "-b", "64", "-e", "64", "-n", "2", "-w", "1", "--timeout", "30",
            "-o", "all", "-d", "int32", "-r", "all", "-N", "2", "-c", "2", "-J", str(folder / "r.json"),
            "--db", str(folder / "t.db"), "--json", str(folder / "t.json")]


# NCCL_TESTS_MIN_BW in GB/s: no CPU reaches it
SHARED_RUNS = {"loops": (2, _loops, {"NCCL_TESTS_MIN_BW": "1000000"})}


def test_all_ops_all_roots_cycles_checks_json_and_min_bw(shared):
    ran = shared.get(__name__, "loops")
    assert ran.rc == 7, ran.stderr  # testNumResults
    assert "below 0.9 x NCCL_TESTS_MIN_BW" in ran.stderr
    rows = [ln.split() for ln in ran.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    ar = [r[3] for r in rows if len(r) > 4 and r[2] == "int32" and r[4] == "-1" and r[3] != "none"]
    ops = ["sum", "prod", "max", "min", "avg", "mulsum"]
    # all_reduce: every op, each size loop twice (-N 2 repeats inside TimeTest); sendrecv prints its op too
    assert ar[:12] == [o for o in ops for _ in range(2)]
    assert [r[4] for r in rows if r[3] == "none"] == ["0", "0", "1", "1"]  # broadcast: root 0 then 1, -N 2
    assert ran.stdout.count("# Avg bus bandwidth    : ") == 3 and "FAILED" in ran.stdout
    recs = json.loads((ran.folder / "t.json").read_text())["records"]
    assert {r["status"] for r in recs if r["op"] in ("avg", "mulsum") and r["collective"] == "all_reduce"} == {"waived"}
    assert all(r["wrong"] == (0 if checked(r) else None) for r in recs if r["status"] == "ok")
    for coll in ("all_reduce", "broadcast"):
        text = (ran.folder / f"r.json.{coll}").read_text()
        assert text.startswith('{"version":3,"start_time":"') and '"okay":"false"' in text
        [p] = parse(text, f"r.json.{coll}")
        # every measured record (waived cells are null blocks there, as nccl-tests writes unmeasured ones)
        assert p.n_ranks == 2 and len(p.rows) == len([r for r in recs if r["collective"] == coll
                                                      and r["status"] == "ok"])
