"""Workload sources beyond logs and traces (issue 29: ccltune's profiler files, NCCL Inspector), the
registry that reads them, steps found from the calls, and sources of one process merged, never added
(issue 30). Fixtures: tests/fixtures/workload (README there) and the real 4-rank FSDP2 capture."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.errors import UsageError
from ccltune.workload import importer, model, nccl_log, profile_file, sameproc, sources, steps
from ccltune.workload.model import Key, RankRecord

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
PROFILE = FIX / "profile-ddp-2"   # real: both ranks of a 2-rank DDP job (README there)
HAND = FIX / "profile"            # hand-written: an entry never timed and a Send/Recv pair, shapes no real file has
INSPECTOR = sorted((FIX / "inspector").glob("*.log"))
FSDP2 = sorted(glob.glob("/work/shared/captures/h200x4-2026-11-26/fsdp2_coll_nccl.vm.*.log"))


def _entry(wl: model.Workload, collective: str) -> model.Entry:
    return next(e for e in wl.entries if e.key.collective == collective)


def test_each_fixture_is_read_by_its_source():
    for path, name in ((FIX / "coll-ddp-1gpu.vm.4029.log", "nccl-log"), (FIX / "trace_rank0.json", "torch-trace"),
                       (INSPECTOR[0], "inspector"), (next(PROFILE.glob("*.txt")), "ccltune-profile")):
        assert sources.recognise(importer.read_text(path), str(path)).name == name
    assert all(s.what in importer.KINDS for s in sources.SOURCES)


def test_profiler_files_give_in_job_medians_what_ran_and_waiting():
    wl = importer.import_files([PROFILE])
    ar = next(e for e in wl.entries if e.key.collective == "all_reduce" and e.key.count == 32768000)
    assert ar.key == Key("all_reduce", 32768000 * 4, 2, "float", 32768000, 1) and ar.calls == 7
    assert ar.time_from == "ccltune-profile" and dict(ar.ran) == {("RING", "SIMPLE", 24): 14}
    # exact over the call lines of both ranks (entry 6 of each file): 7 calls each, matched by their sequence number
    files = profile_file.read_dir(PROFILE)
    index = next(i for i, e in enumerate(files[0].entries) if e.count == 32768000)
    calls = {f.rank: {seq: (start, end) for seq, e, start, end in f.calls if e == index} for f in files}
    own = sorted((end - start) / 1000 for by_seq in calls.values() for start, end in by_seq.values())
    assert ar.timing.calls == 14 and ar.timing.median_us == pytest.approx((own[6] + own[7]) / 2)
    # waiting: latest start among the ranks - own start (timers lined up on the RING calls); transfer: own end -
    # latest start. One rank reached one of these calls 6.9 ms after the other.
    assert ar.wait.calls == ar.transfer.calls == 14 and ar.wait.max_us == pytest.approx(6943.328, abs=1e-3)
    assert ar.wait.total_us + ar.transfer.total_us == pytest.approx(sum(own))    # per call: wait + transfer = own
    assert min(ar.wait.samples) == 0.0                          # the last rank to arrive waits for nobody
    assert wl.steps == 7 and not wl.warnings
    doc = json.loads(model.to_json(wl, {}))
    back = model.from_json(model.to_json(wl, {}), "w.json")
    e0 = next(d for d in doc["entries"] if d["collective"] == "all_reduce" and d["count"] == 32768000)
    assert e0["time_us_median"] == round(ar.timing.median_us, 3) and e0["wait_us_max"] == 6943.328
    assert e0["ran"] == [{"algo": "RING", "proto": "SIMPLE", "nchannels": 24, "calls": 14}]
    b = next(e for e in back.entries if e.key == ar.key)
    assert b.timing.median_us == pytest.approx(ar.timing.median_us, abs=1e-3) and b.wait.median_us is not None


def test_an_entry_never_timed_is_counted_and_send_recv_pairs_are_exchanges():
    """Shapes no real capture has (the hand-written files, README there): an entry the sampling never timed, and
    the Send/Recv of one exchange on 2 ranks."""
    wl = importer.import_files([HAND])
    assert _entry(wl, "reduce_scatter").timing is None          # counted, never timed
    assert _entry(wl, "sendrecv").calls == 2                    # 2 Send + 2 Recv: 2 exchanges
    assert _entry(wl, "all_reduce").wait.max_us == pytest.approx(30.0)


def test_one_ranks_profiler_file_says_waiting_is_not_computed():
    wl = importer.import_files([next(PROFILE.glob("*.0.txt"))])
    assert _entry(wl, "all_reduce").wait is None
    assert any("files of 1 of its 2 ranks given" in w for w in wl.warnings)


def test_inspector_output_imports_with_sizes_times_and_steps():
    wl = importer.import_files(INSPECTOR)
    ar, ag = _entry(wl, "all_reduce"), _entry(wl, "all_gather")
    assert (ar.key.size_bytes, ar.calls, ar.key.datatype) == (262144, 12, None)
    assert ag.key.size_bytes == 4 << 20 and ag.calls == 3          # per-rank 2 MiB on 2 ranks
    assert ar.time_from == "inspector" and ar.timing.median_us == 12.0 and ar.timing.max_us == 42.0
    assert _entry(wl, "sendrecv").calls == 3 and wl.steps == 3
    assert "repeating sequence (3 repeats" in wl.steps_note


def test_inspector_cut_line_is_skipped_and_another_version_refused(tmp_path):
    text = INSPECTOR[0].read_text()
    cut = tmp_path / "h-pid1.log"
    cut.write_text(text[:-40])
    wl = importer.import_files([cut])
    assert any(f"{cut}:21: skipped: not a JSON object" in w for w in wl.warnings)
    other = tmp_path / "h-pid2.log"
    other.write_text(text.replace('"v4.0"', '"v9.0"'))
    with pytest.raises(UsageError, match=r"h-pid2.log:1: Inspector output format 'v9.0'"):
        importer.import_files([other])


def test_steps_from_the_calls_repeating_sequence():
    recs, _ = nccl_log.parse((FIX / "coll-ddp-1gpu.vm.4029.log").read_text(), "log")
    assert steps.find(recs[0].order)[0] == 7                 # the trace of the same job shows 7/2 the calls
    assert steps.find(["a"] * 4608) is None                  # a TP decode: one entry, no structure
    assert steps.find(list("abcabx")) is None                # no repeat covers half the calls


@pytest.mark.skipif(not FSDP2, reason="the real 4-rank FSDP2 capture is not on this machine")
def test_steps_of_the_real_fsdp2_capture():
    """18 steps (README of the capture): 10 timed steps end with a barrier the 8 others lack."""
    wl = importer.import_files(FSDP2)
    assert wl.steps == 18 and "18 steps" in wl.steps_note


def test_keys_of_more_and_less_detail_are_one_entry():
    """Issue 30: a log with INIT lines (nodes 1) and a trace (nodes unknown) of one all_reduce were
    two entries, every bytes% wrong."""
    k1, k0 = Key("all_reduce", 4096, 2, "float", 1024, 1), Key("all_reduce", 4096, 2, "float", 1024, None)
    a = RankRecord("log", "nccl-log", "h:1")
    a.calls[k1] = 5
    b = RankRecord("trace", "torch-trace", "rank 1")
    b.calls[k0] = 5
    sameproc.unify_keys([a, b])
    wl = model.merge([a, b])
    assert [(e.key, e.calls) for e in wl.entries] == [(k1, 5)]


def test_show_prints_in_job_median_and_waiting(tmp_path, capsys):
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(PROFILE), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["workload", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "job_us" in text and "wait_us" in text and "trace_us" not in text
    assert next(x for x in text.splitlines() if x.startswith("  all_reduce")).endswith("  RING/SIMPLE/24")


def test_a_profiler_file_without_its_rank_count_is_said_not_guessed(tmp_path):
    harness = FIX / "profile-harness"
    with pytest.raises(UsageError, match="no collective calls") as err:
        importer.import_files([harness / "v1"])
    assert "rank count is not in the file (profiler ABI v1 does not give it)" in str(err.value)
    wl = importer.import_files([harness / "v5"])
    (ar,) = [e for e in wl.entries if e.key.collective == "all_reduce"]
    assert ar.key.size_bytes == 65536 * 2 and ar.calls == 10 and dict(ar.ran) == {("RING", "LL", 2): 10}
    # with a file of the same communicator that gives it, the count is taken from there; host times are said
    # (another rank's: the same rank of the same communicator twice is one file given twice, issue 41)
    other = tmp_path / "ccltune-profile.vm.11820.0123456789abcdef.3.txt"
    (v5,) = (harness / "v5").iterdir()
    other.write_text(v5.read_text().replace("pid 11819 comm 0123456789abcdef rank 2", "pid 11820 comm 0123456789abcdef rank 3"))
    both = importer.import_files([harness / "v1", other]).warnings
    assert any("timed with the host clock (ABI v1 has no GPU timer" in w for w in both)
    assert not any("rank count is not in the file" in w for w in both)


def test_fuzz_inspector_lines_give_records_or_a_usage_error():
    """Seeded, time-bounded: random byte flips, cuts and repeated lines of a real Inspector file; each
    import is records (bad lines skipped with a warning) or a UsageError, nothing else."""
    import gzip
    import random
    import time

    from ccltune.workload import inspector

    raw = gzip.decompress((FIX / "inspector-real" / "vm-pid4438.log.gz").read_bytes()).decode()
    lines = raw.splitlines()[:12]
    rng = random.Random(29)
    deadline = time.monotonic() + 2.0
    seen = {"ok": 0, "error": 0}
    while time.monotonic() < deadline and sum(seen.values()) < 1500:
        cur = list(lines)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(cur))
            s = cur[i]
            j = rng.randrange(len(s) + 1)
            cur[i] = rng.choice([s[:j], s[:j] + chr(rng.randrange(32, 127)) + s[j + 1:], s[:j] + "9" * 5000 + s[j:],
                                 s.replace('"v4.0"', '"v5.0"'), "[" * 3000])
        try:
            recs, warns = inspector.parse("\n".join(cur), "fz.log")
            assert all(r.kind == "inspector" for r in recs)
            seen["ok"] += 1
        except UsageError as exc:
            assert str(exc).startswith("fz.log:")
            seen["error"] += 1
    assert seen["ok"] > 50 and seen["error"] > 0


def test_a_one_gpu_jobs_capture_says_why_it_holds_no_call(tmp_path, capsys):
    """The real capture of a one-GPU job (H200, 2026-11-28): nranks=1, no call. Import refuses it as before, and now
    says why: NCCL consults no tuner for a one-rank communicator; the COLL log or a trace sees the collectives."""
    (f,) = (FIX / "capture-1gpu-h200").glob("ccltune-capture.*.txt")
    assert main(["workload", "import", str(f), "--out", str(tmp_path / "w.json")]) == 2
    err = capsys.readouterr().err
    assert "no collective calls in them" in err and "a one-rank communicator (nranks=1): NCCL consults no tuner" in err
    assert not (tmp_path / "w.json").exists()


def test_a_log_of_a_job_that_issued_no_collective_says_so_besides_the_missing_subsystem(tmp_path, capsys):
    """FSDP2 on one H200 (real INIT,COLL log, 2026-11-28): NCCL_DEBUG_SUBSYS had COLL, the job issued no collective.
    The error still names the subsystem (a log cannot say which were on) and adds that every communicator has one
    rank; a multi-rank log without COLL lines does not get that clause."""
    (f,) = (FIX / "fsdp2-1gpu-h200").glob("*.log.gz")
    assert main(["workload", "import", str(f), "--out", str(tmp_path / "w.json")]) == 2
    err = capsys.readouterr().err
    assert "an NCCL log without COLL lines" in err and "every communicator in it has one rank" in err
    import gzip

    four = gzip.decompress(f.read_bytes()).decode().replace(" nranks 1 ", " nranks 4 ")
    (tmp_path / "four.log").write_text(four)
    assert main(["workload", "import", str(tmp_path / "four.log"), "--out", str(tmp_path / "w.json")]) == 2
    err = capsys.readouterr().err
    assert "an NCCL log without COLL lines" in err and "one rank" not in err
