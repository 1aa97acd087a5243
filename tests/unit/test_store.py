"""The results database: runs, measurements, and errors that name the --db path."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ccltune.errors import UsageError
from ccltune.store import SCHEMA_VERSION, AbSample, Measurement, Store


def _m(size, in_place=False, **kw):
    base = dict(collective="all_reduce", size_bytes=size, count=size // 4, dtype="float", op="sum", root=None,
                in_place=in_place, n_ranks=2, time_us=10.5, algbw_gbps=size / 10.5 / 1e3,
                busbw_gbps=size / 10.5 / 1e3, wrong=0)
    base.update(kw)
    return Measurement(**base)


ENV = {"world_size": 2, "n_nodes": 1, "launcher": "torchrun", "host": "h0", "platform": "cpu",
       "ccltune_version": "0.1.0", "nccl_version": None, "variables": {"NCCL_DEBUG": "INFO"}}


def test_run_round_trip(tmp_path):
    db = tmp_path / "r.db"
    with Store(db) as st:
        rid = st.begin_run("bench", command="ccltune bench all", env=ENV, args={"iters": 3}, engine="gloo")
        assert st.run(rid).status == "running"
        rows = [_m(8), _m(8, True), _m(64, status="waived", time_us=None, algbw_gbps=None, busbw_gbps=None,
                                      wrong=None, note="no in-place form")]
        st.add_measurements(rid, rows)
        st.finish_run(rid, "complete", {"rows": 3, "wrong": 0})
    with Store(db, create=False) as st:   # everything was committed
        run = st.run(rid)
        assert (run.kind, run.status, run.command, run.engine) == ("bench", "complete", "ccltune bench all", "gloo")
        assert (run.world_size, run.launcher, run.host) == (2, "torchrun", "h0")
        assert run.env["variables"] == {"NCCL_DEBUG": "INFO"}
        assert run.args == {"iters": 3} and run.summary == {"rows": 3, "wrong": 0}
        assert run.finished_at is not None
        assert st.measurements(rid) == rows
        assert st.measurements(rid, in_place=True) == [rows[1]]
        assert st.measurements(rid, status="waived")[0].note == "no in-place form"


def test_rows_are_committed_as_they_are_added(tmp_path):
    """A crash loses nothing already measured: another connection sees each row at once."""
    db = tmp_path / "r.db"
    st = Store(db)
    rid = st.begin_run("bench", command="c")
    st.add_measurements(rid, [_m(8)])
    other = sqlite3.connect(db)
    assert other.execute("SELECT count(*) FROM measurements").fetchone()[0] == 1
    assert other.execute("SELECT status FROM runs").fetchone()[0] == "running"
    other.close()
    st.close()


def test_runs_listing_by_kind_and_latest(tmp_path):
    with Store(tmp_path / "r.db") as st:
        a = st.begin_run("bench", command="a")
        b = st.begin_run("sweep", command="b")
        c = st.begin_run("bench", command="c")
        assert [r.id for r in st.runs()] == [a, b, c]
        assert [r.id for r in st.runs("bench")] == [a, c]
        st.add_measurements(a, [_m(8)])
        st.add_measurements(c, [_m(16), _m(32)])
        assert [m.size_bytes for m in st.measurements([a, c])] == [8, 16, 32]
        assert [m.size_bytes for m in st.measurements(c)] == [16, 32]


def test_unknown_run_names_the_runs_there(tmp_path):
    with Store(tmp_path / "r.db") as st:
        for _ in range(3):
            st.begin_run("bench", command="x")
        with pytest.raises(UsageError, match=r"no run 9; runs in .*: 1-3"):
            st.run(9)


def test_bad_status_and_column_are_rejected(tmp_path):
    with Store(tmp_path / "r.db") as st:
        rid = st.begin_run("bench", command="x")
        with pytest.raises(ValueError, match="run status must be one of"):
            st.finish_run(rid, "done")
        with pytest.raises(ValueError, match="unknown measurement column 'sizes'"):
            st.measurements(rid, sizes=8)


def test_missing_folder_is_a_usage_error_naming_the_path(tmp_path):
    path = tmp_path / "nowhere" / "r.db"
    with pytest.raises(UsageError, match="folder of database .*nowhere.* does not exist"):
        Store(path)
    assert not path.parent.exists()


def test_missing_file_without_create(tmp_path):
    with pytest.raises(UsageError, match=r"does not exist \(--db\)"):
        Store(tmp_path / "r.db", create=False)
    assert not (tmp_path / "r.db").exists()


def test_a_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are not the results you are looking for\n" * 100)
    with pytest.raises(UsageError, match="is not a usable ccltune database"):
        Store(path)


def test_reopen_run_marks_a_finished_run_running_again(tmp_path):
    with Store(tmp_path / "r.db") as st:
        rid = st.begin_run("sweep", command="ccltune sweep")
        st.finish_run(rid, "interrupted")
        st.reopen_run(rid)
        run = st.run(rid)
        assert run.status == "running" and run.finished_at is None


def test_a_version_1_file_is_read_as_it_is_and_gains_extra_when_written(tmp_path):
    """A database written before schema 2 (no measurements.extra): read-only it reads with extra None
    and is not changed; opened to write it gains the column, every old row as it was."""
    import shutil
    from pathlib import Path
    src = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "iters-s-each-0.sqlite"
    db = tmp_path / "old.db"
    shutil.copy(src, db)
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
    assert "extra" not in {r[1] for r in con.execute("PRAGMA table_info(measurements)")}
    con.close()
    before = db.read_bytes()
    with Store(db, readonly=True) as st:
        old = st.measurements()
        assert st.ab_samples(1) == []  # no ab tables yet: no ab run either
    assert old and all(m.extra is None for m in old) and db.read_bytes() == before
    with Store(db) as st:
        assert st.measurements() == old
        rid = st.begin_run("bench", command="t")
        st.add_measurements(rid, [_m(8, extra={"cpu_time_us": 3.5, "per_iter": {"times_us": [1.0, 2.0]}})])
        assert st.measurements(rid)[0].extra == {"cpu_time_us": 3.5, "per_iter": {"times_us": [1.0, 2.0]}}
        assert st.measurement_rows([rid])[0]["extra"]["cpu_time_us"] == 3.5
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"ab_arms", "ab_samples"} <= tables  # schema 3 (ccltune ab) comes with the write
    con.close()


def test_ab_samples_come_back_as_stored_and_a_number_column_holding_text_names_the_row(tmp_path):
    db = tmp_path / "r.db"
    s = AbSample("NCCL_TOPO_FILE=/a/path", 1, 0, 12.5, "ms", "ok", 0, 3.25, 40, "")
    with Store(db) as st:
        rid = st.begin_run("ab", command="ccltune ab")
        st.add_ab_arms(rid, {"default": {}, s.arm: {"env": {"NCCL_TOPO_FILE": "/a/path"}}})
        st.add_ab_sample(rid, s)
        failed = AbSample("default", 1, 1, None, "ms", "failed", 1, 0.5, 0, "exit code 1")
        st.add_ab_sample(rid, failed)
    with Store(db, readonly=True) as st:
        assert st.ab_samples(rid) == [s, failed]
    con = sqlite3.connect(db)  # edited by hand: text in a number column (issue 41 item 9)
    con.execute("UPDATE ab_samples SET value = 'x', round = 'y' WHERE note = 'exit code 1'")
    con.commit()
    con.close()
    with Store(db, readonly=True) as st, pytest.raises(UsageError, match="ab_samples row 2"):
        st.ab_samples(rid)


def test_extra_that_is_not_a_json_object_names_the_row(tmp_path):
    db = tmp_path / "r.db"
    with Store(db) as st:
        rid = st.begin_run("bench", command="t")
        st.add_measurements(rid, [_m(8)])
    con = sqlite3.connect(db)
    con.execute("UPDATE measurements SET extra = '{broken'")
    con.commit()
    con.close()
    with Store(db, readonly=True) as st, pytest.raises(UsageError, match=r"measurements row 1 \(run 1\) has extra = "):
        st.measurements()


def test_an_unknown_run_is_answered_with_the_runs_there_are_as_ranges(tmp_path):
    with Store(tmp_path / "r.db") as st:
        for _ in range(5):
            st.begin_run("bench", command="x")
        st.conn.execute("DELETE FROM runs WHERE id = 3")
        with pytest.raises(UsageError, match=r"no run 9; runs in '.*r\.db': 1-2, 4-5$"):
            st.run(9)


def test_no_module_but_the_store_writes_sql():
    """One owner of the schema (issue 40 item 2): every query is a Store method; a module that reaches for
    ``.conn`` to run its own SQL fails here (store.py owns the records and queries, storefile.py the tables)."""
    import ast

    src = Path(__file__).resolve().parents[2] / "src" / "ccltune"
    found = []
    for path in sorted(src.rglob("*.py")):
        if path.name in ("store.py", "storefile.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "conn":
                found.append(f"{path.relative_to(src)}:{node.lineno}")
    assert not found, "SQL outside the store: " + ", ".join(found)
