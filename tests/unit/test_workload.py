"""workload import/show on real NCCL 2.28.9 COLL logs and torch 2.11 profiler traces of a DDP
job (tests/fixtures/workload/README.md), and the bad inputs made from them."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.errors import UsageError
from ccltune.store import Measurement, Store
from ccltune.workload import estimate, importer, model, nccl_log

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
LOG = FIX / "coll-ddp-1gpu.vm.4029.log"
STDOUT_LOG = FIX / "coll-ddp-stdout.log"
TRACE = FIX / "trace_rank0.json"
TRACE_GZ = FIX / "trace_rank0.json.gz"


def _calls(wl: model.Workload) -> dict[tuple[str, str | None, int | None, int], int]:
    return {(e.key.collective, e.key.datatype, e.key.count, e.key.size_bytes): e.calls for e in wl.entries}


def test_coll_log_exact_counts() -> None:
    wl = importer.import_files([LOG])
    f4 = lambda n: n * 4  # noqa: E731  float
    assert _calls(wl) == {
        ("all_gather", "int64", 1, 8): 1,
        ("broadcast", "int64", 140, 1120): 1, ("broadcast", "int32", 53, 212): 1, ("broadcast", "int32", 8, 32): 1,
        ("broadcast", "float", 66353152, f4(66353152)): 1, ("broadcast", "float", 49569792, f4(49569792)): 1,
        ("all_reduce", "float", 115922944, f4(115922944)): 1,
        ("all_reduce", "float", 32768000, f4(32768000)): 7, ("all_reduce", "float", 32773120, f4(32773120)): 7,
        ("all_reduce", "float", 8391680, f4(8391680)): 7, ("all_reduce", "float", 8394752, f4(8394752)): 7,
        ("all_reduce", "float", 8396800, f4(8396800)): 14, ("all_reduce", "float", 8400896, f4(8400896)): 14,
    }
    assert all(e.key.nranks == 1 and e.key.nnodes is None for e in wl.entries)
    assert sum(e.calls for e in wl.entries) == LOG.read_text().count(": opCount ") == 63
    assert wl.entries[0].bytes_total == max(e.bytes_total for e in wl.entries)  # by share of bytes
    assert wl.sources[0]["rank"] == "vm:4029" and not wl.warnings


def test_coll_log_mixed_into_stdout() -> None:
    wl = importer.import_files([STDOUT_LOG])
    assert sum(e.calls for e in wl.entries) == 10
    assert _calls(wl)[("all_reduce", "float", 16384000, 65536000)] == 2
    assert _calls(wl)[("broadcast", "float", 39073792, 156295168)] == 1


@pytest.mark.parametrize("path", [TRACE, TRACE_GZ], ids=["json", "json.gz"])
def test_trace_exact_counts(path: Path) -> None:
    wl = importer.import_files([path])
    assert wl.steps == 2
    assert {(k[2]): n for k, n in _calls(wl).items()} == {
        8400896: 4, 8396800: 4, 32768000: 2, 8391680: 2, 8394752: 2, 32773120: 2}
    assert all(e.key.collective == "all_reduce" and e.key.datatype == "float" and e.key.nranks == 1
               for e in wl.entries)
    assert all(e.timing is None for e in wl.entries)  # one rank: NCCL launches no kernel


# A real GPU kernel event of the job's trace (/work/captures/cap/ddp/trace-json/trace_rank0.json, torch
# 2.11, the first 'kernel' event: at::native::vectorized_gather_kernel), whole. With one rank NCCL launches
# no kernel, so the NCCL kernels below are made in exactly this shape: name, ts, dur, External id,
# correlation and stream changed, every other field as torch.profiler wrote it.
REAL_KERNEL = {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_gather_kernel<16, long>(char*, char*, "
               "long*, int, long, long, long, long, bool)", "pid": 0, "tid": 7, "ts": 4608972409519.892, "dur": 4.48,
               "args": {"External id": 12, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 75,
                        "registers per thread": 32, "shared memory": 0, "blocks per SM": 7.757576,
                        "warps per SM": 62.060608, "grid": [1024, 1, 1], "block": [256, 1, 1],
                        "est. achieved occupancy %": 97}}


def _with_nccl_kernels(doc: dict, dur_us: Callable[[int, int], float]) -> dict:
    """The trace with one ncclDevKernel per record_param_comms, launched by it (its External id),
    on NCCL's stream 13, ``dur_us(call index, elements)`` long."""
    comms = [e for e in doc["traceEvents"] if e.get("name") == "record_param_comms"]
    for i, e in enumerate(comms):
        k = json.loads(json.dumps(REAL_KERNEL))
        k.update(name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", tid=13,
                 ts=e["ts"] + 20.0, dur=dur_us(i, e["args"]["In msg nelems"]))
        k["args"].update({"External id": e["args"]["External id"], "stream": 13, "correlation": 900000 + i})
        doc["traceEvents"].append(k)
    return doc


