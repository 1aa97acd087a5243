"""ccltune check: profiles, gates, monotonicity, JUnit, the CLI on a bench JSON (CPU only)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import xml.etree.ElementTree as ET

import pytest

from ccltune.cli import main
from ccltune.diagnose.checks import gates, profiles
from ccltune.diagnose.findings import exit_code
from ccltune.diagnose.probes import benchrun
from ccltune.errors import UsageError

M = 1 << 20


def _records(points: dict[int, float], *, in_place: bool = True, collective: str = "all_reduce") -> list[dict]:
    return [{"collective": collective, "size_bytes": s, "in_place": in_place, "busbw_gbps": bw,
             "algbw_gbps": bw / 1.5, "time_us": s / (bw / 1.5) / 1e3, "n_ranks": 4, "graph": 0, "status": "ok"}
            for s, bw in points.items()]


def _bench_json(tmp_path, points, world_size=4, name="bench.json"):
    recs = _records(points) + _records({s: 1.0 for s in points}, in_place=False)  # out-of-place must be ignored
    env = {"world_size": world_size, "engine": "nccl", "launcher": "torchrun", "platform": "NVIDIA H200 x4"}
    path = tmp_path / name
    path.write_text(json.dumps({"env": env, "records": recs}))
    return path


GOOD = {64 * M: 300.0, 128 * M: 320.0, 256 * M: 335.0, 512 * M: 346.0, 1024 * M: 350.0}


def test_builtin_profiles_load_with_vendor_figures():
    names = profiles.builtin_names()
    assert {"h200-4", "mi300x-8", "mi350x-8", "mi355x-8"} <= set(names)
    mi300 = profiles.load_profile("mi300x-8")
    assert (mi300.world_size, mi300.gates[0].size_bytes, mi300.gates[0].min_value) == (8, 8 << 30, 304.0)
    assert profiles.load_profile("mi355x-8").gates[0].min_value == 350.0
    h200 = profiles.load_profile("h200-4")
    # measured by ccltune on 4 x H200 (docs/performance.md): no longer provisional
    assert not h200.provisional and h200.gates[0].size_bytes == 512 * M and h200.gates[0].min_value == 340.0


def test_unknown_profile_says_did_you_mean():
    with pytest.raises(UsageError, match="did you mean 'h200-4'"):
        profiles.load_profile("h200-44")


@pytest.mark.parametrize("body, message", [
    ('name = "x"\nworld_size = 4\n', "at least one"),
    ('name = "x"\nworld_size = 4\n[[gate]]\ncollective = "all_reduce"\nsize = "1M"\nmni = 3\n', "did you mean 'min'"),
    ('name = "x"\nworld_size = "4"\n[[gate]]\ncollective = "a"\nsize = "1M"\nmin = 1\n', "wrong type"),
    ('name = "x"\nworld_size = 4\n[[gate]]\ncollective = "a"\nsize = "1Q"\nmin = 1\n', "not a size"),
    ('name = "x"\nworld_size = 4\n[[gate]]\ncollective = "a"\nsize = "1M"\nmin = 1\nmetric = "busbw"\n', "metric"),
    ("name = [\n", "not valid TOML"),
])
def test_bad_user_profiles_are_rejected_with_the_file_and_key(tmp_path, body, message):
    p = tmp_path / "mine.toml"
    p.write_text(body)
    with pytest.raises(UsageError, match=message) as info:
        profiles.load_profile(str(p))
    assert "mine.toml" in str(info.value)


_PROFILE = 'name = "x"\nworld_size = 4\n[[gate]]\ncollective = "all_reduce"\nsize = "512M"\nmin = 1.0\n'
_MONO = '[monotonic]\ncollective = "all_reduce"\nfrom_size = "64M"\n'


@pytest.mark.parametrize("extra, table, key, expected", [
    (_MONO + 'tolerance = "abc"\n', "[monotonic]", "tolerance", "a number"),
    (_MONO + 'in_place = "no"\n', "[monotonic]", "in_place", "a boolean"),  # "no" was read as true
    (_MONO + "in_place = 0\n", "[monotonic]", "in_place", "a boolean"),
    ('[bench]\nstep_factor = "x"\n', "[bench]", "step_factor", "an integer"),
    ("[bench]\nstep_factor = 2.5\n", "[bench]", "step_factor", "an integer"),  # was cut to 2
    ('[bench]\niters = "20"\n', "[bench]", "iters", "an integer"),
    ("[bench]\nwarmup = true\n", "[bench]", "warmup", "an integer"),
    ("[bench]\nmax_bytes = 1.5\n", "[bench]", "max_bytes", "a string or an integer"),
    ('provisional = "no"\n', "", "provisional", "a boolean"),
    ("description = 3\n", "", "description", "a string"),
    ("gpu_match = true\n", "", "gpu_match", "a string"),
])
def test_every_profile_key_is_type_checked_naming_file_table_and_key(tmp_path, extra, table, key, expected):
    body = _PROFILE + extra if table else extra + _PROFILE  # top-level keys go before the first table
    p = tmp_path / "mine.toml"
    p.write_text(body)
    with pytest.raises(UsageError, match="wrong type") as info:
        profiles.load_profile(str(p))
    msg = str(info.value)
    assert msg.startswith(str(p) + ": " + (table + ": " if table else "")), msg
    assert f"'{key}'" in msg and f"expected {expected}" in msg


@pytest.mark.parametrize("line, message", [
    ('in_place = "no"', "'in_place' has the wrong type"), ("name = 5", "'name' has the wrong type"),
    ('metric = 3', "'metric' has the wrong type"), ("min = nan", "'min' must be a finite number"),
    ('min = "340"', "'min' has the wrong type"),
])
def test_gate_keys_are_type_checked(tmp_path, line, message):
    p = tmp_path / "mine.toml"
    base = _PROFILE.replace("min = 1.0\n", "") if line.startswith("min ") else _PROFILE
    p.write_text(base + line + "\n")
    with pytest.raises(UsageError, match=message) as info:
        profiles.load_profile(str(p))
    assert f"{p}: [[gate]] 1: " in str(info.value)


@pytest.mark.parametrize("extra, message", [
    ("[bench]\nstep_factor = 1\n", "'step_factor' must be >= 2"), ("[bench]\niters = 0\n", "'iters' must be >= 1"),
    ("[bench]\nwarmup = -1\n", "'warmup' must be >= 0"), (_MONO + "tolerance = 1\n", "'tolerance' must be in"),
])
def test_profile_counts_out_of_range(tmp_path, extra, message):
    p = tmp_path / "mine.toml"
    p.write_text(_PROFILE + extra)
    with pytest.raises(UsageError, match=message):
        profiles.load_profile(str(p))


def test_profile_booleans_and_numbers_of_the_right_type_are_read():
    prof = profiles.parse_profile(
        {"name": "x", "world_size": 4, "provisional": True, "gpu_match": "H200",
         "gate": [{"collective": "all_reduce", "size": 1 << 20, "min": 3, "in_place": False}],
         "monotonic": {"collective": "all_reduce", "from_size": "1M", "tolerance": 0, "in_place": False},
         "bench": {"step_factor": 4, "iters": 3, "warmup": 0}}, where="t")
    assert prof.provisional and prof.gpu_match == "H200" and not prof.gates[0].in_place
    assert prof.gates[0].min_value == 3.0 and prof.monotonic.tolerance == 0.0 and not prof.monotonic.in_place
    assert (prof.bench.step_factor, prof.bench.iters, prof.bench.warmup) == (4, 3, 0)


def test_gates_pass_fail_and_missing_point():
    prof = profiles.load_profile("h200-4")
    how = {"world_size": 4}
    ok = {f.name: f for f in gates.evaluate(prof, _records(GOOD), how)}
    assert ok["all_reduce_busbw_512M"].status == "PASS" and ok["all_reduce_busbw_512M"].value == 346.0
    assert "provisional" not in ok["all_reduce_busbw_512M"].evidence
    flagged = dataclasses.replace(prof, provisional=True)
    assert "provisional" in gates.evaluate(flagged, _records(GOOD), how)[0].evidence
    slow = {f.name: f for f in gates.evaluate(prof, _records(GOOD | {512 * M: 339.9}), how)}
    assert slow["all_reduce_busbw_512M"].status == "FAIL"
    missing = {f.name: f for f in gates.evaluate(prof, _records({64 * M: 300.0, 128 * M: 310.0}), how)}
    assert missing["all_reduce_busbw_512M"].status == "ERROR" and "64M, 128M" in missing["all_reduce_busbw_512M"].evidence


def test_gate_uses_median_of_repetitions():
    prof = profiles.load_profile("h200-4")
    recs = _records({512 * M: 100.0}) + _records({512 * M: 345.0}) + _records({512 * M: 350.0})
    (gate,) = [f for f in gates.evaluate(prof, recs, {}) if f.name.startswith("all_reduce")]
    assert gate.value == 345.0 and gate.status == "PASS"


def test_world_size_mismatch_is_an_error_not_a_pass():
    prof = profiles.load_profile("mi300x-8")
    found = gates.evaluate(prof, _records({8 << 30: 999.0}), {"world_size": 4})
    assert found[0].status == "ERROR" and exit_code(found) == 1
    assert all(f.status == "WAIVED" for f in found[1:])


def test_monotonicity_fails_on_a_drop_beyond_tolerance_against_the_best_so_far():
    rule = profiles.Monotonic("all_reduce", True, 64 * M, 0.05)
    assert gates.check_monotonic(rule, _records(GOOD)).status == "PASS"
    # a 4% dip is within tolerance
    assert gates.check_monotonic(rule, _records(GOOD | {512 * M: 322.0})).status == "PASS"
    # gradual decline: no step falls 5% below the one before, but 1G is 7% under the peak at 128M
    decline = {64 * M: 300.0, 128 * M: 330.0, 256 * M: 325.0, 512 * M: 318.0, 1024 * M: 306.0}
    f = gates.check_monotonic(rule, _records(decline))
    assert f.status == "FAIL" and f.data["drops"][0]["size_bytes"] == 1024 * M
    # sizes below from_size are ignored, fewer than two points is waived
    assert gates.check_monotonic(rule, _records({M: 500.0, 64 * M: 300.0, 128 * M: 300.0})).status == "PASS"
    assert gates.check_monotonic(rule, _records({64 * M: 300.0})).status == "WAIVED"


def test_how_measured_reads_bench_env_and_records():
    how = gates.how_measured({"world_size": 4, "engine": "nccl", "launcher": "torchrun"},
                             _records({M: 1.0}), source="x.json")
    assert how["process_per_gpu"] is True and how["graph"] is False and how["engine"] == "nccl"
    assert gates.how_measured({}, [], source="x")["world_size"] is None


def test_bench_argv_is_the_briefed_command():
    from ccltune.commands.bench_probe import bench_args

    argv = benchrun.bench_argv(4, benchrun.Probe(db="/t/b.db", json_path="/t/b.json"), bench_args)
    assert argv[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", "-m", "ccltune",
                        "bench", "all_reduce", "--minbytes=1M", "--maxbytes=1M", "--stepfactor=2", "--iters=5",
                        "--warmup_iters=2", "--json=/t/b.json", "--db=/t/b.db", "--engine=nccl"]
    sweep = benchrun.bench_argv(8, benchrun.Probe("d", "j", min_bytes=256 * M, max_bytes=8 << 30, iters=20), bench_args)
    assert {"--minbytes=256M", "--maxbytes=8G", "--stepfactor=2"} <= set(sweep)
    assert not any(a.startswith("--iters") for a in sweep)  # bench's default, 20: left out
    with pytest.raises(UsageError, match="must be >= 1, got 0"):
        benchrun.bench_argv(0, benchrun.Probe("d", "j"), bench_args)


def test_a_probe_without_the_commands_bench_line_is_refused():
    with pytest.raises(ValueError, match="needs the command's bench_args"):
        benchrun.run_bench(2, bench_args=None)


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"), ('{"env": {}}', "not a bench JSON"), ('{"records": [{"size_bytes": 1}]}', "lacks"),
])
def test_bad_bench_json(tmp_path, content, message):
    p = tmp_path / "b.json"
    p.write_text(content)
    with pytest.raises(UsageError, match=message):
        benchrun.read_bench_json(p)


def _bad_json(tmp_path, *, env=None, record=None, index=3):
    recs = _records(GOOD)
    if record is not None:
        recs[index] = {**recs[index], **record}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"env": {"world_size": 4, **(env or {})}, "records": recs}))
    return path


@pytest.mark.parametrize("env, record, field, message", [
    ({"world_size": "four"}, None, "env.world_size", 'must be an integer or null, got a string "four"'),
    ({"world_size": 0}, None, "env.world_size", "must be a finite number >= 1"),
    ({"graph": "yes"}, None, "env.graph", "must be an integer"),
    (None, {"busbw_gbps": "fast"}, "records[3].busbw_gbps", 'must be a number or null, got a string "fast"'),
    (None, {"busbw_gbps": float("nan")}, "records[3].busbw_gbps", "finite"),  # json writes NaN, reads it back
    (None, {"busbw_gbps": float("inf")}, "records[3].busbw_gbps", "finite"),  # would pass every gate
    (None, {"algbw_gbps": [1]}, "records[3].algbw_gbps", "got an array"),
    (None, {"size_bytes": "512M"}, "records[3].size_bytes", "must be an integer"),
    (None, {"size_bytes": 1.5}, "records[3].size_bytes", "must be an integer"),
    (None, {"in_place": "false"}, "records[3].in_place", "must be true or false"),  # "false" read as true
    (None, {"collective": 7}, "records[3].collective", "must be a string"),
    (None, {"status": None}, "records[3].status", "must be a string, got null"),
    (None, {"n_ranks": "4"}, "records[3].n_ranks", "must be an integer"),
])
def test_bench_json_fields_are_type_checked_naming_file_and_field(tmp_path, env, record, field, message):
    path = _bad_json(tmp_path, env=env, record=record)
    with pytest.raises(UsageError) as info:
        benchrun.read_bench_json(path)
    assert str(info.value).startswith(f"--from-json: {str(path)!r}: {field}: ")
    assert message in str(info.value)


def test_bench_json_env_and_records_must_be_objects(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"env": [], "records": []}))
    with pytest.raises(UsageError, match="'env' must be an object, got an array"):
        benchrun.read_bench_json(p)
    p.write_text(json.dumps({"records": [_records({M: 1.0})[0], "x"]}))
    with pytest.raises(UsageError, match=r"records\[1\] must be an object, got a string"):
        benchrun.read_bench_json(p)
    p.write_text(json.dumps({"records": [{"size_bytes": 1}]}))
    with pytest.raises(UsageError, match=r"records\[0\] lacks 'collective'"):
        benchrun.read_bench_json(p)


@pytest.mark.parametrize("env, record, field", [
    ({"world_size": "four"}, None, "env.world_size"), (None, {"busbw_gbps": "fast"}, "records[3].busbw_gbps"),
])
def test_cli_check_bad_bench_json_is_exit_2_without_traceback(tmp_path, capsys, env, record, field):
    path = _bad_json(tmp_path, env=env, record=record)
    assert main(["check", "--profile", "h200-4", "--from-json", str(path), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert f"--from-json: {str(path)!r}: {field}" in err and "Traceback" not in err


def test_bench_json_with_null_bandwidths_and_no_env_is_read(tmp_path):
    recs = _records(GOOD)
    recs[0] = {**recs[0], "busbw_gbps": None, "algbw_gbps": None, "status": "skipped"}
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"records": recs}))
    env, records = benchrun.read_bench_json(p)
    assert env == {} and len(records) == len(recs)


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_cli_check_bad_timeout_is_exit_2(tmp_path, capsys, value):
    src = _bench_json(tmp_path, GOOD)
    assert main(["check", "--profile", "h200-4", "--from-json", str(src), "--timeout", value,
                 "--db", str(tmp_path / "r.db")]) == 2
    assert f"--timeout must be > 0 and at most 31536000 seconds (a year), got {value}" in capsys.readouterr().err


def test_cli_check_from_json_passes_and_writes_junit_json_db(tmp_path, capsys):
    src = _bench_json(tmp_path, GOOD)
    db, out, junit = tmp_path / "r.db", tmp_path / "v.json", tmp_path / "j.xml"
    rc = main(["check", "--profile", "h200-4", "--from-json", str(src), "--db", str(db), "--json", str(out),
               "--junit", str(junit)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "PASS    all_reduce_busbw_512M" in text and "process per GPU True" in text
    verdict = json.loads(out.read_text())
    assert verdict["status"] == "PASS" and verdict["how"]["world_size"] == 4
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    rows = sqlite3.connect(db).execute("SELECT name, status FROM findings ORDER BY id").fetchall()
    assert rows == [("all_reduce_busbw_512M", "PASS"), ("monotonic", "PASS")]


def test_cli_check_fails_with_exit_1_and_junit_failure(tmp_path, capsys):
    src = _bench_json(tmp_path, GOOD | {512 * M: 300.0, 1024 * M: 280.0})
    junit = tmp_path / "j.xml"
    rc = main(["check", "--profile", "h200-4", "--from-json", str(src), "--db", str(tmp_path / "r.db"),
               "--junit", str(junit)])
    assert rc == 1
    assert "FAIL" in capsys.readouterr().out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "2"
    assert suite.find("testcase/failure") is not None


def test_cli_check_user_profile_and_bad_inputs(tmp_path, capsys):
    prof = tmp_path / "mine.toml"
    prof.write_text('name = "mine"\nworld_size = 4\n[[gate]]\ncollective = "all_reduce"\nsize = "64M"\nmin = 299\n')
    src = _bench_json(tmp_path, GOOD)
    assert main(["check", "--profile", str(prof), "--from-json", str(src), "--db", str(tmp_path / "r.db")]) == 0
    assert main(["check", "--profile", "mi300x", "--from-json", str(src), "--db", str(tmp_path / "r.db")]) == 2
    assert "did you mean 'mi300x-8'" in capsys.readouterr().err
    assert main(["check", "--profile", "h200-4", "--from-json", str(tmp_path / "no.json")]) == 2


def test_cli_check_without_gpus_is_waived_exit_0(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("ccltune.environment.gpu_facts", lambda: {"gpus": [], "cuda": None, "hip": None})
    rc = main(["check", "--profile", "h200-4", "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "v.json")])
    assert rc == 0
    assert "needs 4 GPUs, 0 visible" in capsys.readouterr().out
    assert json.loads((tmp_path / "v.json").read_text())["status"] == "WAIVED"
    # without GPUs and without --profile there is nothing to judge: WAIVED, exit 0
    assert main(["check", "--db", str(tmp_path / "r.db")]) == 0
    assert "WAIVED  check  no GPU here" in capsys.readouterr().out


def test_cli_check_unmatched_machine_needs_a_profile(tmp_path, capsys, monkeypatch):
    gpus = [{"name": "Tesla T4", "index": i} for i in range(2)]
    monkeypatch.setattr("ccltune.environment.gpu_facts", lambda: {"gpus": gpus, "cuda": "13.0", "hip": None})
    assert main(["check", "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert "2 x Tesla T4" in err and "h200-4" in err


def test_profile_detection_by_gpu_name_and_count():
    assert profiles.detect(["NVIDIA H200"] * 4).name == "h200-4"
    assert profiles.detect(["AMD Instinct MI300X"] * 8).name == "mi300x-8"
    assert profiles.detect(["NVIDIA H200"] * 2) is None and profiles.detect([]) is None


def test_cli_list_profiles(capsys):
    assert main(["check", "--list-profiles"]) == 0
    out = capsys.readouterr().out
    assert "mi300x-8" in out and "h200-4" in out and "h100-8" in out and "a100-8" in out
    assert "(provisional)" not in out.split("h200-4")[1].splitlines()[0]  # measured, not provisional
