"""ccltune ab --in-run against a fake job that plays the tuner plugin's in-run arms (tests/jobs/fake_inrun_job.py:
it reads CCLTUNE_ARMS, switches by ccltune's twin of the schedule, writes the arm logs of CONTRACTS.md section 2):
a planted slowdown found in one run, the A/A twin equal, drift cancelled by pairing within rounds, a tokens/s
metric, a block-buffered job, CUDA graphs, and bad input."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ccltune.ab import armsfile, blocks, schedule
from ccltune.ab.armsfile import ArmLog, LoggedBlock
from ccltune.ab.output import number
from ccltune.ab.steplines import StepLine
from ccltune.cli import main
from ccltune.errors import DataError
from ccltune.store import Store

JOB = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_inrun_job.py")
REGEX = r"step +[0-9]+ +([0-9.]+) ms"


@pytest.fixture(autouse=True)
def _own_tmp(tmp_path, monkeypatch) -> None:
    """ab --in-run keeps a run's folder when no verdict comes of it: here, inside the test's own folder."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _ab(tmp_path, *flags: str) -> int:
    return main(["ab", "--in-run", "--db", str(tmp_path / "ab.db"), "--block-steps", "6", "--warmup-blocks", "1",
                 "--seed", "5", *flags, "--", sys.executable, JOB])


def _rules(tmp_path, name: str, word: str) -> str:
    p = tmp_path / f"{name}.conf"
    p.write_text(f"# {word} (the fake job reads this word)\nallreduce,0,1K,ring,simple,-1,-1,-1\n")
    return str(p)


def _rows(out: str) -> dict[str, str]:
    """The verdict table's rows (the GPU step period's diagnostic table below it left out)."""
    table = out.split("# GPU step period per block", 1)[0]
    return {line.split()[0]: line for line in table.splitlines() if line.startswith("  ")}


def test_a_planted_slowdown_is_found_in_one_run_the_aa_twin_is_equal_and_drift_cancels(tmp_path, capsys,
                                                                                       monkeypatch) -> None:
    monkeypatch.setenv("FAKE_DRIFT_PCT", "20")  # the step time grows 20% over the run: 4x the planted effect
    # steps of 10 ms: a block (6 steps) is 60 ms, so a step line read late by a loaded CI machine stays in its block
    monkeypatch.setenv("FAKE_STEP_S", "0.01")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--rules", _rules(tmp_path, "same", "plain"),
             "--metric", REGEX, "--json", str(tmp_path / "ab.json"))
    out = capsys.readouterr()
    assert rc == 1 and "slow slower" in out.err
    rows = _rows(out.out)
    assert rows["slow"].endswith("SLOWER") and "no difference" in rows["same"]
    assert "no difference (A/A control" in rows["default-2"]
    doc = json.loads((tmp_path / "ab.json").read_text())
    (slow,) = [a for a in doc["arms"] if a["arm"] == "slow"]
    assert 1.03 < slow["ratio"] < 1.07 and slow["ratio_lo"] > 1 and slow["pairs"] >= 6
    with Store(tmp_path / "ab.db", readonly=True) as st:
        run = st.runs("ab")[-1]
        samples = st.ab_samples(run.id)
    assert run.status == "complete" and run.summary["in_run"] is True
    assert {s.arm for s in samples} == {"default", "default-2", "slow", "same"}
    assert all(s.note.startswith("in-run block") and s.matches >= 3 for s in samples)


def test_the_gpu_step_period_per_arm_is_a_diagnostic_below_the_verdict_and_stored(tmp_path, capsys) -> None:
    """With ccltune's profiler plugin built, the job's profiler files (the fake job writes them as the plugin does:
    arms from the tuner, GPU timestamps) give each judged block its GPU step period: per arm its ratio to default's,
    paired by round, printed below the verdict table, in --json and in the run's summary; never the verdict."""
    from ccltune.ab import job

    assert job.profiler_path() is not None, "build the profiler plugin: make -C profiler"
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX, "--json", str(tmp_path / "a.json"))
    out = capsys.readouterr().out
    assert rc == 1
    table, gpu = out.split("# GPU step period per block", 1)
    assert "SLOWER" in table and "from 2 profiler file(s)" in gpu and "SLOWER" not in gpu
    rows = {line.split()[0]: line.split() for line in gpu.splitlines() if line.startswith("  ")}
    assert 1.03 < float(rows["slow"][3]) < 1.07 and 0.98 < float(rows["default-2"][3]) < 1.02
    doc = json.loads((tmp_path / "a.json").read_text())["gpu_period"]
    (slow,) = [a for a in doc["arms"] if a["arm"] == "slow"]
    assert doc["files"] == 2 and slow["pairs"] >= 6 and slow["ratio_lo"] > 1 and "not the verdict" in doc["what"]
    with Store(tmp_path / "ab.db", readonly=True) as st:
        assert st.runs("ab")[-1].summary["gpu_period"]["arms"][2]["ratio"] == slow["ratio"]


