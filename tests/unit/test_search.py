"""ccltune search against the fake in-run job (tests/jobs/fake_inrun_job.py): SM-budget candidates from a
workload whose compute overlaps its all_reduce, successive halving, the confirmation run; the planted faster
arm is kept with its in-job ratio, and with no faster arm the answer is how close NCCL's default is. The
whole-run arms NCCL_CTA_POLICY and NCCL_MAX_CTAS (ab's rounds) where the job's NCCL has them; the idle sweep's
best from a sweep database; the first run bounded to the candidates its blocks can judge."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.store import Store

JOB = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_inrun_job.py")
REGEX = r"step +[0-9]+ +([0-9.]+) ms"
# 3 calls a step, as the fake job makes (FAKE_PERIOD): search hands the plugin the workload's calls a step
WORKLOAD = {"schema": "ccltune-workload", "version": 1, "steps": 10, "sources": [{"kind": "test"}], "warnings": [],
            "overflow_calls": 0, "overflow_bytes": 0,
            "compute_overlap": {"traces": 1, "nccl_kernel_us": 1000.0, "overlap_us": 600.0, "share": 0.6,
                                "kernel_us_median": 50.0, "kernels": 10},
            "entries": [{"collective": "all_reduce", "datatype": "bfloat16", "count": 524288, "op": None,
                         "size_bytes": 1048576, "nranks": 4, "nnodes": None, "calls": 30,
                         "ran": [{"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 30}]}]}


def _search(tmp_path, monkeypatch, effects: dict, *flags: str, workload: dict = WORKLOAD) -> int:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(workload))
    monkeypatch.setenv("FAKE_EFFECTS", json.dumps(effects))
    monkeypatch.setenv("FAKE_STEPS", "240")
    monkeypatch.setenv("FAKE_WHOLE_STEPS", "12")   # a whole run (no CCLTUNE_ARMS): 12 steps, the first 4 skipped
    return main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", REGEX, "--seed", "3",
                 "--block-steps", "4", "--warmup-blocks", "1", "--steps", "240", *flags, "--", sys.executable, JOB])


def test_search_keeps_the_planted_faster_sm_budget_rule_with_its_in_job_ratio(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.28.9")
    rc = _search(tmp_path, monkeypatch, {",8,-1,-1": -5}, "--out", str(tmp_path / "kept.conf"), "--no-whole-run")
    out = capsys.readouterr().out
    assert rc == 0 and "3 candidate(s)" in out and "(confirmation)" in out
    kept = (tmp_path / "kept.conf").read_text()
    rules = [line for line in kept.splitlines() if not line.startswith("#")]
    assert rules == ["allreduce,1048576,1048576,default,default,8,-1,-1,-1,-1"]
    ratio = float(re.search(r"in-job ratio ([0-9.]+) \[", kept).group(1))
    assert 0.93 < ratio < 0.97 and "sm-budget; NCCL ran RING/SIMPLE/24ch" in kept
    assert "whole-run arms NCCL_CTA_POLICY, NCCL_MAX_CTAS: skipped (--no-whole-run)" in out
    with Store(tmp_path / "s.db", readonly=True) as st:
        runs = st.runs("ab")
    assert len(runs) == 2 and all(r.summary["in_run"] for r in runs)
    assert re.search(r"^# cost: 2 in-run run\(s\) of the job, 0 min [0-9]+ s$", out, re.M), out   # the "cost"
    assert re.search(r"^# cost: 2 in-run run\(s\) of the job, ", kept, re.M)


def test_a_decode_loops_search_takes_its_step_from_the_workload(tmp_path, capsys, monkeypatch) -> None:
    """A decode loop: the plugin alone finds period 1 (FAKE_FOUND_PERIOD), so without the workload's calls a step
    every block would be a fraction of a step; search hands the workload's 12 calls a step to the plugin
    (step_calls) and finds the planted winner as on any job."""
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.28.9")
    monkeypatch.setenv("FAKE_PERIOD", "12")
    monkeypatch.setenv("FAKE_FOUND_PERIOD", "1")
    twelve = {**WORKLOAD, "entries": [{**WORKLOAD["entries"][0], "calls": 120, "ran": [
        {"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 120}]}]}
    rc = _search(tmp_path, monkeypatch, {",8,-1,-1": -5}, "--out", str(tmp_path / "kept.conf"), "--no-whole-run",
                 workload=twelve)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert [x for x in (tmp_path / "kept.conf").read_text().splitlines() if not x.startswith("#")] == [
        "allreduce,1048576,1048576,default,default,8,-1,-1,-1,-1"]


def test_search_says_how_close_the_default_is_when_no_candidate_wins(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.26.2")
    rc = _search(tmp_path, monkeypatch, {}, "--out", str(tmp_path / "kept.conf"), "--no-whole-run")
    out = capsys.readouterr().out
    assert rc == 0 and "NCCL's default is within " in out and "% of the best of the 3 candidates tried" in out
    kept = (tmp_path / "kept.conf").read_text()
    assert "no rule candidate was faster" in kept and not [x for x in kept.splitlines() if not x.startswith("#")]


def test_a_whole_run_winner_joins_the_answer_and_is_written_as_the_setting_to_use(tmp_path, capsys,
                                                                                 monkeypatch) -> None:
    """NCCL 2.26 has NCCL_MAX_CTAS, not NCCL_CTA_POLICY (2.27, 2.28): the two NCCL_MAX_CTAS arms run as whole runs
    (default, its A/A twin and them, 7 rounds: the fewest that reach 95% under Holm over 3 arms). The job is 5%
    faster with NCCL_MAX_CTAS=8 in its environment (a tokens/s metric, higher is better, with thousands
    separators): it wins, the answer counts it among the 5 candidates tried, the rule file says to set it."""
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.26.2")
    monkeypatch.setenv("FAKE_ENV_EFFECTS", json.dumps({"NCCL_MAX_CTAS=8": -5}))
    monkeypatch.setenv("FAKE_TPS", "1")
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    monkeypatch.setenv("FAKE_STEPS", "240")
    monkeypatch.setenv("FAKE_WHOLE_STEPS", "12")
    rc = main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", r"tps: ([0-9,]+)",
               "--seed", "3", "--block-steps", "4", "--warmup-blocks", "1", "--steps", "240", "--runs", "0",
               "--out", str(tmp_path / "kept.conf"), "--", sys.executable, JOB])
    out = capsys.readouterr().out
    assert rc == 0 and "not in this NCCL: NCCL_CTA_POLICY=1 (NCCL 2.27), NCCL_CTA_POLICY=2 (NCCL 2.28)" in out
    assert "4 arms (default, its A/A twin, NCCL_MAX_CTAS=8, NCCL_MAX_CTAS=16) x 7 round(s)" in out
    assert "1 whole-run setting(s) (NCCL_MAX_CTAS=8) made the job faster, of 5 candidate(s) tried" in out
    assert re.search(r"^# cost: 1 in-run run\(s\) and 28 whole run\(s\) of the job, ", out, re.M), out  # 4 arms x 7
    kept = (tmp_path / "kept.conf").read_text()
    line = next(x for x in kept.splitlines() if x.startswith("# set NCCL_MAX_CTAS=8 in the job's environment"))
    assert 0.93 < float(re.search(r"ratio ([0-9.]+) \[", line).group(1)) < 0.97
    assert not [x for x in kept.splitlines() if not x.startswith("#")]
    with Store(tmp_path / "s.db", readonly=True) as st:
        (whole,) = [r for r in st.runs("ab") if r.summary.get("whole_run")]
        samples = st.ab_samples(whole.id)
    arms = {a["arm"]: a for a in whole.summary["arms"]}
    assert set(arms) == {"default", "default-2", "NCCL_MAX_CTAS=8", "NCCL_MAX_CTAS=16"}
    assert arms["NCCL_MAX_CTAS=8"]["status"] == "faster" and arms["NCCL_MAX_CTAS=16"]["status"] == "no difference"
    assert len(samples) == 28 and {s.round for s in samples} == set(range(1, 8))


def test_the_whole_run_arms_by_nccl_version() -> None:
    """NCCL_CTA_POLICY=1 (efficiency) from 2.27, =2 (zero) from 2.28 (NCCL's src/nccl.h.in), NCCL_MAX_CTAS from 2.17;
    their default rounds: the fewest that reach 95% under Holm over the judged arms, the A/A control included."""
    from ccltune.ab import judge, search

    def names(v):
        return [a.name for a in search.whole_run_arms(v)[0]]

    assert names((2, 28, 9)) == ["NCCL_CTA_POLICY=1", "NCCL_CTA_POLICY=2", "NCCL_MAX_CTAS=8", "NCCL_MAX_CTAS=16"]
    assert names((2, 27, 3)) == ["NCCL_CTA_POLICY=1", "NCCL_MAX_CTAS=8", "NCCL_MAX_CTAS=16"]
    assert names((2, 18, 1)) == ["NCCL_MAX_CTAS=8", "NCCL_MAX_CTAS=16"] and names((2, 16, 5)) == []
    assert names(None) == [] and "unknown" in search.whole_run_arms(None)[1]
    assert [a.env for a in search.whole_run_arms((2, 28, 0))[0][:2]] == [(("NCCL_CTA_POLICY", "1"),),
                                                                         (("NCCL_CTA_POLICY", "2"),)]
    assert (judge.min_rounds(5), judge.min_rounds(3)) == (8, 7)


def test_the_answer_is_within_the_worst_case_of_the_best_in_run_and_whole_run_candidates() -> None:
    """No winner: X is the most the best in-run finalist or the best whole-run arm could be faster, the larger."""
    from ccltune import stats
    from ccltune.ab import judge, search
    from ccltune.ab.inrun_judge import ArmJudgement
    from ccltune.status import ArmStatus

    fin = ArmJudgement("c1", ArmStatus.NO_DIFFERENCE, 8, 100.0, stats.Estimate(0.995, 0.98, 1.01, 0.95, 8, 0.3, "t"))
    res = search.SearchResult(3, [search.Stage(1, ["c1"], [fin], confirm=True)])
    runs = {"default": {r: 100.0 + r % 3 for r in range(8)}, "default-2": {r: 100.0 + r % 2 for r in range(8)},
            "NCCL_MAX_CTAS=8": {r: 96.0 + (r * 7) % 9 for r in range(8)}}
    res.whole = judge.verdicts(runs, {}, controls=["default-2"])
    search.conclude(res)
    (w,) = [v for v in res.whole if v.name == "NCCL_MAX_CTAS=8"]
    assert w.status is ArmStatus.NO_DIFFERENCE and search.tried(res) == 4
    assert w.effect.low < 0.98 and res.within_pct == pytest.approx(100 * (1 - w.effect.low))
    assert "of the best of the 4 candidates tried" in search.summary_line(res)


def test_an_unknown_nccl_version_is_said_and_the_whole_run_arms_skipped(tmp_path, capsys, monkeypatch) -> None:
    rc = _search(tmp_path, monkeypatch, {}, "--runs", "0")
    out = capsys.readouterr().out
    assert rc == 0 and "NCCL's version is unknown" in out and "whole-run arms NCCL_CTA_POLICY, NCCL_MAX_CTAS skipped" in out
    assert "of the 3 candidates tried" in out
    with Store(tmp_path / "s.db", readonly=True) as st:
        assert not [r for r in st.runs("ab") if r.summary.get("whole_run")]


def test_search_refuses_bad_input_before_the_job_runs(tmp_path, capsys) -> None:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({**WORKLOAD, "compute_overlap": {**WORKLOAD["compute_overlap"], "overlap_us": 10.0,
                                                              "share": 0.01}}))
    job = ["--", sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'w')"]
    assert main(["search", "--db", str(tmp_path / "s.db"), "--metric", REGEX, *job]) == 2
    assert "--workload W.json is required" in capsys.readouterr().err
    assert main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", REGEX, *job]) == 2
    assert "no SM-budget candidate" in capsys.readouterr().err
    assert main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", "x(", *job]) == 2
    assert not (tmp_path / "ran").exists()


def test_candidates_come_from_collectives_that_recur_each_step():
    """A real DDP job's workload (4 x H200, tests/fixtures/workload/h200x4-2026-11-28/ddp): its start-up broadcasts
    (issued once) are no candidates, its gradient buckets are, and by weight they come first."""
    import gzip
    import json
    from pathlib import Path

    from ccltune.ab import candidates
    from ccltune.workload import model

    path = Path(__file__).resolve().parents[1] / "fixtures" / "workload" / "h200x4-2026-11-28" / "ddp" / "w.json.gz"
    wl = model.from_doc(json.loads(gzip.decompress(path.read_bytes())), str(path))
    assert wl.steps and any(e.key.collective == "broadcast" for e in wl.entries)
    gs = candidates.groups(wl, 8)
    assert gs and {g.collective for g in gs} == {"allreduce"}
    every_step = [e for e in wl.entries if e.key.collective == "all_reduce" and e.calls >= wl.steps]
    assert every_step and all(any(g.min_bytes <= e.key.size_bytes <= g.max_bytes for g in gs) for e in every_step
                              if e.key.size_bytes >= 1 << 20)


TWO_GROUPS = {**WORKLOAD, "entries": [   # 1 + 2 calls a step: the fake job's 3
    {**WORKLOAD["entries"][0], "calls": 10, "ran": [{"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 10}]},
    {"collective": "all_reduce", "datatype": "bfloat16", "count": 33554432, "op": None, "size_bytes": 67108864,
     "nranks": 4, "nnodes": None, "calls": 20, "ran": [{"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 20}]}]}


def test_the_first_run_holds_only_the_candidates_its_blocks_can_judge(tmp_path, capsys, monkeypatch) -> None:
    """Two groups, 3 SM-budget candidates each; a run of 240 steps in blocks of 4 holds about 58 blocks: 4 candidates
    (1 warm-up block, then 6 arms x (1 + 8 rounds) = 55 blocks; 5 would need 64). The heavier group's 3 and the
    lighter's first are kept, the other 2 said."""
    rc = _search(tmp_path, monkeypatch, {}, "--runs", "0", "--no-whole-run", workload=TWO_GROUPS)
    out = capsys.readouterr().out
    assert rc == 0 and "6 candidate(s)" in out
    assert "holds about 58 blocks of 4 steps: it can judge 4 candidate(s) (55 blocks)" in out
    assert ("2 left out: allreduce.1M.4ch (allreduce 1M..1M), allreduce.1M.8ch (allreduce 1M..1M)" in out)
    assert "search run 1 (confirmation): 4 candidate(s): allreduce.64M.2ch, allreduce.64M.4ch, allreduce.64M.8ch, " \
           "allreduce.1M.2ch" in out and "of the 4 candidates tried" in out


def test_a_run_too_short_for_one_candidate_is_refused_before_it_runs(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_STEPS", "1")
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    job = ["--", sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'w')"]
    rc = main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", REGEX, *job])
    err = capsys.readouterr().err
    assert rc == 2 and "a run of 10 steps (the workload's steps) holds about 0 blocks of 5 steps" in err
    assert "run the job for at least 123 steps" in err and not (tmp_path / "ran").exists()


def _sweep_db(path, size: int, winner: str) -> str:
    """A sweep run of all_reduce at ``size`` on 4 ranks where ``winner`` beats NCCL's default by 20%."""
    from ccltune.store import Measurement
    from tune_rows import rows_for

    times = {"default": {size: [99.0, 100.0, 101.0]}, winner: {size: [79.0, 80.0, 81.0]}}
    with Store(path) as st:
        run = st.begin_run("sweep", command="ccltune sweep --workload w.json",
                           env={"gpus": [{"name": "NVIDIA H200"}] * 4, "world_size": 4})
        st.add_measurements(run, [Measurement("all_reduce", r["size_bytes"], r["size_bytes"] // 4, "float", "sum", None,
                                              False, 4, time_us=r["time_us"], algo=r["algo"], proto=r["proto"],
                                              channels=r["channels"], config=r["config"], rep=r["rep"], graph=1)
                                  for r in rows_for(times, coll="all_reduce", gpu="H200")])
        st.finish_run(run, "complete")
    return str(path)


def test_the_idle_sweeps_best_comes_from_a_sweep_database_as_tune_workload_reads_it(tmp_path, capsys,
                                                                                   monkeypatch) -> None:
    """--sweep-db: the rule ccltune tune --workload derives from the database's sweep runs (ring/ll at the job's
    1 MiB all_reduce) is the group's sweep candidate; planted 5% faster in the job, it is kept."""
    db = _sweep_db(tmp_path / "sweep.db", 1048576, "ring/ll/-")
    rc = _search(tmp_path, monkeypatch, {"ring,ll": -5}, "--sweep-db", db, "--runs", "0", "--no-whole-run",
                 "--out", str(tmp_path / "kept.conf"))
    out = capsys.readouterr().out
    assert rc == 0 and f"1 rule(s) ccltune tune --workload derives from runs 1 of --sweep-db {db}" in out
    assert "4 candidate(s)" in out and "allreduce.1M.sweep.ring.ll.any" in out
    kept = (tmp_path / "kept.conf").read_text()
    assert [x for x in kept.splitlines() if not x.startswith("#")] == ["allreduce,1048576,1048576,ring,ll,-1,-1,-1,-1,-1"]
    assert "(sweep; NCCL ran RING/SIMPLE/24ch)" in kept


def test_sweep_db_and_sweep_rules_together_or_a_missing_db_are_refused(tmp_path, capsys) -> None:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    job = ["--", sys.executable, "-c", "pass"]
    base = ["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", REGEX]
    assert main([*base, "--sweep-db", str(tmp_path / "none.db"), *job]) == 2
    assert f"--sweep-db {tmp_path / 'none.db'}: no such file" in capsys.readouterr().err
    rules = tmp_path / "r.conf"
    rules.write_text("allreduce,0,1K,ring,simple,-1,-1,-1\n")
    assert main([*base, "--sweep-db", str(tmp_path / "none.db"), "--sweep-rules", str(rules), *job]) == 2
    assert "give one" in capsys.readouterr().err


def test_a_one_gpu_jobs_search_is_refused_before_it_runs(tmp_path, capsys, monkeypatch) -> None:
    """A one-GPU job's workload (nranks 1, as a one-rank COLL log gives it): NCCL consults no tuner there, so the
    search says so instead of running the job for blocks no arm can change."""
    one = {**WORKLOAD, "entries": [{**WORKLOAD["entries"][0], "nranks": 1}]}
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(one))
    rc = main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", REGEX, "--",
               sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'w')"])
    err = capsys.readouterr().err
    assert rc == 2 and "one-rank communicators, where NCCL consults no tuner" in err and not (tmp_path / "ran").exists()


