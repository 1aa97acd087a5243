"""Step 5 of docs/workload.md on the real jobs of issue 38 (tests/fixtures/workload, README there: the DDP and TP
decode jobs of h200x4-2026-11-28 and the FSDP2 job of h200x4-2026-11-26, 4 x H200): `tune --workload` runs on
every job, whatever ops and datatypes its sizes were measured in (item 1); a rule covers the job's sizes around
it that share its winner, or tune says why it left them to NCCL (item 3); each point is swept in the datatype the
job issues there (item 4).

The results database is a real one, written through the store API with rows shaped as `sweep --workload`
writes them: the points, datatypes and ops of the sweep's own plan (``workload.plan``), NCCL's default, its twin
and candidates, 5 repetitions each. NCCL's default per call is replay's `default_us` on the same machine (the
DDP job's replay.txt in /work/shared/captures/h200x4-2026-11-28); candidates are the test's own."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest

from ccltune import collectives, datatypes
from ccltune.cli import main
from ccltune.rules import PlatformFacts, Query, RuleSet, load, match
from ccltune.store import Measurement, Store
from ccltune.workload import importer, model
from ccltune.workload.plan import job_dtypes, job_ops, sweep_points

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
REAL = FIX / "h200x4-2026-11-28"
FSDP2_LOGS = sorted((FIX / "fsdp2-4-h200").glob("fsdp2_coll_nccl.vm.*.log.gz"))
BUCKET, BUCKET_64M = 67125248, 67108864  # the DDP job's main gradient bucket (544 calls) and its 64 MiB one (272)

# NCCL's default per call on an idle H200 (us): replay.txt's default_us of the DDP job; other sizes by bytes
DDP_DEFAULT_US = {32: 12.4, 3168: 11.8, 268435456: 1228.1, 268500992: 814.1, 268468224: 847.1, 268451840: 1228.7,
                  3758637056: 15586.4, 532: 11.9, 200: 11.7, BUCKET: 342.5, BUCKET_64M: 344.6, 4: 13.3, 40: 13.8}

Times = Callable[[str, int, float], dict[str, tuple[float, float]]]  # (collective, size, default us) -> config -> (us, spread)


def default_us(size: int) -> float:
    return DDP_DEFAULT_US.get(size, 12.0 + size / 2.2e5)


def no_win(coll: str, size: int, us: float) -> dict[str, tuple[float, float]]:
    return {"default": (us, 0.005), "default-twin": (us, 0.005), "ring/simple/32": (us * 1.01, 0.005)}


def real_workload(job: str) -> model.Workload:
    path = REAL / job / "w.json.gz"
    return model.from_json(gzip.decompress(path.read_bytes()).decode(), str(path))


def write_workload(tmp_path: Path, wl: model.Workload) -> Path:
    out = tmp_path / "w.json"
    out.write_text(model.to_json(wl, {}))
    return out


def sweep_rows(wl: model.Workload, times: Times, *, op: str | None = None) -> list[Measurement]:
    """The rows `sweep --workload W.json` stores on 4 ranks (with `-o op` when given): its points in the job's
    datatype and op, one row per configuration and repetition."""
    points, _ = sweep_points(wl, 4, 1, datatypes.dtype("float"), dtypes=job_dtypes(wl))
    dts, ops = job_dtypes(wl), job_ops(wl)
    out = []
    for coll, sizes in points.items():
        c = collectives.REGISTRY[coll]
        for size in sizes:
            dt = dts.get((coll, size), datatypes.dtype("float"))
            row_op = (op or ops.get((coll, size), "sum")) if c.reduces else None
            count = size // dt.size // (4 if coll in ("all_gather", "reduce_scatter") else 1)
            for label, (us, spread) in times(coll, size, default_us(size)).items():
                algo = proto = chans = None
                if label not in ("default", "default-twin"):
                    algo, proto, ch = label.split("/")
                    chans = int(ch)
                for rep, f in enumerate((1 - spread, 1 - spread / 2, 1.0, 1 + spread / 2, 1 + spread)):
                    out.append(Measurement(coll, size, count, dt.name, row_op, 0 if coll == "broadcast" else None,
                                           False, 4, time_us=us * f, n_nodes=1, algo=algo, proto=proto,
                                           channels=chans, config=label, graph=1, rep=rep))
    return out


def sweep_db(path: Path, *runs: list[Measurement]) -> Path:
    with Store(path) as st:
        for rows in runs:
            run = st.begin_run("sweep", command="ccltune sweep --workload w.json",
                               env={"gpus": [{"name": "NVIDIA H200"}] * 4, "world_size": 4})
            st.add_measurements(run, rows)
            st.finish_run(run, "complete")
    return path


def tune(tmp_path: Path, db: Path, w: Path, capsys) -> tuple[int, str, str, Path]:
    out = tmp_path / "rules.conf"
    rc = main(["tune", "--db", str(db), "--out", str(out), "--workload", str(w)])
    got = capsys.readouterr()
    return rc, got.out, got.err, out


# item 1 ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("job", ["ddp", "fsdp2"])
def test_tune_workload_runs_on_a_sweep_in_the_jobs_own_ops(job, tmp_path, capsys) -> None:
    """Issue 38 item 1: each job issues one 40-byte all_reduce with op max beside its sum all_reduces; `sweep
    --workload` measures each point in the job's op, and tune refused the sweep ("group all_reduce nranks=4 nnodes=1
    gpu=H200 mixes op values (max, sum)"). Different sizes never compete for one rule: tune runs."""
    wl = real_workload("ddp") if job == "ddp" else importer.import_files(FSDP2_LOGS)
    assert {(e.key.size_bytes, e.key.op) for e in wl.entries if e.key.collective == "all_reduce"} >= {(4, "sum"),
                                                                                                      (40, "max")}
    rows = sweep_rows(wl, no_win)
    assert {(r.size_bytes, r.op) for r in rows if r.collective == "all_reduce"} >= {(4, "sum"), (40, "max")}
    db = sweep_db(tmp_path / "s.db", rows)
    rc, out, err, rules = tune(tmp_path, db, write_workload(tmp_path, wl), capsys)
    assert rc == 0, err
    assert "mixes" not in out + err and rules.exists()
    assert "predicted communication time per step" in out
    # every point the sweep measured is judged, none left unmeasured
    assert "unmeasured" not in out and "the job reduces with max" not in out


