"""nccl-tests import: text table and -J JSON, N/A, #wrong, truncation, concatenated runs, bad values,
the CLI and a tune round trip."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.errors import UsageError
from ccltune.rules import parse_text as parse_rules
from ccltune.store import Store
from ccltune.commconfig import CommConfig
from ccltune.tune.importer import number_reps, parse, parse_json, parse_text

FIX = Path(__file__).parent.parent / "fixtures" / "nccl-tests"
MB = 1 << 20


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_text_table_both_placements():
    [p] = parse_text(read("all_gather_default.txt"), "all_gather_default.txt")
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
    [p] = parse_text(read("all_reduce_perf_nocheck.log"), "x/all_reduce_perf_nocheck.log")
    assert p.collective == "all_reduce" and all(m.wrong is None and m.status == "ok" for m in p.rows)
    assert p.rows[0].op == "sum"


def test_wrong_results_are_stored_as_errors():
    [p] = parse_text(read("all_reduce_wrong.txt"), "all_reduce_wrong.txt")
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
    with pytest.raises(UsageError, match=r"f.txt:16: bad out-of-place time '3o.40': must be a positive number"):
        parse_text(text, "f.txt")


def test_nranks_and_collective_overrides():
    text = "\n".join(line for line in read("all_gather_default.txt").splitlines()
                     if "Rank" not in line and "starting" not in line)
    with pytest.raises(UsageError, match="no '#  Rank N"):
        parse_text(text, "results.txt", collective="all_gather")
    with pytest.raises(UsageError, match="pass --collective"):
        parse_text(text, "results.txt", nranks=4)
    [p] = parse_text(text, "results.txt", nranks=8, collective="allgather")
    assert (p.collective, p.n_ranks) == ("all_gather", 8)
    with pytest.raises(UsageError, match="--nranks 2 but the file lists 4"):
        parse_text(read("all_gather_default.txt"), "f", nranks=2)
    with pytest.raises(UsageError, match="did you mean"):
        parse_text(read("all_gather_default.txt"), "f", collective="all_gathr")


def test_json_output():
    [p] = parse(read("all_gather_ring_ll128.json"), "ag.json", candidate=CommConfig("ring", "ll128", None))
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
    with pytest.raises(UsageError, match=r"ag.json:2: not valid JSON \(Extra data\); several -J files joined"):
        parse_json(text + text, "ag.json")
    with pytest.raises(UsageError, match=r"no 'average_bus_bandwidth'"):
        parse_json(text.replace('"average_bus_bandwidth"', '"x"'), "ag.json")
    with pytest.raises(UsageError, match=r'ag.json: "results\[0\].size" is missing'):
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


# --- several runs in one text file (cat a.txt b.txt) ---


def test_concatenated_runs_keep_their_own_headers():
    """Each block of rows belongs to the header before it: collective, ranks, graph, dtype."""
    ar, ag = parse_text(read("all_reduce_then_all_gather.txt"), "both.txt")
    assert (ar.collective, ar.n_ranks, ar.line, ag.collective, ag.n_ranks, ag.line) == (
        "all_reduce", 2, 1, "all_gather", 4, 19)
    assert {(m.collective, m.n_ranks, m.dtype, m.op, m.graph) for m in ar.rows} == {("all_reduce", 2, "half", "sum", 0)}
    assert {(m.collective, m.n_ranks, m.dtype, m.op, m.graph) for m in ag.rows} == {("all_gather", 4, "float", None, 1)}
    assert (len(ar.rows), len(ag.rows), ar.hosts, ag.gpus) == (6, 8, ["gpu-node-7"], ["NVIDIA H200"] * 4)
    # the same run twice: two runs of one collective, numbered as repetitions
    twice = parse(read("all_gather_default.txt") * 2, "ag2.txt")
    number_reps(twice)
    assert [len(p.rows) for p in twice] == [8, 8] and {m.rep for m in twice[1].rows} == {1}


def test_concatenated_runs_errors():
    both = read("all_reduce_then_all_gather.txt")
    lines = both.splitlines()
    # the first run cut short before its footer: refused, naming its last row
    cut = "\n".join(lines[:14] + lines[18:])
    with pytest.raises(UsageError, match=r"both.txt:14: truncated: no '# Avg bus bandwidth' footer"):
        parse_text(cut, "both.txt")
    # a run without 'Collective test starting' in a file of several: the file name cannot tell
    anon = "\n".join(line for line in lines if "all_gather_perf" not in line)
    with pytest.raises(UsageError, match=r"all_reduce_x.txt:19: no 'Collective test starting' line.*pass --collective"):
        parse_text(anon, "all_reduce_x.txt")
    # --collective that contradicts a header is refused, not stored under the wrong name
    with pytest.raises(UsageError, match=r"both.txt:2: --collective all_gather, but the header says all_reduce_perf"):
        parse_text(both, "both.txt", collective="all_gather")
    # a run that stopped before its table (NCCL failed to start), after a complete one
    with pytest.raises(UsageError, match=r"both.txt:19: no nccl-tests column header"):
        parse_text("\n".join(lines[:29]), "both.txt")


def test_cli_imports_concatenated_runs(tmp_path, capsys):
    db = tmp_path / "c.db"
    both = tmp_path / "both.txt"
    both.write_text(read("all_reduce_then_all_gather.txt"))
    assert main(["import", "nccl-tests", str(both), "--db", str(db)]) == 0
    with Store(db) as st:
        [run] = st.runs("import")
        rows = st.measurements(run.id)
    assert sorted({(m.collective, m.n_ranks, m.dtype, m.size_bytes) for m in rows}) == [
        *[("all_gather", 4, "float", s * MB) for s in (1, 2, 4, 8)],
        *[("all_reduce", 2, "half", s * MB) for s in (1, 2, 4)]]
    out = capsys.readouterr().out
    assert f"{both}:1" in out and f"{both}:19" in out


# --- values nccl-tests never prints ---

ROW = "     1048576         65536     float    none      -1    12.50   83.89   62.91       0    12.10   86.66   64.99       0"


@pytest.mark.parametrize("old, new, message", [
    ("    12.50 ", "      inf ", "bad out-of-place time 'inf': must be a positive number of microseconds"),
    ("    12.50 ", "     -inf ", "bad out-of-place time '-inf': must be a positive number"),
    ("    12.50 ", "    -3.00 ", "bad out-of-place time '-3.00': must be a positive number"),
    ("    12.10 ", "      inf ", "bad in-place time 'inf'"),
    ("     1048576 ", "    -1048576 ", "bad size '-1048576': must be a non-negative integer"),
    ("         65536 ", "        -65536 ", "bad count '-65536': must be a non-negative integer"),
    ("      -1 ", "      -2 ", "bad root '-2': must be -1 or a rank in 0..3"),
    ("      -1 ", "       4 ", "bad root '4': must be -1 or a rank in 0..3"),
    ("   62.91 ", "  -62.91 ", "bad out-of-place busbw '-62.91': must be a non-negative number"),
    ("   83.89 ", "     inf ", "bad out-of-place algbw 'inf': must be a non-negative number"),
    ("   64.99       0", "   64.99     inf", "bad in-place #wrong 'inf': must be a non-negative integer"),
    ("   64.99       0", "   64.99      -1", "bad in-place #wrong '-1': must be a non-negative integer"),
])
def test_impossible_row_values_are_refused(old, new, message):
    assert old in ROW
    text = read("all_gather_default.txt").replace(ROW, ROW.replace(old, new, 1))
    with pytest.raises(UsageError, match=f"^f.txt:14: {message}"):
        parse_text(text, "f.txt")


def test_unmeasured_values_are_stored_as_errors():
    """nan (and N/A) is what nccl-tests prints when it has no value: stored, never feeds a rule."""
    zero = ("           0             0     float    none      -1     0.00    0.00    0.00       0     0.00"
            "    0.00    0.00       0")  # size 0 may round to 0.00 us: possible, but not a time
    nan = ROW.replace("    12.50 ", "      nan ", 1)
    text = read("all_gather_default.txt").replace(ROW, f"{zero}\n{nan}")
    [p] = parse_text(text, "f.txt")
    bad = [(m.size_bytes, m.in_place, m.time_us, m.note) for m in p.rows if m.status != "ok"]
    assert bad == [(0, False, 0.0, "time 0"), (0, True, 0.0, "time 0"), (1 * MB, False, None, "time N/A")]


def test_cli_refuses_impossible_values_and_keeps_what_is_stored(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["import", "nccl-tests", str(FIX / "all_gather_default.txt"), "--db", str(db)]) == 0
    bad = tmp_path / "all_gather_bad.txt"
    text = read("all_gather_default.txt")
    bad.write_text(text.replace(ROW, ROW.replace("    12.50 ", "      inf ", 1)))
    assert main(["import", "nccl-tests", str(bad), "--db", str(db)]) == 2
    bad.write_text(text.replace("     2097152   ", "    -2097152   "))
    assert main(["import", "nccl-tests", str(bad), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:14: bad out-of-place time 'inf'" in err and f"{bad}:15: bad size '-2097152'" in err
    assert "Traceback" not in err
    with Store(db) as st:
        [run] = st.runs()
        assert len(st.measurements(run.id)) == 8


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
    ('{"size":1048576,', "5,{", '"results[0]" must be an object, got 5'),
    ('"size":1048576', '"size":"1048576"', '"results[0].size" must be an integer, got "1048576"'),
    ('"size":1048576', '"size":-1048576', '"results[0].size" must be a non-negative integer, got -1048576'),
    ('"size":1048576', '"size":1048576.5', '"results[0].size" must be an integer, got 1048576.5'),
    ('"count":65536', '"count":true', '"results[0].count" must be an integer, got true'),
    ('"type":"float"', '"type":4', '"results[0].type" must be a string, got 4'),
    ('"redop":"none"', '"redop":null', '"results[0].redop" must be a string, got null'),
    ('"root":"    -1"', '"root":"x"', '"results[0].root" must be -1 or a rank in 0..3, got "x"'),
    ('"root":"    -1"', '"root":9', '"results[0].root" must be -1 or a rank in 0..3, got 9'),
    ('"out_of_place":{', '"out_of_place":[1],"x":{', '"results[0].out_of_place" must be an object or null, got [1]'),
    ('"time":11.900000', '"time":"fast"',
     '"results[0].out_of_place.time" must be a positive number of microseconds, "nan" or null, got "fast"'),
    ('"time":11.900000', '"time":Infinity',
     '"results[0].out_of_place.time" must be a positive number of microseconds, "nan" or null, got Infinity'),
    ('"time":11.900000', '"time":-1.5', '"results[0].out_of_place.time" must be a positive number'),
    ('"time":11.900000', '"time":0', '"results[0].out_of_place.time" must be a positive number'),
    ('"time":11.900000', '"tim":11.9', '"results[0].out_of_place.time" is missing'),
    ('"alg_bw":88.116639', '"alg_bw":-88.1', '"results[0].out_of_place.alg_bw" must be a non-negative number'),
    ('"bus_bw":66.087479', '"bus_bw":"66"', '"results[0].out_of_place.bus_bw" must be a non-negative number'),
    ('"nwrong":0.000000', '"nwrong":-2', '"results[0].out_of_place.nwrong" must be a non-negative integer'),
    ('"nwrong":0.000000', '"nwrong":0.5', '"results[0].out_of_place.nwrong" must be a non-negative integer'),
])
def test_json_wrong_typed_result_fields(old, new, message):
    text = read("all_gather_ring_ll128.json")
    assert old in text
    with pytest.raises(UsageError) as exc:
        parse_json(text.replace(old, new, 1), "ag.json")
    assert str(exc.value).startswith(f"ag.json: {message}")


def test_json_cpu_time_and_collective_conflict():
    doc = json.loads(read("all_gather_ring_ll128.json"))
    for res in doc["results"]:
        for key in ("out_of_place", "in_place"):
            res[key]["cpu_time"] = res[key].pop("time")
    [p] = parse(json.dumps(doc), "ag.json")
    assert p.rows[0].time_us == 11.9
    with pytest.raises(UsageError, match=r"^ag.json: --collective all_reduce, but \"args\[0\]\" says .*all_gather_perf"):
        parse_json(read("all_gather_ring_ll128.json"), "ag.json", collective="all_reduce")


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
    assert main(["import", "nccl-tests", str(FIX / "all_gather_default.txt"), "--db", str(tmp_path / "c.db"),
                 "--collective", "all"]) == 2
    err = capsys.readouterr().err
    assert "unknown collective 'all' in --collective" in err and "did you mean" not in err
    valid = err.split("valid: ", 1)[1].split(";")[0].split("(")[0].strip()
    assert valid.split(", ")[-1] == "sendrecv" and "all" not in valid.split(", ")
    with pytest.raises(UsageError, match=r"did you mean 'all_gather'\?\); valid: all_reduce, .*, sendrecv$"):
        parse_text(read("all_gather_default.txt"), "f", collective="all_gathr")


def test_time_printed_zero_is_kept_unmeasured() -> None:
    """Real nccl-tests 2.19.6 output (one H100, -G 10): one rank's in-place all_reduce is a no-op and
    prints 0.00 us at every size; the file imports, those rows are errors ("time 0"), the others ok."""
    (run,) = parse_text(read("all_reduce_graph_1rank_inplace_zero.txt"), "z.txt")
    inplace = [r for r in run.rows if r.in_place]
    assert [(r.size_bytes, r.status, r.note) for r in inplace] == [(s, "error", "time 0") for s in (8, 256, 8192, 262144)]
    assert [r.time_us for r in run.rows if not r.in_place] == [1.03, 1.22, 1.21, 1.41]
