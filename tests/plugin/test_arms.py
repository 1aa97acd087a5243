"""In-run arms (CCLTUNE_ARMS) of the tuner plugin: the schedule and period detection against their
Python twin (ccltune.ab.schedule), the arms file's parser (plugin/tests/test_arms.c), and the ranks
harness (plugin/tests/test_ranks.c): 4 threads as the 4 ranks of one communicator, each replaying its
own rank's real call order (from the jobs' NCCL COLL logs in tests/fixtures/arms), must make the same
choice at every call through every block switch, plain, under ASan + UBSan and under TSan; the arm logs
they write are read back and checked against the Python schedule call by call."""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

import pytest

from ccltune import collectives
from ccltune.ab import schedule
from ccltune.workload import capture, nccl_log
from ccltune.workload.model import Key
from plugin_build import LIB, REPO, make, run, sanitizer_works

FIXTURES = REPO / "tests" / "fixtures" / "arms"
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=1"}
Call = tuple[int, int, int]  # ncclFunc_t, nBytes, numPipeOps


# ---- the real call sequences ----
def rank_orders(job: str) -> list[list[Call]]:
    """Each rank's getCollInfo calls in order, from its NCCL COLL log: in these jobs (NCCL 2.28, no
    aggregation) one COLL line is one tuner call with numPipeOps 1 (test_sequences_are_the_captures)."""
    out = []
    for path in sorted((FIXTURES / job).glob("*.log.gz")):
        records, warnings = nccl_log.parse(gzip.decompress(path.read_bytes()).decode(), str(path))
        assert not warnings and len(records) == 1, warnings
        assert len({comm for _, comm in records[0].order}) == 1  # one communicator
        out.append([(collectives.REGISTRY[k.collective].tuner_func, k.size_bytes, 1) for k, _ in records[0].order])
    return out


def extend(order: list[Call], steps: int) -> list[Call]:
    """The job run longer: its repeating step (found at the end of the calls, less at most 8 trailing calls
    such as a final all_reduce) repeated until ``steps`` more have run, then the trailing calls."""
    for after in range(9):
        body = order[:len(order) - after]
        p = schedule.detect_period(body)
        if p is not None and p > 1:
            return body + body[len(body) - p:] * steps + order[len(order) - after:]
    raise AssertionError("no repeating step")


def write_seq(calls: list[Call], path: Path) -> Path:
    path.write_text("".join(f"{c} {b} {p}\n" for c, b, p in calls))
    return path


def test_sequences_are_the_captures() -> None:
    """The order read from each rank's COLL log holds exactly the calls the tuner plugin counted in the
    same run (its capture files): one COLL line is one getCollInfo call, numPipeOps 1."""
    orders = rank_orders("fsdp2-4")
    names = {c.tuner_func: c.name for c in collectives.TUNABLE}
    for order, cap in zip(orders, sorted((FIXTURES / "fsdp2-4").glob("ccltune-capture.*.txt"))):
        rec = capture.parse(cap.read_text(), str(cap))
        counts: dict[Key, int] = {}
        for coll, nbytes, _ in order:
            key = Key(names[coll], nbytes, 4, nnodes=1)
            counts[key] = counts.get(key, 0) + 1
        assert counts == dict(rec.calls)
        assert all(set(v) == {(1, 0)} for v in rec.variants.values())  # numPipeOps 1, regBuff 0
    assert len({tuple(o) for o in orders}) == 1  # every rank issues the same calls in the same order


# ---- the schedule ----
GOLDEN = [((1, 3, 2), [0, 0, 0, 1, 2, 0, 1, 2, 2, 0, 1, 2, 1, 0, 2, 0, 1, 1, 0, 2]),
          ((0xDEADBEEFCAFEF00D, 4, 0), [0, 1, 2, 3, 2, 0, 1, 3, 2, 0, 1, 3, 1, 3, 0, 2, 2, 3, 1, 0]),
          ((42, 2, 1), [0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0])]


