"""Issue 41, items 7-11 (Medium): what import writes must be readable, runs left running by a killed
command, a database edited by hand or carrying its own code, the job judge's inputs (``ccltune ab``), and
text that reaches the terminal. One class per item; each case is the audit's (bench/input_audit.py,
``issue41_medium_cases``), through the command a user runs, in this process."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ccltune.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURE = FIX / "workload" / "capture-h200x4" / "ccltune-capture.vm.1565.efc820a254537a17.0.txt"
PROFILES = sorted((FIX / "workload" / "profile").glob("*.txt"))
INSPECTOR = FIX / "workload" / "inspector" / "gpu01-pid4101.log"
DB = FIX / "bench" / "h200x2-flow.sqlite"


def _error(capsys) -> str:
    """The one error line of a command that failed (no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("ccltune: error:")]
    assert lines, err
    return lines[-1]


class TestImportWritesWhatShowReads:
    """Item 7: a value ``workload show`` refuses is refused by ``workload import`` before it writes, by the
    same checks (workload.model.from_doc): exit 2, the value and the files named, no file written."""

    def _capture(self, tmp_path: Path, *edits: tuple[str, str]) -> Path:
        text = CAPTURE.read_text()
        for pattern, repl in edits:
            text, n = re.subn(pattern, repl, text, count=1, flags=re.M)
            assert n
        path = tmp_path / CAPTURE.name
        path.write_text(text)
        return path

    @pytest.mark.parametrize(("edits", "says"), [
        ([(r",288$", ",1125899906842624"), (r"^calls=911", "calls=1125899906843247")], "calls must be an integer"),
        ([(r"^nnodes=1", "nnodes=0")], "nnodes must be an integer in 1..4, got 0"),
        ([(r"^nnodes=1", "nnodes=9")], "nnodes must be an integer in 1..4, got 9"),
        ([(r"^(reducescatter,201359360),1,", r"\1,4611686018427387904,")], "num_pipe_ops must be an integer"),
    ], ids=["calls 2^50", "nnodes 0", "nnodes 9 of 4", "num_pipe_ops 2^62"])
    def test_capture(self, tmp_path, capsys, edits, says):
        out = tmp_path / "w.json"
        assert main(["workload", "import", str(self._capture(tmp_path, *edits)), "--out", str(out)]) == 2
        line = _error(capsys)
        assert says in line and CAPTURE.name in line and "nothing was written" in line
        assert not out.exists()

    @pytest.mark.parametrize(("old", "new", "says"), [
        ('"coll_msg_size_bytes":262144', '"coll_msg_size_bytes":1000000000000000', "size_bytes must be"),
        ('"coll_msg_size_bytes":262144', '"coll_msg_size_bytes":' + "9" * 400, "size_bytes must be"),
        ('"coll_exec_time_us":42', '"coll_exec_time_us":10000000000000000', "must be a finite number of micro"),
    ], ids=["size 10^15", "size of 400 digits", "time 10^16 us"])
    def test_inspector(self, tmp_path, capsys, old, new, says):
        path, out = tmp_path / INSPECTOR.name, tmp_path / "w.json"
        path.write_text(INSPECTOR.read_text().replace(old, new))
        assert main(["workload", "import", str(path), "--out", str(out)]) == 2
        line = _error(capsys)
        assert says in line and INSPECTOR.name in line and not out.exists()

    @pytest.mark.parametrize(("old", "new"), [("RING LL 16 16 - 8 8", "RING LL 16 16 - 18446744073709551615 8"),
                                              ("AllReduce 131072", "AllReduce 18446744073709551615")],
                             ids=["calls 2^64-1", "count 2^64-1"])
    def test_profiler_file(self, tmp_path, capsys, old, new):
        path, out = tmp_path / PROFILES[0].name, tmp_path / "w.json"
        path.write_text(PROFILES[0].read_text().replace(old, new, 1))
        assert main(["workload", "import", str(path), "--out", str(out)]) == 2
        assert "must be an integer" in _error(capsys) and not out.exists()

    def test_a_good_capture_still_imports_and_shows(self, tmp_path, capsys):
        out = tmp_path / "w.json"
        assert main(["workload", "import", str(CAPTURE), "--out", str(out)]) == 0
        assert main(["workload", "show", str(out)]) == 0
        assert json.loads(out.read_text())["entries"]