def test_a_tokens_per_second_metric_with_thousands_separators_is_higher_is_better(tmp_path, capsys,
                                                                                  monkeypatch) -> None:
    monkeypatch.setenv("FAKE_TPS", "1")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", r"tps: ([0-9,]+)")
    out = capsys.readouterr()
    assert "higher is better (inferred from 'tps'" in out.out
    rows = _rows(out.out)
    assert rc == 1 and rows["slow"].endswith("SLOWER") and float(rows["default"].split()[2]) > 8000
    assert number("12,345") == 12345 and number("1,234.5") == 1234.5 and number("12,34") is None


def test_a_block_buffered_job_is_named(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_BUFFERED", "1")
    _ab(tmp_path, "--rules", _rules(tmp_path, "same", "plain"), "--metric", REGEX)
    out = capsys.readouterr()
    assert "block-buffered" in out.out + out.err and "stdbuf -oL" in out.out + out.err


def test_tuner_calls_stopping_while_steps_go_on_is_said_to_be_cuda_graphs(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GRAPH_AFTER", "110")
    monkeypatch.setenv("FAKE_STEPS", "220")
    _ab(tmp_path, "--rules", _rules(tmp_path, "same", "plain"), "--metric", REGEX)
    out = capsys.readouterr().out
    assert "CUDA graphs" in out and "in-run arms do not apply to those collectives" in out


@pytest.mark.parametrize("flags,says", [
    (["--metric", "step ([0-9.]+ ms"], "is not a regular expression"),
    (["--metric", "step [0-9.]+ ms"], "has no group"),
    ([], "--in-run needs --metric REGEX"),
    (["--metric", REGEX, "--env", "NCCL_ALGO=ring"], "which a run cannot change midway"),
    (["--metric", REGEX, "--block-steps", "1"], "--block-steps must be an integer in 2.."),
])
def test_bad_input_is_refused_before_the_job_runs(tmp_path, capsys, flags, says) -> None:
    rc = main(["ab", "--in-run", "--db", str(tmp_path / "ab.db"), "--rules", _rules(tmp_path, "same", "plain"),
               *flags, "--", sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'w')"])
    assert rc == 2 and says in capsys.readouterr().err and not (tmp_path / "ran").exists()


def test_a_job_that_writes_no_arm_log_names_what_is_missing(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NO_LOGS", "1")
    monkeypatch.setenv("FAKE_STEPS", "20")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "same", "plain"), "--metric", REGEX)
    err = capsys.readouterr().err
    assert rc == 1 and "wrote no arm log (ccltune-arms.*.txt)" in err and "NCCL_TUNER_PLUGIN=" in err
    with Store(tmp_path / "ab.db", readonly=True) as st:
        assert st.runs("ab")[-1].status == "failed"


def test_a_metric_that_matches_nothing_shows_the_job_output(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_STEPS", "20")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "same", "plain"), "--metric", r"iter ([0-9.]+)")
    err = capsys.readouterr().err
    assert rc == 2 and "matched no line" in err and "| step  19" in err


# -- the pure parts --------------------------------------------------------------------------------------------

def test_the_schedule_warms_up_on_default_then_in_order_then_shuffled_rounds() -> None:
    k, seed, warm = 4, 7, 2
    got = [schedule.arm_at(b, k, seed, warm) for b in range(warm + k * 6)]
    assert got[:warm] == [0, 0] and got[warm:warm + k] == [0, 1, 2, 3]
    rounds = [got[warm + k * (r + 1): warm + k * (r + 2)] for r in range(5)]
    assert all(sorted(r) == [0, 1, 2, 3] for r in rounds) and len({tuple(r) for r in rounds}) > 1
    # the C twin (plugin/src/arms*.c) must give these: splitmix64(seed ^ r), Fisher-Yates from the top
    assert schedule.splitmix64(0)[1] == 0xE220A8397B1DCDAF
    assert schedule.round_order(4, 7, 0) == rounds[0]
    assert schedule.round_of(warm + k, k, warm) == (0, 0)


def _log(path: str, starts: list[int], arms: list[int]) -> ArmLog:
    return ArmLog(path, pid=1, period=3, arms=("default", "default-2"),
                  blocks=[LoggedBlock(i, a, i * 9, t) for i, (t, a) in enumerate(zip(starts, arms))])


def test_a_block_spans_the_latest_start_to_the_earliest_next_start_and_drops_the_step_that_took_the_switch():
    a = _log("a", [100, 200, 300], [0, 0, 1])
    b = _log("b", [105, 203, 301], [0, 0, 1])
    spans, _ = blocks.spans([a, b], 2, 0, 1)
    assert [(s.start_ns, s.end_ns) for s in spans] == [(105, 200), (203, 300), (301, None)]
    steps = [StepLine(t, v) for t, v in [(101, 9.0), (120, 1.0), (150, 2.0), (190, 3.0), (210, 9.0), (240, 9.0),
                                     (270, 5.0), (299, 6.0), (330, 9.0)]]
    kept, dropped = blocks.assign(steps, spans)
    # block 0: (101,120] starts before 105 (it straddles the switch and is dropped), so (120,150] counts;
    # block 1: (190,210] straddles 200/203, so (210,240] counts; (299,330] straddles block 2's edge
    assert kept == {0: [2.0, 3.0], 1: [9.0, 5.0, 6.0]} and dropped == 4
    # steps cover time from the first line on, so only a switch before the first line has no straddler: then
    # the block's first whole step took it and is dropped
    late = [StepLine(t, v) for t, v in [(110, 9.0), (150, 2.0), (190, 3.0), (199, 4.0)]]
    kept, dropped = blocks.assign(late, spans)
    assert kept == {0: [3.0, 4.0]} and dropped == 2
    bad = _log("c", [100, 200, 300], [0, 1, 1])
    with pytest.raises(DataError, match="block 1 ran arm 0 in a but arm 1 in c: the ranks disagree"):
        blocks.spans([a, bad], 2, 0, 1)


def test_communicators_that_switch_apart_leave_blocks_unjudged_and_say_why():
    """Two communicators of one process, the second found its period later (fewer calls a step, as a data-parallel
    one beside a tensor-parallel one): block b starts there after block b+1 started on the first, so block b has no
    common time; it is said, not judged with another arm's steps."""
    arms = [schedule.arm_at(i, 2, 1, 0) for i in range(4)]
    a = _log("a", [100, 200, 300, 400], arms)
    b = ArmLog("b", pid=1, comm_id="0x00000000000000cd", period=3, arms=("default", "default-2"),
               blocks=[LoggedBlock(i, x, i * 9, t) for i, (t, x) in enumerate(zip([250, 350, 450, 550], arms))])
    spans, notes = blocks.spans([a, b], 2, 0, 1)
    assert [(s.start_ns, s.end_ns) for s in spans] == [(250, 200), (350, 300), (450, 400), (550, None)]
    assert len(notes) == 1 and "3 of 4 blocks (first: 0) have no time common" in notes[0]
    assert "the job's 2 communicators switch arms at different times" in notes[0]
    assert blocks.assign([StepLine(t, 1.0) for t in range(90, 600, 20)], spans)[0] == {}


def test_a_bad_arm_log_is_named_by_file_and_line(tmp_path) -> None:
    head = "# ccltune-arms 1\nhost=h\npid=1\ncomm_id=0x00000000000000ab\narms=default,x\n"
    with pytest.raises(DataError, match=r"f.txt:6: expected 'block,arm,first_call,t_ns'"):
        armsfile.parse_log(head + "0,0,0\n# end\n", "f.txt")
    with pytest.raises(DataError, match="no '# end' line"):
        armsfile.parse_log(head + "0,0,0,5\n", "f.txt")
    with pytest.raises(DataError, match="names arm 2, but the log has 2 arms"):
        armsfile.parse_log(head + "0,2,0,5\n# end\n", "f.txt")
    with pytest.raises(DataError, match="comm_id must be 0x and 16 hex digits"):
        armsfile.parse_log("# ccltune-arms 1\ncomm_id=12\n# end\n", "f.txt")
    log = armsfile.parse_log(head + "period=none\n# end\n", "f.txt")
    assert log.period is None and log.arms == ("default", "x")


def test_in_run_reads_its_job_as_whole_runs_do(tmp_path, capsys) -> None:
    """ab --in-run runs the job through the same reader as whole-run ab (ab/output.py): a job that leaves a
    process holding the pipe ends when its top process does, and a --metric that backtracks without bound is
    stopped with a clear error instead of holding ab (issues 39 item 5 and 41 item 10, for in-run arms too)."""
    import time

    from ccltune.ab import steplines

    start = time.monotonic()
    got = steplines.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen(['sleep', '20']);"
                         "print('step 0  5.0 ms'); print('step 1  6.0 ms')"], {"PATH": "/usr/bin:/bin"},
                        re.compile(r"step +[0-9]+ +([0-9.]+) ms"))
    assert time.monotonic() - start < 10 and got.exit_code == 0 and [s.value for s in got.steps] == [5.0, 6.0]
    from ccltune.ab import output
    old, output.MATCH_S = output.MATCH_S, 1.0
    try:
        from ccltune.errors import UsageError

        with pytest.raises(UsageError, match="took more than 1 s on one line"):
            steplines.run([sys.executable, "-c", "print('a' * 60 + 'b')"], {"PATH": "/usr/bin:/bin"},
                          re.compile(r"(a+)+$()"))
    finally:
        output.MATCH_S = old


def test_blocks_shorter_than_a_step_say_to_give_the_period(tmp_path, capsys, monkeypatch) -> None:
    """A decode loop's calls are all one key, so the plugin finds period 1 and a block is a few calls, far less
    than a step (4 x H200 TP job, 2026-11-28): no step lies wholly in a block, and ab says to give --period."""
    monkeypatch.setenv("FAKE_PERIOD", "12")
    monkeypatch.setenv("FAKE_FOUND_PERIOD", "1")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX)
    err = capsys.readouterr().err
    assert rc == 1 and "no block to judge" in err and "a block is shorter than a step" in err  # no verdict
    assert "plugin's period (1 tuner call(s)) is not the job's step; give --workload W.json" in err and "or --period N" in err


