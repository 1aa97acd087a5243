"""`ccltune replay` on the gloo engine (CPU): the default only, WAIVED, what it cannot reproduce listed,
the run stored as kind 'replay' with plain rows per arm and round."""

from __future__ import annotations

import subprocess
import sys

from ccltune.store import Store
from ccltune.workload.model import Entry, Key, Workload, to_json


def _replay_argv(folder, wl, iters):
    """``ccltune replay`` of ``wl`` on the gloo engine, its files in ``folder``."""
    (folder / "w.json").write_text(to_json(wl, {}))
    return ["replay", str(folder / "w.json"), "--engine", "gloo", "--iters", str(iters), "--db", str(folder / "r.db")]


DEFAULT_WL = Workload([Entry(Key("all_reduce", 4096, 2, "float", 1024, op="max"), 4), Entry(Key("broadcast", 64, 2, "int64", 8), 1),
                       Entry(Key("all_reduce", 256, 4, "float", 64), 2)], [], steps=2,
                      order=[(1, 0, 1), (0, 0, 2), (2, 1, 1), (0, 0, 2), (2, 1, 1)])
# a run of the shared job of 2 gloo processes (dist_helpers.SharedJobs): it exits 0, so it needs no launch of
# its own; the test below, whose exit code the parent hands over, launches its own
SHARED_RUNS = {"default": (2, lambda folder: _replay_argv(folder, DEFAULT_WL, 3))}


def test_replay_on_gloo_replays_the_default_and_lists_what_it_cannot(shared):
    proc = shared.get(__name__, "default")
    db = proc.folder / "r.db"
    assert proc.rc == 0, proc.stderr
    out = proc.stdout
    assert "# WAIVED: the gloo engine has no tuner plugin" in out
    assert "per step, the whole sequence in captured order, eager, no load: gloo default " in out and "NCCL" not in out.splitlines()[0]
    assert "# not replayed: all_reduce 256 B x2: captured on 4 ranks, this launch has 2" in out
    with Store(db, readonly=True) as st:
        (run,) = st.runs()
    assert run.kind == "replay" and run.status == "complete" and run.summary["library"] == "gloo"
    assert [r["arm"] for r in run.summary["rounds"]] == ["default"] * 3
    assert run.summary["status"] == "WAIVED" and run.summary["skipped"][0]["entry"] == 2
    # the breakdown: each replayed entry timed alone (the default only here), printed and stored
    ents = {e["entry"]: e for e in run.summary["entries"]}
    assert sorted(ents) == [0, 1] and all(e["default_us"]["n"] == 3 and e["rules_us"] is None for e in ents.values())
    assert ents[0]["calls"] == 4 and ents[1]["size_bytes"] == 64
    rows = [x.split() for x in out.splitlines() if x.startswith("  ")]
    assert [(r[0], r[1], r[2]) for r in rows] == [("broadcast", "64", "1"), ("all_reduce", "4096", "4")]
    assert all(float(r[3]) > 0 and r[4] == "-" for r in rows)
    assert run.summary["comm_us_per_step"]["default"] > 0 and run.summary["comm_us_per_step"]["rules"] is None
    with Store(db, readonly=True) as st:
        stored = st.measurements(run.id)
    assert {(m.collective, m.size_bytes, m.dtype, m.config) for m in stored} == {
        ("all_reduce", 4096, "float", "default"), ("broadcast", 64, "int64", "default")}
    assert len(stored) == 6 and all(m.status == "ok" for m in stored)
    assert {m.op for m in stored if m.collective == "all_reduce"} == {"max"}   # the job's op (issue 30)


def test_replay_with_nothing_the_engine_can_run_says_why_and_stores_nothing(tmp_path):
    """Entries that fit the launch but that the engine cannot issue (gloo has no FP8), found once the
    job runs: each entry's reason printed, one error, and no empty 'complete' run in the database."""
    wl = Workload([Entry(Key("all_reduce", 4096, 2, "f8e4m3", 4096), 3)], [], steps=1)
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "ccltune", *_replay_argv(tmp_path, wl, 2), "--nproc", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "# note: all_reduce 4096 B: not replayed (the gloo engine has no f8e4m3" in proc.stdout
    assert "nothing this launch (the gloo engine, 2 processes) can replay (the reasons above)" in proc.stderr
    with Store(db, readonly=True) as st:
        assert st.runs() == []