NCCLT = FIX / "nccl-tests" / "ar-eager-v2.19.6.txt"
# a command that stores part of a run and is killed (kill -9: no handler runs, the run stays stored as running)
_KILLED = """
import os, signal, sys
from ccltune.store import AbSample, Store
st = Store(sys.argv[1])
src = st.run(1)
env = {k: v for k, v in src.env.items() if k != "processes"}
rid = st.begin_run("import", command="ccltune import (killed)", env=env, args=src.args)
rows = st.measurements(1)
for m in rows:
    m.algo, m.proto, m.config = "ring", "ll", "ring/ll"
    m.time_us = (m.time_us or 1.0) / 10
st.add_measurements(rid, rows[:8])
os.kill(os.getpid(), signal.SIGKILL)
"""


class TestRunsThatNeverEnd:
    """Item 8: every run records its process (host, pid, start time), so a command killed (kill -9, a full
    disk) reads as abandoned on the next open; tune leaves abandoned and failed runs out unless --runs names
    them, and says so."""

    @pytest.fixture
    def db(self, tmp_path, capsys):
        import os
        import subprocess
        import sys

        db = tmp_path / "k.db"
        assert main(["import", "nccl-tests", str(NCCLT), "--db", str(db)]) == 0
        assert main(["import", "nccl-tests", str(NCCLT), "--db", str(db), "--algo", "tree", "--proto", "simple"]) == 0
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
        proc = subprocess.run([sys.executable, "-c", _KILLED, str(db)], env=env, capture_output=True, text=True)
        assert proc.returncode == -9, proc.stderr
        capsys.readouterr()
        return db

    def test_a_killed_import_reads_abandoned(self, db, capsys):
        from ccltune.store import Store

        with Store(db, readonly=True) as st:
            run = st.run(3)
            assert run.status == "abandoned" and "gone" in run.note
            assert set(run.env["processes"]) == {"host", "pids"}
        assert main(["runs", "--db", str(db)]) == 0
        assert re.search(r"^\s+3\s+import\s+abandoned", capsys.readouterr().out, re.M)

    def test_tune_leaves_it_out_unless_asked(self, db, tmp_path, capsys):
        from ccltune.store import Store

        out = tmp_path / "r.conf"
        assert main(["tune", "--db", str(db), "--out", str(out)]) == 0
        said = capsys.readouterr().out
        assert "run(s) 3 (abandoned)" in said and "--runs 3" in said
        with Store(db, readonly=True) as st:
            assert st.runs("tune")[-1].summary["source_runs"] == [1, 2]
        assert main(["tune", "--db", str(db), "--out", str(out), "--runs", "1-3"]) == 0
        with Store(db, readonly=True) as st:
            assert st.runs("tune")[-1].summary["source_runs"] == [1, 2, 3]

    def test_a_reused_pid_does_not_keep_it_running(self, db):
        """The pid recorded may name a later process: its start time differs, so the run is still abandoned."""
        import os
        import sqlite3

        from ccltune.processes import process_start
        from ccltune.store import Store

        con = sqlite3.connect(db)
        env = json.loads(con.execute("SELECT env_json FROM runs WHERE id = 3").fetchone()[0])
        env["processes"]["pids"] = {str(os.getpid()): process_start(os.getpid()) + 1}
        con.execute("UPDATE runs SET env_json = ? WHERE id = 3", (json.dumps(env),))
        con.commit()
        con.close()
        with Store(db, readonly=True) as st:
            assert st.run(3).status == "abandoned"


def _edited_db(tmp_path: Path, sql: str) -> Path:
    """The real sweep database with a doctor run (a finding) and an ab run (arms, samples) added by ccltune's
    own writers, then ``sql`` run on it as someone editing it by hand would."""
    import sqlite3

    from ccltune.store import AbSample, Store

    db = tmp_path / "e.db"
    shutil.copy(DB, db)
    with Store(db) as st:
        d = st.begin_run("doctor", command="ccltune doctor", env={"host": "h"})
        st.add_findings(d, [{"name": "gpu", "status": "PASS", "evidence": "ok", "value": 1.5, "data": {"a": 1}}])
        st.finish_run(d, "complete", {})
        a = st.begin_run("ab", command="ccltune ab", env={"host": "h"})
        st.add_ab_arms(a, {"default": {}, "r": {"rules": "x.conf"}})
        for rnd in range(6):
            for arm in ("default", "r"):
                st.add_ab_sample(a, AbSample(arm, rnd, 0, 10.0 + rnd, "ms", "ok", 0, 1.0, 3, ""))
        st.finish_run(a, "complete", {"seed": 1})
    con = sqlite3.connect(db)
    con.executescript(sql)
    con.commit()
    con.close()
    return db


