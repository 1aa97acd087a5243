"""The report's workload views, fed by the summaries the commands write: replay's communication time
per step on the verdict card and its entries by share, tune --workload's points by share of the job."""

from __future__ import annotations

import re

from ccltune.report import load, sections, verdict
from ccltune.report import workload as report_workload
from ccltune.report.model import Table
from ccltune.stats import point_stats
from ccltune.store import Run, Store
from ccltune.tune import weighted
from ccltune.tune.derive import derive
from ccltune.validate import replay as replay_plan
from ccltune.workload.model import Entry, Key, Workload
from report_db import add_replay
from test_report_synthetic import fill_store

ENV = {"host": "vm", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 2, "world_size": 2}


def _run(i: int, kind: str, summary: dict) -> Run:
    return Run(i, kind, "complete", "2026-11-23 20:00", None, f"ccltune {kind}", "nccl", 2, 1, "torchrun", "vm",
               None, None, None, env=ENV, summary=summary)


def _replay() -> Run:
    ents = [replay_plan.EntryTime(0, "all_reduce", 33587200, 14, point_stats([400.0, 401.0, 402.0]),
                                  point_stats([300.0] * 3)),
            replay_plan.EntryTime(3, "broadcast", 1120, 1, point_stats([20.0, 21.0, 22.0]), point_stats([21.0] * 3))]
    rounds = {"default": [2820.0, 2830.0, 2840.0, 2825.0, 2835.0, 2830.0],
              "rules": [2120.0, 2130.0, 2140.0, 2125.0, 2135.0, 2130.0]}
    v = replay_plan.verdict(rounds, 2, ents)
    return _run(7, "replay", {**v.to_dict(rounds), "under_load": None, "skipped": [], "notes": []})


def test_replay_feeds_the_verdict_card_and_its_entries_are_weighted_by_share() -> None:
    run = _replay()
    (card,) = verdict.cards([run], {}, {})
    assert card.figures == [("communication per step, NCCL's default ± 0.35% -> rules ± 0.47% (replay run 7, 6 rounds)",
                             "2.83 → 2.13 ms"), ("rules / default time (paired rounds: Wilcoxon signed-rank, interval)",
                                                 "0.7527x [0.7518, 0.7535] at 95.0%")]
    assert card.level == "good" and card.lines[-1][1].startswith("replay run 7 PASS: the rules are faster: x0.7527, 95% "
                                                                  "interval [0.7518, 0.7535] (Wilcoxon signed-rank")
    t = report_workload.replay_table(run)
    # 14 calls x 401 us / 2 steps = 2807 us of the default's step; the broadcast 10.5 us
    assert [r[:7] for r in t.rows] == [["all_reduce", t.rows[0][1], "14", "99.6%", "2807.0", "2100.0", "707.0"],
                                       ["broadcast", t.rows[1][1], "1", "0.4%", "10.5", "10.5", "0.0"]]
    assert t.row_class == ["good", ""]
    sec = sections.validate_section(sections.ReportInput(runs=[run]))
    assert "replay verdict PASS; communication per step: default 2830.0 us ± 0.35%, rules 2130.0 us ± 0.47%" in sec.blocks[0].text


