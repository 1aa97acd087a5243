"""The status words (ccltune.status): each written value is a member of its Enum, files of any ccltune read
back as members, and no module outside status.py compares a status to a literal of its own."""

from __future__ import annotations

import ast
import json
import sqlite3
from pathlib import Path

import pytest

import ccltune
import source_trees
from ccltune.cli import main
from ccltune.status import RowStatus, RuleCheck, RunStatus, SampleStatus, Verdict
from ccltune.store import AbSample, Measurement, Store

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ROOT = Path(ccltune.__file__).parent
# the status column of each table, and the vocabulary it holds
COLUMNS = {"runs": RunStatus, "measurements": RowStatus, "findings": Verdict, "ab_samples": SampleStatus}


def _statuses(db: Path) -> dict[str, set[str]]:
    conn = sqlite3.connect(db)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {t: {r[0] for r in conn.execute(f"SELECT DISTINCT status FROM {t}")} for t in COLUMNS if t in tables}
    finally:
        conn.close()


def _assert_members(db: Path) -> dict[str, set[str]]:
    found = _statuses(db)
    for table, words in found.items():
        for w in words:
            COLUMNS[table].parse(w, f"{db.name}: {table}.status")  # raises on a word outside the vocabulary
    return found


def test_a_member_is_its_text_in_every_output():
    assert f"{Verdict.PASS}|{RowStatus.OK:>4}|{RunStatus.FAILED!s}" == "PASS|  ok|failed"
    assert json.dumps({"status": RuleCheck.NOT_APPLIED}) == '{"status": "NOT APPLIED"}'
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (s TEXT)")
    conn.execute("INSERT INTO t VALUES (?)", (RunStatus.COMPLETE,))
    assert conn.execute("SELECT s, typeof(s) FROM t").fetchone() == ("complete", "text")
    assert RowStatus("ok") is RowStatus.OK and Verdict.FAIL.failing and not Verdict.WARN.failing


def test_the_parse_error_names_the_word_and_where():
    with pytest.raises(ValueError, match=r"x.db:3: verdict 'PASSED' is not one of PASS, WARN, FAIL, WAIVED, ERROR"):
        Verdict.parse("PASSED", "x.db:3")


@pytest.mark.parametrize("db", sorted((FIX / "bench").glob("*.sqlite")), ids=lambda p: p.name)
def test_databases_of_earlier_versions_read_as_members(db):
    found = _assert_members(db)
    assert found["runs"] and found["measurements"]


def test_validate_files_of_earlier_versions_read_as_members():
    for path in sorted((FIX / "bench").glob("*-validate.json")):
        v = json.loads(path.read_text())
        Verdict.parse(v["status"], path.name)
        assert {Verdict.parse(s["status"], path.name) for s in v["sizes"]} <= {Verdict.PASS, Verdict.FAIL, Verdict.ERROR}
        assert set(v["counts"]) <= set(Verdict)


def test_every_status_the_commands_write_is_a_member(tmp_path):
    """Real writers, in process: import (runs, measurements, ok and error rows) and doctor (findings)."""
    db = tmp_path / "r.db"
    assert main(["import", "nccl-tests", str(FIX / "nccl-tests" / "ncclt-2.19.0_all_reduce_h200x4_wrong.txt"),
                 "--db", str(db)]) == 0
    out = tmp_path / "doctor.json"
    assert main(["doctor", "--nccl-log", str(FIX / "logs" / "nccl_4gpu_shm.log"), "--db", str(db),
                 "--json", str(out)]) == 1  # the log has NCCL_P2P_DISABLE=1: a FAIL
    found = _assert_members(db)
    assert found["runs"] == {"complete"} and {"ok", "error"} <= found["measurements"]
    assert {"PASS", "WARN", "FAIL"} <= found["findings"]
    report = json.loads(out.read_text())
    assert Verdict.parse(report["status"], out.name) is Verdict.FAIL
    assert {Verdict.parse(f["status"], out.name) for f in report["checks"]} == found["findings"]


def test_the_store_refuses_a_word_outside_the_vocabulary(tmp_path):
    with Store(tmp_path / "r.db") as st:
        run = st.begin_run("bench", command="test")
        row = Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, status="fine")
        with pytest.raises(ValueError, match="'fine' is not one of ok, skipped"):
            st.add_measurements(run, [row])
        with pytest.raises(ValueError, match="'done'"):
            st.finish_run(run, "done")
        with pytest.raises(ValueError, match="'OK'"):
            st.add_findings(run, [{"name": "x", "status": "OK", "evidence": ""}])
        with pytest.raises(ValueError, match="'passed'"):
            st.add_ab_sample(run, AbSample("a", 0, 0, None, "s", "passed", None, 0.0))
        st.finish_run(run, RunStatus.COMPLETE)
    assert _statuses(tmp_path / "r.db") == {"runs": {"complete"}, "measurements": set(), "findings": set(),
                                            "ab_samples": set()}


# Words of other programs that happen to spell one of ours: NCCL's log levels (diagnose/parsers read them)
_THEIRS = ("diagnose/parsers/",)
_WORDS = {m.value for cls in (Verdict, RowStatus, RunStatus, RuleCheck) for m in cls}


def _literal_words(node: ast.AST) -> list[str]:
    """The status words spelled as literals in a comparison operand (a string, or a tuple/list/set of them)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and n.value in _WORDS]


def _offences(path: Path, label: str) -> list[str]:
    """'label:line: word' for each status literal compared, passed as status= or assigned to .status."""
    out = []
    for node in source_trees.nodes(path):
        if isinstance(node, ast.Compare):  # '"error" in record' asks for a key, not a status
            keyed = isinstance(node.ops[0], (ast.In, ast.NotIn))
            operands = [*([] if keyed else [node.left]), *node.comparators]
        elif isinstance(node, ast.keyword) and node.arg in ("status", "bad_status"):
            operands = [node.value]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "status"
                                                  for t in node.targets):
            operands = [node.value]
        else:
            continue
        out += [(o.lineno, o.col_offset, w) for o in operands for w in _literal_words(o)]
    return [f"{label}:{line}: {w!r}" for line, _, w in sorted(out)]


def test_no_module_spells_a_status_word_of_its_own():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if path.name != "status.py" and not rel.startswith(_THEIRS):
            found += _offences(path, rel)
    assert not found, "compare to ccltune.status's members, not to literals:\n" + "\n".join(found)


def test_the_scan_sees_a_literal(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("if row.status == 'ok' or x in ('PASS', 'WARN') or 'error' in d:\n    run.status = 'failed'\nf(status='FAIL')\n")
    assert _offences(bad, "bad.py") == ["bad.py:1: 'ok'", "bad.py:1: 'PASS'", "bad.py:1: 'WARN'", "bad.py:2: 'failed'",
                                        "bad.py:3: 'FAIL'"]
