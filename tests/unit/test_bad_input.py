"""Bad input that used to get through: the results database refused or kept as it is, run ids and
sizes beyond any real value, output files that are the database, options only a GPU engine uses."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from ccltune import launch
from ccltune.cli import main
from ccltune.commands import launching
from ccltune.commands.sweep import check_resume
from ccltune.commands.sweep_options import SweepOptions
from ccltune.errors import UsageError
from ccltune.sizes import parse_size, size_series
from ccltune.store import Measurement, Store


def _db(path, runs=1):
    with Store(path) as st:
        for _ in range(runs):
            rid = st.begin_run("bench", command="ccltune bench", env={"world_size": 2}, args={})
            st.add_measurements(rid, [Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, time_us=1.0)])
            st.finish_run(rid, "complete")
    return path


def _tables(path):
    return sorted(r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'"))


@pytest.mark.parametrize("argv", [
    ["export", "1", "--out", "{db}"],
    ["report", "--out", "{db}"],
    ["tune", "--out", "{db}"],
    ["tune", "--out", "./{db}"],
    ["bench", "all_reduce", "-e", "64", "--json", "{db}"],
    ["validate", "rules.conf", "--junit", "{db}"],
    ["doctor", "--no-run", "--json", "{db}"],
])
def test_an_output_file_that_is_the_database_is_refused_and_the_runs_kept(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    _db(tmp_path / "X.db", runs=2)
    before = (tmp_path / "X.db").read_bytes()
    rc = main([a.format(db="X.db") for a in argv] + ["--db", "X.db"])
    err = capsys.readouterr().err
    assert rc == 2 and "is the results database (--db)" in err, err
    assert (tmp_path / "X.db").read_bytes() == before


def test_outputs_into_a_missing_folder_or_onto_a_folder_are_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    assert main(["bench", "all_reduce", "--json", "no/such/x.json", "--db", "t.db"]) == 2
    assert "--json: folder of 'no/such/x.json' does not exist" in capsys.readouterr().err
    assert main(["bench", "all_reduce", "--json", "d", "--db", "t.db"]) == 2
    assert "--json: 'd' is a folder" in capsys.readouterr().err
    assert not (tmp_path / "t.db").exists()


def test_another_programs_sqlite_file_is_refused_untouched(tmp_path):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE runs (a)")
    con.commit()
    con.close()
    for kw in ({}, {"create": False}, {"readonly": True}):
        with pytest.raises(UsageError, match="SQLite database of another program \\(tables: runs\\)"):
            Store(other, **kw)
    assert _tables(other) == ["runs"]


def test_a_newer_schema_is_refused(tmp_path):
    db = _db(tmp_path / "n.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(UsageError, match="schema version '99'.*newer ccltune"):
        Store(db, readonly=True)


def test_reading_commands_open_read_only_and_leave_an_empty_file_empty(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for argv in (["runs"], ["export", "1"], ["report", "--out", str(tmp_path / "r.html")]):
        assert main(argv + ["--db", str(empty)]) == 2
        assert "holds no ccltune data" in capsys.readouterr().err
    assert empty.read_bytes() == b""
    db = _db(tmp_path / "r.db")
    before = db.read_bytes()
    with Store(db, readonly=True) as st:
        assert [r.id for r in st.runs()] == [1]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            st.begin_run("bench", command="x", env={}, args={})
    assert db.read_bytes() == before


def test_a_damaged_run_record_names_the_run_and_column(tmp_path, capsys):
    db = _db(tmp_path / "r.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET env_json = '{not json' WHERE id = 1")
    con.commit()
    con.close()
    assert main(["runs", "--db", str(db)]) == 2
    assert "run 1's env_json is not a JSON object ('{not json')" in capsys.readouterr().err


def test_run_ids_beyond_sqlite_integers_and_huge_ranges_name_the_runs_there_are(tmp_path, capsys):
    db = _db(tmp_path / "r.db", runs=3)
    huge = "99999999999999999999999"
    for argv in (["export", huge], ["report", "--run", huge, "--out", str(tmp_path / "r.html")],
                 ["report", "--compare", "1", huge, "--out", str(tmp_path / "r.html")]):
        assert main(argv + ["--db", str(db)]) == 2
        assert f"no run {huge}; runs in" in capsys.readouterr().err
    t0 = time.monotonic()
    assert main(["tune", "--runs", "1-99999999999", "--out", str(tmp_path / "r.conf"), "--db", str(db)]) == 2
    assert "no run 4; runs in" in capsys.readouterr().err and time.monotonic() - t0 < 5
    with Store(db, readonly=True) as st:
        assert st.runs_in([(2, 3), (1, 1), (3, 3)]) == [2, 3, 1]
        with pytest.raises(UsageError, match="no run 0"):
            st.runs_in([(0, 2)])


def test_runs_kind_is_checked(tmp_path, capsys):
    db = _db(tmp_path / "r.db")
    assert main(["runs", "--kind", "bnech", "--db", str(db)]) == 2
    assert "unknown run kind 'bnech' in --kind (did you mean 'bench'?)" in capsys.readouterr().err
    assert main(["export", "LATEST", "--db", str(db), "--out", str(tmp_path / "e.json")]) == 0


def test_sizes_and_step_factors_beyond_any_real_value():
    with pytest.raises(UsageError, match="-e: '99999999999999999999999' is more than 1024T bytes"):
        parse_size("99999999999999999999999", "-e")
    assert parse_size("1024T") == 1 << 50
    for bad in (float("nan"), float("inf")):
        with pytest.raises(UsageError, match="-f/--stepfactor must be >= 2"):
            size_series(8, 64, factor=bad)


def _args(**kw):
    base = dict(collective=("all_reduce",), minbytes="8", maxbytes="1K", stepfactor=2.0, datatype="float", op="sum",
                algos="", protos="", channels="", grid="axes", reps=5, target_us=1000.0, max_iters=100,
                warmup_iters=2, no_graph=False, mode="exhaustive", no_twin=False, virtual_nodes=0)
    base.update(kw)
    return SweepOptions(**base)


class _Run:
    def __init__(self, kind="sweep", world_size=2, **args):
        self.id, self.kind, self.world_size = 7, kind, world_size
        self.args = json.loads(json.dumps(dataclasses.asdict(_args(**args))))  # as the database gives them back


def test_resume_continues_only_the_same_sweep():
    check_resume(_Run(), _args(), 2)  # the same command: fine
    check_resume(_Run(), _args(datatype="float", channels=""), 2)
    cases = [
        (_Run(kind="bench"), _args(), 2, "run 7 is a bench run, not a sweep"),
        (_Run(), _args(), 4, "2 ranks, now 4"),
        (_Run(), _args(collective=("all_gather",)), 2, "other collectives"),
        (_Run(), _args(maxbytes="1M"), 2, "other sizes"),
        (_Run(), _args(channels="8"), 2, "other candidates"),
        (_Run(), _args(datatype="double"), 2, "-d 'float', now 'double'"),
        (_Run(), _args(reps=3), 2, "--reps 5, now 3"),
    ]
    before_grid = _Run(algos="ring", protos="ll", channels="8")
    del before_grid.args["grid"]  # a run from before --grid measured the two axes
    cases.append((before_grid, _args(algos="ring", protos="ll", channels="8", grid="full"), 2, "other candidates"))
    check_resume(before_grid, _args(algos="ring", protos="ll", channels="8", grid="axes"), 2)
    for run, args, n, needle in cases:
        with pytest.raises(UsageError) as ei:
            check_resume(run, args, n)
        assert needle in str(ei.value) and "--resume 7" in str(ei.value)


@pytest.mark.parametrize("argv, needle", [
    (["sweep", "--target-us", "nan"], "--target-us must be a number of microseconds > 0, got nan"),
    (["sweep", "--target-us", "-5"], "--target-us must be a number of microseconds > 0, got -5"),
    (["sweep", "--max-iters", "-3"], "--max-iters must be >= 1, got -3"),
    (["sweep", "-w", "-4"], "-w/--warmup_iters must be >= 0, got -4"),
    (["bench", "all_reduce", "--timeout", "nan"], "--timeout must be > 0 and at most 31536000 seconds (a year), got nan"),
    (["bench", ","], "COLLECTIVE: ',' names no collective"),
    (["bench", "all_reduce", "-r", "5", "--nproc", "2"], "-r/--root must be < the number of ranks (2), got 5"),
    (["bench", "all_reduce", "--engine", "gloo", "--nccl-lib", "/x.so"],
     "--nccl-lib /x.so is for the nccl engine, not --engine gloo"),
    (["report", "--tolerance", "nan"], "--tolerance must be a number of percent, got nan"),
    (["tune", "--runs", "3-", "--out", "r.conf"], "--runs: '3-' is not a run id"),
    (["tune", "--min-gain-us", "1e7", "--out", "r.conf"], "--min-gain-us must be at least 0 and under 1000000"),
])
def test_values_refused_before_any_work(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch.subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    _db(tmp_path / "x.db")
    assert main(argv + ["--db", "x.db"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_sweep_accepts_the_rule_files_spelling_of_collnet():
    from ccltune.commands.sweep import candidates

    got = candidates(_args(algos="collnet_direct,CollNetChain", protos="simple"))
    assert [c.algo for c in got if c.algo] == ["collnetdirect", "collnetchain"]



@pytest.mark.parametrize("algos", ["collnet_dirct", "CollNetDirct"])
def test_sweep_lists_the_algorithms_in_the_rule_files_spelling(algos):
    """Either spelling is taken; the refusal echoes what was typed and lists the rule files' names (those
    that rules explain and plugin check list), one spelling only."""
    from ccltune import rules
    from ccltune.commands.sweep import candidates

    with pytest.raises(UsageError) as ei:
        candidates(_args(algos=f"ring,{algos}", protos="simple"))
    assert str(ei.value) == (f"unknown algorithm '{algos}' in --algos (did you mean 'collnet_direct'?); "
                             f"valid: {', '.join(rules.ALGORITHMS)}")
    with pytest.raises(UsageError, match="unknown protocol 'll64' in --protos .*; valid: ll, ll128, simple$"):
        candidates(_args(algos="ring", protos="ll64"))


def test_more_processes_than_gpus_is_refused_for_the_gpu_engines(monkeypatch):
    monkeypatch.setattr(launching, "gpu_count", lambda: 2)
    for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(UsageError, match="--nproc 4: one process per GPU, and 2 GPUs are visible here"):
        launching.job_size(argparse.Namespace(nproc=4), "nccl")
    assert launching.job_size(argparse.Namespace(nproc=2), "torch") == 2
    assert launching.job_size(argparse.Namespace(nproc=4), "gloo") == 4


def test_messages_name_the_flag_the_user_gave(tmp_path, capsys):
    rules = tmp_path / "r.conf"
    rules.write_text("# no rules\n")
    assert main(["plugin", "verify", str(rules), "--from-log", str(tmp_path / "nope.log")]) == 2
    assert "--from-log: " in capsys.readouterr().err
    assert main(["links", "--latency-iters", "0", "--db", str(tmp_path / "l.db")]) == 2
    assert "--latency-iters must be >= 1, got 0" in capsys.readouterr().err
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE foo (a)").connection.commit()
    from ccltune.validate.capture import arms_from_db

    with pytest.raises(UsageError, match="^--best-from '.*other.db' is an SQLite database of another program"):
        arms_from_db(str(other), 1, 1, None)


def test_a_rule_file_given_as_a_pipe_is_read_once_and_handed_on_as_a_file(tmp_path, monkeypatch):
    """`validate <(cat rules.conf)`: the workers and NCCL's plugin read the rules again, and only this
    process can read the pipe, once: it becomes a private copy, and the command line names the copy."""
    from ccltune import files

    r, w = os.pipe()
    os.write(w, b"allreduce,0,1K,ring,ll,1,-1,-1\n")
    os.close(w)
    try:
        argv = ["validate", f"/dev/fd/{r}", "--db", "x.db"]
        path, new_argv = files.regular_copy(f"/dev/fd/{r}", "RULES", argv)
    finally:
        os.close(r)
    assert path != f"/dev/fd/{r}" and new_argv == ["validate", path, "--db", "x.db"]
    assert Path(path).read_text() == "allreduce,0,1K,ring,ll,1,-1,-1\n"
    plain = tmp_path / "r.conf"
    plain.write_text("# none\n")
    assert files.regular_copy(str(plain), "RULES", ["x"]) == (str(plain), ["x"])


def test_a_binary_verdict_is_quoted_by_one_short_line(tmp_path, capsys):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 200)
    text = tmp_path / "notes.txt"
    text.write_text("x" * 50_000 + "\nsecond line\n")
    for path in (garbage, text):
        assert main(["tune", "--out", str(tmp_path / "r.conf"), "--exclude-failed", str(path),
                     "--db", str(_db(tmp_path / "t.db"))]) == 2
        err = capsys.readouterr().err
        # short whatever the folder's length (pytest-xdist's tmp_path is longer): the line without the path
        assert str(path) in err and len(err.replace(str(path), "")) < 300 and err.count("\n") == 1, err