def test_a_missing_sweep_rules_file_is_the_users_mistake(tmp_path, capsys) -> None:
    """--sweep-rules naming no file (the loop's step 8 after a tune that could not run): exit 2, as ab's --rules."""
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    rc = main(["search", "--workload", str(wl), "--sweep-rules", str(tmp_path / "rules.conf"), "--metric", REGEX,
               "--", sys.executable, "-c", "pass"])
    assert rc == 2 and "--sweep-rules: " in capsys.readouterr().err


def test_two_winners_are_judged_together_as_the_file_holds_them(tmp_path, capsys, monkeypatch) -> None:
    """Two groups, a winner in each (8 channels for the 64M all_reduce, 2 for the 1M one, each 5% faster alone):
    one more run judges them together, as kept.conf holds them; both stay, with that run's ratio in the header."""
    effects = {r"^allreduce,67108864,.*,8,-1,-1": -5, r"^allreduce,1048576,.*,2,-1,-1": -5}
    rc = _search(tmp_path, monkeypatch, effects, "--runs", "0", "--no-whole-run", "--out", str(tmp_path / "kept.conf"),
                 workload=TWO_GROUPS)
    out = capsys.readouterr().out
    assert rc == 0 and "search run 2 (the 2 winners together, the rule file as written)" in out, out
    kept = (tmp_path / "kept.conf").read_text()
    assert len([x for x in kept.splitlines() if x and not x.startswith("#")]) == 2
    ratio = float(re.search(r"^# the 2 rules together: in-job ratio ([0-9.]+) \[", kept, re.M).group(1))
    assert 0.88 < ratio < 0.93   # 0.95 x 0.95
    assert re.search(r"^# cost: 2 in-run run\(s\) of the job", out, re.M)