def test_trace_kernel_times_per_entry(tmp_path: Path) -> None:
    doc = _with_nccl_kernels(json.loads(TRACE.read_text()), lambda i, n: n / 1e5 + (i % 2))
    t = tmp_path / "kernels.json"
    t.write_text(json.dumps(doc))
    wl = importer.import_files([t])
    for e in wl.entries:  # every call timed by its own kernel: n/1e5 us, +1 on every other call
        assert e.timing is not None and e.timing.calls == e.calls, e.key
        assert e.timing.min_us >= e.key.count / 1e5 and e.timing.max_us <= e.key.count / 1e5 + 1
        assert e.timing.mean_us == pytest.approx(e.key.count / 1e5 + 0.5, abs=0.5)
    back = json.loads(model.to_json(wl, {}))["entries"]
    assert all(d["timed_calls"] == d["calls"] and d["time_us_min"] <= d["time_us_mean"] <= d["time_us_max"]
               for d in back)
    # a kernel of another op (the real gather kernel) and NCCL kernels of no comms event time nothing
    doc = json.loads(TRACE.read_text())
    doc["traceEvents"].append(REAL_KERNEL)
    stray = dict(REAL_KERNEL, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    doc["traceEvents"].append(stray)
    t.write_text(json.dumps(doc))
    assert all(e.timing is None for e in importer.import_files([t]).entries)


def test_trace_and_log_of_one_process_agree() -> None:
    """The trace (2 profiled steps) and the COLL log (7 steps with gradient buckets) of pid
    4029 name the same entries; every bucket is called 7/2 times as often in the log."""
    log, trace = _calls(importer.import_files([LOG])), _calls(importer.import_files([TRACE]))
    for key, n in trace.items():
        assert log[key] * 2 == n * 7, key
    # issue 30: one process (pid 4029) seen twice is merged, never added; the log's repeating sequence
    # gives its 7 steps (the trace's 2 are another span)
    both = importer.import_files([LOG, TRACE])
    assert _calls(both) == log and both.steps == 7 and len(both.sources) == 1
    assert "repeating sequence (7 repeats of 8 calls" in both.steps_note
    assert any("are one process (pid 4029 on vm): merged, not added" in w for w in both.warnings)
    forced = importer.import_files([LOG, TRACE], steps=7)
    assert _calls(forced) == log and forced.steps_note == "steps: 7, from --steps"


def test_log_and_trace_of_other_spans_are_refused_without_steps(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The log counts the whole run (7 backward passes), the trace 2 profiled steps: merged as the
    largest count per entry with the trace's 2 steps, every per-step figure was 3.5x too high."""
    err = _import_fails(tmp_path, [LOG, TRACE_GZ], capsys)
    assert "do not cover the same steps" in err and "--steps N" in err
    assert f"{LOG}: 7 steps (nccl-log)" in err and f"{TRACE_GZ}: 2 steps (torch-trace)" in err
    # two traces of other lengths disagree too: the gzipped one cut to its first ProfilerStep
    doc = json.loads(TRACE.read_text())
    first = min(e["ts"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("ProfilerStep#") or e["ts"] == first]
    one = tmp_path / "one_step.json"
    one.write_text(json.dumps(doc))
    err = _import_fails(tmp_path, [TRACE, one], capsys)
    assert f"{TRACE}: 2 steps" in err and f"{one}: 1 step (torch-trace)" in err
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(LOG), str(TRACE_GZ), "--steps", "7", "--out", str(out)]) == 0
    assert "# steps: 7, from --steps (the files:" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["steps"] == 7 and doc["steps_from"].startswith("steps: 7, from --steps (the files: ")
    # the file keeps where its steps came from: show says it, and a file without --steps has no such line
    assert main(["workload", "show", str(out)]) == 0
    assert f"# {doc['steps_from']}\n" in capsys.readouterr().out
    assert main(["workload", "import", str(TRACE), "--out", str(out)]) == 0
    # issue 30: the steps always say where they came from: here the trace's ProfilerStep#N spans
    said = capsys.readouterr().out
    assert json.loads(out.read_text())["steps_from"] == f"steps: 2, from {TRACE}: 2 ProfilerStep#N spans"
    assert "from --steps" not in said and "ProfilerStep#N spans" in said


def test_cli_import_then_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(TRACE), str(TRACE_GZ), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ccltune-workload" and doc["version"] == 1 and doc["steps"] == 2
    wl = model.from_json(out.read_text(), str(out))
    assert _calls(wl) == _calls(importer.import_files([TRACE, TRACE_GZ]))
    capsys.readouterr()
    assert main(["workload", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "all_reduce" in text and "2 steps" in text


def test_show_estimates_from_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store(db) as st:
        run = st.begin_run("sweep", command="test")
        rows = [Measurement("all_reduce", s, s // 4, "float", "sum", None, False, 1, time_us=t)
                for s, t in ((33554432, 100.0), (33587200, 110.0), (134217728, 400.0))]
        st.add_measurements(run, rows)
        st.finish_run(run, "complete")
    wl = importer.import_files([LOG], steps=7)
    est = estimate.estimate(wl, Store(db, readonly=True).measurements())
    by_size = {wl.entries[i].key.size_bytes: e for i, e in est.items()}
    assert by_size[33587200] == estimate.IdleTime(110.0, "measured")
    assert by_size[33603584].how == "interpolated" and 110.0 < by_size[33603584].time_us < 400.0
    assert 4 * 115922944 not in by_size  # above every measured size: no estimate
    out = tmp_path / "w.json"
    main(["workload", "import", str(LOG), "--steps", "7", "--out", str(out)])
    capsys.readouterr()
    assert main(["workload", "show", str(out), "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "us/step" in text and "~" in text and "estimated communication time per step" in text
    # a run made --under-load (the GPU busy with matrix multiplies) times another machine state:
    # its rows at the same sizes, 100x slower, leave the estimates as they were
    with Store(db) as st:
        run = st.begin_run("replay", command="test")
        st.add_measurements(run, [Measurement("all_reduce", s, s // 4, "float", "sum", None, False, 1,
                                              time_us=100 * t) for s, t in ((33554432, 100.0), (33587200, 110.0))])
        st.finish_run(run, "complete", {"under_load": {"matrix": 4096}})
    assert main(["workload", "show", str(out), "--db", str(db)]) == 0
    assert capsys.readouterr().out == text


# ---- bad input: a clear error naming the file (and line or event); nothing replaced ----

def _import_fails(tmp_path: Path, files: list[Path], capsys: pytest.CaptureFixture[str]) -> str:
    out = tmp_path / "keep.json"
    out.write_text("previous\n")
    assert main(["workload", "import", *map(str, files), "--out", str(out)]) == 2
    assert out.read_text() == "previous\n"
    return capsys.readouterr().err


def test_file_of_no_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nt = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / "ncclt-2.19.0_all_gather_h200x4.txt"
    assert "none of: a ccltune capture file" in _import_fails(tmp_path, [LOG, nt], capsys)
    info = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "nccl_4gpu_p2p.log"
    assert "without COLL lines" in _import_fails(tmp_path, [info], capsys)


def test_truncated_gzip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(TRACE_GZ.read_bytes()[:-200])
    err = _import_fails(tmp_path, [cut], capsys)
    assert f"{cut}: truncated or corrupt gzip" in err


def test_trace_cut_short_and_trace_without_comms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(TRACE.read_text()[:20000])
    assert f"{cut}:1: invalid JSON" in _import_fails(tmp_path, [cut], capsys)
    doc = json.loads(TRACE.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "record_param_comms"]
    nocomm = tmp_path / "nocomm.json"
    nocomm.write_text(json.dumps(doc))
    assert f"{nocomm}: a PyTorch profiler trace without communication events" in _import_fails(tmp_path, [nocomm], capsys)


def test_trace_event_with_bad_dtype_names_the_event(tmp_path: Path) -> None:
    doc = json.loads(TRACE.read_text())
    i = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("name") == "record_param_comms")
    doc["traceEvents"][i]["args"]["dtype"] = "Quaternion"
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=rf"traceEvents\[{i}\] \(record_param_comms\): unknown dtype 'Quaternion'"):
        importer.import_files([bad])


def test_rank_died_mid_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = LOG.read_text()
    cut = tmp_path / "dead.log"
    cut.write_text(text[: text.rindex("count 32773120") + 9])  # the last line stops inside its count
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(cut), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{cut}:64: skipped an incomplete NCCL COLL line (the file ends here" in err
    wl = model.from_json(out.read_text(), str(out))
    assert sum(e.calls for e in wl.entries) == 62  # every complete line stays
    assert wl.warnings and "dead.log:64" in wl.warnings[0]


def test_glued_lines_of_two_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A shared stdout (coll-2proc-glued.log: real lines of two processes, cut and interleaved by
    hand): a line cut mid-way with another process's line glued to it ('recvvm:4029:4042 ...')
    must not invent a process 'recvvm:4029' nor lose the complete line; the cut one is skipped
    with a warning naming the file and line. torchrun's '[rank1]:' tag starts a line."""
    glued = FIX / "coll-2proc-glued.log"
    wl = importer.import_files([glued])
    assert sorted(s["rank"] for s in wl.sources) == ["vm:4029", "vm:4086"]
    calls = {s["rank"]: s["calls"] for s in wl.sources}
    assert calls == {"vm:4029": 11, "vm:4086": 9}  # every complete line; 4086's cut Broadcast skipped
    assert len(wl.warnings) == 1 and wl.warnings[0].startswith(
        f"{glued}:15: 2 NCCL COLL lines glued on one line (processes sharing one stream, one cut short): "
        "counted the 1 complete one(s), skipped 1")
    assert _calls(wl)[("all_reduce", "float", 115922944, 4 * 115922944)] == 1  # the glued, complete line
    assert ("broadcast", "float", 39073792, 4 * 39073792) not in _calls(wl)   # the cut one
    # the line whose process cannot be told (no line of its pid starts with a host) is skipped, said
    alone = tmp_path / "alone.log"
    alone.write_text("\n".join(glued.read_text().splitlines()[14:15]) + "\n")
    out = tmp_path / "w.json"
    assert main(["workload", "import", str(alone), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{alone}:1: 2 NCCL COLL lines glued" in err and "whose process cannot be told" in err


@pytest.mark.parametrize("lead", ["", "[rank0]:", "[2026-11-23 20:30:01] ", "[1,0]<stdout>:", "0: ",
                                  "2026-11-23T20:30:01.123 "])
def test_line_prefixes_of_timestamps_and_launchers(lead: str) -> None:
    """Real lines of the 1-GPU log behind what NCCL_DEBUG_TIMESTAMP_FORMAT or a launcher (torchrun
    --tee, mpirun --tag-output, srun --label) puts before NCCL's prefix: every call counted, one rank."""
    text = "".join(lead + line for line in LOG.read_text().splitlines(keepends=True))
    records, warnings = nccl_log.parse(text, "x.log")
    assert [r.rank_id for r in records] == ["vm:4029"] and not warnings
    assert sum(records[0].calls.values()) == 63


P2P_LOG = FIX / "coll-p2p-2rank-from-source.log"


def test_send_and_recv_are_one_sendrecv_call() -> None:
    """NCCL prints a Send and a Recv line per exchange (P2P_LOG, written from NCCL 2.28.9's print
    statement): counted as two calls, replay issued twice the traffic. One exchange is one call."""
    wl = importer.import_files([P2P_LOG])
    assert _calls(wl) == {("all_reduce", "float", 1048576, 4 << 20): 1, ("sendrecv", "float", 262144, 1 << 20): 3}
    assert sorted(s["calls"] for s in wl.sources) == [4, 4]  # per rank: 1 all_reduce + 3 exchanges
    assert wl.order == [(0, 0, 1), (1, 0, 3)]  # replay issues 3 exchanges, not 6
    # a Send with no Recv of its size (a pipeline stage that only sends) is a call of its own
    sends = "".join(line for line in P2P_LOG.read_text().splitlines(keepends=True) if "Recv:" not in line)
    records, _ = nccl_log.parse(sends, "sends.log")
    assert {r.rank_id: sum(r.calls.values()) for r in records} == {"vm:5101": 4, "vm:5102": 4}


# c10d's send and recv as torch.profiler writes them (no real trace with P2P exists here: one GPU). Made
# from the trace's first real record_param_comms event (an allreduce of the 1-rank group; In and Out msg
# nelems are the tensor's numel for send/recv too), changing only what makes it a send or a recv:
# 'Collective name', and the peer: 'Rank' is the peer's group rank (the rank argument that
# ProcessGroupNCCL::send/recv pass to RECORD_PARAM_COMMS_DATA: dstRank/srcRank, pytorch/pytorch
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), 'Dst Rank' (send) or 'Src Rank' (recv) its global
# rank (torch/csrc/profiler/util.cpp saveNcclMeta, kP2pDst/kP2pSrc; key names as in torch 2.13's
# include/torch/csrc/profiler/util.h). The group has one rank, so the peer is rank 0 itself.
def _p2p(template: dict, name: str, ts: float, ext: int, nelems: int) -> dict:
    e = json.loads(json.dumps(template))
    e["ts"] = ts
    e["args"].update({"Collective name": name, "Rank": 0, "External id": ext,
                      "In msg nelems": nelems, "Out msg nelems": nelems})
    e["args"]["Dst Rank" if name == "send" else "Src Rank"] = 0
    return e


def test_trace_send_and_recv_are_one_sendrecv_call(tmp_path: Path) -> None:
    """A trace has one record_param_comms per c10d send and per recv: counted as two sendrecv calls,
    replay issued twice the traffic. Paired as the COLL log's Send and Recv lines are (one rule,
    workload.model.Halves): 3 exchanges are 3 calls timed by both halves' kernels; a send of another
    size, with no recv, is a call of its own."""
    doc = json.loads(TRACE.read_text())
    comms = [e for e in doc["traceEvents"] if e.get("name") == "record_param_comms"]
    t0, n = max(e["ts"] for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float))) + 10.0, 262144
    names = ["send", "recv", "recv", "send", "send", "recv", "send"]   # the last, of n // 2, is one-way
    p2p = [_p2p(comms[0], name, t0 + 100.0 * j, 990000 + j, n if j < 6 else n // 2) for j, name in enumerate(names)]
    doc["traceEvents"] += p2p
    for j, e in enumerate(p2p):   # each half's kernel: 10 us for a send, 5 for a recv
        k = json.loads(json.dumps(REAL_KERNEL))
        k.update(name="ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", tid=13, ts=e["ts"] + 20.0,
                 dur=10.0 if e["args"]["Collective name"] == "send" else 5.0)
        k["args"].update({"External id": e["args"]["External id"], "stream": 13, "correlation": 990000 + j})
        doc["traceEvents"].append(k)
    t = tmp_path / "p2p.json"
    t.write_text(json.dumps(doc))
    wl = importer.import_files([t])
    got = {k: v for k, v in _calls(wl).items() if k[0] == "sendrecv"}
    assert got == {("sendrecv", "float", n, 4 * n): 3, ("sendrecv", "float", n // 2, 2 * n): 1}
    assert sum(v for k, v in _calls(wl).items() if k[0] == "all_reduce") == len(comms)  # the rest unchanged
    timed = {e.key.count: e.timing for e in wl.entries if e.key.collective == "sendrecv"}
    assert timed[n].calls == 3 and timed[n].min_us == timed[n].max_us == 15.0   # send + recv
    assert timed[n // 2].calls == 1 and timed[n // 2].mean_us == 10.0
    sr = {i: e.key.count for i, e in enumerate(wl.entries) if e.key.collective == "sendrecv"}
    assert [(sr[i], rep) for i, _, rep in wl.order if i in sr] == [(n, 3), (n // 2, 1)]  # replay: 3 exchanges, not 6


def test_workload_file_errors(tmp_path: Path) -> None:
    p = tmp_path / "w.json"
    p.write_text('{"schema": "ccltune-workload", "version": 1, "entries": [{"collective": "all_reduce"}]}')
    with pytest.raises(UsageError, match=r"entries\[0\]: missing field 'size_bytes'"):
        model.from_json(p.read_text(), str(p))
    with pytest.raises(UsageError, match="not a workload file"):
        model.from_json("{}", "x.json")


@pytest.mark.parametrize("path", [LOG, TRACE_GZ], ids=["coll-log", "trace"])
def test_order_of_one_rank_is_kept_and_round_trips(path: Path) -> None:
    wl = importer.import_files([path])
    per_entry = Counter()
    for i, comm, n in wl.order:
        per_entry[i] += n
        assert comm == 0  # one communicator in this job
    assert [per_entry[i] for i in range(len(wl.entries))] == [e.calls for e in wl.entries]
    first = wl.entries[wl.order[0][0]].key
    if path == LOG:  # DDP's first call: the all_gather of its rank check, then the parameter broadcasts
        assert (first.collective, first.size_bytes) == ("all_gather", 8)
    back = model.from_json(model.to_json(wl, {}), "w.json")
    assert back.order == wl.order


def test_bad_order_is_refused_naming_the_file() -> None:
    wl = importer.import_files([TRACE])
    doc = json.loads(model.to_json(wl, {}))
    doc["order"] = [[len(wl.entries), 0, 1]]
    with pytest.raises(UsageError, match="w.json: field 'order'"):
        model.from_json(json.dumps(doc), "w.json")