class TestEditedDatabase:
    """Item 9: a database edited by hand is refused with one line naming the table, row or column (no
    traceback) by runs, report, export and tune; a database carrying a trigger or view is refused before we
    write (ccltune creates none), and every database is opened with trusted_schema off."""

    NEST = "[" * 5000 + "]" * 5000

    @pytest.mark.parametrize(("sql", "argv", "says"), [
        ("DROP TABLE measurements", ["runs"], "table measurements is missing"),
        ("DROP TABLE findings", ["report", "--out", "{tmp}/r.html"], "table findings is missing"),
        ("ALTER TABLE ab_samples DROP COLUMN note", ["runs"], "table ab_samples has no column note"),
        ("UPDATE findings SET data_json = '{bad'", ["export", "4", "--out", "{tmp}/x.json"],
         "findings row 1 (run 4)'s data_json is not a JSON object"),
        (f"UPDATE findings SET data_json = '{NEST}'", ["export", "4", "--out", "{tmp}/x.json"],
         "findings row 1 (run 4)'s data_json is not a JSON object"),
        ("UPDATE ab_samples SET value = 'fast' WHERE id = 1", ["report", "--run", "5", "--out", "{tmp}/r.html"],
         "ab_samples row 1 (run 5) has value = 'fast', not a number"),
        ("UPDATE ab_samples SET wall_s = 'slow' WHERE id = 1", ["report", "--out", "{tmp}/r.html"],
         "ab_samples row 1 (run 5) has wall_s = 'slow'"),
        ("UPDATE findings SET value = 'x'", ["export", "4", "--out", "{tmp}/x.json"], "findings row 1 (run 4) has value"),
        ("UPDATE meta SET value = '³' WHERE key = 'schema_version'", ["tune", "--out", "{tmp}/r.conf"],
         "schema version '³'"),
        ("CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM measurements WHERE run_id != NEW.id; END;",
         ["tune", "--out", "{tmp}/r.conf"], "holds trigger t, which ccltune never creates"),
        ("CREATE VIEW v AS SELECT * FROM runs", ["runs"], "holds view v"),
    ], ids=["dropped table", "dropped findings", "dropped column", "findings invalid JSON", "findings nested 5000",
            "ab_samples value text", "ab_samples wall_s text", "findings value text", "superscript version",
            "trigger", "view"])
    def test_refused_naming_the_place(self, tmp_path, capsys, sql, argv, says):
        db = _edited_db(tmp_path, sql)
        capsys.readouterr()
        argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
        assert main([*argv, "--db", str(db)]) == 2
        assert says in _error(capsys)

    def test_infinity_in_a_value_is_no_figure(self, tmp_path, capsys):
        db = _edited_db(tmp_path, "UPDATE findings SET value = 9e999; UPDATE ab_samples SET value = 9e999 WHERE id = 1")
        out = tmp_path / "x.json"
        assert main(["export", "4", "--db", str(db), "--out", str(out)]) == 0
        assert json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} written"))
        assert main(["report", "--db", str(db), "--out", str(tmp_path / "r.html")]) == 0

    def test_a_pid_of_5000_digits_reads_abandoned(self, tmp_path, capsys):
        import socket

        env = json.dumps({"processes": {"host": socket.gethostname(), "pids": {"9" * 5000: 1}}})
        db = _edited_db(tmp_path, f"UPDATE runs SET status = 'running', env_json = '{env}' WHERE id = 5")
        capsys.readouterr()
        assert main(["runs", "--db", str(db)]) == 0
        assert re.search(r"^\s+5\s+ab\s+abandoned", capsys.readouterr().out, re.M)

    def test_a_trigger_never_runs_on_an_import(self, tmp_path, capsys):
        import sqlite3

        db = _edited_db(tmp_path, "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM measurements; END;")
        assert main(["import", "nccl-tests", str(NCCLT), "--db", str(db)]) == 2
        assert "trigger t" in _error(capsys)
        con = sqlite3.connect(db)
        assert con.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 1428
        con.close()

    def test_opened_with_trusted_schema_off(self, tmp_path):
        from ccltune.store import Store

        with Store(tmp_path / "n.db") as st:
            assert st.conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0


