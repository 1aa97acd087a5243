"""docs/workload.md's loop, its ccltune commands as the doc writes them (only paths substituted), on the real
jobs of issue 38 (tests/fixtures/workload, README there; 4 x H200, NCCL 2.28.9): the DDP and TP decode jobs of
h200x4-2026-11-28 (each rank's INIT+COLL log and ccltune profiler file) and the FSDP2 job of h200x4-2026-11-26
(its COLL logs; that run had no profiler, so the doc's `/tmp/prof/*.txt` matches nothing there, and its step 7
imports that run's tuner-plugin capture files).

What runs here: step 2 (`workload import`), step 3 (`workload show`), step 5 (`tune --workload`, on a real SQLite
database holding the rows `sweep --workload` stores for the workload step 2 wrote: step 4 needs GPUs, so its rows
are built as tests/unit/test_workload_loop_real.py builds them) and, for the FSDP2 job, step 7's import. Steps 4
and 6 (GPUs, 4 ranks) and step 8 (the user's job) are parsed by ccltune's own parser; step 8's `ab` then goes
through ab's checks of its arms, and `search` through the candidates it would try, both before anything runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ccltune import rules
from ccltune.ab import candidates
from ccltune.cli import build_parser, main
from ccltune.cli.ab import options as ab_options
from ccltune.commands import ab, ab_inrun
from ccltune.errors import UsageError
from ccltune.workload import model
from test_workload_loop_real import BUCKET, BUCKET_64M, bucket_win, no_win, sweep_db, sweep_rows

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "workload.md"
FIX = ROOT / "tests" / "fixtures" / "workload"
JOBS = {  # the doc's capture globs -> the real files of each job
    "ddp": {"/tmp/nccl.*.log": sorted((FIX / "h200x4-1128" / "ddp").glob("nccl.vm.*.log.gz")),
            "/tmp/prof/*.txt": sorted((FIX / "h200x4-1128" / "ddp" / "prof").glob("ccltune-profile.*.txt.gz")),
            "/tmp/cap/*.txt": []},
    "tp": {"/tmp/nccl.*.log": sorted((FIX / "h200x4-1128" / "tp").glob("nccl.vm.*.log.gz")),
           "/tmp/prof/*.txt": sorted((FIX / "h200x4-1128" / "tp" / "prof").glob("ccltune-profile.*.txt.gz")),
           "/tmp/cap/*.txt": []},
    "fsdp2": {"/tmp/nccl.*.log": sorted((FIX / "fsdp2-4-h200").glob("fsdp2_coll_nccl.vm.*.log.gz")),
              "/tmp/prof/*.txt": [],
              "/tmp/cap/*.txt": sorted((FIX / "capture-fsdp2-4").glob("ccltune-capture.*.txt"))},
}
# what each real job's import gives: (entries, steps)
FACTS = {"ddp": (15, 17), "tp": (3, 18), "fsdp2": (6, 18)}
STEP_CALLS = {"ddp": 52, "tp": 257, "fsdp2": 51}   # tuner calls a step on the job's communicator, from W.json
OUTPUTS = ("W.json", "W2.json", "results.db", "rules.conf", "kept.conf")


def loop_block() -> str:
    """The fenced block after 'The loop, each step below'."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("The loop, each step below")
    return text[start:].split("```")[1]


def steps() -> dict[int, list[list[str]]]:
    """The block's ccltune command lines by the step number their comment gives (`# 5.` or `# 8,`), as argv
    without the leading `ccltune`."""
    out: dict[int, list[list[str]]] = {}
    for line in loop_block().splitlines():
        if not line.startswith("ccltune "):
            continue
        m = re.search(r"#\s*(\d+)[.,]", line)
        assert m, f"docs/workload.md's loop: a ccltune line without its step number: {line}"
        out.setdefault(int(m.group(1)), []).append(shlex.split(line, comments=True)[1:])
    return out


def substituted(argv: list[str], paths: dict[str, list[Path]], tmp: Path) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if arg in paths:
            out += [str(p) for p in paths[arg]]
        elif arg in OUTPUTS:
            out.append(str(tmp / arg))
        else:
            assert "*" not in arg and not arg.startswith("/tmp/"), f"a path the test does not substitute: {arg}"
            out.append(arg)
    return out