def test_tune_predictions_are_weighted_by_the_jobs_share() -> None:
    bucket = 8396800 * 4
    rows = [dict(collective="all_reduce", size_bytes=s, n_ranks=2, n_nodes=1, algo=a, proto=p, channels=None,
                 config=c, rep=k, time_us=t * f, status="ok", in_place=False, dtype="float", op=None, graph=1, gpu="H100")
            for s, t0 in ((1 << 20, 50.0), (bucket, 500.0)) for c, a, p, t in (("default", None, None, t0),
                                                                              ("ring/simple/-", "ring", "simple",
                                                                               t0 * (0.8 if s == bucket else 1)))
            for k, f in enumerate((0.99, 1.0, 1.01))]
    wl = Workload([Entry(Key("all_reduce", bucket, 2, "float", 8396800), 10),
                   Entry(Key("all_reduce", 1 << 20, 2, "float", 1 << 18), 4),
                   Entry(Key("all_reduce", 3 << 20, 2, "float", 3 << 18), 1)], [], 2)
    (plan,) = weighted.plan(wl, derive(rows, isolated_margin=0.10))
    run = _run(9, "tune", {"workload": "w.json", "predictions": [weighted.summary(plan)]})
    (t,) = report_workload.tune_tables(run)
    assert [(r[0], r[2], r[3], r[4], r[5], r[7]) for r in t.rows] == [
        ("all_reduce", "10", "96.2%", "2500.0", "2000.0", "ring/simple/default"),
        ("all_reduce", "4", "3.8%", "100.0", "100.0", "default"),
        ("all_reduce", "1", "-", "-", "-", "unmeasured")]
    assert "on H100" in t.caption and "per step" in t.caption
    # issue 29: the job's own time per call and its waiting, per entry, when the workload has them
    from ccltune.workload.timing import Timing

    job, wait = Timing(), Timing()
    for us, w in ((520.0, 20.0), (530.0, 30.0), (540.0, 40.0)):
        job.add(us)
        wait.add(w)
    wl.entries[0].timing, wl.entries[0].wait = job, wait
    (plan2,) = weighted.plan(wl, derive(rows, isolated_margin=0.10))
    (t2,) = report_workload.tune_tables(_run(10, "tune", {"workload": "w.json", "predictions": [weighted.summary(plan2)]}))
    assert t2.rows[0][7] == "ring/simple/default (in the job: 530.0 us/call, 30.0 us of it waiting for the last rank)"
    sec = sections.rules_section(sections.ReportInput(runs=[run], artifacts={9: {"rules": "# no rules\n"}}))
    assert sec.blocks[-1] == t


def test_stored_replay_and_tune_reach_the_card_and_the_tuning_section(tmp_path) -> None:
    """Through the store: fill_store's tune --workload run (real derive and weighted.plan over its
    sweep) and report_db.add_replay's run (real verdict and ReplayRun summary, rows per entry)."""
    with Store(tmp_path / "w.db") as store:
        fill_store(store)
        rid = add_replay(store)
        inp = load(store, latest=20)
    (card,) = [c for c in verdict.cards(inp.runs, inp.findings, inp.peaks) if c.title == "node-a"]
    (label, value), ratio = card.figures[-2:]
    assert re.fullmatch(rf"communication per step, NCCL's default ± \d\.\d+% -> rules ± \d\.?\d*% \(replay run {rid}, "
                        r"5 rounds\)", label) and re.fullmatch(r"2\d\.\d → 2\d\.\d us", value)
    assert ratio[0].startswith("rules / default time") and ratio[1].startswith("0.9")
    assert any(lv == "good" and t.startswith(f"replay run {rid} PASS") for lv, t in card.lines)
    assert "runs 1, 3-8 (" in card.subtitle and "1 tune" in card.subtitle  # tune joined its sweep's group
    rules = sections.rules_section(inp)
    assert len(rules.figures()) == 1  # the replay stored the tune run's file: drawn once, named
    assert any(f"run {rid} (replay" in getattr(b, "text", "") and "ran with the rule file of run 4" in b.text
               for b in rules.blocks)
    (pred,) = [b for b in rules.blocks if isinstance(b, Table) and "predicted" in b.caption]
    shares = [float(row[3].rstrip("%")) for row in pred.rows if row[3] != "-"]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 100) < 0.5
    assert pred.rows[0][:3] == ["all_reduce", "16M", "10"] and pred.rows[-1][-1] == "unmeasured"  # the broadcast
    replay = sections.validate_section(inp).blocks
    (entries,) = [b for b in replay if isinstance(b, Table) and "replayed entry" in b.caption]
    # the 16M buckets keep NCCL's default: equal within the noise, not red for a jitter of the mean
    assert entries.rows[0][:3] == ["all_reduce", "16M", "10"] and entries.rows[0][-1].startswith("within the noise")
    assert entries.row_class == ["", "good", "good", "good", "good"]