JOB = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_step_job.py")
STEP = r"step +[0-9]+ +([0-9.]+) ms"


class TestJobJudgeInputs:
    """Item 10: ``ccltune ab``'s inputs. The user's --metric REGEX runs in a worker process with a time limit
    per line (ab/output.BoundedRegex: Python's re cannot be interrupted); --env values with control
    characters are refused; every timeout is bounded (a year) before a watchdog is armed; each rules arm's
    file is stored with the run (content, sha256) and a change mid-run stops ab."""

    def test_a_backtracking_metric_is_ended_with_an_error(self, tmp_path, capsys, monkeypatch):
        import sys
        import time

        from ccltune.ab import output
        from ccltune.store import Store

        monkeypatch.setattr(output, "MATCH_S", 1.0)
        start = time.monotonic()
        rc = main(["ab", "--db", str(tmp_path / "ab.db"), "--env", "A=1", "--metric", "(a+)+$", "--rounds", "2",
                   "--", sys.executable, "-c", "print('a' * 60 + 'b')"])
        assert rc == 2 and time.monotonic() - start < 30
        assert "took more than 1 s on one line" in _error(capsys)
        with Store(tmp_path / "ab.db", readonly=True) as st:
            run = st.runs("ab")[-1]
            assert run.status == "failed" and "took more than" in run.summary["error"]

    def test_a_good_metric_still_reads_every_step(self, tmp_path, capsys):
        import sys

        from ccltune.store import Store

        assert main(["ab", "--db", str(tmp_path / "ab.db"), "--env", "FAKE_OTHER=1", "--metric", STEP,
                     "--rounds", "2", "--", sys.executable, JOB]) == 0
        with Store(tmp_path / "ab.db", readonly=True) as st:
            assert all(s.matches > 0 and s.value for s in st.ab_samples(st.runs("ab")[-1].id))

    @pytest.mark.parametrize("value", ["1\n  FAKE=1   5   0   1.0   1.0   faster", "1\rX", "a\x1b[2Jb", "\u202eevil"],
                             ids=["newline", "CR", "escape", "bidi"])
    def test_env_values_with_control_characters_are_refused(self, tmp_path, capsys, value):
        assert main(["ab", "--db", str(tmp_path / "ab.db"), "--env", f"X={value}", "--", "true"]) == 2
        assert "control character" in _error(capsys)
        assert main(["ab", "--db", str(tmp_path / "ab.db"), "--arm", f"a:env:X={value}", "--", "true"]) == 2
        assert "control character" in _error(capsys)

    @pytest.mark.parametrize("argv", [
        ["ab", "--run-timeout", "1e300", "--env", "A=1", "--", "true"],
        ["ab", "--budget", "1e15", "--until-confident", "--env", "A=1", "--", "true"],
        ["bench", "all_reduce", "--timeout", "1e15", "-b", "8", "-e", "8"],
        ["doctor", "--timeout", "1e15"],
    ], ids=["ab --run-timeout 1e300", "ab --budget 1e15", "bench --timeout 1e15", "doctor --timeout 1e15"])
    def test_timeouts_past_a_year_are_refused(self, tmp_path, capsys, argv):
        assert main([*argv[:1], "--db", str(tmp_path / "x.db"), *argv[1:]]) == 2
        assert "at most 31536000 seconds" in _error(capsys)

    def test_bench_minus_t_10_12_is_refused(self, tmp_path, capsys):
        with pytest.raises(SystemExit) as exc:
            main(["bench", "all_reduce", "-T", "1000000000000", "--db", str(tmp_path / "x.db")])
        assert exc.value.code == 2 and "at most 31536000 seconds" in capsys.readouterr().err

    def test_a_rule_file_rewritten_by_the_job_stops_ab(self, tmp_path, capsys):
        import hashlib
        import sys

        from ccltune.store import Store

        rules_path = tmp_path / "r.conf"
        text = "allreduce,0,1024,ring,simple,-1,-1,-1\n"
        rules_path.write_text(text)
        job = ("import os; p = os.environ.get('CCLTUNE_RULES'); "
               "p and open(p, 'a').write('allgather,0,1024,ring,ll,-1,-1,-1\\n'); print('step 1 5.0 ms')")
        rc = main(["ab", "--db", str(tmp_path / "ab.db"), "--rules", str(rules_path), "--metric", STEP,
                   "--rounds", "3", "--", sys.executable, "-c", job])
        assert rc == 2
        line = _error(capsys)
        assert "arm r's rule file" in line and "changed during its run of round" in line
        with Store(tmp_path / "ab.db", readonly=True) as st:
            run = st.runs("ab")[-1]
            assert run.status == "failed"
            arts = st.artifacts(run.id)
            assert arts["rules r"] == text and arts["rules r sha256"] == hashlib.sha256(text.encode()).hexdigest()