def test_winners_slower_together_leave_only_the_best_alone(tmp_path, capsys, monkeypatch) -> None:
    """The same two winners, but the job is 15% slower when both rules load together (FAKE_EFFECTS matches the two
    lines one after the other): only the better winner alone is kept, and the answer says why."""
    effects = {r"^allreduce,67108864,.*,8,-1,-1": -5, r"^allreduce,1048576,.*,2,-1,-1": -6,
               r",8,-1,-1,-1,-1\nallreduce,1048576|,2,-1,-1,-1,-1\nallreduce,67108864": 25}
    rc = _search(tmp_path, monkeypatch, effects, "--runs", "0", "--no-whole-run", "--out", str(tmp_path / "kept.conf"),
                 workload=TWO_GROUPS)
    out = capsys.readouterr().out
    assert rc == 0 and "not proven faster together: only the best alone is kept (allreduce.1M.2ch" in out, out
    kept = (tmp_path / "kept.conf").read_text()
    assert [x for x in kept.splitlines() if x and not x.startswith("#")] == [
        "allreduce,1048576,1048576,default,default,2,-1,-1,-1,-1"]
    assert "# the 2 winners together: ratio 1.1" in kept


# --- the search's decisions simulated: its real code (successive halving, confirmation with Holm, the winners
# together), each run of the job replaced by simulated blocks judged by ab's own in-run judge ---------------

