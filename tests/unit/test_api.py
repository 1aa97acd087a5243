"""The Python API (ccltune.api) without starting a job: keywords to typed options (and to the command
line a job's workers parse back), the checks it shares with the CLI, errors, the results database as
objects. docs/api.md's examples run for real in tests/dist/test_api_docs.py."""

from __future__ import annotations

import inspect
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ccltune
from ccltune import api, launch
from ccltune.cli import build_parser
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.options import from_fields, from_keywords, to_argv
from ccltune.commands.report import ReportOptions
from ccltune.commands.results import ValidateResult
from ccltune.commands.sweep_options import SweepOptions
from ccltune.commands.tune import TuneOptions
from ccltune.errors import CheckFailed, DistError, Interrupted, MinBandwidthFailed, UsageError, error_for_exit_code
from ccltune.store import Measurement, Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "h200x2-flow.sqlite"


def _options(cls, command, **kw):
    return from_keywords(cls, command, kw)


def test_keywords_become_typed_options_and_the_workers_command_line():
    o = _options(BenchOptions, "bench", collective=["all_reduce", "all_gather"], nproc=2, min_bytes="8",
                 max_bytes=1 << 20, iters="0x3", symmetric=False, engine=None, root=-1, timeout=30)
    assert (o.collective, o.nproc, o.minbytes, o.maxbytes, o.iters, o.root, o.timeout) == (
        ("all_reduce", "all_gather"), 2, "8", "1048576", 3, "-1", 30.0)  # -n's text read as strtol reads it
    argv = o.to_argv()
    assert argv == ["bench", "all_reduce", "all_gather", "--minbytes=8", "--maxbytes=1048576", "--iters=3",
                    "--root=-1", "--nproc=2", "--timeout=30.0"]
    parsed = build_parser().parse_args(argv)  # the workers parse it back to the same options
    assert from_fields(BenchOptions, vars(parsed)) == o
    assert BenchOptions(collective=("all",)).to_argv() == ["bench", "all"]  # defaults left out
    sweep = _options(SweepOptions, "sweep", no_graph=True, algos="", collective="all_reduce")
    assert sweep.to_argv() == ["sweep", "all_reduce", "--algos=", "--no-graph"]
    assert from_fields(SweepOptions, vars(build_parser().parse_args(sweep.to_argv()))) == sweep
    assert _options(ReportOptions, "report", compare=(1, 2)).compare == (1, 2)
    assert to_argv(_options(ReportOptions, "report", compare=(1, 2)), "report") == ["report", "--compare", "1", "2"]
    tune = _options(TuneOptions, "tune", out="r.conf", exclude_failed=["a.json", "b.json"])
    assert tune.exclude_failed == ("a.json", "b.json") and to_argv(tune, "tune") == [
        "tune", "--out=r.conf", "--exclude-failed=a.json", "--exclude-failed=b.json"]


def test_a_default_of_its_own_type_stays_apart_from_the_same_value_given():
    """-b left out may become nccl-tests' 32M (--ncclt-defaults); -b 8 given stays 8, also in a worker's argv."""
    assert BenchOptions(collective=("all",), minbytes="8").to_argv() == ["bench", "all", "--minbytes=8"]
    assert _options(BenchOptions, "bench", collective="all", min_bytes="8").to_argv()[-1] == "--minbytes=8"


def test_a_comma_separated_option_takes_a_list(monkeypatch):
    o = _options(SweepOptions, "sweep", collective="all_reduce", algos=["ring", "tree"], protos=("simple",),
                 channels=[8, 16], engine="gloo")
    assert o.to_argv() == ["sweep", "all_reduce", "--algos=ring,tree", "--protos=simple", "--channels=8,16",
                           "--engine=gloo"]
    assert _options(SweepOptions, "sweep", channels=[]).to_argv()[-1] == "--channels="  # none
    assert _options(TuneOptions, "tune", out="r.conf", runs=[3, "5-7"]).runs == "3,5-7"
    assert _options(ReportOptions, "report", runs=(1, 2)).runs == "1,2"
    dash = _options(SweepOptions, "sweep", algos=["ring", "-x"])  # joined to its flag: never read as a flag
    assert dash.to_argv()[-1] == "--algos=ring,-x"
    assert from_fields(SweepOptions, vars(build_parser().parse_args(dash.to_argv()))) == dash
    with pytest.raises(UsageError, match="unknown algorithm '-x' in --algos"):
        ccltune.sweep("all_reduce", algos=["ring", "-x"], engine="gloo")
    with pytest.raises(UsageError, match=r"unknown keyword argument 'algo' in ccltune.sweep\(\) \(did you mean 'algos'"):
        ccltune.sweep("all_reduce", algo="ring")
    monkeypatch.setattr(launch, "relaunch", lambda *a, **k: pytest.fail("a job was started"))
    with pytest.raises(UsageError, match="unknown algorithm 'rnig' in --algos"):
        ccltune.sweep("all_reduce", algos=["rnig"], engine="gloo")
    with pytest.raises(UsageError, match="forced candidates .* need the nccl engine"):  # the command's own answer
        ccltune.sweep("all_reduce", algos=["ring", "tree"], engine="gloo")