def test_schedule_golden_sequences() -> None:
    """The sequences plugin/tests/test_arms.c pins for the C schedule."""
    for (seed, k, w), want in GOLDEN:
        assert [schedule.arm_at(b, k, seed, w) for b in range(len(want))] == want
    state, out = schedule.splitmix64(0)
    assert out == 0xE220A8397B1DCDAF  # Vigna's splitmix64 from state 0


def test_schedule_c_and_python_agree(c_build: Path) -> None:
    rng = random.Random(39)
    seeds = [0, 1, 42, 2**63, 2**64 - 1] + [rng.getrandbits(64) for _ in range(7)]
    for seed in seeds:
        for k in (1, 2, 3, 7, 32):
            w = rng.randrange(4)
            proc = run([c_build / "test_arms", "--schedule", seed, k, w, 400])
            assert proc.returncode == 0, proc.stderr
            assert [int(a) for a in proc.stdout.split()] == [schedule.arm_at(b, k, seed, w) for b in range(400)], (seed, k, w)


def test_schedule_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="n_arms must be 1 to 32, got 0"):
        schedule.arm_at(3, 0, 1, 0)


# ---- period detection on real sequences ----
@pytest.mark.parametrize(("job", "steps", "want"), [
    ("fsdp2-4", 0, None),        # 911 calls: never reaches the first check (1,024 calls)
    ("fsdp2-4", 200, (51, 1024)),  # the step: 32 all_gather, 16 reduce_scatter, ... and the barrier
    ("ddp-4", 200, (51, 1024)),
    # a decode loop whose step is 256 equal all_reduces: the calls alone cannot tell steps apart, and
    # the first 1,024 are one key: period 1 (give period=<int> for such a job)
    ("tp-4", 0, (1, 1024)),
])
def test_period_c_and_python_agree_on_real_sequences(c_build: Path, tmp_path: Path, job: str, steps: int,
                                                     want: tuple[int, int] | None) -> None:
    order = rank_orders(job)[0]
    calls = extend(order, steps) if steps else order
    proc = run([c_build / "test_arms", "--period"], input=write_seq(calls, tmp_path / "seq").read_text())
    assert proc.returncode == 0, proc.stderr
    got = None if proc.stdout.strip() == "none" else tuple(int(x) for x in proc.stdout.split())
    assert got == schedule.find_period(calls) == want


@pytest.mark.parametrize(("job", "want_hint", "want_period"), [
    ("ddp-4", 52, 51),      # the log counts 52 calls a step (the first steps differ): the found 51 stays
    ("fsdp2-4", 51, 51),
    ("tp-4", 257, 257),     # 256 equal all_reduces and the loss's: the plugin alone finds 1
])
def test_the_workloads_calls_per_step_make_every_real_jobs_period_its_step(tmp_path: Path, job: str, want_hint: int,
                                                                           want_period: int) -> None:
    """ab --in-run --workload W.json / search: W.json imported from the job's own COLL logs gives the calls a step
    (workload.quantities.tuner_calls_per_step); with it the plugin's period is the job's step on all three jobs."""
    from ccltune.cli import main
    from ccltune.workload import model, quantities

    assert main(["workload", "import", *map(str, sorted((FIXTURES / job).glob("*.log.gz"))),
                 "--out", str(tmp_path / "w.json")]) == 0
    hint = quantities.tuner_calls_per_step(model.load(str(tmp_path / "w.json")))
    assert hint == want_hint
    got = schedule.find_period(extend(rank_orders(job)[0], 200), hint)
    assert got is not None and got[0] == want_period


