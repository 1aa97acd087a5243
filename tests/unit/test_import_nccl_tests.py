"""nccl-tests import: text table and -J JSON, N/A, #wrong, truncation, the CLI and a tune round trip."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.errors import UsageError
from ccltune.rules import parse_text as parse_rules
from ccltune.store import Store
from ccltune.tune.derive import Candidate
from ccltune.tune.importer import parse, parse_json, parse_text

FIX = Path(__file__).parent.parent / "fixtures" / "nccl-tests"
MB = 1 << 20


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_text_table_both_placements():
    p = parse_text(read("all_gather_default.txt"), "all_gather_default.txt")
    assert (p.collective, p.n_ranks, p.n_nodes, p.nccl_version) == ("all_gather", 4, 1, "2.28.9")
    assert p.gpus == ["NVIDIA H200"] * 4 and p.hosts == ["gpu-node-7"]
    assert len(p.rows) == 8
    oop = [m for m in p.rows if not m.in_place]
    inp = [m for m in p.rows if m.in_place]
    assert [m.size_bytes for m in oop] == [1 * MB, 2 * MB, 4 * MB, 8 * MB]
    assert (oop[2].time_us, inp[2].time_us, oop[2].busbw_gbps) == (30.4, 29.8, 103.48)
    m = oop[0]
    assert (m.config, m.algo, m.dtype, m.op, m.root, m.count, m.graph, m.wrong, m.status) == (
        "default", None, "float", None, None, 65536, 1, 0, "ok")


def test_na_wrong_is_unchecked_and_collective_from_file_name():
    p = parse_text(read("all_reduce_perf_nocheck.log"), "x/all_reduce_perf_nocheck.log")
    assert p.collective == "all_reduce" and all(m.wrong is None and m.status == "ok" for m in p.rows)
    assert p.rows[0].op == "sum"


def test_wrong_results_are_stored_as_errors():
    p = parse_text(read("all_reduce_wrong.txt"), "all_reduce_wrong.txt")
    bad = [m for m in p.rows if m.status != "ok"]
    assert [(m.size_bytes, m.in_place, m.note) for m in bad] == [(2 * MB, True, "#wrong 12")]


def test_truncated_text_names_file_and_line():
    with pytest.raises(UsageError, match=r"all_gather_truncated.txt:16: expected 13 columns"):
        parse_text(read("all_gather_truncated.txt"), "all_gather_truncated.txt")
    cut = "\n".join(read("all_gather_default.txt").splitlines()[:15])
    with pytest.raises(UsageError, match=r"f.txt:15: truncated: no '# Avg bus bandwidth'"):
        parse_text(cut, "f.txt")


def test_garbage_and_missing_header():
    with pytest.raises(UsageError, match=r"g.txt: no nccl-tests column header"):
        parse_text("# hi\n", "g.txt")
    with pytest.raises(UsageError, match=r"g.txt:1: data before the column header"):
        parse_text("1 2 3\n", "g.txt")
    text = read("all_gather_default.txt").replace("30.40", "3o.40")
    with pytest.raises(UsageError, match=r"f.txt:16: bad number"):
        parse_text(text, "f.txt")


def test_nranks_and_collective_overrides():
    text = "\n".join(line for line in read("all_gather_default.txt").splitlines()
                     if "Rank" not in line and "starting" not in line)
    with pytest.raises(UsageError, match="no '#  Rank N"):
        parse_text(text, "results.txt", collective="all_gather")
    with pytest.raises(UsageError, match="pass --collective"):
        parse_text(text, "results.txt", nranks=4)
    p = parse_text(text, "results.txt", nranks=8, collective="allgather")
    assert (p.collective, p.n_ranks) == ("all_gather", 8)
    with pytest.raises(UsageError, match="--nranks 2 but the file lists 4"):
        parse_text(read("all_gather_default.txt"), "f", nranks=2)
    with pytest.raises(UsageError, match="did you mean"):
        parse_text(read("all_gather_default.txt"), "f", collective="all_gathr")


def test_json_output():
    p = parse(read("all_gather_ring_ll128.json"), "ag.json", candidate=Candidate("ring", "ll128", None))
    assert (p.collective, p.n_ranks, p.nccl_version, p.gpus[0]) == ("all_gather", 4, "2.28.9", "NVIDIA H200")
    assert len(p.rows) == 8
    assert all(m.config == "ring/ll128/default" and m.algo == "ring" for m in p.rows)
    nan = [m for m in p.rows if m.status != "ok"]
    assert [(m.size_bytes, m.in_place, m.note) for m in nan] == [(8 * MB, False, "time N/A")]
    assert [m.wrong for m in p.rows if m.size_bytes == 2 * MB] == [0, None]


def test_truncated_json():
    text = read("all_gather_ring_ll128.json")
    with pytest.raises(UsageError, match=r"ag.json:1: not valid JSON"):
        parse_json(text[:500], "ag.json")
    with pytest.raises(UsageError, match=r"no 'average_bus_bandwidth'"):
        parse_json(text.replace('"average_bus_bandwidth"', '"x"'), "ag.json")
    with pytest.raises(UsageError, match=r"results\[0\]: bad or missing field"):
        parse_json(text.replace('"size":1048576,', ""), "ag.json")


def test_cli_import_then_tune(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["import", "nccl-tests", str(FIX / "all_gather_default.txt"), "--db", str(db)]) == 0
    assert main(["import", "nccl-tests", str(FIX / "all_gather_ring_ll128.json"), "--db", str(db),
                 "--algo", "Ring", "--proto", "LL128"]) == 0
    with Store(db) as st:
        runs = st.runs("import")
        assert [r.platform for r in runs] == ["NVIDIA H200 x4"] * 2
        assert {m.config for m in st.measurements(runs[1].id)} == {"ring/ll128/default"}
    out = tmp_path / "rules.conf"
    assert main(["tune", "--db", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    # single samples need > 10% (5% each side): 1 MB gains 5% (no), 2 MB 10.5% and 4 MB 27% (one
    # merged rule), 8 MB has no candidate time (N/A)
    assert not parse_rules(text).diagnostics
    lo, hi = math.isqrt(1 * MB * 2 * MB) + 1, math.isqrt(4 * MB * 8 * MB)
    assert [line for line in text.splitlines() if line.startswith("allgather")] == [
        f"allgather,{lo},{hi},ring,ll128,-1,1,4,-1,-1"]


def test_cli_import_errors(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["import", "nccl-tests", str(FIX / "all_gather_default.txt"), "--db", str(db), "--algo", "rng"]) == 2
    assert main(["import", "nccl-tests", str(FIX / "all_gather_truncated.txt"), "--db", str(db)]) == 2
    assert main(["import", "nccl-tests", str(tmp_path / "missing.txt"), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'ring'" in err and "all_gather_truncated.txt:16" in err and "missing.txt" in err
    with Store(db) as st:
        assert st.runs() == []  # nothing half-imported