def _simulated_search(tmp_path, monkeypatch, rng, effects: dict[str, float], noise: float, rounds: int = 8):
    import math
    import types

    from ccltune.ab import blocks as blockmod
    from ccltune.ab import candidates, inrun, inrun_judge, search
    from ccltune.workload import model

    def fake_run(plan, say):
        values = []
        for r in range(rounds):
            drift = math.exp(rng.gauss(0, 0.05))
            for i, arm in enumerate(plan.arms):
                f = 1.0 + effects.get(arm.name, 0.0)
                span = blockmod.Span(i + r * len(plan.arms), i, r, i, 0, 1)
                values.append(blockmod.BlockValue(span, 100 * drift * f * math.exp(rng.gauss(0, noise)), 4))
        judged = inrun_judge.judge(values, [a.name for a in plan.arms], higher_better=False, min_effect=0.01)
        return types.SimpleNamespace(judged=judged, notes=[], job=types.SimpleNamespace(nccl_version=None),
                                     blocks=types.SimpleNamespace(spans=[None] * 200))

    monkeypatch.setattr(inrun, "run", fake_run)
    wl_path = tmp_path / "w.json"
    wl_path.write_text(json.dumps(TWO_GROUPS))
    wl = model.load(str(wl_path))
    cands = candidates.candidates(candidates.groups(wl, 8), None, True)
    base = inrun.InRunPlan(["job"], (), re.compile(REGEX), False, 1, warmup_blocks=1, block_steps=4)
    folder = tmp_path / "cands"
    folder.mkdir(exist_ok=True)
    return cands, search.search(base, cands, folder, runs=2, finalists=2, say=lambda s: None,
                                store=lambda *a: None)


