"""`ccltune sweep` machinery on the gloo engine (CPU): rows committed per size, interleaved
repetitions, Ctrl-C keeps rows, --resume finishes the run without measuring a point twice.
(The forced NCCL candidates themselves need a GPU: tests/gpu.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dist_helpers import alive, background_fixture, count_rows, descendants, only_run, ran, wait_rows, worker

DEFAULT_ONLY = ["--algos", "", "--protos", "", "--channels", ""]


def sweep_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "ccltune", "sweep", *args]


STORES = ["all_reduce", "all_gather", "-b", "8", "-e", "4K", "-f", "8", "--reps", "3", *DEFAULT_ONLY]


def test_sweep_stores_every_rep_of_every_size(shared):
    proc = shared.get(__name__, "stores")
    db = proc.folder / "s.db"
    assert proc.rc == 0, proc.stderr
    # each collective's first size is measured once first and thrown away (one-time costs)
    warm = [line for line in proc.stderr.splitlines() if "warm-up, not stored" in line]
    assert warm == ["sweep: all_reduce 8 B (warm-up, not stored)", "sweep: all_gather 8 B (warm-up, not stored)"]
    run, rows = only_run(db)
    assert run.kind == "sweep" and run.status == "complete" and run.env["world_size"] == 2
    sizes = {(m.collective, m.size_bytes) for m in rows}
    assert sizes == {(c, s) for c in ("all_reduce", "all_gather") for s in (8, 64, 512, 4096)}
    for key in sizes:
        reps = sorted(m.rep for m in rows if (m.collective, m.size_bytes) == key)
        assert reps == [0, 1, 2], (key, reps)
    assert all(m.status == "ok" and m.wrong == 0 and m.time_us > 0 and m.config == "default" for m in rows)
    # gloo's all_reduce API is in-place only: the sweep measures what the engine can run
    assert {m.in_place for m in rows if m.collective == "all_reduce"} == {True}
    assert {m.in_place for m in rows if m.collective == "all_gather"} == {False}
    # where the time went: rank 0's phases, in the summary and on stdout
    t = run.summary["time"]
    assert t["timed"]["count"] == 8 and t["warm-up"]["count"] == 2 and t["start-up"]["count"] == 1
    assert 0 < sum(v["seconds"] for v in t.values()) <= run.summary["wall_s"]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("ccltune sweep: time on rank 0, ")]
    assert " timed " in line and " (8)" in line and line.endswith(" s")


def test_model_mode_plans_in_stored_sizes_and_finishes(shared):
    # 1, 2 and 4 B of float all_gather on 2 ranks are all stored as 0 B (no whole element per rank):
    # the planner works in the stored sizes, so it neither asks for them forever nor twice
    proc = shared.get(__name__, "model")
    db = proc.folder / "s.db"
    assert proc.rc == 0, proc.stderr
    run, rows = only_run(db)
    assert run.status == "complete" and run.summary["mode"] == "model"
    per_size = {}
    for m in rows:
        per_size[m.size_bytes] = per_size.get(m.size_bytes, 0) + 1
    assert per_size == {s: 2 for s in (0, 8, 16, 32, 64)}


def test_candidates_need_the_nccl_engine(tmp_path):
    proc = subprocess.run(sweep_cmd("all_reduce", "--db", str(tmp_path / "x.db")), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4  # no GPU here: EngineUnavailable, as --help's exit codes say
    assert "need the nccl engine" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.db").exists()


def _interrupted_sweep_resumes_where_it_stopped(tmp_path):
    db = tmp_path / "s.db"
    args = ["all_reduce", "-b", "8", "-e", "1M", "-f", "2", "--reps", "2", *DEFAULT_ONLY, "--db", str(db)]
    proc = subprocess.Popen(sweep_cmd(*args), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 90
    while count_rows(db) < 6 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    workers = descendants(proc.pid)
    assert workers, "torchrun's workers should be running"
    os.killpg(proc.pid, signal.SIGINT)   # what the terminal does
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "resume with --resume 1" in err and "Traceback" not in err
    run, before = only_run(db)
    assert run.status == "interrupted" and 6 <= len(before) < 36

    done = subprocess.run(sweep_cmd(*args, "--resume", "1"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    run, rows = only_run(db)
    assert run.status == "complete"
    assert f"run 1 complete, {len(rows)} rows in" in done.stdout and run.summary["rows"] == len(rows), done.stdout
    sizes = [8 << i for i in range(18)]   # 8 B .. 1 MB
    keys = [(m.size_bytes, m.rep) for m in rows]
    assert sorted(set(keys)) == sorted((s, r) for s in sizes for r in (0, 1))
    assert len(keys) == len(set(keys)), "a point was measured twice"
    assert not any(alive(p) for p in workers), "a worker outlived the interrupted sweep"


def test_virtual_nodes_are_the_nodes_of_the_rows_and_the_run(shared):
    # NCCL sees K nodes (NCCL_HOSTID) and passes nNodes=K to the tuner: rules must be keyed on K,
    # so the rows say K too, and the run says the nodes were simulated (gloo ignores NCCL_HOSTID)
    proc = shared.get(__name__, "virtual-nodes")
    db = proc.folder / "s.db"
    assert proc.rc == 0, proc.stderr
    run, rows = only_run(db)
    assert {m.n_nodes for m in rows} == {2} and len(rows) == 4
    assert run.env["virtual_nodes"] == 2 and "simulated 2 nodes" in run.env["platform"]


def test_virtual_nodes_that_do_not_divide_the_job_are_refused_before_it_starts(tmp_path):
    proc = subprocess.run(sweep_cmd("all_reduce", "--virtual-nodes", "3", "--nproc", "2", *DEFAULT_ONLY,
                                    "--db", str(tmp_path / "s.db")),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("--virtual-nodes 3 does not divide the job's 2 processes") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "FAILED" not in proc.stderr
    assert not (tmp_path / "s.db").exists()


_KEEP_WORKER = """
import argparse, json, sys
from ccltune import collectives, datatypes
from ccltune.engines.base import EngineOptions
from ccltune.measure import session
from ccltune.measure import sweep as measure_sweep
ctx = session.join("gloo", 60)
eng = session.make_engine("gloo", ctx, EngineOptions())
s = measure_sweep.SweepSettings(dtype=datatypes.dtype("float"), op="sum", reps=2, graph=False, target_us=100,
                                max_iters=5, warmup=1, timeout_s=60)