def _workload(tmp_path, steps: int | None, calls: int) -> str:
    from ccltune.workload.model import Entry, Key, Workload, to_json

    wl = Workload([Entry(Key("all_reduce", 262144, 2, "bfloat16", 131072, op="sum"), calls)], sources=[], steps=steps)
    p = tmp_path / "w.json"
    p.write_text(to_json(wl, {}))
    return str(p)


def test_blocks_shorter_than_a_step_say_how_many_calls_a_step_made(tmp_path, capsys, monkeypatch) -> None:
    """The refusal names the two ways out and what this run measured: about 12 tuner calls a step."""
    monkeypatch.setenv("FAKE_PERIOD", "12")
    monkeypatch.setenv("FAKE_FOUND_PERIOD", "1")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX)
    err = capsys.readouterr().err
    assert rc == 1 and "give --workload W.json" in err and "(this run: about 12 a step)" in err
    # nothing measured is lost: the run's step lines and arm logs stay where the error says
    kept = Path(re.search(r"are kept in (\S+)\)", err).group(1))
    try:
        assert len((kept / "steps.txt").read_text().splitlines()) == 201
        assert len(list((kept / "arms").glob("ccltune-arms.*.txt"))) == 2
    finally:
        import shutil

        shutil.rmtree(kept)


