"""nccl-tests' loops inside one run on gloo (one launch of 2 processes): -o all, -r all, -N 2, -c 2,
and -J written with nccl-tests' own JSON writer; NCCL_TESTS_MIN_BW exits 7 as nccl-tests does."""

from __future__ import annotations

import json
import os

from ccltune.ncclt import parse
from dist_helpers import checked


def test_all_ops_all_roots_cycles_checks_json_and_min_bw(run_bench, tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "1000000")  # GB/s: no CPU reaches it
    out = tmp_path / "r.json"
    proc, _db, js = run_bench("all_reduce,broadcast,sendrecv", "-b", "64", "-e", "64", "-n", "2", "-w", "1",
                              "--timeout", "30", "-o", "all", "-d", "int32", "-r", "all", "-N", "2", "-c", "2",
                              "-J", str(out), "--nproc", "2")
    assert proc.returncode == 7, proc.stderr  # testNumResults
    assert "below 0.9 x NCCL_TESTS_MIN_BW" in proc.stderr
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    ar = [r[3] for r in rows if len(r) > 4 and r[2] == "int32" and r[4] == "-1" and r[3] != "none"]
    ops = ["sum", "prod", "max", "min", "avg", "mulsum"]
    # all_reduce: every op, each size loop twice (-N 2 repeats inside TimeTest); sendrecv prints its op too
    assert ar[:12] == [o for o in ops for _ in range(2)]
    assert [r[4] for r in rows if r[3] == "none"] == ["0", "0", "1", "1"]  # broadcast: root 0 then 1, -N 2
    assert proc.stdout.count("# Avg bus bandwidth    : ") == 3 and "FAILED" in proc.stdout
    recs = json.loads(js.read_text())["records"]
    assert {r["status"] for r in recs if r["op"] in ("avg", "mulsum") and r["collective"] == "all_reduce"} == {"waived"}
    assert all(r["wrong"] == (0 if checked(r) else None) for r in recs if r["status"] == "ok")
    for coll in ("all_reduce", "broadcast"):
        text = (tmp_path / f"r.json.{coll}").read_text()
        assert text.startswith('{"version":3,"start_time":"') and '"okay":"false"' in text
        [p] = parse(text, f"r.json.{coll}")
        # every measured record (waived cells are null blocks there, as nccl-tests writes unmeasured ones)
        assert p.n_ranks == 2 and len(p.rows) == len([r for r in recs if r["collective"] == coll
                                                      and r["status"] == "ok"])
    assert os.environ["NCCL_TESTS_MIN_BW"] == "1000000"
