"""The workload loop on real 2- and 4-rank captures (tests/fixtures/workload, README there): one process
seen by its log and its trace is merged, never added; steps are found and say from where; the job's time
per call is a median that one wait does not own; and every printer of one quantity agrees (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune.stats import point_stats
from ccltune.store import Measurement
from ccltune.tune import weighted
from ccltune.tune.derive import derive
from ccltune.validate import replay as replay_plan
from ccltune.workload import estimate, importer, profile_file, show

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"


def _files(job: str, pattern: str = "*") -> list[Path]:
    return sorted((FIX / job).glob(pattern))


def test_log_and_trace_of_the_same_ranks_are_merged_not_added():
    logs, traces = _files("ddp-2", "nccl.*.log.gz"), _files("ddp-2", "trace_rank*.json.gz")
    alone = importer.import_files(logs)
    both = importer.import_files(logs + traces)
    assert [(e.key, e.calls) for e in both.entries] == [(e.key, e.calls) for e in alone.entries]
    assert len(both.sources) == 2 and both.steps == alone.steps == 7
    assert sum(1 for w in both.warnings if "merged, not added" in w) == 1   # one line for both ranks (issue 38)
    assert any(e.time_from == "torch-trace" for e in both.entries)


def test_tp_decode_steps_come_from_the_trace_and_the_median_is_robust():
    wl = importer.import_files(_files("tp-decode-2", "nccl.*.log.gz") + _files("tp-decode-2", "trace_rank*.json.gz"))
    (e,) = wl.entries
    assert (e.key.collective, e.key.size_bytes, e.calls) == ("all_reduce", 8192, 512)
    assert wl.steps == 8 and "scaled by" in wl.steps_note and "2 ProfilerStep#N spans" in wl.steps_note
    # one kernel that waited for its peer owns the mean, not the median the workload shows and uses
    assert e.timing.mean_us > 3 * e.timing.median_us and e.timing.max_us > 100 * e.timing.median_us
    assert f"{e.timing.median_us:.1f}" in "\n".join(show.table(wl))


def test_real_inspector_output_imports():
    wl = importer.import_files(_files("inspector-real", "*.log.gz"))
    assert len(wl.sources) == 4 and wl.steps == 7 and sum(e.calls for e in wl.entries) == 37
    assert all(e.time_from == "inspector" and e.timing.median_us > 0 for e in wl.entries)
    assert {e.key.nranks for e in wl.entries} == {4}


def test_real_fsdp2_steps():
    wl = importer.import_files(_files("fsdp2-4", "nccl.*.log.gz"))
    assert wl.steps == 8 and "8 repeats of 8 calls" in wl.steps_note


def test_one_quantity_one_answer_on_a_real_workload():
    """show's estimate, tune's prediction and replay's rows are one quantity (per step: calls x per-call
    median / steps) from the same per-call figures: they must agree to the microsecond."""
    wl = importer.import_files(_files("fsdp2-4", "nccl.*.log.gz"))
    per_call = {e.key.size_bytes: 100.0 + e.key.size_bytes / 1e5 for e in wl.entries}
    rows = [dict(collective=e.key.collective, size_bytes=e.key.size_bytes, n_ranks=4, n_nodes=1, algo=None,
                 proto=None, channels=None, config="default", rep=k, time_us=per_call[e.key.size_bytes] * f,
                 status="ok", in_place=False, dtype=e.key.datatype, op=None, graph=1, gpu="H200")
            for e in wl.entries for k, f in enumerate((0.99, 1.0, 1.01))]
    (plan,) = weighted.plan(wl, derive(rows))
    est = estimate.estimate(wl, [Measurement(r["collective"], r["size_bytes"], 0, r["dtype"], None, None, False, 4,
                                             time_us=r["time_us"], rep=r["rep"]) for r in rows])
    shown = next(x for x in show.table(wl, est, "db") if x.startswith("# estimated communication time per step"))
    ents = [replay_plan.EntryTime(i, e.key.collective, e.key.size_bytes, e.calls,
                                  point_stats([per_call[e.key.size_bytes] * f for f in (0.99, 1.0, 1.01)]), None)
            for i, e in enumerate(wl.entries)]
    v = replay_plan.verdict({"default": [plan.default_us * 1.5] * 3}, wl.steps, ents)
    assert plan.default_us == pytest.approx(v.rows_us)
    assert f"{plan.default_us:.1f} us" in shown
    assert f"the rows sum to {plan.default_us:.1f} us per step" in "\n".join(replay_plan.lines(v, wl, "captured"))


def test_real_profiler_files_give_waiting_per_entry():
    """Real 4-rank DDP profiler files (README): every all_reduce call of one (op, seq) is matched across
    the 4 ranks, wait + transfer is each call's own time, and waiting is most of the job's time per call
    for the gradient buckets (the ranks arrive apart); what NCCL ran is kept per entry."""
    wl = importer.import_files([FIX / "profile-ddp-4"])
    ar = [e for e in wl.entries if e.key.collective == "all_reduce"]
    assert wl.steps == 7 and all(e.time_from == "ccltune-profile" for e in wl.entries)
    for e in ar:
        assert e.wait.calls == e.transfer.calls == e.timing.calls == 4 * e.calls
        assert e.wait.total_us + e.transfer.total_us == pytest.approx(e.timing.total_us)
        assert dict(e.ran) == {("RING", "SIMPLE", 24): 4 * e.calls}
    assert all(e.wait is None for e in wl.entries if e.key.collective == "broadcast")  # rooted: not split
    # the bytes view of a collective that does not reduce: size kept, datatype and count unknown
    assert {(e.key.datatype, e.key.count) for e in wl.entries if e.key.collective == "broadcast"} == {(None, None)}


def test_real_fsdp2_profiler_files_have_the_logs_sizes_and_steps():
    """FSDP2, 4 ranks: the profiler's int8 all_gathers have the sizes the COLL logs of another run of the
    job give (its bf16 elements), and the steps come from the files' call lines."""
    wl = importer.import_files([FIX / "profile-fsdp2-4"])
    assert wl.steps == 8 and [e.key.size_bytes for e in wl.entries] == [e.key.size_bytes for e in
                                                                        importer.import_files(_files("fsdp2-4", "nccl.*.log.gz")).entries]