def test_the_workloads_calls_per_step_make_a_decode_loops_blocks_whole_steps(tmp_path, capsys, monkeypatch) -> None:
    """A decode loop (one key: the plugin alone finds period 1) judged with --workload: its 12 calls a step go to
    the plugin as step_calls, the period becomes 12, and the planted slowdown is found; whole-run ab refuses the
    in-run-only flag, and a workload with no steps is refused before the job runs."""
    monkeypatch.setenv("FAKE_PERIOD", "12")
    monkeypatch.setenv("FAKE_FOUND_PERIOD", "1")
    monkeypatch.setenv("FAKE_STEP_S", "0.01")
    w = _workload(tmp_path, 30, 12 * 30 + 1)   # 361 calls over 30 steps: 12 a step
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX, "--workload", w)
    out = capsys.readouterr()
    assert rc == 1 and "slow slower" in out.err, out.err
    assert _rows(out.out)["slow"].endswith("SLOWER")
    assert main(["ab", "--workload", w, "--metric", REGEX, "--", sys.executable, JOB]) == 2
    assert "--workload: for --in-run only" in capsys.readouterr().err
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX,
             "--workload", _workload(tmp_path, None, 100))
    assert rc == 2 and "its steps are unknown" in capsys.readouterr().err
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX,
             "--workload", _workload(tmp_path, 1, 1 << 39))   # more calls a step than the plugin takes: no traceback
    assert rc == 2 and "549755813888 calls a step" in capsys.readouterr().err


