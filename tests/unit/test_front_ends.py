"""Options are data, commands are functions (STYLE.md 16, issue 33): argparse lives in cli/ only; the
Python API builds typed options and neither swaps the process's streams nor catches SystemExit; the
argv a job's workers get is written from the options and parses back to the same options."""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import shutil
from pathlib import Path

import pytest

import ccltune
from ccltune.cli import build_parser
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.options import from_fields
from ccltune.errors import UsageError

ROOT = Path(ccltune.__file__).parent
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "h200x2-flow.sqlite"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_no_argparse_outside_cli():
    found = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
             if "argparse" in _imports(p) and p.relative_to(ROOT).parts[0] != "cli"]
    assert not found, f"argparse imported outside ccltune/cli/: {found}"


def test_the_check_sees_argparse(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    from argparse import Namespace\n")
    assert "argparse" in _imports(tmp_path / "m.py")


def test_the_api_swaps_no_stream_and_catches_no_exit():
    tree = ast.parse((ROOT / "api.py").read_text(encoding="utf-8"))
    names = {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Name))}
    assert not names & {"sys.stdout", "sys.stderr", "SystemExit", "argparse"}, names & {
        "sys.stdout", "sys.stderr", "SystemExit", "argparse"}


def test_the_api_prints_nothing_unless_verbose(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.chdir(tmp_path)
    shutil.copy(FIXTURE, tmp_path / "sweep.db")
    with caplog.at_level(logging.INFO, logger="ccltune"):
        t = ccltune.tune(db="sweep.db", out="rules.conf")
    said = capsys.readouterr()
    assert said.out == "" and said.err == ""
    assert any(f"stored as artifact 'rules' of run {t.run_id}" in r.getMessage() for r in caplog.records)
    assert t.run.kind == "tune" and t.rules == (tmp_path / "rules.conf").read_text()
    again = ccltune.tune(db="sweep.db", out="rules2.conf", verbose=True)
    assert again.run_id == t.run_id + 1  # the run this call stored, from the call itself
    assert f"of run {again.run_id})" in capsys.readouterr().out  # the table the command line prints


# a value other than the default for every option of bench (the argv must carry each, and read back)
_EVERY = dict(nthreads=1, ngpus=2, minbytes="1K", maxbytes="2M", stepbytes="4K", stepfactor=4, iters=7, agg_iters=2,
              warmup_iters=3, run_cycles=2, parallel_init=1, check=2, op="max", datatype="half", root="all",
              blocking=2, stream_null=1, cudagraph=3, report_cputime=1, report_timestamps=1, output_file="o.json",
              average="min", local_register=1, cta_policy=2, device_implementation=1, device_cta_count=8, memory=1,
              unalign=3, per_iter_timing=1, per_iter_skip=1, ncclt_defaults=True, warmup_mode="series",
              symmetric=True, algo="ring", proto="simple", channels=8, json="r.json", db="x.db", engine="gloo",
              nproc=3, timeout=9.5, nccl_lib="/lib/nccl.so", buffers="torch")


def test_every_bench_option_travels_to_the_workers_and_back():
    fields = {f.name for f in dataclasses.fields(BenchOptions)} - {"collective"}
    assert set(_EVERY) == fields, f"a value for each option: {fields ^ set(_EVERY)}"
    o = BenchOptions(collective=("all_reduce", "broadcast"), **_EVERY)
    argv = o.to_argv()
    assert argv[:3] == ["bench", "all_reduce", "broadcast"] and len(argv) == 3 + len(_EVERY)
    assert from_fields(BenchOptions, vars(build_parser().parse_args(argv))) == o


def test_bench_options_are_frozen():
    o = BenchOptions(collective=("all",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.iters = 3  # type: ignore[misc]


def test_every_validate_option_travels_to_the_workers_and_back():
    from ccltune.commands.validate import ValidateOptions

    every = dict(minbytes="1K", maxbytes="1M", stepfactor=4.0, datatype="half", op="max", reps=3, target_us=50.0,
                 max_iters=9, warmup_iters=1, no_graph=True, hard_limit=5.0, retest=2, best_from="s.db",
                 json="v.json", junit="v.xml", under_load=512, virtual_nodes=2, db="x.db", engine="nccl", nproc=4,
                 timeout=30.0, nccl_lib="/lib/nccl.so", buffers="ncclmem")
    assert set(every) == {f.name for f in dataclasses.fields(ValidateOptions)} - {"rules", "collective"}
    o = ValidateOptions(rules="r.conf", collective=("all_gather",), **every)
    assert from_fields(ValidateOptions, vars(build_parser().parse_args(o.to_argv()))) == o
    default = ValidateOptions(rules="r.conf")
    assert from_fields(ValidateOptions, vars(build_parser().parse_args(default.to_argv()))) == default


def test_replay_options_travel_to_the_workers_and_back():
    from ccltune.commands.replay import ReplayOptions

    o = ReplayOptions(workload="w.json", rules="r.conf", iters=3, order="grouped", under_load=256, db="x.db",
                      engine="gloo", nproc=2, timeout=30.0)
    assert from_fields(ReplayOptions, vars(build_parser().parse_args(o.to_argv()))) == o


def test_every_sweep_option_travels_to_the_workers_and_back():
    from ccltune.commands.sweep_options import SweepOptions

    every = dict(minbytes="1K", maxbytes="1M", stepfactor=4.0, datatype="half", op="max", algos="ring,-x",
                 protos="", channels="", grid="axes", reps=3, target_us=50.0, max_iters=9, warmup_iters=1,
                 no_graph=True, mode="model", no_twin=True, workload="w.json", under_load=512, idle=True,
                 virtual_nodes=2, resume=4, db="x.db", engine="nccl", nproc=4, timeout=30.0,
                 nccl_lib="/lib/nccl.so", buffers="ncclmem")
    assert set(every) == {f.name for f in dataclasses.fields(SweepOptions)} - {"collective"}
    o = SweepOptions(collective=("all_gather", "all_reduce"), **every)
    argv = o.to_argv()
    assert argv[:3] == ["sweep", "all_gather", "all_reduce"] and len(argv) == 3 + len(every)
    assert from_fields(SweepOptions, vars(build_parser().parse_args(argv))) == o
    default = SweepOptions()
    back = from_fields(SweepOptions, vars(build_parser().parse_args(default.to_argv())))
    assert back == default and type(back.datatype) is type(default.datatype)  # -d left out stays left out
    typed = SweepOptions(datatype="float", op="sum")  # the defaults' values, given: -d and -o typed
    assert typed.to_argv()[-2:] == ["--datatype=float", "--op=sum"]
    back = from_fields(SweepOptions, vars(build_parser().parse_args(typed.to_argv())))
    assert type(back.datatype) is str and type(back.op) is str


def test_every_ab_option_travels_and_the_job_comes_last():
    from ccltune.cli.ab import options as ab_options
    from ccltune.commands.ab import AbOptions

    every = dict(rules=("a.conf", "b.conf"), env=("NCCL_P2P_LEVEL=SYS",), nccl_lib=("/lib/nccl.so",),
                 arm=("fix:env:NCCL_ALGO=ring", "fix:rules:a.conf"), no_aa=True, metric="step ([0-9.]+) ms",
                 skip=2, rounds=7, until_confident=True, budget=60.0, min_effect=2.5, seed=11, run_timeout=9.0,
                 echo=True, prune="p.conf", json="ab.json", db="x.db", in_run=True, better="higher",
                 block_steps=7, warmup_blocks=3, max_blocks=90, period="6", workload="w.json")
    assert set(every) == {f.name for f in dataclasses.fields(AbOptions)} - {"command"}
    o = AbOptions(command=("torchrun", "--nproc-per-node", "2", "train.py", "--lr=1"), **every)
    argv = o.to_argv()
    assert argv[0] == "ab" and argv[-6:] == ["--", "torchrun", "--nproc-per-node", "2", "train.py", "--lr=1"]
    assert ab_options(build_parser().parse_args(argv)) == o
    assert ab_options(build_parser().parse_args(AbOptions().to_argv())) == AbOptions()


# -- import, runs, export, plugin: the command line and the Python API build the same options ----------------
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCCLT = FIXTURES / "nccl-tests" / "ag-mpi-v2.19.6.txt"
NVB = FIXTURES / "nvbandwidth" / "h100_4gpu.txt"
TUNING_LOG = FIXTURES / "logs" / "nccl_tuning_rules.log"


def _cases():
    from ccltune.commands.export import ExportOptions
    from ccltune.commands.import_ import ImportNcclTestsOptions
    from ccltune.commands.import_links import ImportLinksOptions
    from ccltune.commands.plugin import PluginCheckOptions, PluginPathOptions
    from ccltune.commands.plugin_verify import PluginVerifyOptions
    from ccltune.commands.runs import RunsOptions

    return [
        (["import", "nccl-tests", "a.txt", "b.txt", "--db", "x.db", "--algo", "ring", "--proto", "ll", "--channels",
          "4", "--nranks", "8", "--gpu", "NVIDIA H200", "--collective", "all_reduce"], ImportNcclTestsOptions,
         "import_nccl_tests", dict(files=["a.txt", "b.txt"], db="x.db", algo="ring", proto="ll", channels=4,
                                   nranks="8", gpu="NVIDIA H200", collective="all_reduce")),
        (["import", "nvbandwidth", "f.txt", "--db", "x.db", "--gpu", "G", "--host", "h", "--threshold", "0.5"],
         ImportLinksOptions, "import_links", dict(source="nvbandwidth", file="f.txt", db="x.db", gpu="G", host="h",
                                                  threshold=0.5)),
        (["runs", "--kind", "sweep", "--db", "x.db"], RunsOptions, "runs", dict(kind="sweep", db="x.db")),
        (["export", "3", "--format", "csv", "--out", "o.csv", "--db", "x.db"], ExportOptions, "export",
         dict(run=3, format="csv", out="o.csv", db="x.db")),
        (["plugin", "path", "--profiler"], PluginPathOptions, "plugin_path", dict(profiler=True)),
        (["plugin", "check", "r.conf", "--platform", "gpu=H200", "--platform", "nps=NPS1"], PluginCheckOptions,
         "plugin_check", dict(file="r.conf", platform=["gpu=H200", "nps=NPS1"])),
        (["plugin", "verify", "r.conf", "all_reduce", "all_gather", "-b", "1K", "-e", "1M", "-f", "4", "--nproc", "2",
          "--from-log", "n.log", "--profile", "prof", "--platform", "gpu=H200", "--save-log", "s.log", "--json",
          "v.json", "--timeout", "30"], PluginVerifyOptions, "plugin_verify",
         dict(file="r.conf", collective=["all_reduce", "all_gather"], min_bytes="1K", max_bytes="1M", step_factor=4,
              nproc=2, from_log="n.log", profile="prof", platform="gpu=H200", save_log="s.log", json="v.json",
              timeout=30)),
    ]


@pytest.mark.parametrize("argv, cls, command, kw", _cases(), ids=lambda c: c[0] if isinstance(c, list) else "")
def test_the_command_line_and_the_api_build_the_same_options(argv, cls, command, kw):
    from ccltune.commands.options import from_keywords

    parsed = from_fields(cls, vars(build_parser().parse_args(argv)))
    assert parsed == from_keywords(cls, command, kw)
    left = [f.name for f in dataclasses.fields(cls) if getattr(parsed, f.name) == f.default]
    assert not left, f"the case leaves {left} at their defaults: give each option a value"
    if command == "plugin_verify":  # a size in bytes is the text -e reads; the collectives a tuple, in order
        assert from_keywords(cls, command, {**kw, "max_bytes": 1 << 20}).maxbytes == "1048576"
        assert parsed.collective == ("all_reduce", "all_gather")


def test_imports_return_the_run_each_call_stored(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="ccltune"):
        first = ccltune.import_nccl_tests(NCCLT, db="i.db", algo="ring")
        links = ccltune.import_links("nvbandwidth", NVB, db="i.db")
        second = ccltune.import_nccl_tests([NCCLT], db="i.db")
    said = capsys.readouterr()
    assert said.out == "" and said.err == ""  # nothing printed: the lines went to the logger
    lines = [r.getMessage() for r in caplog.records]
    assert (first.run_id, links.run_id, second.run_id) == (1, 2, 3)
    assert any(m.startswith(f"# run {links.run_id} (links, imported from nvbandwidth") for m in lines)
    assert first.run.kind == "import" and first.rows and {m.algo for m in first.rows} == {"ring"}
    assert second.run.summary["config"] == "default" and "--algo" not in second.run.command
    assert links.run.kind == "links" and links.links and links.run.env["source"] == "nvbandwidth"
    assert [r.id for r in ccltune.open_db("i.db").runs("import")] == [first.run_id, second.run_id]
    from ccltune.commands.runs import RunsOptions, run_runs

    listing = run_runs(RunsOptions(db="i.db"))  # `ccltune runs`: measurements per run, the links run has none
    assert [r.id for r in listing.runs] == [1, 2, 3] and listing.rows == {1: len(first.rows), 3: len(second.rows)}


def test_export_returns_the_text_and_prints_it_only_when_verbose(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run = ccltune.import_nccl_tests(str(NCCLT), db="e.db")
    quiet = ccltune.export(run.run_id, db="e.db", format="csv")
    assert capsys.readouterr().out == "" and quiet.path is None and quiet.run_id == run.run_id
    assert quiet.text.splitlines()[0].startswith("run_id,collective,size_bytes") and len(quiet.text.splitlines()) == 1 + len(run.rows)
    loud = ccltune.export("latest", db="e.db", verbose=True)
    assert capsys.readouterr().out == loud.text and json.loads(loud.text)["run"]["id"] == run.run_id
    written = ccltune.export(run.run_id, db="e.db", out="r.json", verbose=True)
    assert capsys.readouterr().out == "" and written.path == "r.json"
    assert (tmp_path / "r.json").read_text() == loud.text
    with pytest.raises(UsageError, match="'fromat'.*did you mean 'format'"):
        ccltune.export(1, db="e.db", fromat="csv")


def test_plugin_check_and_verify_from_python(tmp_path, capsys):
    from ccltune.errors import RuleFileError

    ok = ccltune.plugin_check(FIXTURES / "rules" / "basic.conf", platform=["gpu=NVIDIA H100"])
    assert (ok.rules, ok.applying, capsys.readouterr().out) == (8, 8, "")  # no platform section: all apply
    with pytest.raises(RuleFileError, match="19 lines rejected"):
        ccltune.plugin_check(FIXTURES / "rules" / "bad_lines.conf")
    assert capsys.readouterr().err == ""  # the rejected lines are the logger's without verbose
    good = ccltune.plugin_verify(TUNING_LOG.with_suffix(".conf"), from_log=TUNING_LOG)
    assert good.verdict == "PASS" and good.n_ranks == 4 and good.checks and capsys.readouterr().out == ""
    rules = tmp_path / "r.conf"
    rules.write_text("allreduce,12,12,tree,ll,-1,-1,-1\n")  # the job's all_reduce is 4 B: the rule never applies
    bad = ccltune.plugin_verify(rules, from_log=TUNING_LOG, verbose=True)  # FAIL is the answer, not an error
    assert bad.verdict == "FAIL" and bad.exit_code == 1 and "# nRanks 4 nNodes 1" in capsys.readouterr().out


# links, topo, doctor and check on typed options ---------------------------------------------------------
NCCL_LOG = FIXTURES / "logs" / "nccl_4gpu_p2p.log"
AMD_SMI = [FIXTURES / "amd-smi" / "mi300x_topology.json", FIXTURES / "amd-smi" / "mi300x_static.json"]
MIB = 1 << 20


def _diag(command):
    """(options class, a value other than the default for every option, the same typed as a user types the
    command line, the same as the API's keywords)."""
    from ccltune.commands.check import CheckOptions
    from ccltune.commands.doctor import DoctorOptions
    from ccltune.commands.links import LinksOptions
    from ccltune.commands.topo import TopoOptions

    out = {"db": "x.db", "json_path": "r.json"}
    return {
        "links": (LinksOptions, dict(size="1M", iters=3, warmup=1, latency_iters=7, method="ce,sm-read", threshold=0.5,
                                     run=4, **out),
                  ["links", "-s", "1M", "-n", "3", "-w", "1", "--latency-iters", "7", "--method", "ce,sm-read",
                   "--threshold", "0.5", "--run", "4", "--db", "x.db", "--json", "r.json"],
                  dict(size="1M", iters=3, warmup=1, latency_iters=7, method=["ce", "sm-read"], threshold=0.5, run=4,
                       db="x.db", json="r.json")),
        "topo": (TopoOptions, dict(sysfs_root="/s", from_amd_smi=("a.json", "b.json"), **out),
                 ["topo", "--sysfs-root", "/s", "--from-amd-smi", "a.json", "--from-amd-smi", "b.json", "--db", "x.db",
                  "--json", "r.json"],
                 dict(sysfs_root="/s", from_amd_smi=["a.json", "b.json"], db="x.db", json="r.json")),
        "doctor": (DoctorOptions, dict(nccl_log="n.log", from_amd_smi=("a.json",), nproc=2, no_run=True, timeout=9.5,
                                       sysfs_root="/s", **out),
                   ["doctor", "--nccl-log", "n.log", "--from-amd-smi", "a.json", "--nproc", "2", "--no-run", "--timeout",
                    "9.5", "--sysfs-root", "/s", "--db", "x.db", "--json", "r.json"],
                   dict(nccl_log="n.log", from_amd_smi="a.json", nproc=2, no_run=True, timeout=9.5, sysfs_root="/s",
                        db="x.db", json="r.json")),
        "check": (CheckOptions, dict(profile="h200-4", run=3, force_profile=True, links_run=2, ring_fraction=0.9,
                                     from_json="b.json", junit="j.xml", timeout=60.0, list_profiles=True, **out),
                  ["check", "--profile", "h200-4", "--run", "3", "--force-profile", "--links-run", "2", "--ring-fraction",
                   "0.9", "--from-json", "b.json", "--junit", "j.xml", "--timeout", "60", "--list-profiles", "--db",
                   "x.db", "--json", "r.json"],
                  dict(profile="h200-4", run="3", force_profile=True, links_run=2, ring_fraction="0.9",
                       from_json="b.json", junit="j.xml", timeout=60, list_profiles=True, db="x.db", json="r.json")),
    }[command]


@pytest.mark.parametrize("command", ["links", "topo", "doctor", "check"])
def test_every_diagnose_option_reads_the_same_from_argv_and_keywords_and_travels_back(command):
    from ccltune.commands.options import from_keywords

    cls, every, argv, kw = _diag(command)
    assert set(every) == {f.name for f in dataclasses.fields(cls)}, "a value for each option"
    o = cls(**every)
    assert from_fields(cls, vars(build_parser().parse_args(argv))) == o  # the command line as a user types it
    assert from_keywords(cls, command, kw) == o  # the API's keywords
    again = o.to_argv()  # the options' own command line parses back to them
    assert again[0] == command and from_fields(cls, vars(build_parser().parse_args(again))) == o
    assert cls().to_argv() == [command]  # defaults are left out
    assert from_fields(cls, vars(build_parser().parse_args([command]))) == cls()  # the CLI's defaults are the class's


def test_the_bench_line_doctor_and_check_start_parses_back_to_bench_options():
    """doctor and check start `ccltune bench` under torchrun (diagnose.probes.benchrun) with the line built from
    BenchOptions (commands.bench_probe): the CLI's own parser reads it back as the options meant."""
    from ccltune.commands.bench_probe import bench_args
    from ccltune.diagnose.probes import benchrun

    probe = benchrun.Probe(db="/t/b.db", json_path="/t/b.json", min_bytes=64 * MIB, max_bytes=1 << 30, iters=20)
    argv = benchrun.bench_argv(4, probe, bench_args)
    o = from_fields(BenchOptions, vars(build_parser().parse_args(argv[argv.index("ccltune") + 1:])))
    assert o == BenchOptions(collective=("all_reduce",), minbytes="64M", maxbytes="1G", stepfactor=2, iters=20,
                             warmup_iters=2, engine="nccl", db="/t/b.db", json="/t/b.json")
    assert o.to_argv() == argv[argv.index("ccltune") + 1:]


def _check_json(tmp_path, busbw_gbps):
    """A bench JSON (``ccltune bench --json``) of 4 x H200 at ``busbw_gbps`` (and a little more per size)."""
    import json

    recs = [{"collective": "all_reduce", "size_bytes": s * MIB, "in_place": True, "busbw_gbps": bw,
             "algbw_gbps": bw / 1.5, "time_us": s * MIB / (bw / 1.5) / 1e3, "n_ranks": 4, "graph": 0, "status": "ok"}
            for s in (64, 128, 256, 512) for bw in [busbw_gbps + s / 64]]  # consistent figures (issue 41)
    env = {"world_size": 4, "engine": "nccl", "launcher": "torchrun", "platform": "NVIDIA H200 x4"}
    path = tmp_path / f"bench{busbw_gbps:g}.json"
    path.write_text(json.dumps({"env": env, "records": recs}))
    return path


def test_the_diagnose_api_returns_what_it_found_and_prints_nothing(tmp_path, capsys, caplog):
    import json

    from ccltune.store import Store

    db = str(tmp_path / "r.db")
    with caplog.at_level(logging.INFO, logger="ccltune"):
        good = ccltune.check(profile="h200-4", from_json=str(_check_json(tmp_path, 340.0)), db=db,
                             json=str(tmp_path / "v.json"), junit=str(tmp_path / "j.xml"))
        bad = ccltune.check(profile="h200-4", from_json=str(_check_json(tmp_path, 100.0)), db=db)
        doc = ccltune.doctor(nccl_log=str(NCCL_LOG), db=db)
        top = ccltune.topo(from_amd_smi=[str(p) for p in AMD_SMI], db=db)
    said = capsys.readouterr()
    assert said.out == "" and said.err == ""
    assert any("ccltune check --profile h200-4" in r.getMessage() for r in caplog.records)  # to the logger instead
    with Store(db, readonly=True) as st:
        assert [(r.id, r.kind) for r in st.runs()] == [(good.run_id, "check"), (bad.run_id, "check"),
                                                       (doc.run_id, "doctor"), (top.run_id, "topo")]
        assert st.run(good.run_id).command.startswith("ccltune check --profile=h200-4 --from-json=")
        assert [f["name"] for f in st.findings(good.run_id)] == [f.name for f in good.findings]
    assert good.status == "PASS" and good.exit_code == 0 and good.profile == "h200-4" and good.how["world_size"] == 4
    assert json.loads((tmp_path / "v.json").read_text()) == json.loads(json.dumps(good.record))
    assert good.json_path == str(tmp_path / "v.json") and (tmp_path / "j.xml").is_file() and good.links_run_id is None
    assert bad.status == "FAIL" and bad.exit_code == 1  # a FAIL is the answer, returned, not raised
    assert bad.finding("all_reduce_busbw_512M").status == "FAIL" and bad.finding("all_reduce_busbw_512M").value > 0
    assert doc.finding("log:transport").status == "PASS" and doc.record["status"] == doc.status
    assert len(top.topology.gpus) == 8 and top.record["topology"]["source"] == top.topology.source


def test_verbose_prints_what_the_command_line_prints(tmp_path, capsys):
    from ccltune.cli import main

    for cli, api in [(["doctor", "--nccl-log", str(NCCL_LOG)], dict(nccl_log=str(NCCL_LOG))),
                     (["topo", *[a for p in AMD_SMI for a in ("--from-amd-smi", str(p))]],
                      dict(from_amd_smi=[str(p) for p in AMD_SMI])),
                     (["check", "--list-profiles"], dict(list_profiles=True))]:
        assert main([*cli, "--db", str(tmp_path / "cli.db")]) == 0
        printed = capsys.readouterr()
        getattr(ccltune, cli[0])(db=str(tmp_path / "api.db"), verbose=True, **api)
        assert capsys.readouterr() == printed and printed.out


def test_links_run_n_returns_the_stored_rows_and_stores_nothing(tmp_path):
    from ccltune.store import Store

    db = str(tmp_path / "r.db")
    rows = [{"src": s, "dst": d, "method": "ce", "direction": "uni", "size_bytes": 256 * MIB,
             "bandwidth_gbps": 80.0 if (s, d) == (0, 1) else 100.0, "latency_us": None, "note": None}
            for s in range(3) for d in range(3) if s != d]
    with Store(db) as st:
        rid = st.begin_run("links", command="ccltune links", env={})
        st.add_links(rid, rows)
        st.finish_run(rid, "complete")
    shown = ccltune.links(run=rid, db=db, threshold=0.9)
    assert shown.run_id is None and shown.record["run"] == rid and len(shown.rows) == len(rows)
    assert shown.summary["series"]["ce/uni"]["ring_ceiling_gbps"] == 160.0  # GPU 0: slowest 80 x 2 peers
    assert shown.status == "WARN" and "0->1" in shown.finding("links:ce/uni").evidence  # below 0.9 x median
    with Store(db, readonly=True) as st:
        assert [r.id for r in st.runs()] == [rid]
    with pytest.raises(ccltune.errors.UsageError, match=r"unknown keyword argument 'treshold' in ccltune.links\(\)"):
        ccltune.links(treshold=0.5)
    with pytest.raises(ccltune.errors.UsageError, match=r"--threshold must be in \(0, 1\], got 2"):
        ccltune.links(run=rid, db=db, threshold=2)


def test_check_returns_the_links_run_it_measured_for_its_gate(tmp_path, monkeypatch):
    """No built-in profile for 2 x L40S: check measures the links, stores them as a run of their own, and
    says which (the id from the store, not the newest run of the database)."""
    from ccltune.diagnose.probes import benchrun, links, nvml
    from ccltune.store import Store

    gpus = [{"name": "NVIDIA L40S", "index": i} for i in range(2)]
    monkeypatch.setattr("ccltune.environment.gpu_facts", lambda: {"gpus": gpus, "cuda": "13.0", "hip": None})
    rows = [{"src": s, "dst": 1 - s, "method": "ce", "direction": "uni", "size_bytes": 256 * MIB,
             "bandwidth_gbps": 50.0, "latency_us": None} for s in (0, 1)]
    monkeypatch.setattr(links, "available", lambda: None)
    monkeypatch.setattr(links, "measure", lambda plan, log: links.LinkRun(rows=rows, n_gpus=2, gpu_names=["L40S"] * 2,
                                                                          bus_ids=[None, None], elapsed_s=0.1))
    monkeypatch.setattr(nvml, "read_nvml", lambda: None)
    recs = [{"collective": "all_reduce", "size_bytes": s * MIB, "in_place": True, "busbw_gbps": 45.0, "status": "ok"}
            for s in (64, 128, 256, 512, 1024)]
    monkeypatch.setattr(benchrun, "run_bench", lambda n, **k: benchrun.BenchRun(
        ["fake"], {}, 0, "", 0.1, bench_env={"world_size": 2, "engine": "nccl"}, records=recs))
    db = str(tmp_path / "r.db")
    res = ccltune.check(db=db)
    assert res.status == "PASS" and res.profile and res.links_run_id is not None
    with Store(db, readonly=True) as st:
        assert [(r.id, r.kind) for r in st.runs()] == [(res.links_run_id, "links"), (res.run_id, "check")]
        assert len(st.links(res.links_run_id)) == 2


def test_every_flag_of_every_command_has_help():
    """Each option's help is its field's (``option(..., help=...)``), read by --help and by the Python API's
    docstrings alike (issue 40: api.py imported the CLI for it); a flag without one showed an empty line in both."""
    import dataclasses

    from ccltune.cli import build_parser
    from ccltune.commands.options import help_of

    missing = []
    for command, parser in _subparsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.dest != "help" and not action.help:
                missing.append(f"ccltune {command} {max(action.option_strings, key=len)}")
    assert not missing, "flags without help:\n" + "\n".join(missing)
    from ccltune import api

    for func, command, _, options in api._DOCUMENTED:
        bare = [f.name for f in dataclasses.fields(options) if f.metadata.get("flag") and not help_of(f)]
        assert not bare, f"{options.__name__}: fields with a flag and no help: {bare}"
        assert "(--" in func.__doc__ and "): \n" not in func.__doc__


def _subparsers(parser, path=""):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}".strip(), sub
                yield from _subparsers(sub, f"{path} {name}")
