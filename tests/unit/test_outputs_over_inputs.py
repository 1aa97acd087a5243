"""Issue 41, item 5: an output that is an input, the results database or another output of the same command is
refused before anything runs (one helper, commands.common.check_outputs), and the file is left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

from ccltune.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RULES = FIX / "rules" / "basic.conf"
DB = FIX / "bench" / "h200x2-flow.sqlite"
COLL = FIX / "workload" / "coll-ddp-1gpu.vm.4029.log"
PROFILES = FIX / "workload" / "profile-ddp-2"


class TestAnOutputOverAnInput:
    def _refused(self, capsys, argv: list[str], victim: Path, words: str) -> None:
        before = victim.read_bytes()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and "choose another file" in err and "Traceback" not in err
        assert victim.read_bytes() == before

    def test_ab_prune_onto_the_database(self, tmp_path, capsys):
        db = tmp_path / "d.db"
        shutil.copy(DB, db)
        self._refused(capsys, ["ab", "--rules", str(RULES), "--prune", str(db), "--db", str(db), "--", "true"], db,
                      "is the results database (--db)")

    def test_ab_prune_onto_its_json(self, tmp_path, capsys):
        p = tmp_path / "P"
        p.write_text("mine\n")
        self._refused(capsys, ["ab", "--rules", str(RULES), "--prune", str(p), "--json", str(p), "--db",
                               str(tmp_path / "x.db"), "--", "true"], p, "is the output")

    def test_tune_out_onto_its_workload(self, tmp_path, capsys):
        w = tmp_path / "w.json"
        assert main(["workload", "import", str(COLL), "--out", str(w)]) == 0
        db = tmp_path / "d.db"
        shutil.copy(DB, db)
        capsys.readouterr()
        self._refused(capsys, ["tune", "--db", str(db), "--workload", str(w), "--out", str(w)], w,
                      "is the input --workload")

    def test_workload_import_out_onto_a_file_of_its_input_folder(self, tmp_path, capsys):
        folder = tmp_path / "prof"
        shutil.copytree(PROFILES, folder)
        victim = sorted(folder.iterdir())[0]
        self._refused(capsys, ["workload", "import", str(folder), "--out", str(victim)], victim, "is the input FILE")

    def test_a_new_file_beside_the_inputs_is_fine(self, tmp_path):
        folder = tmp_path / "prof"
        shutil.copytree(PROFILES, folder)
        assert main(["workload", "import", str(folder), "--out", str(folder / "w.json")]) == 0