# ---- the white-box harness ----
@pytest.fixture(params=["plain", "sanitizers"])
def build(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("c_build" if request.param == "plain" else "san_build")


def test_white_box(build: Path) -> None:
    proc = run([build / "test_arms"], env={**os.environ, **SAN_ENV})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout and "runtime error" not in proc.stderr


# ---- the ranks harness ----
RULES = {"ring_ll": "allgather,0,1T,ring,ll,2,-1,-1\nreducescatter,0,1T,ring,simple,4,-1,-1\n"
                    "allreduce,0,1M,ring,ll,1,-1,-1\nbroadcast,0,1T,ring,ll128,-1,-1,-1\n",
         "pat": "allgather,0,1T,pat,simple,8,-1,-1\nallreduce,0,1T,tree,ll128,-1,-1,-1\n"}
ARMS = ["default", "aa", "ring_ll", "pat"]  # arm 0 NCCL's default, arm 1 its twin, two rule sets


def choice(arm: int, coll: int, nbytes: int) -> tuple[int, int]:
    """(cell = algo * 3 + proto, nChannels) the arm's rules give a call; (-1, 0): NCCL's choice."""
    if arm == 2:
        small_allreduce = {4: (1 * 3 + 0, 1)} if nbytes <= 1 << 20 else {}
        return {2: (1 * 3 + 0, 2), 3: (1 * 3 + 2, 4), 0: (1 * 3 + 1, 0), **small_allreduce}.get(coll, (-1, 0))
    if arm == 3:
        return {2: (6 * 3 + 2, 8), 4: (0 * 3 + 1, 0)}.get(coll, (-1, 0))
    return (-1, 0)
SEED, WARMUP, BLOCK_PERIODS, MAX_BLOCKS = 0x1234_5678_9ABC_DEF0, 2, 2, 60


def arms_file(tmp: Path, period: str, arms: list[str] = ARMS, step_calls: int | None = None) -> Path:
    """An arms file as ccltune writes it, rule files beside it (relative paths)."""
    lines = ["# ccltune-arms 1", f"seed={SEED}", f"warmup_blocks={WARMUP}", f"block_periods={BLOCK_PERIODS}",
             f"period={period}", f"max_blocks={MAX_BLOCKS}", "log=logs"]
    if step_calls is not None:
        lines.append(f"step_calls={step_calls}")
    for name in arms:
        if name in RULES:
            (tmp / f"{name}.conf").write_text(RULES[name])
            lines.append(f"arm={name} rules={name}.conf")
        else:
            lines.append(f"arm={name}")
    path = tmp / "arms.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def read_log(path: Path) -> tuple[dict[str, str], list[tuple[int, int, int, int]]]:
    lines = path.read_text().splitlines()
    assert lines[0] == "# ccltune-arms 1" and lines[-1] == "# end", path
    at = lines.index("# block,arm,first_call,t_ns")
    head = dict(line.split("=", 1) for line in lines[1:at])
    blocks = [tuple(int(x) for x in line.split(",")) for line in lines[at + 1:-1]]
    return head, blocks  # type: ignore[return-value]


def harness_env(arms: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NCCL_TUNER_CONFIG_FILE", "CCLTUNE_RULES", "CCLTUNE_CAPTURE")}
    return {**env, **SAN_ENV, "CCLTUNE_ARMS": str(arms)}


@pytest.fixture(scope="module")
def tsan_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("plugin-tsan")
    if not sanitizer_works("thread", tmp):
        pytest.skip("gcc here cannot build and run a program with -fsanitize=thread")
    build = tmp / "build"
    return make(build, f"{build}/{LIB}", f"{build}/test_ranks", TSAN="1", OPT="-O1")


@pytest.fixture(params=["plain", "asan-ubsan", "tsan"])
def ranks_build(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue({"plain": "c_build", "asan-ubsan": "san_build", "tsan": "tsan_build"}[request.param])


@pytest.mark.parametrize(("job", "steps", "period", "abi", "step_calls"), [
    ("fsdp2-4", 200, "auto", "v6", None),  # period found at call 1,024; the schedule ends (max_blocks) before the job
    ("ddp-4", 200, "51", "v5", None),      # period given: blocks from the first call
    ("tp-4", 0, "auto", "v6", None),       # period 1: a block is 2 calls, 60 blocks, then arm 0
    # the workload's 257 calls a step (ccltune ab --in-run --workload): period 1 found, blocks of 2 x 257 calls
    ("tp-4", 200, "auto", "v6", 257),
    ("fsdp2-4", 200, "auto", "v5", 50),    # a hint near the found period (51) keeps it
])
def test_ranks_choose_alike_at_every_call(ranks_build: Path, tmp_path: Path, job: str, steps: int, period: str,
                                          abi: str, step_calls: int | None) -> None:
    orders = rank_orders(job)
    seqs = [write_seq(extend(o, steps) if steps else o, tmp_path / f"rank{r}.seq") for r, o in enumerate(orders)]
    calls = extend(orders[0], steps) if steps else orders[0]
    arms = arms_file(tmp_path, period, step_calls=step_calls)
    proc = run([ranks_build / "test_ranks", ranks_build / LIB, abi, tmp_path / "choices", *seqs],
               env=harness_env(arms), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ranks 4 calls {len(calls)} mismatches 0" in proc.stdout and "warnings 0" in proc.stdout, proc.stdout
    assert "runtime error" not in proc.stderr and "ThreadSanitizer" not in proc.stderr, proc.stderr

    logs = sorted((tmp_path / "logs").iterdir())
    assert [f.name.split(".")[3:] for f in logs] == [["5eed0000c0ffee01", str(s), "txt"] for s in range(4)]
    heads, blocks = zip(*(read_log(f) for f in logs))
    # every rank logged the same blocks, the same arms at the same calls; only the clock differs
    assert len({tuple(b[:3] for b in bl) for bl in blocks}) == 1
    assert len({tuple((k, v) for k, v in h.items() if k not in ("comm_seq",)) for h in heads}) == 1
    head, block = heads[0], blocks[0]
    want_period = schedule.find_period(calls, step_calls) if period == "auto" else (int(period), 0)
    assert want_period is not None
    p, found = want_period
    own = schedule.find_period(calls)
    assert own is not None and p == {"tp-4": step_calls or 1}.get(job, 51)  # the hint makes TP's blocks whole steps
    size = p * BLOCK_PERIODS
    auto = {"sequence_period": str(own[0]), "step_calls": str(step_calls or 0)} if period == "auto" else {}
    assert head == {"host": head["host"], "pid": head["pid"], "comm_id": "0x5eed0000c0ffee01", "comm_seq": "0",
                    "nranks": "4", "seed": str(SEED), "period": str(p), "period_found_at": str(found),
                    "block_calls": str(size), **auto, "arms": ",".join(ARMS), "calls": str(len(calls))}
    n_blocks = min(-(-(len(calls) - found) // size), MAX_BLOCKS + 1)
    assert [b[:3] for b in block] == [
        (b, 0 if b == MAX_BLOCKS else schedule.arm_at(b, len(ARMS), SEED, WARMUP), found + b * size)
        for b in range(n_blocks)]
    assert [b[3] for b in block] == sorted(b[3] for b in block) and block[0][3] > 1_700_000_000 * 10**9
    assert len(block) == MAX_BLOCKS + 1  # each job runs past the schedule: its end is logged, arm 0 after it

    # rank 0's choice at every call is the rule of the arm the schedule puts there
    def arm_at_call(i: int) -> int:
        b = (i - found) // size
        return 0 if i < found or b >= MAX_BLOCKS else schedule.arm_at(b, len(ARMS), SEED, WARMUP)
    got = [tuple(int(x) for x in line.split()) for line in (tmp_path / "choices").read_text().splitlines()]
    want = [choice(arm_at_call(i), coll, nbytes) for i, (coll, nbytes, _) in enumerate(calls)]
    assert got == want
    assert len(set(want)) >= 3  # the arms' rules differ on these calls: the check is not hollow


def test_a_bad_arms_file_runs_nccls_default(c_build: Path, tmp_path: Path) -> None:
    """One WARN per communicator (one per rank here) naming the problem; no arms, no log, no rule applied."""
    seq = write_seq(rank_orders("fsdp2-4")[0], tmp_path / "rank0.seq")
    good = arms_file(tmp_path, "auto").read_text()
    (tmp_path / "nccl_tuner.conf").write_text(RULES["pat"])  # not read while CCLTUNE_ARMS is set
    cases = {"header": ("seed=1\n" + good, "line 1: expected the header '# ccltune-arms 1'"),
             "value": (good.replace("block_periods=2", "block_periods=0"),
                       "line 4: block_periods must be a whole number from 1 to 100000"),
             "missing rules": (good.replace("rules=pat.conf", "rules=nope.conf"),
                               f"arm pat: its rule file {tmp_path}/nope.conf cannot be used (No such file or directory)"),
             "log": (good.replace("log=logs", "log=/proc/no/such"), "cannot create it")}
    for name, (text, why) in cases.items():
        (tmp_path / "arms.txt").write_text(text)
        proc = run([c_build / "test_ranks", c_build / LIB, "v6", tmp_path / "choices", seq, seq],
                   env=harness_env(tmp_path / "arms.txt"), cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        warns = [line for line in proc.stdout.splitlines() if line.startswith("WARN ")]
        assert len(warns) == 2 and all(why in w for w in warns), (name, warns)
        assert set((tmp_path / "choices").read_text().splitlines()) == {"-1 0"}, name
        assert not (tmp_path / "logs").exists(), name


def test_arms_without_a_commhash_and_the_exit_writer(san_build: Path, tmp_path: Path) -> None:
    """ABI v4 passes no commHash: arms still run (logs named nocommid, comm_id=unknown) and arm_of knows
    nothing. A communicator never finalized gets its whole log from the exit writer."""
    calls = extend(rank_orders("fsdp2-4")[0], 60)
    seq = write_seq(calls, tmp_path / "rank0.seq")
    arms = arms_file(tmp_path, "auto")
    proc = run([san_build / "test_ranks", san_build / LIB, "v4", tmp_path / "choices", seq, seq, seq],
               env={**harness_env(arms), "TEST_RANKS_KEEP_LAST": "1"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ranks 3 calls {len(calls)} mismatches 0 arms_seen 0 warnings 0" in proc.stdout
    logs = sorted((tmp_path / "logs").iterdir())
    assert [f.name.split(".")[3:] for f in logs] == [["nocommid", str(s), "txt"] for s in range(3)]
    assert not [f for f in (tmp_path / "logs").iterdir() if f.name.startswith(".")]  # no temp file left
    read = [read_log(f) for f in logs]
    assert len({tuple(b[:3] for b in blocks) for _, blocks in read}) == 1
    for head, blocks in read:
        assert head["comm_id"] == "unknown" and head["calls"] == str(len(calls)) and head["period"] == "51"
        assert len(blocks) > 10


def test_ccltunes_arms_file_and_its_reading_of_the_plugins_logs(c_build: Path, tmp_path: Path) -> None:
    """The two halves of ab --in-run meet: the arms file ccltune writes (ab.armsfile.ArmsFile) is the one the
    plugin runs, and the arm logs the plugin writes are read back (ab.armsfile.read_logs) into the blocks the
    analysis judges (ab.blocks.spans), whose arms are the schedule's and whose end mark is no block."""
    from ccltune.ab import armsfile, blocks

    for name in ("ring_ll", "pat"):
        (tmp_path / f"{name}.conf").write_text(RULES[name])
    arms = (armsfile.InRunArm("default"), armsfile.InRunArm("default-2"),
            armsfile.InRunArm("ring_ll", str(tmp_path / "ring_ll.conf")), armsfile.InRunArm("pat", str(tmp_path / "pat.conf")))
    spec = armsfile.ArmsFile(SEED, WARMUP, BLOCK_PERIODS, 12, str(tmp_path / "logs"), arms, period=51)
    spec.write(tmp_path / "arms.txt")
    orders = rank_orders("ddp-4")
    seqs = [write_seq(extend(o, 40), tmp_path / f"rank{r}.seq") for r, o in enumerate(orders)]
    proc = run([c_build / "test_ranks", c_build / LIB, "v6", tmp_path / "choices", *seqs],
               env=harness_env(tmp_path / "arms.txt"), cwd=tmp_path)
    assert proc.returncode == 0 and "mismatches 0" in proc.stdout and "warnings 0" in proc.stdout, proc.stdout
    logs = armsfile.read_logs(tmp_path / "logs")
    assert len(logs) == 4 and {lg.period for lg in logs} == {51} and {lg.block_calls for lg in logs} == {102}
    assert all(lg.arms == ("default", "default-2", "ring_ll", "pat") for lg in logs)
    spans, notes = blocks.spans(logs, 4, WARMUP, SEED, 12)
    # every block's arm is the schedule's (no note says otherwise); the harness's threads are not held together by
    # collectives as NCCL's ranks are, so they may switch far apart in time, which the analysis may note
    assert not [n for n in notes if "another arm" in n] and all("far apart in time" in n for n in notes)
    assert [s.arm for s in spans[:12]] == [schedule.arm_at(b, 4, SEED, WARMUP) for b in range(12)]
    assert spans[12].index == 12 and spans[12].arm == 0  # the end-of-schedule mark (max_blocks)


def test_ccltunes_arms_file_limits_are_the_plugins() -> None:
    """An arms file the plugin refuses runs NCCL's default and writes no log (2 x H200, 2026-11-28: ab --in-run
    wrote max_blocks=1073741824, the plugin's limit is 100,000, and every run ended 'no arm log'): ccltune's
    writer checks the plugin's own limits, read here from plugin/src/arms.h."""
    import re as re_

    from ccltune.ab import armsfile

    header = (Path(__file__).resolve().parents[2] / "plugin" / "src" / "arms.h").read_text()
    def value(text: str) -> int:  # "100000", "(1 << 24)", "(1u << 18)"
        nums = [int(x) for x in re_.findall(r"[0-9]+", text)]
        return nums[0] << nums[1] if "<<" in text else nums[0]
    c = {m[1]: value(m[2]) for m in re_.finditer(r"#define (CCLT_ARMS_\w+) +(\([^)]*\)|[0-9]+)", header)}
    assert (c["CCLT_ARMS_MAX"], c["CCLT_ARMS_MAX_BLOCKS"], c["CCLT_ARMS_MAX_WARMUP"], c["CCLT_ARMS_MAX_BLOCK_PERIODS"],
            c["CCLT_ARMS_MAX_PERIOD"]) == (armsfile.MAX_ARMS, armsfile.MAX_BLOCKS_FILE, armsfile.MAX_WARMUP,
                                           armsfile.MAX_BLOCK_PERIODS, armsfile.MAX_PERIOD)
    arms = (armsfile.InRunArm("default"), armsfile.InRunArm("default-2"))
    with pytest.raises(ValueError, match="max_blocks must be 0..100000"):
        armsfile.ArmsFile(1, 2, 5, 1 << 30, "logs", arms).text()
    with pytest.raises(ValueError, match="takes no rule file"):
        armsfile.ArmsFile(1, 2, 5, 10, "logs", (armsfile.InRunArm("default", "r.conf"),)).text()


def test_arms_only_on_communicators_of_the_named_size(c_build: Path, tmp_path: Path) -> None:
    """nranks=N in the arms file: a communicator of another size runs NCCL's default at every call and writes no
    arm log (every rank of a communicator has its size, so they agree); one of N ranks runs the arms."""
    orders = rank_orders("ddp-4")
    seqs = [write_seq(extend(o, 40), tmp_path / f"rank{r}.seq") for r, o in enumerate(orders)]
    for size, armed in ((8, False), (4, True)):
        arms = arms_file(tmp_path, "51")
        arms.write_text(arms.read_text() + f"nranks={size}\n")
        logs = tmp_path / "logs"
        if logs.exists():
            for f in logs.iterdir():
                f.unlink()
        proc = run([c_build / "test_ranks", c_build / LIB, "v6", tmp_path / "choices", *seqs],
                   env=harness_env(arms), cwd=tmp_path)
        assert proc.returncode == 0 and "mismatches 0" in proc.stdout and "warnings 0" in proc.stdout, proc.stdout
        got = {tuple(int(x) for x in line.split()) for line in (tmp_path / "choices").read_text().splitlines()}
        assert (got != {(-1, 0)}) == armed    # NCCL's default at every call, or the arms' rules somewhere
        assert (len(list(logs.glob("ccltune-arms.*.txt"))) if logs.exists() else 0) == (4 if armed else 0)
