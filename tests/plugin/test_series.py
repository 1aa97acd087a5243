"""The eager launch loop (native/): its C harness against fake NCCL entry points, plain and under
ASan + UBSan, its exported symbols, and the Python binding (engines/series.py) driving the built
library against a fake libnccl, for every collective of the registry: the operations NCCL would
see, in order, on which pointers, and NCCL's message with the failing call's index."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ccltune import builtlib
from ccltune.collectives import REGISTRY, get
from ccltune.collectives.base import NcclOp
from ccltune.engines import series
from ccltune.engines.nccl_lib import NcclError, NcclLib
from ccltune.errors import DistError, EngineUnavailable
from plugin_build import REPO, run

NATIVE = REPO / "native"
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}


def _make(build: Path, *targets: str, **variables: str) -> Path:
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("gcc and make are needed to build the launch loop")
    args = ["make", "-C", str(NATIVE), f"BUILD={build}", "CC=gcc", f"-j{os.cpu_count() or 1}", *targets, *(f"{k}={v}" for k, v in variables.items())]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return build


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory.mktemp("native-build"), "tests", "fake")


@pytest.mark.parametrize("sanitizers", [False, True], ids=["plain", "sanitizers"])
def test_c_harness(sanitizers: bool, built: Path, tmp_path: Path) -> None:
    build = _make(tmp_path, "tests", SAN="1", OPT="-O1") if sanitizers else built
    proc = run([build / "test_series"], env={**os.environ, **SAN_ENV})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout
    assert "runtime error" not in proc.stderr  # UBSan


def test_exports_only_the_loop(built: Path) -> None:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not installed")
    proc = run(["nm", "-D", "--defined-only", built / series.LIBRARY_NAME])
    names = {line.split()[-1] for line in proc.stdout.splitlines() if line.strip()}
    api = {"ccltune_series_run", "ccltune_series_time", "ccltune_series_abi", "ccltune_series_capture",
           "ccltune_graph_launch", "ccltune_graph_destroy"}
    assert api <= names
    assert names - api - {"_init", "_fini", "_edata", "_end", "__bss_start"} == set()


@pytest.fixture
def loop(built: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(series, "_loaded", None)
    monkeypatch.setattr(builtlib, "candidates", lambda name, folder: [built / name])
    nccl = NcclLib(str(built / "libfake-nccl.so"))
    fake = nccl.lib
    fake.fake_log.restype = ctypes.c_char_p
    fake.fake_reset.argtypes = [ctypes.c_int, ctypes.c_int]
    return series.Loop(nccl), fake


SEND, RECV, COMM, STREAM = 0x100000, 0x900000, 0xC0, 0x5E


def _expected(ops, lay, calls, shift=0, steps=1) -> list[str]:
    """The fake's log lines for ``calls`` calls of ``ops`` (one call's NcclOps)."""
    out = []
    for i in range(calls):
        base = shift * (i % steps)
        grouped = series.grouped(ops)
        if grouped:
            out.append("GroupStart 0 0 0 -1 -1 -1 0 0")
        for o in ops:
            name = o.fn.removeprefix("nccl")
            s = 0 if name == "Recv" else SEND + base + o.send_off
            r = 0 if name == "Send" else RECV + base + o.recv_off
            op = 2 if name in ("AllReduce", "ReduceScatter", "Reduce") else -1
            peer = o.peer if name in ("Broadcast", "Reduce", "Gather", "Scatter", "Send", "Recv") else -1
            out.append(f"{name} {s:x} {r:x} {lay.count} 7 {op} {peer} {COMM:x} {STREAM:x}")
        if grouped:
            out.append("GroupEnd 0 0 0 -1 -1 -1 0 0")
    return out


@pytest.mark.parametrize("name", list(REGISTRY))
@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("nccl", [22809, 22703], ids=["nccl-2.28", "nccl-2.27"])
def test_binding_issues_each_collective(loop, name: str, rank: int, nccl: int) -> None:
    """3 ranks, root 1, 4 calls stepping through 2 buffer steps: exactly the collective's operations;
    alltoall, gather and scatter as NCCL's own call from 2.28 on (as nccl-tests 2.19 issues them), as
    grouped send/recv before."""
    lp, fake = loop
    if nccl < series.WHOLE_CALLS_FROM:
        lp.nccl.version_code = nccl
        lp = series.Loop(lp.nccl)
    coll, nranks = get(name), 3
    lay = coll.layout(3 * 4 * 24, 4, nranks, rank)
    s = lp.series(coll, lay, 1, rank, nranks, send=SEND, recv=RECV, dtype=7, op=2, comm=ctypes.c_void_p(COMM),
                  stream=STREAM, shift_bytes=4096, shift_steps=2)
    fake.fake_reset(-1, 0)
    lp.run(s, 0, 4)
    ops = coll.nccl_ops(lay, 1, rank, nranks)
    if coll.nccl_call and nccl >= series.WHOLE_CALLS_FROM:
        ops = [NcclOp(coll.nccl_call, 1)]
        assert coll.nccl_call in {"ncclAlltoAll", "ncclGather", "ncclScatter"}
    assert fake.fake_log().decode().splitlines() == _expected(ops, lay, 4, 4096, 2)
    if nccl < series.WHOLE_CALLS_FROM or coll.nccl_call is None:
        assert lp.operations(coll, lay, 1, rank, nranks) == coll.nccl_ops(lay, 1, rank, nranks)


def test_whole_calls_are_not_grouped(loop) -> None:
    """ncclAlltoAll/ncclGather/ncclScatter are issued bare, as nccl-tests calls them; send/recv in a group."""
    lp, fake = loop
    for name, want in [("alltoall", "AlltoAll"), ("gather", "Gather"), ("scatter", "Scatter")]:
        coll = get(name)
        lay = coll.layout(64, 4, 2, 0)
        s = lp.series(coll, lay, 0, 0, 2, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM, stream=STREAM)
        fake.fake_reset(-1, 0)
        lp.run(s, 0, 2)
        assert [line.split()[0] for line in fake.fake_log().decode().splitlines()] == [want, want]
    assert series.grouped([NcclOp("ncclSend", 0)]) and not series.grouped([NcclOp("ncclGather", 0)])


def test_binding_resumes_at_a_call_index(loop) -> None:
    lp, fake = loop
    coll = get("all_reduce")
    lay = coll.layout(64, 4, 1, 0)
    s = lp.series(coll, lay, 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM, stream=STREAM,
                  shift_bytes=64, shift_steps=3)
    fake.fake_reset(-1, 0)
    lp.run(s, 5, 2)  # calls 5 and 6: steps 2 and 0
    lines = fake.fake_log().decode().splitlines()
    assert [int(line.split()[1], 16) - SEND for line in lines] == [128, 0]


@pytest.mark.parametrize("name, fail_at, call, where, issued", [
    ("all_reduce", 6, 6, "ncclAllReduce", 7),
    ("sendrecv", 10, 2, "ncclRecv", 12),     # (sr)(sr)(sr: the 3rd call's recv, then its group is closed
    ("sendrecv", 3, 0, "ncclGroupEnd", 4),
    ("sendrecv", 4, 1, "ncclGroupStart", 5),
])
def test_binding_error_names_the_call(loop, name: str, fail_at: int, call: int, where: str, issued: int) -> None:
    lp, fake = loop
    coll = get(name)
    lay = coll.layout(64, 4, 2, 0)
    s = lp.series(coll, lay, 0, 0, 2, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM, stream=STREAM)
    fake.fake_reset(fail_at, 5)
    with pytest.raises(NcclError) as err:
        lp.run(s, 0, 10)
    assert str(err.value) == (f"{where} (call {call} of the series) failed: invalid usage (run with NCCL_DEBUG=WARN "
                              "for details): fake: refused on purpose (ncclResult_t 5)")
    assert err.value.code == 5
    assert len(fake.fake_log().decode().splitlines()) == issued  # nothing after the failing call


def _graph_api(fake) -> series.GraphApi:
    return series.GraphApi(*(ctypes.cast(getattr(fake, f"fake_{n}"), ctypes.c_void_p).value
                             for n in ("begin_capture", "end_capture", "instantiate", "graph_launch", "exec_destroy",
                                       "graph_destroy")))


def test_binding_captures_and_launches_a_graph(loop) -> None:
    """-G: the timed calls captured between BeginCapture (thread-local) and EndCapture on the series'
    stream, instantiated with no flags as nccl-tests does, the template freed; launched n times from C
    on that stream; the executable graph freed once, by close() or when dropped."""
    lp, fake = loop
    api = _graph_api(fake)
    coll = get("all_reduce")
    lay = coll.layout(64, 4, 1, 0)
    s = lp.series(coll, lay, 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM, stream=STREAM,
                  shift_bytes=64, shift_steps=2)
    fake.fake_reset(-1, 0)
    graph = lp.capture(s, 0, 3, api)
    log = fake.fake_log().decode().splitlines()
    assert log == [f"BeginCapture 0 0 0 -1 1 -1 0 {STREAM:x}", *_expected([NcclOp("ncclAllReduce", 0)], lay, 3, 64, 2),
                   f"EndCapture 0 0 0 -1 -1 -1 0 {STREAM:x}", "Instantiate 6a 0 0 -1 0 -1 0 0",
                   "GraphDestroy 6a 0 0 -1 -1 -1 0 0"]
    fake.fake_reset(-1, 0)
    graph.launch(4)
    graph.replay()
    assert fake.fake_log().decode().splitlines() == [f"Launch e8 0 0 -1 -1 -1 0 {STREAM:x}"] * 5
    fake.fake_reset(-1, 0)
    graph.close()
    graph.close()
    assert fake.fake_log().decode().splitlines() == ["ExecDestroy e8 0 0 -1 -1 -1 0 0"]
    fake.fake_reset(-1, 0)
    dropped = lp.capture(s, 0, 1, api)
    del dropped
    assert fake.fake_log().decode().splitlines()[-1] == "ExecDestroy e8 0 0 -1 -1 -1 0 0"


def test_binding_graph_errors(loop) -> None:
    """NCCL refusing a call while capturing is named as eagerly (the capture still ends, nothing is
    instantiated); a failed launch names its index."""
    lp, fake = loop
    api = _graph_api(fake)
    coll = get("sendrecv")
    lay = coll.layout(64, 4, 2, 0)
    s = lp.series(coll, lay, 0, 0, 2, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM, stream=STREAM)
    fake.fake_reset(7, 5)  # Begin (sr)( s r: the 2nd call's recv
    with pytest.raises(NcclError, match=r"^ncclRecv \(call 1 of the series\) failed: invalid usage"):
        lp.capture(s, 0, 4, api)
    names = [line.split()[0] for line in fake.fake_log().decode().splitlines()]
    assert names == ["BeginCapture", "GroupStart", "Send", "Recv", "GroupEnd", "GroupStart", "Send", "Recv",
                     "GroupEnd", "EndCapture", "GraphDestroy"]
    fake.fake_reset(-1, 0)
    graph = lp.capture(s, 0, 1, api)
    fake.fake_reset(2, 700)  # the third launch
    with pytest.raises(EngineUnavailable, match=r"launching the CUDA graph \(-G\) failed at launch 2 of 10: "
                                                r"GPU runtime error 700"):
        graph.launch(10)
    assert len(fake.fake_log().decode().splitlines()) == 3
    blocking = lp.series(coll, lay, 0, 0, 2, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM, stream=STREAM,
                         schedule=series.Schedule(blocking=2, runtime=None))
    blocking.stream_query = ctypes.cast(fake.fake_stream_query, ctypes.c_void_p).value
    with pytest.raises(EngineUnavailable, match="refused the series"):
        lp.capture(blocking, 0, 1, api)


def test_missing_library_says_how_to_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(series, "_loaded", None)
    monkeypatch.setattr(builtlib, "candidates", lambda name, folder: [tmp_path / "lib" / name, tmp_path / name])
    with pytest.raises(EngineUnavailable, match=r"make -C native.*--engine torch"):
        series.library()


def test_candidates_cover_wheel_editable_and_source_tree() -> None:
    paths = builtlib.candidates(series.LIBRARY_NAME, "native")
    assert paths[0].parent.name == "lib" and paths[0].parent.parent.name == "ccltune"
    # the source tree's build folder, two levels above the package (src/ccltune -> the checkout);
    # where ccltune is installed (CI), that is two levels above site-packages/ccltune
    assert paths[-1] == Path(builtlib.__file__).resolve().parents[2] / "native" / "build" / series.LIBRARY_NAME
    assert len(paths) == len(set(paths))


def _runtime(fake):
    from types import SimpleNamespace

    return SimpleNamespace(stream_query=ctypes.cast(fake.fake_stream_query, ctypes.c_void_p).value,
                           event_record=ctypes.cast(fake.fake_event_record, ctypes.c_void_p).value)


@pytest.mark.parametrize("agg, blocking, events, want", [
    (2, 0, 0, "( A A ) ( A A )"),
    (1, 1, 0, "A Wait | A Wait |"),
    (2, 3, 1, "( Event A Wait A Wait ) Wait Event | ( Event A Wait A Wait ) Wait Event |"),
    (1, 0, 1, "Event A Event A Event"),
])
def test_binding_runs_nccl_tests_schedule(loop, agg: int, blocking: int, events: int, want: str) -> None:
    """-m, -z and -I through the binding: the C loop's order of calls, waits, events and barriers
    (the barrier is a Python callable called from C)."""
    lp, fake = loop
    coll = get("all_reduce")
    met: list[int] = []
    handles = [0xE0 + k for k in range(4)]
    sched = series.Schedule(agg=agg, blocking=blocking, events=handles if events else (), runtime=_runtime(fake),
                            barrier=lambda: met.append(len(fake.fake_log().decode().splitlines())))
    s = lp.series(coll, coll.layout(64, 4, 1, 0), 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM,
                  stream=STREAM, shift_bytes=64, shift_steps=3, schedule=sched)
    fake.fake_reset(-1, 0)
    busy = lp.run(s, 0, 2)
    lines = fake.fake_log().decode().splitlines()
    log = []
    for n, line in enumerate(lines):
        log.append({"GroupStart": "(", "GroupEnd": ")", "AllReduce": "A"}.get(line.split()[0], line.split()[0]))
        if n + 1 in met:
            log.append("|")
    assert " ".join(log) == want
    assert [int(x.split()[1], 16) for x in lines if x.startswith("Event")] == handles[:want.count("Event")]
    assert [int(x.split()[1], 16) - SEND for x in lines if x.startswith("AllReduce")] == [64 * (c % 3) for c in
                                                                                          range(2 * agg)]
    assert (busy > 0) == (blocking == 3)


def test_binding_raises_the_barriers_own_error(loop) -> None:
    lp, fake = loop
    coll = get("all_reduce")

    def barrier() -> None:
        raise DistError("rank 1 left the barrier")
    s = lp.series(coll, coll.layout(64, 4, 1, 0), 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM,
                  stream=STREAM, schedule=series.Schedule(blocking=1, runtime=_runtime(fake), barrier=barrier))
    fake.fake_reset(-1, 0)
    with pytest.raises(DistError, match="rank 1 left"):
        lp.run(s, 0, 3)
    assert len(fake.fake_log().decode().splitlines()) == 2  # AllReduce, Wait: nothing after the barrier


def test_binding_names_a_failed_wait(loop) -> None:
    lp, fake = loop
    coll = get("all_reduce")
    s = lp.series(coll, coll.layout(64, 4, 1, 0), 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM,
                  stream=STREAM, schedule=series.Schedule(blocking=2, runtime=_runtime(fake)))
    fake.fake_reset(1, 700)  # the first wait: an illegal address (CUDA error 700)
    with pytest.raises(EngineUnavailable, match=r"waiting for the stream \(-z\) failed at call 0 .*error 700"):
        lp.run(s, 0, 3)


def test_binding_times_the_series_in_c_with_the_final_wait(loop) -> None:
    """Eager timing as nccl-tests' BenchTime: the calls, then one stream wait (its completeColl), both
    inside C's clock; (seconds issuing, seconds until idle). A failed wait names the stream wait."""
    lp, fake = loop
    coll = get("all_reduce")
    s = lp.series(coll, coll.layout(64, 4, 1, 0), 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM,
                  stream=STREAM, schedule=series.Schedule(runtime=_runtime(fake)))
    fake.fake_reset(-1, 0)
    cpu, elapsed = lp.time(s, 0, 3)
    assert [line.split()[0] for line in fake.fake_log().decode().splitlines()] == ["AllReduce"] * 3 + ["Wait"]
    assert 0.0 <= cpu <= elapsed < 1.0
    fake.fake_reset(3, 700)  # the wait (the 4th operation) reports a GPU error
    with pytest.raises(EngineUnavailable, match=r"waiting for the stream \(-z\) failed at call 3 of the series"):
        lp.time(s, 0, 3)
    plain = lp.series(coll, coll.layout(64, 4, 1, 0), 0, 0, 1, send=SEND, recv=RECV, dtype=7, op=2, comm=COMM,
                      stream=STREAM)  # no runtime: no stream query to wait with
    with pytest.raises(EngineUnavailable, match="refused the series"):
        lp.time(plain, 0, 3)
