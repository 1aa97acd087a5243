"""nccl-tests import: text table and -J JSON, N/A, #wrong, truncation, concatenated runs, bad values,
the CLI and a tune round trip."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.commconfig import CommConfig
from ccltune.errors import UsageError
from ccltune.ncclt import number_reps, parse, parse_json, parse_text
from ccltune.rules import parse_text as parse_rules
from ccltune.store import Store

FIX = Path(__file__).parent.parent / "fixtures" / "nccl-tests"
MB = 1 << 20
# real outputs (tests/fixtures/nccl-tests/README.md names each one's run)
AG = "ncclt-2.19.0_all_gather_h200x4.txt"  # 4 H200s, one host, -G 10, 16-256 MB
AG_CUT = "ncclt-2.19.0_all_gather_h200x4_cut.txt"  # AG cut inside its line 16
AR_WRONG = "ncclt-2.19.0_all_reduce_h200x4_wrong.txt"  # a real output, one #wrong cell edited (header line)
BOTH = "ncclt-cat_all_reduce_h200x4_all_gather_h100.txt"  # cat of two real outputs
NOCHECK = "v2.19.6/ar-nocheck-mem-v2.19.6.txt"  # -c 0 -M 1, one H100
JSON = "v2.19.6/ar-v2.19.6.json"  # -J of all_reduce_perf -b 8 -e 1M -f 32, one H100


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_text_table_both_placements():
    [p] = parse_text(read(AG), AG)
    assert (p.collective, p.n_ranks, p.n_nodes, p.nccl_version) == ("all_gather", 4, 1, "2.28.9")
    assert p.gpus == ["NVIDIA H200"] * 4 and p.hosts == ["vm"]
    assert len(p.rows) == 10
    oop = [m for m in p.rows if not m.in_place]
    inp = [m for m in p.rows if m.in_place]
    assert [m.size_bytes for m in oop] == [16 * MB, 32 * MB, 64 * MB, 128 * MB, 256 * MB]
    assert (oop[2].time_us, inp[2].time_us, oop[2].busbw_gbps) == (170.11, 165.9, 295.88)
    m = oop[0]
    assert (m.config, m.algo, m.dtype, m.op, m.root, m.count, m.graph, m.wrong, m.status) == (
        "default", None, "float", None, None, 1048576, 1, 0, "ok")  # graph: 10 -> graph mode 1


def test_na_wrong_is_unchecked_and_collective_from_file_name():
    [p] = parse_text(read(NOCHECK), "ar-nocheck-mem-v2.19.6.txt")
    assert p.collective == "all_reduce" and len(p.rows) == 8
    assert all(m.wrong is None and m.status == "ok" for m in p.rows) and p.rows[0].op == "sum"
    # nccl-tests 2.13 prints no "Collective test starting" line: the file name tells the collective
    text = read("ar-eager-v2.13.13.txt")
    assert "Collective test starting" not in text
    [p] = parse_text(text, "x/all_reduce_perf.log")
    assert p.collective == "all_reduce" and p.rows[0].op == "sum"


def test_wrong_results_are_stored_as_errors():
    [p] = parse_text(read(AR_WRONG), AR_WRONG)
    bad = [m for m in p.rows if m.status != "ok"]
    assert [(m.size_bytes, m.in_place, m.note) for m in bad] == [(2 * MB, True, "#wrong 12")]


def test_truncated_text_names_file_and_line():
    with pytest.raises(UsageError, match=rf"{AG_CUT}:16: expected 13 columns"):
        parse_text(read(AG_CUT), AG_CUT)
    cut = "\n".join(read(AG).splitlines()[:15])
    with pytest.raises(UsageError, match=r"f.txt:15: truncated: no '# Avg bus bandwidth'"):
        parse_text(cut, "f.txt")


def test_garbage_and_missing_header():
    with pytest.raises(UsageError, match=r"g.txt: no nccl-tests column header"):
        parse_text("# hi\n", "g.txt")
    with pytest.raises(UsageError, match=r"g.txt:1: data before the column header"):
        parse_text("1 2 3\n", "g.txt")
    text = read(AG).replace("170.11", "17o.11")
    with pytest.raises(UsageError, match=r"f.txt:16: bad out-of-place time '17o.11': must be a positive number"):
        parse_text(text, "f.txt")


def test_nranks_and_collective_overrides():
    text = "\n".join(line for line in read(AG).splitlines()
                     if "Rank" not in line and "starting" not in line)
    with pytest.raises(UsageError, match="no '#  Rank N"):
        parse_text(text, "results.txt", collective="all_gather")
    with pytest.raises(UsageError, match="pass --collective"):
        parse_text(text, "results.txt", nranks=4)
    [p] = parse_text(text, "results.txt", nranks=8, collective="allgather")
    assert (p.collective, p.n_ranks) == ("all_gather", 8)
    with pytest.raises(UsageError, match="--nranks 2 but the file lists 4"):
        parse_text(read(AG), "f", nranks=2)
    with pytest.raises(UsageError, match="did you mean"):
        parse_text(read(AG), "f", collective="all_gathr")


def test_json_output():
    [p] = parse(read(JSON), "ar.json", candidate=CommConfig("ring", "ll128", None))
    assert (p.collective, p.n_ranks, p.nccl_version, p.gpus) == ("all_reduce", 1, "2.28.9", ["NVIDIA H100 80GB HBM3"])
    assert [m.size_bytes for m in p.rows] == [8, 8, 256, 256, 8192, 8192, 262144, 262144]
    assert all(m.config == "ring/ll128/default" and m.algo == "ring" for m in p.rows)
    assert all(m.status == "ok" and m.wrong == 0 for m in p.rows)
    assert [(m.in_place, m.time_us) for m in p.rows[-2:]] == [(False, 7.9184), (True, 0.8651)]


def test_json_nan_and_unchecked():
    """util.cu writes a NaN value as "nan" and #wrong as null under -c 0; the real file has neither, so
    both are made here from it: an unmeasured point is stored as an error, an unchecked one as ok."""
    text = read(JSON)
    last = '"time":7.918400,"alg_bw":33.105678,"bus_bw":0.000000'
    assert text.count(last) == 1
    [p] = parse(text.replace(last, '"time":"nan","alg_bw":"nan","bus_bw":"nan"'), "ar.json")
    assert [(m.size_bytes, m.in_place, m.note) for m in p.rows if m.status != "ok"] == [(262144, False, "time N/A")]
    [p] = parse(text.replace('"nwrong":0.000000', '"nwrong":null'), "ar.json")
    assert len(p.rows) == 8 and all(m.wrong is None and m.status == "ok" for m in p.rows)


def test_truncated_json():
    text = read(JSON)
    assert not text.endswith("\n")  # the real file ends at its "}", no newline: `cat a b` joins on one line
    with pytest.raises(UsageError, match=r"ar.json:1: not valid JSON"):
        parse_json(text[:500], "ar.json")
    with pytest.raises(UsageError, match=r"ar.json:1: not valid JSON \(Extra data\); several -J files joined"):
        parse_json(text + text, "ar.json")
    with pytest.raises(UsageError, match=r"ar.json:2: not valid JSON \(Extra data\); several -J files joined"):
        parse_json(text + "\n" + text, "ar.json")
    with pytest.raises(UsageError, match=r"no 'average_bus_bandwidth'"):
        parse_json(text.replace('"average_bus_bandwidth"', '"x"'), "ar.json")
    with pytest.raises(UsageError, match=r'ar.json: "results\[0\].size" is missing'):
        parse_json(text.replace('"size":8,', "", 1), "ar.json")


def test_cli_import_then_tune(tmp_path, capsys):
    """Two real all_reduce_perf runs on one H100, sizes 8 B-256 KB: the -J run imported as NCCL's default,
    the -c 0 run as ring/ll128 (what --algo/--proto assert; that run itself set no NCCL_ALGO)."""
    db = tmp_path / "c.db"
    assert main(["import", "nccl-tests", str(FIX / JSON), "--db", str(db)]) == 0
    assert main(["import", "nccl-tests", str(FIX / NOCHECK), "--db", str(db), "--algo", "Ring", "--proto", "LL128"]) == 0
    with Store(db) as st:
        runs = st.runs("import")
        assert [r.platform for r in runs] == ["NVIDIA H100 80GB HBM3 x1"] * 2
        assert {m.config for m in st.measurements(runs[0].id)} == {"default"}
        assert {m.config for m in st.measurements(runs[1].id)} == {"ring/ll128/default"}
    out = tmp_path / "rules.conf"
    assert main(["tune", "--db", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    # out-of-place, single samples: 8 B is slower (7.76 against 7.32 us); 256 B, 8 KB and 256 KB are
    # 27%, 16% and 14% faster (one merged rule, up to the largest measured size)
    assert not parse_rules(text).diagnostics
    assert [line for line in text.splitlines() if line.startswith("allreduce")] == [
        f"allreduce,{math.isqrt(8 * 256) + 1},262144,ring,ll128,-1,1,1,-1,-1"]


def test_cli_import_errors(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["import", "nccl-tests", str(FIX / AG), "--db", str(db), "--algo", "rng"]) == 2
    assert main(["import", "nccl-tests", str(FIX / AG_CUT), "--db", str(db)]) == 2
    assert main(["import", "nccl-tests", str(tmp_path / "missing.txt"), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'ring'" in err and f"{AG_CUT}:16" in err and "missing.txt" in err
    with Store(db) as st:
        assert st.runs() == []  # nothing half-imported


# --- several runs in one text file (cat a.txt b.txt) ---


def test_concatenated_runs_keep_their_own_headers():
    """Each block of rows belongs to the header before it: collective, ranks, graph, GPUs (a 4-H200
    -G 10 all_reduce, then a 1-H100 eager all_gather, as `cat a b` joins them)."""
    ar, ag = parse_text(read(BOTH), "both.txt")
    assert (ar.collective, ar.n_ranks, ar.line, ag.collective, ag.n_ranks, ag.line) == (
        "all_reduce", 4, 1, "all_gather", 1, 25)
    assert {(m.collective, m.n_ranks, m.dtype, m.op, m.graph) for m in ar.rows} == {("all_reduce", 4, "float", "sum", 1)}
    assert {(m.collective, m.n_ranks, m.dtype, m.op, m.graph) for m in ag.rows} == {("all_gather", 1, "float", None, 0)}
    assert (len(ar.rows), len(ag.rows), ar.hosts, ag.hosts) == (10, 8, ["vm"], ["vm"])
    assert (ar.gpus, ag.gpus) == (["NVIDIA H200"] * 4, ["NVIDIA H100 80GB HBM3"])
    # the same run twice: two runs of one collective, numbered as repetitions
    twice = parse(read(AG) * 2, "ag2.txt")
    number_reps(twice)
    assert [len(p.rows) for p in twice] == [10, 10] and {m.rep for m in twice[1].rows} == {1}


def test_concatenated_runs_errors():
    both = read(BOTH)
    lines = both.splitlines()
    assert lines[17].startswith("    16777216 ") and lines[24].startswith("# nccl-tests version 2.19.6")
    # the first run cut short before its footer (lines 19-23): refused, naming its last row
    cut = "\n".join(lines[:18] + lines[23:])
    with pytest.raises(UsageError, match=r"both.txt:18: truncated: no '# Avg bus bandwidth' footer"):
        parse_text(cut, "both.txt")
    # a run without 'Collective test starting' in a file of several: the file name cannot tell
    anon = "\n".join(line for line in lines if "all_gather_perf" not in line)
    with pytest.raises(UsageError, match=r"all_reduce_x.txt:25: no 'Collective test starting' line.*pass --collective"):
        parse_text(anon, "all_reduce_x.txt")
    # --collective that contradicts a header is refused, not stored under the wrong name
    with pytest.raises(UsageError, match=r"both.txt:2: --collective all_gather, but the header says all_reduce_perf"):
        parse_text(both, "both.txt", collective="all_gather")
    # a run that stopped before its table (NCCL failed to start), after a complete one
    assert "out-of-place" in lines[31]  # line 32: the second run's table starts
    with pytest.raises(UsageError, match=r"both.txt:25: no nccl-tests column header"):
        parse_text("\n".join(lines[:31]), "both.txt")


def test_cli_imports_concatenated_runs(tmp_path, capsys):
    """One GPU model: the file's runs are one import. BOTH's 4-H200 all_reduce then AG (4 H200s), as
    `cat` joins them; BOTH itself (H200 then H100) is refused whole, naming the two models."""
    db = tmp_path / "c.db"
    both = tmp_path / "both.txt"
    both.write_text("".join(read(BOTH).splitlines(keepends=True)[:24]) + read(AG))
    assert main(["import", "nccl-tests", str(both), "--db", str(db)]) == 0
    with Store(db) as st:
        [run] = st.runs("import")
        rows = st.measurements(run.id)
    assert run.platform == "NVIDIA H200 x4"
    assert sorted({(m.collective, m.n_ranks, m.dtype, m.size_bytes) for m in rows}) == [
        *[("all_gather", 4, "float", s * MB) for s in (16, 32, 64, 128, 256)],
        *[("all_reduce", 4, "float", s * MB) for s in (1, 2, 4, 8, 16)]]
    out = capsys.readouterr().out
    assert f"{both}:1" in out and f"{both}:25" in out
    assert main(["import", "nccl-tests", str(FIX / BOTH), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "different GPU models (NVIDIA H100 80GB HBM3, NVIDIA H200)" in err and "Traceback" not in err
    with Store(db) as st:
        assert len(st.runs()) == 1


# --- values nccl-tests never prints ---

ROW = ("    16777216       1048576     float    none      -1    59.41  282.38  211.79       0    56.61  296.35"
       "  222.26       0")  # line 14 of AG


@pytest.mark.parametrize("old, new, message", [
    ("    59.41 ", "      inf ", "bad out-of-place time 'inf': must be a positive number of microseconds"),
    ("    59.41 ", "     -inf ", "bad out-of-place time '-inf': must be a positive number"),
    ("    59.41 ", "    -3.00 ", "bad out-of-place time '-3.00': must be a positive number"),
    ("    56.61 ", "      inf ", "bad in-place time 'inf'"),
    ("    16777216 ", "   -16777216 ", "bad size '-16777216': must be a non-negative integer"),
    ("       1048576 ", "      -1048576 ", "bad count '-1048576': must be a non-negative integer"),
    ("      -1 ", "      -2 ", "bad root '-2': must be -1 or a rank in 0..3"),
    ("      -1 ", "       4 ", "bad root '4': must be -1 or a rank in 0..3"),
    ("  211.79 ", " -211.79 ", "bad out-of-place busbw '-211.79': must be a non-negative number"),
    ("  282.38 ", "     inf ", "bad out-of-place algbw 'inf': must be a non-negative number"),
    ("  222.26       0", "  222.26     inf", "bad in-place #wrong 'inf': must be a non-negative integer"),
    ("  222.26       0", "  222.26      -1", "bad in-place #wrong '-1': must be a non-negative integer"),
])
def test_impossible_row_values_are_refused(old, new, message):
    assert old in ROW and ROW in read(AG)
    text = read(AG).replace(ROW, ROW.replace(old, new, 1))
    with pytest.raises(UsageError, match=f"^f.txt:14: {message}"):
        parse_text(text, "f.txt")


def test_unmeasured_values_are_stored_as_errors():
    """nan (and N/A) is what nccl-tests prints when it has no value: stored, never feeds a rule."""
    zero = ("           0             0     float    none      -1     0.00    0.00    0.00       0     0.00"
            "    0.00    0.00       0")  # size 0 may round to 0.00 us: possible, but not a time
    nan = ROW.replace("    59.41 ", "      nan ", 1)
    text = read(AG).replace(ROW, f"{zero}\n{nan}")
    [p] = parse_text(text, "f.txt")
    bad = [(m.size_bytes, m.in_place, m.time_us, m.note) for m in p.rows if m.status != "ok"]
    assert bad == [(0, False, 0.0, "time 0"), (0, True, 0.0, "time 0"), (16 * MB, False, None, "time N/A")]


def test_cli_refuses_impossible_values_and_keeps_what_is_stored(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["import", "nccl-tests", str(FIX / AG), "--db", str(db)]) == 0
    bad = tmp_path / "all_gather_bad.txt"
    text = read(AG)
    bad.write_text(text.replace(ROW, ROW.replace("    59.41 ", "      inf ", 1)))
    assert main(["import", "nccl-tests", str(bad), "--db", str(db)]) == 2
    bad.write_text(text.replace("    33554432   ", "   -33554432   "))
    assert main(["import", "nccl-tests", str(bad), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:14: bad out-of-place time 'inf'" in err and f"{bad}:15: bad size '-33554432'" in err
    assert "Traceback" not in err
    with Store(db) as st:
        [run] = st.runs()
        assert len(st.measurements(run.id)) == 10


# --- -J JSON with wrong-typed fields ---

TAIL = '"results":[{"size":8}],"average_bus_bandwidth":1'


@pytest.mark.parametrize("head, message", [
    ('"args":{"a":1}', '"args" must be a list of strings, got {"a": 1}'),
    ('"args":["all_reduce_perf"],"config":[1]', '"config" must be an object, got [1]'),
    ('"config":{"devices":[{"rank":"x"}]}', '"config.devices[0].rank" must be an integer, got "x"'),
    ('"config":{"graph":"yes","devices":[{"rank":0}]}', '"config.graph" must be an integer, got "yes"'),
    ('"args":[3]', '"args[0]" must be a string, got 3'),
    ('"config":{"devices":"gpu0"}', '"config.devices" must be a list, got "gpu0"'),
    ('"config":{"devices":[7]}', '"config.devices[0]" must be an object, got 7'),
    ('"config":{"devices":[{"rank":-1,"hostname":"h"}]}', '"config.devices[0].rank" must be a non-negative integer, got -1'),
    ('"config":{"devices":[{"rank":0}]}', '"config.devices[0].hostname" is missing'),
    ('"config":{"devices":[{"rank":0,"hostname":["h"]}]}', '"config.devices[0].hostname" must be a string, got ["h"]'),
    ('"config":{"devices":[{"rank":0,"hostname":"h","device_info":1}]}',
     '"config.devices[0].device_info" must be a string, got 1'),
    ('"nccl_version":"2.28.9"', '"nccl_version" must be an integer, got "2.28.9"'),
])
def test_json_wrong_typed_header_fields(head, message):
    with pytest.raises(UsageError) as exc:
        parse_json(f"{{{head},{TAIL}}}", "x.json")
    assert str(exc.value) == f"x.json: {message}"


@pytest.mark.parametrize("old, new, message", [
    ('{"size":8,', "5,{", '"results[0]" must be an object, got 5'),
    ('"size":8,', '"size":"8",', '"results[0].size" must be an integer, got "8"'),
    ('"size":8,', '"size":-8,', '"results[0].size" must be a non-negative integer, got -8'),
    ('"size":8,', '"size":8.5,', '"results[0].size" must be an integer, got 8.5'),
    ('"count":2,', '"count":true,', '"results[0].count" must be an integer, got true'),
    ('"type":"float"', '"type":4', '"results[0].type" must be a string, got 4'),
    ('"redop":"sum"', '"redop":null', '"results[0].redop" must be a string, got null'),
    ('"root":"    -1"', '"root":"x"', '"results[0].root" must be -1 or a rank in 0..0, got "x"'),
    ('"root":"    -1"', '"root":1', '"results[0].root" must be -1 or a rank in 0..0, got 1'),
    ('"out_of_place":{', '"out_of_place":[1],"x":{', '"results[0].out_of_place" must be an object or null, got [1]'),
    ('"time":7.321250', '"time":"fast"',
     '"results[0].out_of_place.time" must be a positive number of microseconds, "nan" or null, got "fast"'),
    ('"time":7.321250', '"time":Infinity',
     '"results[0].out_of_place.time" must be a positive number of microseconds, "nan" or null, got Infinity'),
    ('"time":7.321250', '"time":-1.5', '"results[0].out_of_place.time" must be a positive number'),
    ('"time":7.321250', '"time":0', '"results[0].out_of_place.time" must be a positive number'),
    ('"time":7.321250', '"tim":7.3', '"results[0].out_of_place.time" is missing'),
    ('"alg_bw":0.001093', '"alg_bw":-0.001', '"results[0].out_of_place.alg_bw" must be a non-negative number'),
    ('"bus_bw":0.000000', '"bus_bw":"0"', '"results[0].out_of_place.bus_bw" must be a non-negative number'),
    ('"nwrong":0.000000', '"nwrong":-2', '"results[0].out_of_place.nwrong" must be a non-negative integer'),
    ('"nwrong":0.000000', '"nwrong":0.5', '"results[0].out_of_place.nwrong" must be a non-negative integer'),
])
def test_json_wrong_typed_result_fields(old, new, message):
    text = read(JSON)
    assert old in text
    with pytest.raises(UsageError) as exc:
        parse_json(text.replace(old, new, 1), "ar.json")
    assert str(exc.value).startswith(f"ar.json: {message}")


def test_json_cpu_time_and_collective_conflict():
    doc = json.loads(read(JSON))
    for res in doc["results"]:
        for key in ("out_of_place", "in_place"):
            res[key]["cpu_time"] = res[key].pop("time")
    [p] = parse(json.dumps(doc), "ar.json")
    assert p.rows[0].time_us == 7.32125
    with pytest.raises(UsageError, match=r"^ar.json: --collective all_gather, but \"args\[0\]\" says .*all_reduce_perf"):
        parse_json(read(JSON), "ar.json", collective="all_gather")


def test_cli_json_type_errors_exit_2(tmp_path, capsys):
    db = tmp_path / "c.db"
    for i, head in enumerate(['"args":{"a":1}', '"args":["all_reduce_perf"],"config":[1]',
                              '"config":{"devices":[{"rank":"x"}]}', '"config":{"graph":"yes","devices":[{"rank":0}]}']):
        f = tmp_path / f"x{i}.json"
        f.write_text(f"{{{head},{TAIL}}}")
        assert main(["import", "nccl-tests", str(f), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("ccltune: error:") == 4
    assert f'{tmp_path / "x2.json"}: "config.devices[0].rank" must be an integer, got "x"' in err


# --- --collective ---


def test_collective_all_is_not_offered(tmp_path, capsys):
    assert main(["import", "nccl-tests", str(FIX / AG), "--db", str(tmp_path / "c.db"),
                 "--collective", "all"]) == 2
    err = capsys.readouterr().err
    assert "unknown collective 'all' in --collective" in err and "did you mean" not in err
    valid = err.split("valid: ", 1)[1].split(";")[0].split("(")[0].strip()
    assert valid.split(", ")[-1] == "sendrecv" and "all" not in valid.split(", ")
    with pytest.raises(UsageError, match=r"did you mean 'all_gather'\?\); valid: all_reduce, .*, sendrecv$"):
        parse_text(read(AG), "f", collective="all_gathr")


def test_time_printed_zero_is_kept_unmeasured() -> None:
    """Real nccl-tests 2.19.6 output (one H100, -G 10): one rank's in-place all_reduce is a no-op and
    prints 0.00 us at every size; the file imports, those rows are errors ("time 0"), the others ok."""
    (run,) = parse_text(read("all_reduce_graph_1rank_inplace_zero.txt"), "z.txt")
    inplace = [r for r in run.rows if r.in_place]
    assert [(r.size_bytes, r.status, r.note) for r in inplace] == [(s, "error", "time 0") for s in (8, 256, 8192, 262144)]
    assert [r.time_us for r in run.rows if not r.in_place] == [1.03, 1.22, 1.21, 1.41]
