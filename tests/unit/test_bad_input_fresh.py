"""The second fresh audit of issue 32 (bench/input_audit.py, docs/limits.md "A fresh audit"), as fast tests:
each reader of a file or a database gets a bomb (a sparse 1 GiB file: refused by its size before a byte is
read), a FIFO (refused without blocking: an alarm ends the test if it blocks), a wrong type and an
out-of-range or huge number, through the command a user runs, in this process. A clear error is exit 2 (or
the command's own code) with one line naming the file; never a traceback, a hang or a value stored that no
real run holds."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from ccltune.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
NCCLT = FIX / "nccl-tests" / "ar-eager-v2.19.6.txt"
NVB_JSON = FIX / "nvbandwidth" / "h100_4gpu.json"
TRACE = FIX / "workload" / "trace_rank0.json"
PROFILE = sorted((FIX / "workload" / "profile-ddp-2").glob("*.txt"))[0]  # real (README there)
DB = FIX / "bench" / "h200x2-flow.sqlite"


@pytest.fixture
def alarm():
    """A reader that blocks (a FIFO opened for reading waits for a writer) fails the test instead of hanging."""
    def ring(signum, frame):
        raise AssertionError("blocked for 10 s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.err


# (argv with {f} for the input and {d} for the case's folder; the input's name)
READERS = {
    "nccl-tests text": (["import", "nccl-tests", "{f}", "--db", "{d}/o.db"], "in.txt"),
    "nvbandwidth": (["import", "nvbandwidth", "{f}", "--db", "{d}/o.db"], "in.json"),
    "transferbench": (["import", "transferbench", "{f}", "--db", "{d}/o.db"], "in.txt"),
    "workload import": (["workload", "import", "{f}", "--out", "{d}/w.json"], "in.log"),
    "workload show": (["workload", "show", "{f}"], "w.json"),
    "rules explain": (["rules", "explain", "{f}", "--nranks", "8"], "r.conf"),
    "plugin check": (["plugin", "check", "{f}"], "r.conf"),
    "runs (a database)": (["runs", "--db", "{f}"], "x.db"),
}


def _argv(reader: str, folder: Path) -> tuple[list[str], Path]:
    argv, name = READERS[reader]
    f = folder / name
    return [a.replace("{f}", str(f)).replace("{d}", str(folder)) for a in argv], f


@pytest.mark.parametrize("reader", READERS)
def test_a_sparse_gigabyte_is_refused_by_its_size_before_it_is_read(reader, tmp_path, capsys):
    argv, f = _argv(reader, tmp_path)
    with open(f, "wb") as fh:
        fh.truncate(1 << 30)   # 1 GiB of zeros that take no disk: read whole, it would take the memory
    rc, err = _run(argv, capsys)
    assert rc == 2 and str(f) in err and err.count("ccltune: error:") == 1, err


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_is_refused_without_waiting_for_a_writer(reader, tmp_path, capsys, alarm):
    argv, f = _argv(reader, tmp_path)
    os.mkfifo(f)
    rc, err = _run(argv, capsys)
    assert rc == 2 and str(f) in err and ("FIFO" in err or "not a regular file" in err or "device" in err), err


def test_an_nvbandwidth_device_list_of_the_wrong_type_is_named(tmp_path, capsys):
    """Before: TypeError ('int' object is not iterable) with a traceback."""
    data = json.loads(NVB_JSON.read_text())
    data["nvbandwidth"]["GPU Device list"] = 7
    f = tmp_path / "n.json"
    f.write_text(json.dumps(data))
    rc, err = _run(["import", "nvbandwidth", str(f), "--db", str(tmp_path / "o.db")], capsys)
    assert rc == 2 and "'GPU Device list' is int, not a list" in err and not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("value", [1.5, True, "7", [2], None, 10**30, -5])
def test_trace_element_counts_must_be_whole_numbers_in_range(value, tmp_path, capsys):
    """Before: 'In msg nelems': 1.5 was imported as a 1-element call (int() of a float), True as 1."""
    data = json.loads(TRACE.read_text())
    event = next(e for e in data["traceEvents"] if isinstance(e.get("args"), dict) and "In msg nelems" in e["args"])
    event["args"]["In msg nelems"] = value
    f = tmp_path / "t.json"
    f.write_text(json.dumps(data))
    rc, err = _run(["workload", "import", str(f), "--out", str(tmp_path / "w.json")], capsys)
    assert rc == 2 and str(f) in err and not (tmp_path / "w.json").exists(), err


@pytest.mark.parametrize("column, value, message", [
    (9, "x", "calls 'x' is not an integer"),
    (2, "1" + "0" * 30, "is not an integer in [0, 18446744073709551615]"),
    (13, "-3.0", "is not a non-negative decimal number of microseconds"),
    (11, "inf", "is not a non-negative decimal number of microseconds"),
])
def test_profiler_file_cells_of_the_wrong_type_or_range_are_named_with_the_line(column, value, message, tmp_path,
                                                                                 capsys):
    lines = PROFILE.read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("coll "))
    cells = lines[i].split()
    cells[column] = value
    lines[i] = " ".join(cells)
    f = tmp_path / PROFILE.name
    f.write_text("\n".join(lines) + "\n")
    rc, err = _run(["workload", "import", str(f), "--out", str(tmp_path / "w.json")], capsys)
    assert rc == 2 and f"{f}:{i + 1}:" in err and message in err, err


@pytest.mark.parametrize("sql", [
    "UPDATE measurements SET time_us = 9e999, busbw_gbps = -9e999 WHERE id <= 3",   # inf and -inf stored
    "UPDATE measurements SET busbw_gbps = 'fast' WHERE id = 1",
])
def test_a_report_of_a_database_with_impossible_values_draws_the_rest(sql, tmp_path, capsys):
    db = tmp_path / "x.db"
    shutil.copyfile(DB, db)
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()
    rc, err = _run(["report", "--db", str(db), "--out", str(tmp_path / "r.html")], capsys)
    page = (tmp_path / "r.html").read_text()
    assert rc == 0 and "<svg" in page and "nan," not in page and "inf," not in page, err


def test_a_rule_size_past_64_bits_is_refused_as_the_plugin_refuses_it(tmp_path, capsys):
    f = tmp_path / "r.conf"
    f.write_text("allreduce,0,1180591620717411303424,ring,simple,4,1,8,-1,-1\n")
    rc, err = _run(["plugin", "check", str(f)], capsys)
    assert rc == 1 and "does not fit in 64 bits" in err, err


@pytest.mark.parametrize("text, message", [
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested deeper than the parser's limit"),
    ('{"sizes": 5}', "'int' object is not iterable"),
    ('{"results": []}', "no 'sizes' key"),
])
def test_a_verdict_that_is_not_one_says_why_in_words(text, message, tmp_path):
    """tune --exclude-failed: before, the reason was a repr of the exception ('UsageError(\"...\")', 'KeyError')."""
    from ccltune.commands import tune as tune_cli
    from ccltune.errors import UsageError

    f = tmp_path / "v.json"
    f.write_text(text)
    with pytest.raises(UsageError) as err:
        tune_cli.failed_sizes([str(f)])
    assert message in str(err.value) and "Error(" not in str(err.value) and str(f) in str(err.value)