def test_a_row_has_short_bandwidth_names_that_are_not_columns():
    m = Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, 1.0, algbw_gbps=3.5, busbw_gbps=7.0)
    assert (m.busbw, m.algbw) == (7.0, 3.5)
    assert "busbw" not in m.to_record() and "busbw" not in api.MEASUREMENT_COLUMNS


@pytest.mark.parametrize("kw, said", [
    ({"min_byte": "8"}, "unknown keyword argument 'min_byte' in ccltune.bench() (did you mean 'min_bytes'?)"),
    ({"minbytes": "8"}, "did you mean 'min_bytes'?"),
    ({"engine": "glo"}, "unknown engine 'glo' in ccltune.bench() (did you mean 'gloo'?)"),
    ({"iters": "x"}, "ccltune.bench(iters='x'): -n/--iters: 'x' is not an integer"),
    ({"iters": [1, 2]}, "ccltune.bench(iters=[1, 2]): one value, not a list"),
    ({"symmetric": 1}, "ccltune.bench(symmetric=1): True or False"),
    ({"db": {"a": 1}}, "ccltune.bench(db=...) takes a string or a number, got {'a': 1}"),
    ({"iters": 2.5}, "ccltune.bench(iters=2.5): a whole number"),
    ({"compare": (1, 2)}, "unknown keyword argument 'compare' in ccltune.bench()"),
    ({"verbose": "yes"}, "ccltune.bench(verbose='yes'): True or False"),
])
def test_a_bad_keyword_is_refused_naming_it(kw, said):
    with pytest.raises(UsageError) as err:
        ccltune.bench("all_reduce", **kw)
    assert said in str(err.value)


@pytest.mark.parametrize("call, said", [
    (lambda: ccltune.bench("al_reduce"), "unknown collective 'al_reduce'"),
    (lambda: ccltune.bench("all_reduce", engine="gloo", iters=0), "-n/--iters must be >= 1, got 0"),
    (lambda: ccltune.bench("all_reduce", engine="gloo", min_bytes="1M", max_bytes="1K"),
     "-b/--minbytes must be <= -e/--maxbytes"),
    (lambda: ccltune.bench("all_reduce", engine="gloo", nproc=0), "--nproc must be >= 1, got 0"),
    (lambda: ccltune.sweep(engine="gloo", reps=0), "--reps must be >= 1, got 0"),
    (lambda: ccltune.tune(), "ccltune.tune() needs out=..."),
    (lambda: ccltune.validate("no-such.conf"), "RULES: 'no-such.conf' does not exist"),
    (lambda: ccltune.report(tolerance=float("nan")), "--tolerance must be a number of percent"),
])
def test_the_cli_checks_refuse_before_anything_starts(call, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch, "relaunch", lambda *a, **k: pytest.fail("a job was started"))
    with pytest.raises(UsageError) as err:
        call()
    assert said in str(err.value)


def test_help_shows_every_option_with_its_cli_default():
    sig = inspect.signature(ccltune.bench)
    assert sig.parameters["min_bytes"].default == "8" and sig.parameters["iters"].default == 20
    assert sig.parameters["verbose"].default is False and "collective" in sig.parameters
    assert inspect.signature(ccltune.tune).parameters["out"].default is None  # required: no default
    assert "max_bytes (--maxbytes): largest size" in ccltune.bench.__doc__
    text = io.StringIO()
    help_out = sys.stdout
    sys.stdout = text
    try:
        help(ccltune)
    finally:
        sys.stdout = help_out
    for name in ("bench", "sweep", "tune", "validate", "report", "open_db"):
        assert f"{name}(" in text.getvalue()


def test_the_api_names_stay_functions_when_their_subpackages_are_imported():
    from ccltune.report import write_report  # noqa: F401
    from ccltune.tune import derive
    from ccltune.validate import verdict

    assert callable(derive.derive) and callable(verdict.retested)
    assert ccltune.tune is api.tune and ccltune.validate is api.validate and ccltune.report is api.report
    assert ccltune.errors.UsageError is UsageError