def run(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_the_loop_has_every_step_and_step_8_judges_in_one_run() -> None:
    """Steps 2-8 are there; step 8 is `ab --in-run` on the rules, beside whole-run `ab` for variables and
    `search --workload` beyond tune's candidates; every ccltune line (and `$(ccltune ...)`) parses."""
    got = steps()
    assert sorted(got) == [2, 3, 4, 5, 6, 7, 8]
    assert [a[:2] for a in got[2]] == [["workload", "import"]] and [a[:2] for a in got[3]] == [["workload", "show"]]
    assert [a[0] for a in got[4] + got[5] + got[6]] == ["sweep", "tune", "replay"]
    in_run, whole, search = got[8]
    assert in_run[:3] == ["ab", "--in-run", "--rules"] and "--metric" in in_run
    assert in_run[in_run.index("--workload") + 1] == "W.json"   # a decode loop's period from its workload
    assert whole[0] == "ab" and "--in-run" not in whole and "--env" in whole
    assert search[:3] == ["search", "--workload", "W.json"]
    parser = build_parser()
    nested = [shlex.split(s) for s in re.findall(r"\$\((ccltune [^)]*)\)", loop_block())]
    assert nested == [["ccltune", "plugin", "path", "--profiler"], ["ccltune", "plugin", "path"]]
    for argv in [a for v in got.values() for a in v] + [n[1:] for n in nested]:
        parser.parse_args(argv)   # exits (SystemExit) on a flag ccltune does not have


def _step8(lines: list[list[str]], tmp: Path, rules_count: int, want_step_calls: int) -> None:
    """Step 8's three lines: parsed, then each command's checks of its options that run before the job does."""
    parser = build_parser()
    in_run, whole, search = (substituted(a, {}, tmp) for a in lines)
    a = parser.parse_args(in_run)
    assert a.in_run and a.rules == [str(tmp / "rules.conf")] and a.command[-1] == "train.py"
    o = ab_options(a)
    assert ab_inrun._period(o) == (None, want_step_calls, None)   # the step hint from the job's own W.json; one size
    if rules_count:
        arms = ab_inrun.in_run_arms(ab.arms(o))
        assert [x.name for x in arms] == ["default", "default-2", "rules"]
    else:   # tune wrote no rule: nothing to judge, said before the job starts
        with pytest.raises(UsageError, match="rules.conf: the file has no rule"):
            ab.arms(o)
    w = parser.parse_args(whole)
    assert [x.name for x in ab.arms(ab_options(w))] == ["default", "default-2", "NCCL_MAX_NCHANNELS=16"]
    with pytest.raises(UsageError, match="--in-run switches rule files"):
        ab_inrun.in_run_arms(ab.arms(ab_options(parser.parse_args(["ab", "--in-run", *whole[1:]]))))
    s = parser.parse_args(search)
    wl = model.load(s.workload)
    sweep = rules.load(s.sweep_rules, "--sweep-rules")
    assert not sweep.diagnostics
    groups = candidates.groups(wl, s.max_groups)
    cands = candidates.candidates(groups, sweep, candidates.overlap_note(wl)[0])
    assert groups and any(c.source == "sm-budget" for c in cands)   # search would not refuse: it has candidates
    assert sum(c.source == "sweep" for c in cands) == rules_count   # tune's rule is one of them


@pytest.mark.parametrize("job", sorted(JOBS))
def test_the_documented_loop_runs_on_a_real_job(job, tmp_path, capsys) -> None:
    got, paths = steps(), JOBS[job]
    assert paths["/tmp/nccl.*.log"] and all(p.is_file() for v in paths.values() for p in v)
    w = tmp_path / "W.json"

    # 2. import: the real COLL logs (and profiler files), mixed ops and all
    rc, out = run(substituted(got[2][0], paths, tmp_path), capsys)
    assert rc == 0, out
    wl = model.load(str(w))
    assert (len(wl.entries), wl.steps) == FACTS[job], out
    assert {(e.key.size_bytes, e.key.op) for e in wl.entries if e.key.collective == "all_reduce"} >= {(4, "sum"), (40, "max")}
    assert all(e.timing is not None for e in wl.entries) == bool(paths["/tmp/prof/*.txt"])

    # 3. show
    rc, out = run(substituted(got[3][0], paths, tmp_path), capsys)
    assert rc == 0, out
    assert re.search(r"^  all_reduce +float +max +10 +40 +4 +1 +1 ", out, re.M), out

    # 4. sweep (GPUs): its argv, and the rows it stores for this workload, in the job's own ops and datatypes
    build_parser().parse_args(substituted(got[4][0], paths, tmp_path))
    rows = sweep_rows(wl, bucket_win() if job == "ddp" else no_win)
    assert {(r.size_bytes, r.op) for r in rows if r.collective == "all_reduce"} >= {(4, "sum"), (40, "max")}
    sweep_db(tmp_path / "results.db", rows)

    # 5. tune: runs on the job's mixed ops (issue 38 item 1), predicts per step, writes rules.conf
    rc, out = run(substituted(got[5][0], paths, tmp_path), capsys)
    assert rc == 0, out
    assert "mixes" not in out and "predicted communication time per step" in out
    written = rules.load(tmp_path / "rules.conf")
    assert not written.diagnostics
    if job == "ddp":   # the one rule the sweep's winner makes: both 64 MiB buckets
        assert [(r.collective, r.min_bytes, r.max_bytes) for r in written.rules] == [("allreduce", BUCKET_64M, BUCKET)]
    else:
        assert not written.rules

    # 6. replay (GPUs, 4 ranks; on the CPU the job's 256 MiB and 3.5 GiB all_reduces take minutes): its argv
    r = build_parser().parse_args(substituted(got[6][0], paths, tmp_path))
    assert (r.workload, r.rules) == (str(w), str(tmp_path / "rules.conf"))

    # 7. capture again with the rules, import: the FSDP2 run's real tuner-plugin captures
    (imp,) = got[7]
    if paths["/tmp/cap/*.txt"]:
        rc, out = run(substituted(imp, paths, tmp_path), capsys)
        assert rc == 0, out
        assert {e.key.collective for e in model.load(str(tmp_path / "W2.json")).entries} >= {"all_gather",
                                                                                            "reduce_scatter"}
    else:   # no capture of this job: a file name for the parser
        build_parser().parse_args(substituted(imp, {"/tmp/cap/*.txt": [tmp_path / "cap.txt"]}, tmp_path))

    # 8. the job is the judge (the job cannot run here)
    _step8(got[8], tmp_path, len(written.rules), STEP_CALLS[job])


def test_the_gpu_runner_runs_every_line_of_the_loop_with_only_the_job_and_paths_substituted(tmp_path) -> None:
    """bench/doc_loop.py (the device's runner of this loop) reads the same block: every command line, each with
    its step, and changes nothing but `torchrun ... train.py`, `/tmp/` (and runs `ccltune` from this checkout)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("doc_loop", ROOT / "bench" / "doc_loop.py")
    assert spec and spec.loader
    runner = importlib.util.module_from_spec(spec)
    import sys

    sys.modules.setdefault("doc_loop", runner)   # its dataclass looks its module up there
    spec.loader.exec_module(runner)
    got = runner.lines(DOC)
    commands = [ln for ln in loop_block().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(got) == len(commands) and [g.step for g in got] == [1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 8]
    for g, raw in zip(got, commands):
        assert raw.startswith(g.text)
        run = runner.substitute(g, tmp_path, "JOB", "CAP", "JUDGE", "WHOLE")
        assert "/tmp/" not in run.replace(str(tmp_path), "") and "..." not in run
        want = raw[:len(g.text)].replace("/tmp/", f"{tmp_path}/")
        assert run == want.replace("torchrun ... train.py", {1: "JOB CAP", 7: "JOB CAP"}.get(g.step, "JOB JUDGE")
                                   if "--env" not in raw else "JOB WHOLE")