def test_a_job_whose_nccl_asked_the_tuner_nothing_is_named_as_such(tmp_path, capsys, monkeypatch) -> None:
    """One GPU: NCCL tunes nothing on a one-rank communicator, so the arm logs count no call; ab says that, not
    'run more steps'."""
    monkeypatch.setenv("FAKE_GRAPH_AFTER", "0")   # the fake's tuner sees no call at all
    monkeypatch.setenv("FAKE_RANKS", "1")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX)
    err = capsys.readouterr().err
    assert rc == 1 and "NCCL asked the tuner plugin about no collective" in err
    assert "NCCL consults no tuner for a one-rank communicator" in err


def test_a_workload_of_several_communicator_sizes_limits_the_arms_to_its_busiest(tmp_path, capsys,
                                                                                 monkeypatch) -> None:
    """Tensor- and data-parallel groups: the plugin counts each communicator's own calls, so communicators called
    at different rates switch apart. A workload whose tuned calls go to two sizes (12 calls a step on 4 ranks, 2
    on 2) limits the arms to its busiest: the arms file says nranks=4 and step_calls=12; a job that then makes no
    communicator of 4 ranks is told so."""
    from ccltune.ab.armsfile import ArmsFile, InRunArm
    from ccltune.commands import ab_inrun
    from ccltune.workload.model import Entry, Key, Workload, to_json

    wl = Workload([Entry(Key("all_reduce", 262144, 4, "bfloat16", 131072, op="sum"), 120),
                   Entry(Key("all_gather", 1 << 20, 2, "bfloat16", 262144), 20)], sources=[], steps=10,
                  order=[(0, 0, 6), (1, 1, 1), (0, 0, 6), (1, 1, 1)] * 10)
    w = tmp_path / "w.json"
    w.write_text(to_json(wl, {}))
    o = type("O", (), {"period": "auto", "workload": str(w)})()
    assert ab_inrun._period(o) == (None, 12, 4)
    text = ArmsFile(1, 0, 2, 10, "logs", (InRunArm("default"),), None, 12, 4).text()
    assert "step_calls=12\nnranks=4\n" in text
    monkeypatch.setenv("FAKE_NO_LOGS", "1")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", REGEX, "--workload", str(w))
    assert rc == 1 and "the arms were for communicators of 4 ranks only" in capsys.readouterr().err


def test_the_gpu_step_period_judges_a_job_that_prints_no_step_line(tmp_path, capsys, monkeypatch) -> None:
    """--metric gpu: each block's GPU step period from the profiler plugin's files (the fake job writes them as
    the plugin does: arms from the tuner, each step lasting its time on the GPU) is the judge, with nothing from
    the job: the planted 5% slowdown is found, the A/A twin is not; whole runs refuse it."""
    monkeypatch.setenv("FAKE_QUIET", "1")
    rc = _ab(tmp_path, "--rules", _rules(tmp_path, "slow", "slow"), "--metric", "gpu", "--json", str(tmp_path / "a.json"))
    out = capsys.readouterr()
    assert rc == 1 and "slow slower" in out.err, out.err
    assert "# metric: each block's GPU step period (ms)" in out.out
    rows = _rows(out.out)
    assert rows["slow"].endswith("SLOWER") and "no difference" in rows["default-2"]
    doc = json.loads((tmp_path / "a.json").read_text())
    (slow,) = [a for a in doc["arms"] if a["arm"] == "slow"]
    assert doc["metric"] == "gpu" and 1.03 < slow["ratio"] < 1.07 and slow["pairs"] >= 6
    assert main(["ab", "--metric", "gpu", "--env", "A=1", "--", sys.executable, JOB]) == 2
    assert "--metric gpu (the GPU step period of each block) is for --in-run" in capsys.readouterr().err
