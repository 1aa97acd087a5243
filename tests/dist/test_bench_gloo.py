"""`ccltune bench` end to end on the gloo engine: every collective on 2 and 4 processes,
every datatype and op that gloo supports, the table, the JSON records and the database."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ccltune import collectives
from ccltune.commands.launching import NO_GPU_NOTE
from ccltune.cli import main
from ccltune.ncclt import table as ncclt_table
from ccltune.sizes import size_series
from ccltune.store import Store
from dist_helpers import ROW_FIELDS, bench_cmd, checked, only_run

ALL = list(collectives.REGISTRY)
SIZES = ["-b", "8", "-e", "4K", "-f", "8"]
FAST = ["-n", "2", "-w", "1", "--timeout", "30"]
# gloo runs torch.distributed's API: these have no out-of-place form there, those no in-place form at all
IN_PLACE_ONLY = {"all_reduce", "broadcast", "reduce"}
NO_IN_PLACE = {"alltoall", "scatter", "gather"}
UNCHECKED_IN_PLACE = {"sendrecv"}  # timed in place, #wrong N/A (nccl-tests' sendrecv.cu)


def table(stdout: str) -> dict[str, list[list[str]]]:
    """Rows of the text table per collective, as whitespace-split cells."""
    out: dict[str, list[list[str]]] = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("# Collective test starting: "):
            current = line.split(": ", 1)[1].removesuffix("_perf")
            out[current] = []
        elif line.strip() and not line.startswith("#"):
            assert current is not None, line
            out[current].append(line.split())
    return out


def check_cells(name: str, cells: list[str]) -> None:
    assert len(cells) == 13, cells
    oop, ip = cells[5:9], cells[9:13]
    assert (oop == ["N/A"] * 4) == (name in IN_PLACE_ONLY), cells
    assert (ip == ["N/A"] * 4) == (name in NO_IN_PLACE), cells
    for half, place in ((oop, "oop"), (ip, "ip")):
        if half[0] != "N/A":
            unchecked = place == "ip" and name in UNCHECKED_IN_PLACE
            assert float(half[0]) > 0 and half[3] == ("N/A" if unchecked else "0"), cells


def _every_collective(folder: Path) -> list[str]:
    return ["bench", "all", *SIZES, *FAST, "--db", str(folder / "t.db"), "--json", str(folder / "t.json")]


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective(shared, nproc):
    """The same command in the shared jobs of 2 and of 4 processes (run by a worker that torchrun started, as
    `ccltune bench --nproc N` runs it); what the parent adds to a launch of its own is checked on step_run's
    (test_the_parent_says_its_note_once_and_records_what_the_user_typed)."""
    ran = shared.get(__name__, f"every-{nproc}")
    rc, stdout, stderr, db, js = ran.rc, ran.stdout, ran.stderr, ran.folder / "t.db", ran.folder / "t.json"
    assert rc == 0, stderr
    assert "Traceback" not in stderr
    sizes = size_series(8, 4096, factor=8)

    # the table: a header per collective, a row per size, #wrong 0 wherever measured
    rows = table(stdout)
    assert list(rows) == ALL
    for name, cells in rows.items():
        coll = collectives.get(name)
        assert len(cells) == len(sizes), (name, cells)
        for size, c in zip(sizes, cells):
            lay = coll.layout(coll.ncclt_size(size, 4, nproc), 4, nproc, 0)
            assert (int(c[0]), int(c[1]), c[2]) == (lay.size_bytes, lay.count, "float")
            check_cells(name, c)
    assert stdout.count("# Out of bounds values : 0 OK") == len(ALL)
    # no NCCL: nccl-tests' version line names the engine instead of NCCL's version codes
    assert f"# nccl-tests version {ncclt_table.NCCL_TESTS_VERSION} ccltune=" in stdout and " engine=gloo" in stdout
    assert "nccl-headers" not in stdout
    assert all(re.search(rf"#  Rank {r:2d} Group  0 Pid +\d+ on +\S+ device +\d+ \[0000:00:00\] cpu", stdout)
               for r in range(nproc))

    # the JSON records: one per (collective, size, placement), busbw = algbw * factor
    data = json.loads(js.read_text())
    recs = data["records"]
    assert len(recs) == len(ALL) * len(sizes) * 2
    for r in recs:
        assert set(ROW_FIELDS) <= set(r)
        coll = collectives.get(r["collective"])
        assert r["dtype"] == "float" and r["n_ranks"] == nproc
        assert r["op"] == ("sum" if coll.reduces or coll.loops_ops else None)  # sendrecv_perf prints its -o op
        assert r["root"] == (0 if coll.rooted else None)
        if r["status"] == "ok":
            unchecked = r["in_place"] and r["collective"] in UNCHECKED_IN_PLACE
            assert r["wrong"] == (None if unchecked else 0) and r["time_us"] > 0
            assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / r["time_us"] / 1e3)
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * coll.bus_factor(nproc))
        else:
            assert r["status"] == "waived" and r["note"] and r["time_us"] is None
    ok = {(r["collective"], r["in_place"]) for r in recs if r["status"] == "ok"}
    assert ok == {(n, p) for n in ALL for p in (False, True)
                  if not (n in IN_PLACE_ONLY and not p) and not (n in NO_IN_PLACE and p)}

    # the database: the same rows, the run complete with its environment
    run, stored = only_run(db)
    # every stored field equal; --json may add what the database does not keep (-C cpu time, -I statistics)
    assert [m.to_record() for m in stored] == [{k: r[k] for k in m.to_record()} for m, r in zip(stored, recs)]
    assert len(stored) == len(recs)
    assert (run.kind, run.status, run.engine, run.world_size) == ("bench", "complete", "gloo", nproc)
    assert run.summary == {"rows": len(recs), "wrong": 0}
    assert run.launcher == "torchrun" and run.command.startswith("ccltune bench all -b 8")
    env = run.env
    assert env == data["env"]
    assert env["world_size"] == nproc and env["launcher"] == "torchrun" and env["engine"] == "gloo"
    assert isinstance(env["variables"], dict) and env["torch_version"]
    assert len(env["hosts"]) == nproc


CASES = [(op, dt) for op in ("sum", "prod", "min", "max") for dt in ("int32", "float")]
CASES += [("sum", "bfloat16"), ("max", "half"), ("prod", "int8"), ("sum", "uint8"), ("min", "double")]


OPS_CASES = {(op, dtype): ["all_reduce,reduce_scatter,reduce,broadcast", "-b", "64", "-e", "1K", "-f", "16", *FAST,
                            "-o", op, "-d", dtype, "-r", "1"] for op, dtype in CASES}
OPS_CASES[("avg", "float")] = ["all_reduce,all_gather", "-b", "64", "-e", "64", *FAST, "-o", "avg"]


def _files(folder: Path) -> list[str]:
    return ["--db", str(folder / "t.db"), "--json", str(folder / "t.json")]


@pytest.fixture(scope="module")
def ops_and_datatypes(shared):
    """Every case of CASES, and -o avg, as its own bench command line in the shared job of 2 processes (a
    launch costs seconds; the cases only differ in -o and -d): {case: (stdout, db, json)}."""
    out = {}
    for case in OPS_CASES:
        ran = shared.get(__name__, f"ops-{case[0]}-{case[1]}")
        assert ran.rc == 0, ran.stderr[-3000:]
        out[case] = (ran.stdout, ran.folder / "t.db", ran.folder / "t.json")
    return out


@pytest.mark.parametrize("op, dtype", CASES)
def test_ops_and_datatypes(ops_and_datatypes, op, dtype):
    stdout, db, js = ops_and_datatypes[(op, dtype)]
    rows = table(stdout)
    assert list(rows) == ["all_reduce", "reduce_scatter", "reduce", "broadcast"]
    assert all(c[2] == dtype for cells in rows.values() for c in cells)
    assert [c[3] for c in rows["all_reduce"]] == [op, op] and [c[4] for c in rows["broadcast"]] == ["1", "1"]
    for name, cells in rows.items():
        for c in cells:
            check_cells(name, c)
    recs = json.loads(js.read_text())["records"]
    measured = [r for r in recs if r["status"] == "ok"]
    assert len(measured) == 2 * (1 + 2 + 1 + 1)   # all_gather-free: reduce_scatter has both placements
    assert all(r["wrong"] == 0 and r["dtype"] == dtype for r in measured)
    assert {r["op"] for r in recs if r["collective"] != "broadcast"} == {op}
    assert {r["root"] for r in recs if r["collective"] in ("reduce", "broadcast")} == {1}
    assert only_run(db)[0].status == "complete"


def test_avg_is_waived_on_gloo_not_failed(ops_and_datatypes):
    stdout, db, js = ops_and_datatypes[("avg", "float")]   # its run exited 0 (the fixture checks)
    assert "WAIVED: gloo has no AVG reduction" in stdout
    recs = json.loads(js.read_text())["records"]
    assert {r["status"] for r in recs if r["collective"] == "all_reduce"} == {"waived"}
    assert {r["status"] for r in recs if r["collective"] == "all_gather"} == {"ok"}   # avg only matters to reductions


def test_single_process_runs_and_waives(run_bench):
    proc, db, js = run_bench("all_reduce,sendrecv,all_gather", "-b", "8", "-e", "64", "-f", "8", *FAST, "--nproc", "1")
    assert proc.returncode == 0, proc.stderr
    assert "WAIVED: one process: start several with --nproc N or a launcher" in proc.stdout
    recs = json.loads(js.read_text())["records"]
    assert len(recs) == 3 * 2 * 2 and {r["status"] for r in recs} == {"waived"}
    run, stored = only_run(db)
    assert run.status == "complete" and run.world_size == 1 and len(stored) == len(recs)
    # a new user learns where the rows went (stderr: stdout stays nccl-tests' table)
    assert f"ccltune bench: run {run.id} complete, {len(recs)} rows in {db}" in proc.stderr
    assert "ccltune bench: run" not in proc.stdout


WARMUP = ["all_gather,reduce_scatter,sendrecv", "-b", "8", "-e", "4K", "-f", "8", *FAST]
WARMUP_MODES = ["series", "nccl-tests", None]
# nccl-tests' schedule and reports: -z 3, -I 1 -K 1, -C 1, -u 3, -J
SCHEDULE = ["all_reduce", "-b", "8", "-e", "64", *FAST, "-n", "4", "-z", "3", "-I", "1", "-K", "1", "-C", "1", "-u", "3"]


@pytest.fixture(scope="module")
def warmup_modes(shared):
    """Runs of the shared job of 2 processes: the same bench with each --warmup-mode, then without:
    {mode or None: (db, json)}; and SCHEDULE's: "schedule": (db, None, -J's file), "schedule_out": its stdout."""
    files = {}
    for mode in WARMUP_MODES:
        ran = shared.get(__name__, f"warmup-{mode}")
        assert ran.rc == 0, ran.stderr[-3000:]
        files[mode] = (ran.folder / "t.db", ran.folder / "t.json")
    ran = shared.get(__name__, "schedule")
    assert ran.rc == 0, ran.stderr[-3000:]
    files["schedule"] = (ran.folder / "t.db", None, ran.folder / "ncclt.json")
    files["schedule_out"] = ran.stdout
    return files


def test_nccl_tests_schedule_and_reports_on_gloo(warmup_modes):
    """-z 3 -I 1 -K 1 -C 1 -u 3: nccl-tests' lines and columns, exact results on misaligned buffers,
    per-iteration statistics in the table and in -J."""
    out = warmup_modes["schedule_out"]
    lines = out.splitlines()
    assert "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier " in lines
    assert ("# Per-Iteration Report: host clock timing (no GPU); i_* uses max over process rows; summary skips first 1 "
            "iterations ") in lines
    assert any(line.startswith("#       size") and line.count("cputime") == 2 and line.count("i_cv%") == 2
               for line in lines)
    assert lines[0].startswith("# Writing JSON output to ")  # -J: said first, as nccl-tests does
    assert "unalign: 3" in lines[3] and "iters: 4" in lines[3]
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    assert len(rows) == 4 and all(len(r) == 9 + 8 for r in rows)  # all_reduce in place: 4 + 4 per-iteration cells
    assert all(r[12] == "0" and float(r[13]) <= float(r[14]) for r in rows)  # #wrong 0 on -u 3; i_min <= i_max
    doc = json.loads(warmup_modes["schedule"][2].read_text())
    res = doc["results"][0]
    assert set(res["in_place"]) == {"cpu_time", "alg_bw", "bus_bw", "nwrong"}
    per = res["in_place_per_iter"]
    assert per["skipped_iterations"] == 1 and len(per["times_us"]) == 4 and len(per["per_process_max_times_us"]) == 2
    assert doc["config"]["per_iter_timing"] == "true" and doc["config"]["blocking_collectives"] == "true"
    # the database keeps what the table printed: -C's CPU time and -I's statistics, every iteration
    _, stored = only_run(warmup_modes["schedule"][0])
    ok = [m for m in stored if m.status == "ok"]
    assert ok and all(m.extra["cpu_time_us"] > 0 for m in ok)
    assert all(m.extra["per_iter"]["skipped"] == 1 and len(m.extra["per_iter"]["times_us"]) == 4
               and m.extra["per_iter"]["min_us"] <= m.extra["per_iter"]["p99_us"] <= m.extra["per_iter"]["max_us"]
               for m in ok)


@pytest.mark.parametrize("mode", ["series", "nccl-tests"])
def test_series_warmup_gives_the_same_rows(warmup_modes, mode):
    """nccl-tests' warm-up over the whole series first: same rows, every result still exact."""
    db, js = warmup_modes[mode]
    recs = json.loads(js.read_text())["records"]
    assert only_run(db)[0].args["warmup_mode"] == mode
    plain = json.loads(warmup_modes[None][1].read_text())["records"]
    key = [(r["collective"], r["size_bytes"], r["in_place"], r["status"]) for r in recs]
    assert key == [(r["collective"], r["size_bytes"], r["in_place"], r["status"]) for r in plain]
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(ok) == len(size_series(8, 4096, factor=8)) * (2 + 2 + 2)
    assert all(r["wrong"] == (0 if checked(r) else None) for r in ok)