@pytest.mark.parametrize("noise", [0.01, 0.05])
def test_a_search_under_a_true_null_keeps_a_false_winner_in_at_most_5_percent(tmp_path, monkeypatch, noise) -> None:
    """No candidate differs from NCCL's default: the race picks the best-looking by chance, so only the fresh
    confirmation run (Holm over the finalists) may keep one; over 300 searches of the 6 candidates, a winner of
    any kind (a false FASTER) in at most 5% of them."""
    import random

    rng = random.Random(int(noise * 1000))
    wrong = sum(bool(_simulated_search(tmp_path, monkeypatch, rng, {}, noise)[1].winners) for _ in range(300))
    assert wrong / 300 <= 0.05, f"{wrong} of 300 searches kept a winner under a true null at {noise:.0%} noise"


def test_a_search_finds_a_planted_winner(tmp_path, monkeypatch) -> None:
    """One candidate 5% faster (1% noise): the search keeps it in at least 90 of 100 searches, nothing else."""
    import random

    rng = random.Random(5)
    found = 0
    for _ in range(100):
        cands, got = _simulated_search(tmp_path, monkeypatch, rng, {"allreduce.64M.8ch": -0.05}, 0.01)
        assert "allreduce.64M.8ch" in [c.name for c in cands]
        names = [c.name for c, _ in got.winners]
        assert names in ([], ["allreduce.64M.8ch"])
        found += names == ["allreduce.64M.8ch"]
    assert found >= 90, found


