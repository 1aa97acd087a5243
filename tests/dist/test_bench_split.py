"""NCCL_TESTS_SPLIT on the gloo engine: 4 processes split "MOD 2" into two groups (ranks 0,2 and 1,3),
each running every collective on its own process group, as nccl-tests runs parallel operations.

One run of the shared job of 4 processes (no launch of its own). A collective that ran over the world
instead of its group, or a root or peer not mapped from the group's rank to the world's, would show as #wrong > 0 or a failed call: the expected values
are the group's (2 ranks), and -r 1 is world rank 2 in group 0 and world rank 3 in group 1."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ccltune import collectives, ncclt
from dist_helpers import bench_cmd, checked, only_run
from test_bench_gloo import ALL, check_cells, table


def _split(folder: Path) -> list[str]:
    return ["bench", "all", "-b", "64", "-e", "64", "-n", "2", "-w", "1", "-r", "1", "--timeout", "30",
            "--db", str(folder / "t.db"), "--json", str(folder / "t.json"), "-J", str(folder / "n.json")]


# one run of the shared job of 4 processes (dist_helpers.SharedJobs), with NCCL_TESTS_SPLIT set for it
SHARED_RUNS = {"split": (4, _split, {"NCCL_TESTS_SPLIT": "MOD 2", "NCCL_TESTS_SPLIT_MASK": None})}


def test_two_groups_of_two_each_measure_every_collective_on_their_own(shared):
    ran = shared.get(__name__, "split")
    tmp_path, db, js = ran.folder, ran.folder / "t.db", ran.folder / "t.json"
    assert ran.rc == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    proc = ran   # .stdout, .stderr: rank 0's

    # the rank lines say each rank's group (its color), as nccl-tests prints them
    for rank, group in enumerate((0, 1, 0, 1)):
        assert re.search(rf"#  Rank {rank:2d} Group {group:2d} Pid +\d+ on", proc.stdout), proc.stdout[:2000]
    assert "NCCL_TESTS_SPLIT='MOD 2': 2 groups: 0 = ranks 0,2; 1 = ranks 1,3" in proc.stdout

    # every collective measured, laid out for a group of 2 (not the world's 4), #wrong 0 over both groups
    rows = table(proc.stdout)
    assert list(rows) == ALL
    for name, cells in rows.items():
        lay = collectives.get(name).layout(64, 4, 2, 0)
        assert [(int(c[0]), int(c[1])) for c in cells] == [(lay.size_bytes, lay.count)], (name, cells)
        check_cells(name, cells[0])
    assert proc.stdout.count("# Out of bounds values : 0 OK") == len(ALL)

    # rows: n_ranks is the group's, busbw the group's factor; the run's environment holds every color
    recs = json.loads(js.read_text())["records"]
    measured = [r for r in recs if r["status"] == "ok"]
    assert {r["collective"] for r in measured} == set(ALL)
    for r in recs:
        assert r["n_ranks"] == 2
    for r in measured:
        assert r["wrong"] == (0 if checked(r) else None)
        assert abs(r["busbw_gbps"] - r["algbw_gbps"] * collectives.get(r["collective"]).bus_factor(2)) < 1e-12
    run, stored = only_run(db)
    assert run.status == "complete" and run.world_size == 4 and run.summary["wrong"] == 0
    assert run.env["groups"] == {"variable": "NCCL_TESTS_SPLIT", "value": "MOD 2", "colors": [0, 1, 0, 1], "count": 2}
    assert len(stored) == len(recs)

    # the table imports back as nccl-tests' split output: rank 0's group's ranks and rows, every color kept
    parsed = ncclt.parse_text(proc.stdout, "bench.txt")
    assert [p.collective for p in parsed] == ALL
    for p in parsed:
        assert (p.n_ranks, p.n_nodes, p.env["groups"]) == (2, 1, {"colors": [0, 1, 0, 1], "count": 2})
        assert all(r.n_ranks == 2 for r in p.rows)
    # and so does -J's nccl-tests JSON (one file per collective)
    p = ncclt.parse_json((tmp_path / "n.json.all_gather").read_text(), "n.json.all_gather")
    assert (p.n_ranks, p.env["groups"]["colors"]) == (2, [0, 1, 0, 1])