def test_two_ops_measured_at_one_size_are_refused_naming_the_size_and_runs(tmp_path, capsys) -> None:
    """A real conflict: the 40 B all_reduce measured in max (the job's op) by one sweep and in sum (`-o sum`) by
    another. One rule covers both: tune refuses, naming the size, each op and its run."""
    wl = real_workload("ddp")
    db = sweep_db(tmp_path / "s.db", sweep_rows(wl, no_win),
                  [r for r in sweep_rows(wl, no_win, op="sum") if r.size_bytes == 40])
    rc, out, err, rules = tune(tmp_path, db, write_workload(tmp_path, wl), capsys)
    assert rc != 0 and not rules.exists()
    assert "group all_reduce nranks=4 nnodes=1 gpu=H200 mixes op values at one size (40 B: max (run 1), sum (run 2))" in err
    assert "--runs" in err and "4 B" not in err


# item 3 ---------------------------------------------------------------------------------------------------------

def bucket_win(noisy_bucket: bool = False) -> Times:
    """ring/simple/32 wins at both 64 MiB buckets by 5%; at the main bucket NCCL's default is spread wide when
    ``noisy_bucket``, so that its saving lies inside twice its own noise there."""
    def times(coll: str, size: int, us: float) -> dict[str, tuple[float, float]]:
        got = no_win(coll, size, us)
        if coll == "all_reduce" and size in (BUCKET, BUCKET_64M):
            spread = 0.04 if noisy_bucket and size == BUCKET else 0.005
            got = {"default": (us, spread), "default-twin": (us, spread), "ring/simple/32": (us * 0.95, 0.005)}
        return got
    return times


