"""ccltune.ab.gpu_period on the profiler's files: the armed file of known step periods that the C harness
writes (tests/fixtures/workload/profile-harness/arms_steps), and real captures without arms (DDP, TP decode;
tests/fixtures/ab/gpu-period/README.md)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from ccltune.ab import gpu_period
from ccltune.errors import UsageError
from ccltune.workload import profile_file

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ARMED = FIX / "workload" / "profile-harness" / "arms_steps"
REAL = FIX / "ab" / "gpu-period"


def _real(job: str) -> list[profile_file.ProfileFile]:
    return [profile_file.parse(gzip.decompress(p.read_bytes()), str(p), strict=True)
            for p in sorted((REAL / job).glob("*.txt.gz"))]


def _anchor_starts(path: str, op: str, count: int) -> list[int]:
    """The start_ns of the call lines of one key, read from the text with nothing of the reader's."""
    lines = gzip.decompress(Path(path).read_bytes()).decode().splitlines()
    entries = [ln.split() for ln in lines if ln.startswith(("coll ", "p2p "))]
    want = {i for i, e in enumerate(entries) if e[1] == op and int(e[2]) == count}
    return [int(ln.split()[3]) for ln in lines if ln.startswith("call ") and int(ln.split()[2]) in want]


def test_the_planted_periods_per_arm_and_block():
    """The harness's job: steps of 4 calls lasting 10, 9.8 and 10.3 ms under arms 0, 1, 2, switched at a
    step's first call in blocks of 3 steps; arm 2 runs the all_reduces as TREE on 2 channels (another entry,
    the same call). The anchor is the reduce_scatter (once per step; the all_reduce twice: halves that
    differ); the step that holds each switch is left out."""
    (f,) = profile_file.read_dir(ARMED, strict=True)
    r = gpu_period.gpu_periods(f)
    assert r.anchor == ("coll", "reduce_scatter", 65536, "bfloat16", None) and r.notes == ()
    assert r.mixed_steps == 8
    assert [(b.arm, b.first_call, len(b.steps_ns)) for b in r.blocks] == [
        (0, 1, 8), (1, 37, 2), (2, 49, 5), (0, 73, 2), (1, 85, 5), (2, 109, 2), (0, 121, 5), (2, 145, 2), (1, 157, 2)]
    assert {b.arm: set(b.steps_ns) for b in r.blocks} == {0: {10_000_000}, 1: {9_800_000}, 2: {10_300_000}}
    assert [(a.arm, a.blocks, a.steps, a.median_ns, a.mean_ns) for a in r.arms] == [
        (0, 3, 15, 10e6, 10e6), (1, 3, 9, 9.8e6, 9.8e6), (2, 3, 9, 10.3e6, 10.3e6)]
    # the collectives' own GPU time (the diagnostic): 4 calls a step of 100, 120 and 90 us
    assert [a.own_per_step_ns for a in r.arms] == [400e3, 480e3, 360e3]
    assert r.blocks[0].own_ns == 8 * 400_000 and r.blocks[0].calls == 32


def test_block_steps_cuts_runs_of_one_arm_into_the_tuners_blocks():
    """Blocks of 3 steps: the first run (2 warm-up blocks and the warm-up round's first, all arm 0) is cut
    from its end, the others from their start; two arm-2 blocks in a row come apart."""
    (f,) = profile_file.read_dir(ARMED, strict=True)
    r = gpu_period.gpu_periods(f, block_steps=3)
    assert [(b.arm, len(b.steps_ns)) for b in r.blocks] == [
        (0, 2), (0, 3), (0, 3), (1, 2), (2, 3), (2, 2), (0, 2), (1, 3), (1, 2), (2, 2), (0, 3), (0, 2), (2, 2), (1, 2)]
    assert [a.steps for a in r.arms] == [15, 9, 9]


def test_a_given_period_in_calls():
    (f,) = profile_file.read_dir(ARMED, strict=True)
    r = gpu_period.gpu_periods(f, period=4)
    assert r.anchor is None and r.mixed_steps == 0 and [a.steps for a in r.arms] == [18, 11, 12]  # the last step has no next start
    assert [a.median_ns for a in r.arms] == [10e6, 9.8e6, 10.3e6]


def test_real_ddp_every_rank_sees_the_same_steps():
    """The real DDP job (no arms: arm -1): the anchor is the first gradient bucket's all_reduce, 16 whole
    steps; each step's period is the anchor's start to its next start, read from the text here; the four
    GPUs' timers differ by an offset, the periods agree within 1% between ranks."""
    files = _real("ddp")
    results = [gpu_period.gpu_periods(f) for f in files]
    for f, r in zip(files, results):
        assert r.anchor == ("coll", "all_reduce", 67108864, "float", None) and r.mixed_steps == 0
        assert len(r.blocks) == 1 and r.blocks[0].arm == -1 and r.arms[0].steps == 16
        starts = _anchor_starts(f.path, "AllReduce", 67108864)
        assert list(r.blocks[0].steps_ns) == [b - a for a, b in zip(starts, starts[1:])]
        assert "no arms" in r.notes[0]
    medians = [r.arms[0].median_ns for r in results]
    assert max(medians) / min(medians) < 1.01, medians
    assert 30e6 < medians[0] < 300e6  # tens of milliseconds per step


