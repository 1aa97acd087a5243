"""Measure in the job's conditions (issue 28 item 4, issue 30): sweep --workload in the job's datatype,
under load when the job's own times are far slower than idle, and `workload show --db` saying so."""

from __future__ import annotations

from pathlib import Path

from ccltune import datatypes
from ccltune.cli import main
from ccltune.commands.sweep_options import SweepOptions
from ccltune.commands.sweep_workload import DEFAULT_LOAD_M, job_dtypes, load_from_job
from ccltune.store import Measurement, Store
from ccltune.workload import importer
from ccltune.workload.model import Entry, Key, Workload
from ccltune.workload.plan import sweep_points
from cli_options import parsed

PROFILE = Path(__file__).resolve().parents[1] / "fixtures" / "workload" / "profile-ddp-2"  # real (README there)
JOB_US = 634.816  # its all_reduce of 32768000 floats (125 MiB): the job's median over both ranks' 14 calls


def test_the_sweep_measures_in_the_jobs_datatype_unless_d_is_typed() -> None:
    """Issue 30: 'the job issues bfloat16, measured with float'. A bfloat16 all_gather of 3 elements per
    rank (12 B on 2 ranks) cannot be timed in float at all; in bfloat16 it is."""
    wl = Workload([Entry(Key("all_gather", 12, 2, "bfloat16", 3), 5), Entry(Key("all_reduce", 64, 2, "float", 16), 2),
                   Entry(Key("all_reduce", 32, 2, "half", 16), 1)], [])
    fl = datatypes.dtype("float")
    points, skipped = sweep_points(wl, 2, 1, fl)
    assert "all_gather" not in points and "does not divide into float" in skipped[0].reason
    dts = job_dtypes(parsed(SweepOptions, ["sweep", "--workload", "w.json"]), wl)
    # each point in its own datatype (issue 38: the job's float all_reduce is not measured in another's bfloat16)
    assert {k: d.name for k, d in dts.items()} == {("all_gather", 12): "bfloat16", ("all_reduce", 64): "float",
                                                   ("all_reduce", 32): "half"}
    points, skipped = sweep_points(wl, 2, 1, fl, dtypes=dts)
    assert points["all_gather"] == [12] and not any(s.entry.key.collective == "all_gather" for s in skipped)
    for typed in (["-d", "float"], ["--datatype=float"], ["-dfloat"]):
        assert job_dtypes(parsed(SweepOptions, ["sweep", *typed]), wl) is None


def _db(path: Path, idle_us: float) -> None:
    with Store(path) as st:
        run = st.begin_run("sweep", command="test")
        st.add_measurements(run, [Measurement("all_reduce", 131072000, 32768000, "float", "sum", None, False, 2,
                                              time_us=idle_us, n_nodes=1, rep=k) for k in range(3)])
        st.finish_run(run, "complete")


def test_a_job_far_slower_than_idle_is_swept_under_load_by_default(tmp_path, capsys) -> None:
    wl = importer.import_files([PROFILE])          # all_reduce 125 MiB: 634.8 us per call in the job
    (note,), load = load_from_job(SweepOptions(db=str(tmp_path / "none.db")), wl)
    assert "holds no idle measurement" in note and load is None
    db = tmp_path / "r.db"
    _db(db, JOB_US / 4.1)
    (note,), load = load_from_job(SweepOptions(db=str(db)), wl)
    assert load == DEFAULT_LOAD_M
    assert "all_reduce 131072000 B x4.1" in note and "sweeping under load" in note
    (note,), load = load_from_job(SweepOptions(db=str(db), idle=True), wl)
    assert "as --idle asks" in note and load is None
    assert load_from_job(SweepOptions(db=str(db), under_load=512), wl) == ([], 512)  # given: kept, nothing said
    near = tmp_path / "near.db"
    _db(near, JOB_US / 1.4)                          # x1.4: the job's conditions are close to idle
    assert load_from_job(SweepOptions(db=str(near)), wl) == ([], None)
    # workload show says the same, with the ratio per entry
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(PROFILE), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["workload", "show", str(out), "--db", str(db)]) == 0
    text = capsys.readouterr().out
    row = next(x.split() for x in text.splitlines() if x.startswith("  all_reduce") and " 32768000 " in x)
    assert row[2] == "?" and row[9] == "634.8" and row[11] == "154.8" and row[12] == "4.10"  # op: profiler files do not say
    assert "far slower than idle (ratio >= 2 at the median) for all_reduce 125M (x4.1)" in text


def test_show_prints_no_estimate_when_nothing_matched(tmp_path, capsys) -> None:
    """Issue 30: 'estimated communication time per run: 0.0 us ... (0 of 17 entries measured)'."""
    db = tmp_path / "r.db"
    with Store(db) as st:
        run = st.begin_run("sweep", command="test")
        st.add_measurements(run, [Measurement("broadcast", 8, 2, "float", "sum", 0, False, 2, time_us=5.0)])
        st.finish_run(run, "complete")
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(PROFILE), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["workload", "show", str(out), "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "no estimate: " in text and "estimated communication time" not in text and "0.0 us" not in text