BIDI = ("\u202e", "\u2066", "\u2069", "\u200f")


def _clean(text: str) -> None:
    """No lone carriage return and no bidirectional control reaches the terminal."""
    assert not re.search("\r(?!\n)", text), repr(text)
    assert not any(c in text for c in BIDI), repr(text)


class TestTerminalText:
    """Item 11: a carriage return (which overwrote a line of `runs`) and bidirectional controls (U+202E,
    U+2066) from imported names, rule lines, Inspector sources and workload warnings are printed escaped,
    by the one escaping stream every command writes through (cli/_safeout.py); CSV's \\r\\n is kept."""

    def test_a_gpu_name_with_bidi_controls(self, tmp_path, capsys):
        path, db = tmp_path / "t.txt", tmp_path / "t.db"
        path.write_text(NCCLT.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100\u202e\u2066 80GB HBM3"))
        assert main(["import", "nccl-tests", str(path), "--db", str(db)]) == 0
        assert main(["runs", "--db", str(db)]) == 0
        out = capsys.readouterr().out
        _clean(out)
        assert "H100\\u202e\\u2066 80GB" in out

    def test_a_carriage_return_in_a_stored_name(self, tmp_path, capsys):
        import sqlite3

        db = tmp_path / "e.db"
        shutil.copy(DB, db)
        con = sqlite3.connect(db)
        con.execute("UPDATE runs SET platform = 'NVIDIA H200 x2\r  99  sweep  complete', host = 'vm\rX'")
        con.commit()
        con.close()
        assert main(["runs", "--db", str(db)]) == 0
        out = capsys.readouterr().out
        _clean(out)
        assert "x2\\r  99" in out

    def test_a_rule_line_and_an_inspector_source(self, tmp_path, capsys):
        rules_path = tmp_path / "r\u202e.conf"
        rules_path.write_text("allreduce,0,1024,ring\u2066,simple,-1,-1,-1\n")
        main(["plugin", "check", str(rules_path)])
        ins = tmp_path / "gpu01-pid4101\r\u202e.log"
        ins.write_text(INSPECTOR.read_text())
        assert main(["workload", "import", str(ins), "--out", str(tmp_path / "w.json")]) == 0
        out = capsys.readouterr()
        _clean(out.out + out.err)
        assert "ring\\xe2\\x81\\xa6" in out.err and "\\r\\u202e" in out.out

    def test_a_workload_warning(self, tmp_path, capsys):
        w = tmp_path / "w.json"
        assert main(["workload", "import", str(CAPTURE), "--out", str(w)]) == 0
        doc = json.loads(w.read_text())
        doc["warnings"] = ["rank 3\rrank 0 fine \u202eevil"]
        w.write_text(json.dumps(doc))
        capsys.readouterr()
        assert main(["workload", "show", str(w)]) == 0
        out = capsys.readouterr()
        _clean(out.out + out.err)
        assert "rank 3\\rrank 0" in out.out + out.err

    def test_csv_to_stdout_keeps_its_line_ends(self, tmp_path, capsys):
        assert main(["export", "1", "--db", str(DB), "--format", "csv"]) == 0
        out = capsys.readouterr().out
        assert out.count("\r\n") > 100 and "\\r" not in out