def test_importing_ccltune_does_not_load_the_api():
    code = "import sys, ccltune; print('ccltune.api' in sys.modules, 'ccltune.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.db"
    shutil.copy(FIXTURE, path)
    return path


def test_open_db_reads_runs_and_rows_as_objects(tmp_path):
    db = ccltune.open_db(_db(tmp_path))
    runs = db.runs()
    assert [r.kind for r in runs] == ["sweep"] and db.runs("bench") == []
    assert db.latest().id == runs[0].id and db.latest("tune") is None
    rows = db.rows(runs[0].id)
    assert rows and all(isinstance(m, Measurement) for m in rows)
    assert {m.collective for m in rows} == {"all_gather"} and any(m.algo for m in rows)
    assert db.run(runs[0].id).world_size == 2


@pytest.mark.parametrize("call, said", [
    (lambda db: db.run(99), "no run 99; runs in"),
    (lambda db: db.rows("1"), "a run id is an integer, got '1'"),
    (lambda db: db.runs("benchh"), "unknown run kind 'benchh' in runs(kind=...) (did you mean 'bench'?)"),
    (lambda db: db.to_pandas(), "pip install pandas"),
])
def test_open_db_errors_name_the_value(tmp_path, call, said, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # as where pandas is not installed
    with pytest.raises(UsageError) as err:
        call(ccltune.open_db(_db(tmp_path)))
    assert said in str(err.value)


def test_open_db_refuses_what_is_not_a_ccltune_database(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        ccltune.open_db(tmp_path / "none.db")
    (tmp_path / "text.db").write_text("not sqlite")
    with pytest.raises(UsageError, match="not a usable ccltune database"):
        ccltune.open_db(tmp_path / "text.db")


def test_to_pandas_gives_one_column_per_field(tmp_path):
    pd = pytest.importorskip("pandas")
    db = ccltune.open_db(_db(tmp_path))
    df = db.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns)[:3] == ["run_id", "collective", "size_bytes"]
    assert len(df) == len(db.rows(db.latest().id))


def test_an_exit_code_stands_for_its_error():
    assert type(error_for_exit_code(1, "x")) is CheckFailed
    assert type(error_for_exit_code(7, "x")) is MinBandwidthFailed
    assert type(error_for_exit_code(130, "x")) is Interrupted
    assert type(error_for_exit_code(2, "x")) is UsageError
    assert type(error_for_exit_code(143, "x")) is DistError  # a signal: a rank died


def test_a_failed_job_raises_its_error_with_the_run(tmp_path, monkeypatch):
    """What the job's ranks said (their 'ccltune: error:' lines) is the error's message; the run
    rank 0 began is its run_id."""
    db = _db(tmp_path)

    def job(argv, nproc, engine, env, caller=None):
        caller.errors.append("rank 1 on host h exited (killed or crashed)")
        caller.run_id = 1
        return DistError.exit_code

    monkeypatch.setattr(launch, "relaunch", job)
    with pytest.raises(DistError) as err:
        ccltune.bench("all_reduce", engine="gloo", nproc=2, db=str(db))
    assert str(err.value) == "rank 1 on host h exited (killed or crashed)" and err.value.run_id == 1


def test_a_job_copies_its_output_and_keeps_its_errors():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('table'); "
                             "print('ccltune: error: it broke', file=sys.stderr)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err, caller = io.StringIO(), io.StringIO(), launch.Caller()
    threads = [launch._copy_lines(proc.stdout, out, None), launch._copy_lines(proc.stderr, err, caller)]
    proc.wait()
    for t in threads:
        t.join(5)
    assert out.getvalue() == "table\n" and caller.errors == ["it broke"] and "it broke" in err.getvalue()


def test_a_job_that_dies_without_a_word_is_said_by_its_last_line(tmp_path, monkeypatch):
    def job(argv, nproc, engine, env, caller=None):
        caller.last_words = "ModuleNotFoundError: No module named 'torch'"
        return 1

    monkeypatch.setattr(launch, "relaunch", job)
    with pytest.raises(CheckFailed, match="exited with code 1: ModuleNotFoundError: No module named 'torch'"):
        ccltune.bench("all_reduce", engine="gloo", nproc=2, db=str(tmp_path / "x.db"))


def test_results_read_back_from_the_database(tmp_path):
    db = _db(tmp_path)
    with Store(db) as st:
        run_id = st.begin_run("validate", command="ccltune validate r.conf")
        st.finish_run(run_id, "complete", {"status": "FAIL", "sizes": [{"size_bytes": 8, "status": "FAIL"}]})
    res = ValidateResult.read(str(db), run_id)
    assert res.verdict == "FAIL" and res.sizes[0]["size_bytes"] == 8 and res.run_id == run_id and res.rows == []
