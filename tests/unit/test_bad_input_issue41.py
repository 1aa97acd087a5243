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