def test_a_job_of_several_communicator_sizes_is_searched_on_its_busiest(tmp_path, capsys, monkeypatch) -> None:
    """Tuned calls on two communicator sizes (12 a step on 4 ranks, 1 on 2): the arms are limited to the busiest
    size (the arms file's nranks), so the candidates are its collectives' only, and search says so."""
    doc = {**WORKLOAD, "entries": [
        {**WORKLOAD["entries"][0], "calls": 120, "ran": [{"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 120}]},
        {"collective": "all_gather", "datatype": "bfloat16", "count": 262144, "op": None, "size_bytes": 1 << 21,
         "nranks": 2, "nnodes": None, "calls": 10}],
        "order": [[0, 0, 12], [1, 1, 1]] * 10}
    monkeypatch.setenv("FAKE_PERIOD", "12")
    rc = _search(tmp_path, monkeypatch, {}, "--runs", "0", "--no-whole-run", workload=doc)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "the arms (and the candidates) are for its busiest, of 4 ranks" in out
    assert "1 group(s): allreduce 1M..1M" in out and "allgather" not in out


def test_a_search_judged_by_the_gpu_step_period_needs_no_step_line(tmp_path, capsys, monkeypatch) -> None:
    """--metric gpu: the job prints nothing; the in-run runs are judged by the profiler's GPU step period, the planted
    winner is kept, and the whole-run arms (which need step lines) are skipped, said."""
    monkeypatch.setenv("FAKE_QUIET", "1")
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.28.9")
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    monkeypatch.setenv("FAKE_EFFECTS", json.dumps({",8,-1,-1": -5}))
    monkeypatch.setenv("FAKE_STEPS", "240")
    rc = main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", "gpu", "--seed", "3",
               "--block-steps", "4", "--warmup-blocks", "1", "--steps", "240", "--out", str(tmp_path / "kept.conf"),
               "--", sys.executable, JOB])
    out = capsys.readouterr().out
    assert rc == 0 and "skipped (--metric gpu is a block's GPU step period" in out, out
    assert [x for x in (tmp_path / "kept.conf").read_text().splitlines() if not x.startswith("#")] == [
        "allreduce,1048576,1048576,default,default,8,-1,-1,-1,-1"]
