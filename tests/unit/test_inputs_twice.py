"""Issue 41, item 1: the same data given twice is counted once, however it is named (a copy, a gzipped copy, a
folder and its file, a folder given twice), with one line saying what was left out. Real fixtures
(tests/fixtures/workload, README there)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from ccltune.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
COLL = FIX / "coll-ddp-1gpu.vm.4029.log"
TRACE = FIX / "trace_rank0.json"
CAPTURE = sorted((FIX / "capture-fsdp2-4").glob("*.txt"))[0]
INSPECTOR = FIX / "inspector" / "gpu01-pid4101.log"
PROFILES = FIX / "profile-ddp-2"
FORCED = FIX / "profile-ddp-tree-4"


def _import(tmp: Path, *files: Path | str) -> tuple[int, int | None]:
    out = tmp / "w.json"
    assert main(["workload", "import", *map(str, files), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    return sum(e["calls"] for e in doc["entries"]), doc.get("steps")


class TestTheSameDataTwice:
    def _twice(self, tmp_path: Path, capsys, first: Path, second: Path | str) -> None:
        once = _import(tmp_path, first)
        capsys.readouterr()
        assert _import(tmp_path, first, second) == once
        err = capsys.readouterr().err
        assert err.count("left out, the same data given twice") == 1 and Path(second).name in err

    def test_a_coll_log_and_its_copy(self, tmp_path, capsys):
        copy = tmp_path / "rank0-again.log"
        shutil.copy(COLL, copy)
        self._twice(tmp_path, capsys, COLL, copy)

    def test_a_coll_log_and_its_gzip(self, tmp_path, capsys):
        gz = tmp_path / "coll.log.gz"
        gz.write_bytes(gzip.compress(COLL.read_bytes()))
        self._twice(tmp_path, capsys, COLL, gz)

    def test_a_coll_log_copied_with_a_line_more_is_the_same_process(self, tmp_path, capsys):
        edited = tmp_path / "edited.log"
        edited.write_text("# copied from the cluster\n" + COLL.read_text())
        self._twice(tmp_path, capsys, COLL, edited)

    def test_a_torch_trace_and_its_copy(self, tmp_path, capsys):
        copy = tmp_path / "trace_rank0-copy.json"
        shutil.copy(TRACE, copy)
        self._twice(tmp_path, capsys, TRACE, copy)

    def test_a_capture_and_its_copy_under_another_header_comment(self, tmp_path, capsys):
        lines = CAPTURE.read_text().splitlines(keepends=True)
        copy = tmp_path / "cap.txt"
        copy.write_text(lines[0] + "# copied\n" + "".join(lines[1:]))
        self._twice(tmp_path, capsys, CAPTURE, copy)

    def test_an_inspector_file_twice(self, tmp_path, capsys):
        copy = tmp_path / "insp.log"
        shutil.copy(INSPECTOR, copy)
        self._twice(tmp_path, capsys, INSPECTOR, copy)

    def test_a_profiler_folder_twice_and_a_copy_of_its_file(self, tmp_path, capsys):
        self._twice(tmp_path, capsys, PROFILES, PROFILES)
        copy = tmp_path / "p"
        shutil.copytree(PROFILES, copy)
        first = sorted(copy.iterdir())[0]
        shutil.copy(first, copy / first.name.replace(".txt", ".copy.txt"))
        capsys.readouterr()
        assert _import(tmp_path, copy) == _import(tmp_path, PROFILES)

    def test_plugin_verify_profile_counts_a_copied_file_once(self, tmp_path, capsys):
        folder = tmp_path / "forced"
        shutil.copytree(FORCED, folder)
        first = sorted(folder.glob("ccltune-profile.*.txt"))[0]
        shutil.copy(first, folder / first.name.replace(".txt", ".again.txt"))
        assert main(["plugin", "verify", str(FORCED / "force.conf"), "--profile", str(folder)]) == 0
        out = capsys.readouterr().out
        assert "NCCL ran TREE/SIMPLE/4ch x144" in out and "left out, the same data given twice" in out