keep = measure_sweep.BufferCache()
out = []
for name in ("all_gather", "all_reduce"):
    coll = collectives.select([name])[0]
    for _ in range(3):  # the same size three times, as the model's later rounds visit it again
        rows = measure_sweep.measure_size(eng, coll, 4096, [None], [dict(config="default")], s, keep=keep)
        out += [(name, m.status, m.wrong) for m in rows]
    out.append((name, "kept", len(keep)))
    keep.clear()
if ctx.rank == 0:
    print(json.dumps({"rows": out, "counts": dict(s.clock.counts)}))
ctx.close()
"""


def _keep_script(folder):
    script = folder / "keep.py"
    script.write_text(_KEEP_WORKER)
    return script


def test_kept_buffers_are_allocated_and_filled_once_and_stay_correct(shared):
    # measure_size with a BufferCache: a size measured again reuses its buffers; an out-of-place input
    # (all_gather) is written once and every later check still finds every element right; an in-place
    # one (gloo's all_reduce) is written again each time (the call overwrote it). The worker script is a
    # run of the shared job of 2 processes (it joins and leaves the gloo group as a launch of its own would)
    proc = shared.get(__name__, "kept-buffers")
    assert proc.rcs == [0, 0], proc.stderr_all
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [tuple(r) for r in got["rows"]]
    assert rows.count(("all_gather", "ok", 0)) == 6 and rows.count(("all_reduce", "ok", 0)) == 6
    assert ("all_gather", "kept", 1) in rows and ("all_reduce", "kept", 1) in rows
    assert got["counts"]["allocation"] == 2  # one per collective, not one per visit
    assert got["counts"]["fill"] == 1 + 3  # all_gather once; all_reduce (in place) every visit


def test_resume_with_other_options_is_refused_before_any_process_starts(shared):
    # the complete run of test_sweep_stores_every_rep_of_every_size, resumed with other options
    stored = shared.get(__name__, "stores")
    assert stored.rc == 0, stored.stderr
    tmp_path, db = stored.folder, stored.folder / "s.db"
    args = [*STORES, "--db", str(db)]
    _, before = only_run(db)
    for extra, needle in ((["-d", "double"], "-d 'float', now 'double'"), (["--nproc", "3"], "2 ranks, now 3"),
                          (["--resume", "5"], "no run 5; runs in")):
        resume = [] if "--resume" in extra else ["--resume", "1"]
        proc = subprocess.run(sweep_cmd(*args, *resume, *extra), cwd=tmp_path, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count(needle) == 1 and "FAILED" not in proc.stderr, proc.stderr
    run, rows = only_run(db)
    assert run.status == "complete" and len(rows) == len(before)


def test_a_sweep_that_timed_nothing_says_so_and_fails(shared):
    proc = shared.get(__name__, "timed-nothing")
    db = proc.folder / "s.db"
    assert proc.rcs == [1, 0], proc.stderr_all   # rank 0 reports the failed check (the launch exits with its code)
    stderr = proc.stderr_all   # all ranks': one says it
    assert stderr.count("no point of run 1 was timed") == 1 and "skipped (out of memory" in stderr
    assert "FAILED" not in stderr and "next: ccltune tune" not in proc.stdout
    run, rows = only_run(db)
    assert run.status == "complete" and [m.status for m in rows] == ["skipped"]


def _workload(folder):
    from ccltune.workload.model import Entry, Key, Workload, to_json

    wl = Workload([Entry(Key("all_reduce", 4100, 2, "float", 1025, op="max"), 7), Entry(Key("all_gather", 24, 2, "float", 3), 2),
                   Entry(Key("all_reduce", 4100, 2, "int32", 1025, op="sum"), 1), Entry(Key("all_reduce", 512, 4, "float", 128, op="sum"), 3),
                   Entry(Key("reduce_scatter", 4, 2, "bfloat16", 1, op="avg"), 1),
                   Entry(Key("all_reduce", 8192, 2, "bfloat16", 4096, op="sum"), 9)], [])
    (folder / "w.json").write_text(to_json(wl, {}))
    return ["sweep", "--workload", str(folder / "w.json"), "--reps", "2", *DEFAULT_ONLY, "--db", str(folder / "s.db")]


def test_workload_sweeps_exactly_its_points_and_lists_the_others(shared):
    proc = shared.get(__name__, "workload")
    w, db = proc.folder / "w.json", proc.folder / "s.db"
    assert proc.rc == 0, proc.stderr
    run, rows = only_run(db)
    # the exact sizes (4100 B is no power of two), datatypes merged: the tuner sees bytes; each point in the
    # datatype the job issues there (issues 30, 38): the bfloat16 reduce_scatter of 4 B, which float could not
    # time, and the float all_reduce of 4100 B beside the bfloat16 one of 8192 B that moves more bytes
    assert sorted({(m.collective, m.size_bytes, m.dtype) for m in rows}) == [
        ("all_gather", 24, "float"), ("all_reduce", 4100, "float"), ("all_reduce", 8192, "bfloat16"),
        ("reduce_scatter", 4, "bfloat16")]
    assert len(rows) == 8 and all(m.status == "ok" for m in rows)
    # and in the job's op (issue 30): max for the all_reduce of 4100 B (most calls); gloo has no avg, which is said
    assert {(m.collective, m.size_bytes, m.op) for m in rows} == {
        ("all_gather", 24, None), ("all_reduce", 4100, "max"), ("all_reduce", 8192, "sum"), ("reduce_scatter", 4, "sum")}
    # (the parent's line naming the ops, "# in the job's reduction op ...", is not printed here: this run is one of
    # the shared job's, under the launcher, where only the ranks speak; tests/unit/test_workload_op.py checks it)
    assert "# reduce_scatter 4 B: the job reduces with avg, measured with sum: gloo has no AVG reduction" in proc.stdout
    assert run.args["workload"] == str(w) and run.summary["workload_points"] == {"all_reduce": [4100, 8192],
                                                                                 "all_gather": [24],
                                                                                 "reduce_scatter": [4]}
    assert [k["entry"] for k in run.summary["workload_skipped"]] == [3]
    assert ("# not swept: all_reduce 512 B x3: captured on 4 ranks, this launch has 2 (launch it with --nproc 4)"
            in proc.stdout.splitlines())


def _killed_rank_ends_the_sweep_in_one_line_and_keeps_its_rows(launcher, tmp_path):
    # kill -9 of rank 1 mid-sweep: rank 0's collective fails inside gloo ('Connection reset by peer'); it
    # says so in one ccltune line, never gloo's traceback (issue 32: 3 of 8 tries printed it), and the
    # rows measured stay stored in the run, marked failed
    db = tmp_path / "s.db"
    proc = subprocess.Popen(sweep_cmd("all_reduce", "-b", "8", "-e", "64M", "-f", "2", "--reps", "3", *DEFAULT_ONLY,
                                      "--db", str(db), "--timeout", "5"),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    launcher.procs.append(proc)
    before = wait_rows(db, 6, proc)
    launcher.note(proc)
    os.kill(worker(proc.pid, 1), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "Traceback" not in err and "[rank" not in err and "RuntimeError" not in err, err
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(("sweep: ", "ccltune: no GPU found"))]
    assert all(x.startswith("ccltune") for x in lines), err
    run, rows = only_run(db)
    assert run.status == "failed" and len(rows) >= before and run.summary["rows"] == len(rows)
    if "exited (killed or crashed)" in lines[0]:   # rank 0 spoke: its line alone, with what it kept
        assert lines == [f"ccltune: error: rank 1 on host {run.env['hosts'][0]} exited (killed or crashed); the "
                         f"launcher stopped rank 0 on {run.env['hosts'][0]}; {len(rows)} rows kept in {db} "
                         f"(run {run.id}, marked failed)"], err
    else:   # rank 0 was still inside the collective when torchrun's grace ran out: the launcher names both
        assert lines[0].startswith("ccltune: error: rank 1 on host ") and "killed by SIGKILL" in lines[0], err
    assert not any(alive(p) for p in launcher.seen)


# The sweeps that only need a gloo job of 2 processes: runs of the shared job (dist_helpers.SharedJobs)
SHARED_RUNS = {
    "stores": (2, lambda folder: ["sweep", *STORES, "--db", str(folder / "s.db")]),
    "model": (2, lambda folder: ["sweep", "all_gather", "-b", "1", "-e", "64", "-f", "2", "--reps", "2", "--mode", "model",
                                 *DEFAULT_ONLY, "--db", str(folder / "s.db")]),
    "virtual-nodes": (2, lambda folder: ["sweep", "all_reduce", "-b", "8", "-e", "64", "-f", "8", "--reps", "2",
                                         "--virtual-nodes", "2", *DEFAULT_ONLY, "--db", str(folder / "s.db")]),
    "workload": (2, _workload),
    "kept-buffers": (2, _keep_script),
    "timed-nothing": (2, lambda folder: ["sweep", "all_reduce", "-b", "1T", "-e", "1T", *DEFAULT_ONLY,
                                         "--db", str(folder / "s.db")]),
}


# This module's own launches run at once, each test's body in its own thread (background_fixture):
# torch's import in torchrun and its workers leaves a core idle, so they overlap well.
_BODIES = [_interrupted_sweep_resumes_where_it_stopped]
background = background_fixture({"test_killed_rank_ends_the_sweep_in_one_line_and_keeps_its_rows":
                                 (_killed_rank_ends_the_sweep_in_one_line_and_keeps_its_rows,),
                                 **{"test" + body.__name__: (lambda launcher, folder, body=body: body(folder),)
                                    for body in _BODIES}})


@pytest.mark.slow   # two launches and a Ctrl-C: about 10 s on 2 cores
def test_interrupted_sweep_resumes_where_it_stopped(background, request):
    ran(background, request)


def test_killed_rank_ends_the_sweep_in_one_line_and_keeps_its_rows(background, request):
    ran(background, request)