def test_tree_times_are_said_to_end_at_thread_0():
    """Real 4-rank DDP files with a rule forcing TREE/SIMPLE on 4 channels (README): the import says once
    that these times end when the channel's thread 0 is done, which under TREE is before the broadcast back
    down the tree on every rank but the root; the same job under NCCL's default (RING) gets no such warning."""
    tree = importer.import_files([FIX / "profile-ddp-tree-4"])
    timed = sum(e.timed for f in profile_file.read_dir(FIX / "profile-ddp-tree-4") for e in f.entries if e.algo == "TREE")
    (w,) = [w for w in tree.warnings if "ran TREE" in w]
    assert w.startswith(f"{timed} timed calls ran TREE (all_reduce count 8391680, ") and "thread 0" in w and "root" in w
    assert all(set(e.ran) == {("TREE", "SIMPLE", 4)} for e in tree.entries if e.key.collective == "all_reduce")
    assert any("ran TREE" in x for x in show.table(tree))
    assert not any("thread 0" in w for w in importer.import_files([FIX / "profile-ddp-4"]).warnings)


CAPTURE_1128 = FIX / "h200x4-1128"


def _import_1128(job: str):
    return importer.import_files(_files(f"h200x4-1128/{job}", "nccl.*.log.gz")
                                 + _files(f"h200x4-1128/{job}", "prof/*.txt.gz"))


def test_every_entry_the_profiler_files_have_gets_a_wait_figure():
    """Issue 38, item 5: DDP's buckets (95% of the calls) had wait_us '-': merged with the COLL logs, only the
    first entry's waiting was kept; and the 4 GPUs' timers stand up to 1 ms apart, so the other ranks' calls
    'ended' before the last one 'started' and were dropped. Lined up by the RING calls' ends, every call of
    every collective without a root is split, and waiting + transfer is the call's own time."""
    wl = _import_1128("ddp")
    split = [e for e in wl.entries if e.key.collective in ("all_reduce", "all_gather")]
    assert len(split) == 8 and sum(e.calls for e in split) > 0.95 * sum(e.calls for e in wl.entries)
    for e in split:
        assert e.wait is not None and e.wait.calls == e.timing.calls == 4 * e.calls, e.key
        assert e.wait.total_us + e.transfer.total_us == pytest.approx(e.timing.total_us), e.key
        assert 0 <= e.wait.median_us <= e.timing.max_us, e.key
    bucket = next(e for e in split if e.calls == 544)
    assert bucket.wait.median_us < bucket.timing.median_us / 2   # a ring of 4 GPUs on one node: mostly transfer
    assert all(e.wait is None for e in wl.entries if e.key.collective == "broadcast")   # a root finishes early
    assert f"{bucket.wait.median_us:.1f}" in next(line for line in show.table(wl) if line.startswith("  all_reduce") and " 544 " in line)


def test_dropped_call_lines_are_said_with_what_they_cost():
    """Issue 38, item 5: the TP files' 523 calls past the 4,096 call lines were reported as 'the profiler's
    table was full: 0 entries'. Nothing left the table; say what was dropped and which entries lose their
    wait. The 256 KiB all_reduce waits most of its 141 us (idle: 14 us), which raw timers 1.5 to 6 ms apart
    showed as a wait of 0.0 from the one rank whose calls survived the old filter."""
    wl = _import_1128("tp")
    said = [w for w in wl.warnings if "call line" in w]
    assert not any("table" in w and "full" in w for w in wl.warnings)
    assert len(said) == 1 and "first 4096 timed calls" in said[0] and "523 after them" in said[0]
    assert "no wait figure for all_reduce 40 B x1" in said[0] and "CCLTUNE_PROFILE_CALLS=4619" in said[0]
    big = next(e for e in wl.entries if e.key.size_bytes == 262144)
    assert big.calls == 4608 and big.wait is not None and big.wait.calls >= 4 * 4000
    assert 0.5 * big.timing.median_us < big.wait.median_us <= big.timing.median_us
    late = next(e for e in wl.entries if e.key.size_bytes == 40)
    assert late.timing is not None and late.wait is None


def test_one_line_says_what_was_merged():
    """Issue 38, item 6: a clean 4-rank capture of two sources said 'merged, not added' once per process."""
    for job in ("ddp", "tp"):
        merged = [w for w in _import_1128(job).warnings if "merged, not added" in w]
        assert len(merged) == 1, merged
        assert "4 processes" in merged[0] and "ccltune-profile and nccl-log" in merged[0], merged[0]