def test_real_tp_decode_repeats_one_collective():
    """The TP decode loop repeats one all_reduce: found alone, the anchor is that all_reduce and a note says
    its repeats are not the job's steps; anchored on the barrier that ends each step of the second half,
    7 steps of 257 calls that agree between the ranks within 1% but the first (a rank's call starts when
    its own stream reaches it: the first barrier step is 52 ms on rank 0 and 105 ms on rank 1)."""
    files = _real("tp")
    r = gpu_period.gpu_periods(files[0])
    assert r.anchor == ("coll", "all_reduce", 131072, "bfloat16", None)
    assert any("not its steps" in n for n in r.notes) and any("call lines stop after 4096" in n for n in r.notes)
    barrier = ("coll", "all_reduce", 1, "float", None)
    by_barrier = [gpu_period.gpu_periods(f, anchor=barrier) for f in files]
    for f, b in zip(files, by_barrier):
        assert b.arms[0].steps == 7 and b.blocks[0].calls == 7 * 257
        starts = _anchor_starts(f.path, "AllReduce", 1)
        assert list(b.blocks[0].steps_ns) == [y - x for x, y in zip(starts, starts[1:])]
    later = [sorted(b.blocks[0].steps_ns[1:]) for b in by_barrier]
    assert all(abs(x / y - 1) < 0.01 for x, y in zip(*later)), later
    firsts = [b.blocks[0].steps_ns[0] for b in by_barrier]
    assert max(firsts) > 1.5 * min(firsts)  # 52 and 105 ms: each rank's first barrier waited on its own stream


def test_files_without_gpu_start_times_are_refused_by_name():
    (v1,) = profile_file.read_dir(FIX / "workload" / "profile-harness" / "v1")
    with pytest.raises(UsageError, match=r"v1/.*host timing \(profiler ABI v1\): no GPU timestamps"):
        gpu_period.gpu_periods(v1)
    (armed,) = ARMED.glob("*.txt")
    every = profile_file.parse(armed.read_bytes().replace(b" every 1\n", b" every 2\n"), "e.txt")
    with pytest.raises(UsageError, match=r"^e.txt: every 2th call timed: .*CCLTUNE_PROFILE_EVERY=1"):
        gpu_period.gpu_periods(every)
    with pytest.raises(UsageError, match=r"^e.txt: period 0: a step has at least 1 call"):
        gpu_period.gpu_periods(profile_file.parse(armed.read_bytes(), "e.txt"), period=0)


def test_the_anchor_is_the_key_whose_steps_agree():
    assert gpu_period.find_anchor(list("abacabacabac")) == "b"   # a twice a step: halves ab, ac differ
    step = list("xabcdefghij")
    assert gpu_period.find_anchor(step * 2 + step + ["Q"] + step * 2 + ["x"]) == "x"  # a step with a barrier agrees
    assert gpu_period.find_anchor(list("abcdefg")) is None and gpu_period.find_anchor(list("abab")) is None


HARNESS_ORDER = (0, 0, 0, 1, 2, 2, 0, 1, 1, 2, 0, 0, 2, 1)   # the harness's blocks (profiler/tests/test_profiler.c)


def _harness_spans() -> list:
    from ccltune.ab import schedule
    from ccltune.ab.blocks import Span

    return [Span(b, arm, *schedule.round_of(b, 3, 2), 1000 * b, 1000 * (b + 1)) for b, arm in enumerate(HARNESS_ORDER)]


def test_each_schedule_block_gets_its_own_gpu_period_and_the_arms_are_paired_by_round():
    """ab --in-run's diagnostic: the harness's file put on the schedule's 14 blocks (2 warm-up, the warm-up round,
    3 rounds of 3 arms) by order, blocks of 3 steps: every block gets its arm's period, and per round arm 1's block
    over default's is 0.98, arm 2's 1.03."""
    from ccltune.ab.blocks import BlockValue

    (f,) = profile_file.read_dir(ARMED, strict=True)
    spans = _harness_spans()
    got, notes = gpu_period.per_block([f], spans, 3)
    assert notes == [] and sorted(got) == list(range(14))
    step = {0: 10_000_000, 1: 9_800_000, 2: 10_300_000}
    assert all(set(b.steps_ns) == {step[spans[i].arm]} for i, (b,) in got.items())
    judged = [BlockValue(s, 1.0, 3) for s in spans if s.round >= 0]
    d = gpu_period.diagnostic([f], judged, ["default", "default-2", "x"], 3, spans)
    assert [a.blocks for a in d.arms] == [3, 3, 3] and [a.median_ms for a in d.arms] == [10.0, 9.8, 10.3]
    assert [round(a.estimate.ratio, 9) for a in d.arms[1:]] == [0.98, 1.03] and d.arms[0].estimate is None
    assert d.to_dict()["arms"][2]["pairs"] == 3 and any("GPU step period" in line for line in d.lines())


def test_a_file_that_leaves_the_schedule_is_used_up_to_there_and_said():
    from dataclasses import replace

    (f,) = profile_file.read_dir(ARMED, strict=True)
    spans = _harness_spans()
    spans[6] = replace(spans[6], arm=1)   # the schedule says arm 1 where the file ran arm 0
    got, notes = gpu_period.per_block([f], spans, 3)
    assert sorted(got) == [0, 1, 2, 3, 4, 5] and "left out" in notes[0] and "block 6" in notes[0]
