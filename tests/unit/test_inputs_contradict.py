"""Issue 41, item 2: contradictory files are refused or the contradiction named, per file and line. Real
fixtures (tests/fixtures: workload, nvbandwidth, logs; READMEs there) spoiled one way each."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
from pathlib import Path

from ccltune.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
PROFILES = FIX / "workload" / "profile-ddp-4"
NVB = FIX / "nvbandwidth"
LOG = FIX / "logs" / "nccl_4gpu_p2p.log"


def _err(capsys) -> str:
    got = capsys.readouterr()
    assert "Traceback" not in got.err
    return got.out + got.err


class TestContradictoryFiles:
    def test_a_profiler_file_whose_nranks_disagrees_with_its_communicator(self, tmp_path, capsys):
        folder = tmp_path / "p"
        shutil.copytree(PROFILES, folder)
        last = sorted(folder.glob("ccltune-profile.*.txt"))[-1]
        last.write_text(last.read_text().replace(" nranks 4 ", " nranks 8 ", 1))
        assert main(["workload", "import", str(folder), "--out", str(tmp_path / "w.json")]) == 2
        err = _err(capsys)
        # the paths may be shortened for the terminal (a long temp folder): the line and both counts are said
        assert ":2: nranks 8" in err and "says nranks 4" in err and "contradict each other" in err
        assert not (tmp_path / "w.json").exists()

    def test_two_nvbandwidth_outputs_of_two_hosts_in_one_file(self, tmp_path, capsys):
        text = (NVB / "h100_4gpu.txt").read_text()
        both = tmp_path / "both.txt"
        both.write_text(text + text.replace("h100-node-07", "node-99"))
        assert main(["import", "nvbandwidth", str(both), "--db", str(tmp_path / "d.db")]) == 2
        assert "a second nvbandwidth run begins here" in _err(capsys)

    def test_a_testcase_listed_twice(self, tmp_path, capsys):
        doc = json.loads((NVB / "h100_4gpu.json").read_text())
        cases = doc["nvbandwidth"]["testcases"]
        cases.append(dict(cases[0]))
        f = tmp_path / "twice.json"
        f.write_text(json.dumps(doc))
        assert main(["import", "nvbandwidth", str(f), "--db", str(tmp_path / "d.db")]) == 2
        assert "is listed a second time" in _err(capsys)
        text = (NVB / "h100_4gpu.txt").read_text()
        a, b = text.index("Running device_to_device_memcpy_read_ce."), text.index("SUM device_to_device_memcpy_read_ce")
        f = tmp_path / "twice.txt"
        f.write_text(text + "\n" + text[a:text.index("\n", b) + 1].replace("388.95", "100.00"))
        assert main(["import", "nvbandwidth", str(f), "--db", str(tmp_path / "d.db")]) == 2
        assert "runs a second time (first at line" in _err(capsys)

    def test_a_doctor_log_of_another_host_is_stored_as_that_host(self, tmp_path, capsys):
        other = "node-99" if socket.gethostname() != "node-99" else "node-98"
        log = tmp_path / "other.log"
        log.write_text(LOG.read_text().replace("vm:", f"{other}:"))
        db = tmp_path / "d.db"
        assert main(["doctor", "--nccl-log", str(log), "--db", str(db)]) == 0
        assert f"is a log of {other}, not of this host" in _err(capsys)
        assert sqlite3.connect(db).execute("SELECT host FROM runs").fetchall() == [(other,)]

    def test_a_rank_on_another_nccl_version_fails_the_version_check(self, tmp_path, capsys):
        lines = LOG.read_text().splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if "[3] NCCL INFO NCCL version" in ln)
        lines[at] = lines[at].replace("2.28.9", "2.18.1")
        log = tmp_path / "mixed.log"
        log.write_text("".join(lines))
        assert main(["doctor", "--nccl-log", str(log), "--db", str(tmp_path / "d.db")]) == 1
        out = _err(capsys)
        assert "FAIL    log:version" in out and "2.18.1+cuda13.0 (vm:7845, line" in out
        assert "PASS    log:version" not in out

    def test_one_ranks_clock_far_ahead_is_named_not_a_wait_of_zero(self, tmp_path, capsys):
        folder = tmp_path / "p"
        shutil.copytree(PROFILES, folder)
        last = sorted(folder.glob("ccltune-profile.*.txt"))[-1]
        out = []
        for ln in last.read_text().splitlines(keepends=True):
            if ln.startswith("call "):
                _, seq, entry, start, end = ln.split()
                ln = f"call {seq} {entry} {int(start) + 10**12} {int(end) + 10**12}\n"  # 1000 s ahead
            out.append(ln)
        last.write_text("".join(out))
        wl, same = tmp_path / "w.json", tmp_path / "same.json"
        assert main(["workload", "import", str(PROFILES), "--out", str(same)]) == 0
        _err(capsys)
        assert main(["workload", "import", str(folder), "--out", str(wl)]) == 0
        err = _err(capsys)
        assert "(rank 3) stands +1e+03 s from the others'" in err
        # lined up by the RING calls' ends: the waits are those of the untouched files, not 0.0 nor 1000 s
        def waits(path):
            return [e.get("wait_us_median") for e in json.loads(path.read_text())["entries"]]
        # the same up to where the timers' reference falls (the median rank's end moves with the shifted rank)
        assert any(waits(wl)) and [w is None for w in waits(wl)] == [w is None for w in waits(same)]
        assert all(abs(a - b) <= max(5.0, 0.02 * b) for a, b in zip(waits(wl), waits(same)) if b is not None)
