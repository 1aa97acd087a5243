"""ccltune runs and ccltune export on a real SQLite file."""

from __future__ import annotations

import csv
import io
import json

from ccltune.cli import main
from ccltune.store import Measurement, Store


def _db(tmp_path):
    db = tmp_path / "r.db"
    with Store(db) as st:
        rid = st.begin_run("bench", command="ccltune bench all_reduce", env={"world_size": 2, "platform": "cpu x2"})
        st.add_measurements(rid, [Measurement("all_reduce", 8, 2, "float", "sum", None, True, 2, time_us=10.0,
                                              algbw_gbps=0.0008, busbw_gbps=0.0008, wrong=0)])
        st.finish_run(rid, "complete")
    return db


def test_runs_lists_every_run(tmp_path, capsys):
    db = _db(tmp_path)
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "bench" in out and "complete" in out and "cpu x2" in out and "ccltune bench all_reduce" in out


def test_export_json_and_csv(tmp_path, capsys):
    db = _db(tmp_path)
    assert main(["export", "1", "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["env"]["world_size"] == 2 and doc["records"][0]["time_us"] == 10.0
    out = tmp_path / "r.csv"
    assert main(["export", "latest", "--format", "csv", "--db", str(db), "--out", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert rows[0]["collective"] == "all_reduce" and rows[0]["run_id"] == "1"


def test_export_errors_name_the_run_and_the_database(tmp_path, capsys):
    db = _db(tmp_path)
    assert main(["export", "7", "--db", str(db)]) == 2
    assert "no run 7" in capsys.readouterr().err
    assert main(["export", "seven", "--db", str(db)]) == 2
    assert "'seven'" in capsys.readouterr().err
    assert main(["runs", "--db", str(tmp_path / "missing.db")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()
