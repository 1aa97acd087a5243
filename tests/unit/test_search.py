"""ccltune search against the fake in-run job (tests/jobs/fake_inrun_job.py): SM-budget candidates from a
workload whose compute overlaps its all_reduce, successive halving, the confirmation run; the planted faster
arm is kept with its in-job ratio, and with no faster arm the answer is how close NCCL's default is."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ccltune.cli import main
from ccltune.store import Store

JOB = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_inrun_job.py")
REGEX = r"step +[0-9]+ +([0-9.]+) ms"
WORKLOAD = {"schema": "ccltune-workload", "version": 1, "steps": 10, "sources": [{"kind": "test"}], "warnings": [],
            "overflow_calls": 0, "overflow_bytes": 0,
            "compute_overlap": {"traces": 1, "nccl_kernel_us": 1000.0, "overlap_us": 600.0, "share": 0.6,
                                "kernel_us_median": 50.0, "kernels": 10},
            "entries": [{"collective": "all_reduce", "datatype": "bfloat16", "count": 524288, "op": None,
                         "size_bytes": 1048576, "nranks": 4, "nnodes": None, "calls": 100,
                         "ran": [{"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 100}]}]}


def _search(tmp_path, monkeypatch, effects: dict, *flags: str) -> int:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(WORKLOAD))
    monkeypatch.setenv("FAKE_EFFECTS", json.dumps(effects))
    monkeypatch.setenv("FAKE_STEPS", "240")
    return main(["search", "--db", str(tmp_path / "s.db"), "--workload", str(wl), "--metric", REGEX, "--seed", "3",
                 "--block-steps", "4", "--warmup-blocks", "1", *flags, "--", sys.executable, JOB])


def test_search_keeps_the_planted_faster_sm_budget_rule_with_its_in_job_ratio(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.28.9")
    rc = _search(tmp_path, monkeypatch, {",8,-1,-1": -5}, "--out", str(tmp_path / "kept.conf"))
    out = capsys.readouterr().out
    assert rc == 0 and "3 candidate(s)" in out and "(confirmation)" in out
    kept = (tmp_path / "kept.conf").read_text()
    rules = [line for line in kept.splitlines() if not line.startswith("#")]
    assert rules == ["allreduce,1048576,1048576,default,default,8,-1,-1,-1,-1"]
    ratio = float(re.search(r"in-job ratio ([0-9.]+) \[", kept).group(1))
    assert 0.93 < ratio < 0.97 and "sm-budget; NCCL ran RING/SIMPLE/24ch" in kept
    assert "NCCL 2.28.9 has NCCL_CTA_POLICY and NCCL_MAX_CTAS" in out and "--env NCCL_CTA_POLICY=1" in out
    with Store(tmp_path / "s.db", readonly=True) as st:
        runs = st.runs("ab")
    assert len(runs) == 2 and all(r.summary["in_run"] for r in runs)


def test_search_says_how_close_the_default_is_when_no_candidate_wins(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NCCL_VERSION", "2.26.2")
    rc = _search(tmp_path, monkeypatch, {}, "--out", str(tmp_path / "kept.conf"))
    out = capsys.readouterr().out
    assert rc == 0 and "NCCL's default is within " in out and "% of the best of the 3 candidates tried" in out
    assert "NCCL 2.26.2 is older than 2.27: not tried" in out
    kept = (tmp_path / "kept.conf").read_text()
    assert "no candidate was faster" in kept and not [x for x in kept.splitlines() if not x.startswith("#")]


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