SHARED_RUNS = {   # name: (processes, build(folder) -> command line): run in dist_helpers.SharedJobs
    **{f"every-{n}": (n, _every_collective) for n in (2, 4)},
    **{f"ops-{op}-{dt}": (2, lambda folder, argv=argv: ["bench", *argv, *_files(folder)])
       for (op, dt), argv in OPS_CASES.items()},
    **{f"warmup-{m}": (2, lambda folder, m=m: ["bench", *WARMUP, *(["--warmup-mode", m] if m else []), *_files(folder)])
       for m in WARMUP_MODES},
    "schedule": (2, lambda folder: ["bench", *SCHEDULE, "-J", str(folder / "ncclt.json"), "--db", str(folder / "t.db")]),
}


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory):
    """`ccltune bench all_reduce -b 8 -e 64K --nproc 2 ... | head -3`, launched by the parent: (the 3 lines
    read, its whole stderr, its exit code, the database). One launch serves the two tests below."""
    tmp = tmp_path_factory.mktemp("piped")
    db = tmp / "b.db"
    proc = subprocess.Popen([sys.executable, "-m", "ccltune", "bench", "all_reduce", "-b", "8", "-e", "64K",
                             "--nproc", "2", "--db", str(db)], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = [proc.stdout.readline() for _ in range(3)]
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    return first, err, proc.wait(timeout=120), db


def test_a_reader_that_goes_stops_the_table_not_the_run(piped_run):
    # `ccltune bench ... | head -3`: rank 0 drops the rest of its table and measures on
    first, err, rc, db = piped_run
    assert rc == 0, err
    assert first[0].startswith(b"# nccl-tests version") and "Traceback" not in err and "BrokenPipe" not in err
    run, rows = only_run(db)
    assert run.status == "complete" and len(rows) == 2 * 14


def test_the_parent_says_its_note_once_and_records_what_the_user_typed(piped_run):
    """What `ccltune bench --nproc 2` adds when it launches the job itself (the shared jobs' runs, in
    test_every_collective, have no parent): its no-GPU note once, the run's environment from its view."""
    _, stderr, rc, db = piped_run
    assert rc == 0, stderr
    assert stderr.startswith(f"ccltune: {NO_GPU_NOTE}\n") and stderr.count(NO_GPU_NOTE) == 1  # the parent's
    run, _ = only_run(db)
    env = run.env
    assert run.launcher == "torchrun" and env["launcher"] == "torchrun" and env["world_size"] == 2
    assert "--nproc" in run.command   # what the user typed, not what torchrun was given
    # only what the user set: torchrun sets TORCH_NCCL_ASYNC_ERROR_HANDLING=1 for the workers it starts
    assert env["variables_from"] == "parent" and set(env["variables"]) <= set(os.environ)
    assert (("TORCH_NCCL_ASYNC_ERROR_HANDLING" in env["variables"])
            == ("TORCH_NCCL_ASYNC_ERROR_HANDLING" in os.environ))
    # the environment records what each worker ran: its argv made from the options (BenchOptions.to_argv),
    # the engine resolved once, --nproc gone
    assert env["command"].startswith("ccltune bench all_reduce --minbytes=8 --maxbytes=64K"), env["command"]
    assert "--nproc" not in env["command"] and env["command"].endswith("--engine gloo"), env["command"]


# nccl-tests' ar-step capture's flags (-R 1 left out: gloo registers nothing), with -g 2: 2 processes
STEP = ["all_reduce", "-g", "2", "-b", "1.5M", "-e", "6M", "-i", "1M", "-f", "1", "-u", "4", "-w", "1"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"


@pytest.fixture(scope="module")
def step_run(tmp_path_factory):
    """One gloo bench of STEP with -J: (stdout, the table's file, the -J file, the database)."""
    tmp = tmp_path_factory.mktemp("step")
    db, ncclt = tmp / "s.db", tmp / "ncclt.json"
    proc = subprocess.run(bench_cmd(*STEP, "--timeout", "60", "-J", str(ncclt), "--db", str(db)), cwd=tmp,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = tmp / "table.txt"
    out.write_text(proc.stdout)
    return proc.stdout, out, ncclt, db



def _import(path: Path, db: Path) -> tuple[Any, list[Any]]:
    assert main(["import", "nccl-tests", str(path), "--db", str(db)]) == 0
    with Store(db, create=False) as st:
        run = st.runs()[-1]
        return run, st.measurements(run.id)


def test_minus_g_2_prints_the_shape_that_imports_back_as_2_ranks(step_run, tmp_path, capsys):
    stdout, table_file, ncclt, db = step_run
    assert re.search(r"^# ccltune: .*-t 1 -g 2: 2 processes per node, one GPU each", stdout, re.M)
    assert "# nThread 1 nGpus 1 " in stdout and len(re.findall(r"^#  Rank  \d Group", stdout, re.M)) == 2
    assert json.loads(ncclt.read_text())["config"]["ngpus"] == 1
    run, stored = only_run(db)
    assert run.world_size == 2 and {m.n_ranks for m in stored} == {2}
    for path in (table_file, ncclt):
        back, rows = _import(path, tmp_path / "i.db")
        assert back.world_size == 2 and {m.n_ranks for m in rows} == {2}, path


def test_the_shape_line_is_nccl_tests_own_for_the_same_flags(step_run):
    """maxBytes is -e (6M), as nccl-tests prints it, not the last size run (5.5M): the whole line equals
    the real nccl-tests 2.19.6 capture's for these flags."""
    shape = [line for line in step_run[0].splitlines() if line.startswith("# nThread")]
    real = [line for line in (FIXTURES / "v2.19.6" / "ar-step-v2.19.6.txt").read_text().splitlines()
            if line.startswith("# nThread")]
    # jsonOutputInit's line comes first, as in the real capture made with -J
    said = (FIXTURES / "v2.19.6" / "ar-json-v2.19.6.txt").read_text().splitlines()[0]
    assert said.startswith("# Writing JSON output to ") and said.endswith("/ar-v2.19.6.json")
    assert step_run[0].splitlines()[0] == f"# Writing JSON output to {step_run[2]}"
    assert shape == real == ["# nThread 1 nGpus 1 minBytes 1572864 maxBytes 6291456 step: 1048576(bytes) warmup iters:"
                             " 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 4"]
    doc = json.loads(step_run[2].read_text())
    assert (doc["config"]["minimum_bytes"], doc["config"]["maximum_bytes"]) == (1572864, 6291456)
    assert [r["size"] for r in doc["results"]][-1] == 5767168


def test_own_table_imports_back_to_the_stored_rows(step_run, tmp_path):
    """ccltune bench's table -> import nccl-tests: every stored field comes back (times and bandwidths
    to the table's precision), the WAIVED cells with their status and reason from the note lines."""
    from ccltune.ncclt import table as ncclt_table

    _, table_file, _, db = step_run
    _, stored = only_run(db)
    _, back = _import(table_file, tmp_path / "i.db")
    assert any(m.status == "waived" and m.note for m in stored)  # gloo: all_reduce has no out-of-place form
    assert len(back) == len(stored)
    widths = {"time_us": 7, "algbw_gbps": 6, "busbw_gbps": 6}
    for mine, theirs in zip(stored, back):
        a, b = mine.to_record(), theirs.to_record()
        for key, width in widths.items():
            if a[key] is not None:
                a[key] = float(ncclt_table.float_cell(a[key], width))
        diff = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
        assert not diff, diff