def test_one_rule_covers_the_jobs_neighbouring_buckets_that_share_its_winner(tmp_path, capsys) -> None:
    """Issue 38 item 3: the DDP job's main bucket, 544 calls, is 67,125,248 B; tune wrote a rule of exactly
    67,108,864 B (272 calls). With the same winner at both, one rule covers both, and nothing far from them."""
    wl = real_workload("ddp")
    db = sweep_db(tmp_path / "s.db", sweep_rows(wl, bucket_win(), op="sum"))  # `-o sum`, as the issue's sweep
    rc, out, err, path = tune(tmp_path, db, write_workload(tmp_path, wl), capsys)
    assert rc == 0, err
    (rule,) = load(path).rules
    assert (rule.collective, rule.min_bytes, rule.max_bytes, rule.algo, rule.proto, rule.channels) == (
        "allreduce", BUCKET_64M, BUCKET, "ring", "simple", 32)
    rs = RuleSet([rule])
    hits = {size: match(rs, Query("all_reduce", size, 4, 1, platform=PlatformFacts(gpu="NVIDIA H200"))).rule is not None
            for size in (40, BUCKET_64M - 1, BUCKET_64M, BUCKET, BUCKET + 1, 268435456)}
    assert hits == {40: False, BUCKET_64M - 1: False, BUCKET_64M: True, BUCKET: True, BUCKET + 1: False,
                    268435456: False}
    table = {x.split()[1]: x.split()[5] for x in out.splitlines() if x.startswith("  all_reduce")}
    assert table[str(BUCKET)] == table[str(BUCKET_64M)] == "rule"


def test_a_neighbouring_size_left_to_nccl_is_named_with_the_reason(tmp_path, capsys) -> None:
    """Issue 38 item 3, the other half: where the main bucket's own saving is inside its noise, the rule stays at
    67,108,864 B, and tune says, on its output and in the rule file, why 67,125,248 B was left to NCCL."""
    wl = real_workload("ddp")
    db = sweep_db(tmp_path / "s.db", sweep_rows(wl, bucket_win(noisy_bucket=True), op="sum"))
    rc, out, err, path = tune(tmp_path, db, write_workload(tmp_path, wl), capsys)
    assert rc == 0, err
    (rule,) = load(path).rules
    assert (rule.min_bytes, rule.max_bytes) == (BUCKET_64M, BUCKET_64M)
    said = (f"all_reduce {BUCKET} B (544 calls) is left to NCCL beside the rule for {BUCKET_64M} B (ring/simple/32): "
            "in-noise: saves ")
    assert said in out and said in path.read_text()
    assert "its own winner is the same (ring/simple/32)" in out


# item 4 ---------------------------------------------------------------------------------------------------------

def test_each_point_is_swept_in_the_datatype_the_job_issues_there(tmp_path, capsys) -> None:
    """Issue 38 item 4: the TP decode job's all_reduces are 256 KiB of bfloat16 (4,608 calls a step) and a 4-byte
    float barrier and 40-byte float max; the sweep measured all of them in bfloat16 and tune said "the job issues
    float, measured with bfloat16". Each point is measured in its own datatype, and tune then says nothing of it."""
    wl = real_workload("tp")
    dts = {k: d.name for k, d in job_dtypes(wl).items()}
    assert dts == {("all_reduce", 262144): "bfloat16", ("all_reduce", 4): "float", ("all_reduce", 40): "float"}
    points, skipped = sweep_points(wl, 4, 1, datatypes.dtype("float"), dtypes=job_dtypes(wl))
    assert points == {"all_reduce": [4, 40, 262144]} and not skipped
    rows = sweep_rows(wl, no_win)
    assert {(r.size_bytes, r.dtype, r.count) for r in rows} == {(4, "float", 1), (40, "float", 10),
                                                               (262144, "bfloat16", 131072)}
    rc, out, err, _ = tune(tmp_path, sweep_db(tmp_path / "s.db", rows), write_workload(tmp_path, wl), capsys)
    assert rc == 0, err
    assert "measured with" not in out   # no datatype (nor op) note: each point as the job issues it
    # the DDP job's broadcasts: int32 and int64 entries measured in their own datatype, not the buckets' float
    ddp = {k: d.name for k, d in job_dtypes(real_workload("ddp")).items() if k[0] == "broadcast"}
    assert ddp[("broadcast", 200)] == ddp[("broadcast", 532)] == "int32" and ddp[("broadcast", 3168)] == "int64"
    assert ddp[("broadcast", 268435456)] == "float"
