"""The eager launch loop: a whole series of NCCL calls issued from C (``native/``), one ctypes
call per series instead of one per NCCL call.

Issued from Python, every eager call cost more host time than NCCL's own time per call at
latency-bound sizes, so eager tables showed Python's cost (docs/performance.md, "Eager calls
issued from C"). The
loop takes NCCL's entry points from the library the engine already loaded (no link against
NCCL: one build serves any NCCL or RCCL) and each collective's operations from its
``nccl_ops`` (collectives/), so the C side knows signatures, not collectives.

alltoall, gather and scatter are one call of NCCL's own entry point from NCCL 2.28 on
(``Collective.nccl_call``), as nccl-tests 2.19 issues them when built against it; before, the
grouped send/recv of ``nccl_ops``. The grouped form is another NCCL call than nccl-tests' and
times slower; with NCCL's own call the two agree (docs/performance.md, "Eager calls issued from C").
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ccltune import builtlib
from ccltune.collectives.base import Collective, Layout, NcclOp
from ccltune.engines.nccl_lib import NcclLib
from ccltune.errors import DistError, EngineUnavailable

LIBRARY_NAME = "libccltune-series.so"
ABI = 5  # CCLTUNE_SERIES_ABI in native/include/ccltune_series.h
INVALID = -1  # CCLTUNE_SERIES_INVALID
# CCLTUNE_AT_*: where a failure happened besides a step; CCLTUNE_FROM_*: whose code it is
_AT = {-1: "ncclGroupStart", -2: "ncclGroupStart (the -m group)", -3: "ncclGroupEnd (the -m group)",
       -4: "waiting for the stream (-z)", -5: "the barrier (-z)", -6: "recording an event (-I)",
       -7: "beginning the CUDA graph's capture (-G)", -8: "ending the CUDA graph's capture (-G)",
       -9: "instantiating the CUDA graph (-G)", -10: "launching the CUDA graph (-G)"}
FROM_NCCL, FROM_GPU, FROM_BARRIER = 0, 1, 2
# enum ccltune_step_kind: the NCCL signature of each entry point the loop can issue
KINDS = {"ncclAllReduce": 0, "ncclAllGather": 1, "ncclReduceScatter": 2, "ncclBroadcast": 3,
         "ncclReduce": 4, "ncclSend": 5, "ncclRecv": 6, "ncclAlltoAll": 7, "ncclGather": 8, "ncclScatter": 9}
WHOLE_CALLS_FROM = 22800  # NCCL 2.28.0 added ncclAlltoAll, ncclGather and ncclScatter (Collective.nccl_call)
P2P = ("ncclSend", "ncclRecv")


def grouped(ops: list[NcclOp]) -> bool:
    """Whether one call's operations go inside ncclGroupStart/ncclGroupEnd: several of them, or
    send/recv (nccl-tests groups a gather's lone send on a non-root rank too)."""
    return len(ops) > 1 or any(o.fn in P2P for o in ops)

_vp, _i32, _i64, _u64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64


class Step(ctypes.Structure):
    _fields_ = [("fn", _vp), ("kind", _i32), ("peer", _i32), ("send_off", _u64), ("recv_off", _u64)]


class Series(ctypes.Structure):
    _fields_ = [("send", _vp), ("recv", _vp), ("count", _u64), ("datatype", _i32), ("op", _i32),
                ("comm", _vp), ("stream", _vp), ("steps", ctypes.POINTER(Step)), ("nsteps", _i32),
                ("grouped", _i32), ("group_start", _vp), ("group_end", _vp), ("shift_bytes", _u64),
                ("shift_steps", _i64), ("agg", _i32), ("blocking", _i32), ("stream_query", _vp),
                ("async_error", _vp), ("barrier", _vp), ("barrier_arg", _vp), ("event_record", _vp),
                ("events", ctypes.POINTER(_vp)), ("nevents", _i64)]


class SeriesOutcome(ctypes.Structure):
    """struct ccltune_outcome: the failing call, its step and source when a series fails; its busy seconds."""

    _fields_ = [("call", _i64), ("step", _i32), ("source", _i32), ("busy_s", ctypes.c_double)]


class GraphApi(ctypes.Structure):
    """struct ccltune_graph_api: the GPU runtime's graph entry points (engines/gpurt.py)."""

    _fields_ = [("begin_capture", _vp), ("end_capture", _vp), ("instantiate", _vp), ("launch", _vp),
                ("exec_destroy", _vp), ("graph_destroy", _vp)]


BARRIER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


@dataclass
class Schedule:
    """nccl-tests' timed schedule for the loop (BenchTime, startColl): ``agg`` calls per iteration
    (-m), the blocking mode (-z 0..3), per-iteration ``events`` (-I: raw event handles, iterations + 1,
    or 2 x iterations with -z 3). ``runtime`` gives the stream query and event record entry points
    (engines/gpurt.py); ``barrier`` is called from C where every rank must meet (-z 1, -z 3)."""

    agg: int = 1
    blocking: int = 0
    events: Sequence[int] = ()
    runtime: Any = None
    barrier: Callable[[], None] | None = None


_loaded: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The built loop, loaded once. Raises EngineUnavailable saying how to build it."""
    global _loaded
    if _loaded is not None:
        return _loaded
    paths = builtlib.candidates(LIBRARY_NAME, "native")
    found = builtlib.first_existing(paths)
    if found is None:
        raise EngineUnavailable(
            f"the nccl engine's launch loop ({LIBRARY_NAME}) is not built (looked in {paths[0].parent}, "
            f"ccltune/lib on sys.path and {paths[-1].parent}): build it with `make -C native` in the source "
            "tree, or `pip install .` to ship it in the package (both need a C compiler, gcc or clang: without "
            "one pip installs ccltune without it); --engine torch runs without it")
    try:
        lib = ctypes.CDLL(str(found))
    except OSError as exc:
        raise EngineUnavailable(f"cannot load the launch loop {found}: {exc}; rebuild it with `make -C native`") from None
    lib.ccltune_series_abi.restype = ctypes.c_int
    if lib.ccltune_series_abi() != ABI:
        raise EngineUnavailable(f"the launch loop {found} is a stale build (ABI {lib.ccltune_series_abi()}, this "
                                f"ccltune needs {ABI}): rebuild it with `make -C native`")
    lib.ccltune_series_run.argtypes = [ctypes.POINTER(Series), _i64, _i64, ctypes.POINTER(SeriesOutcome)]
    lib.ccltune_series_run.restype = ctypes.c_int
    lib.ccltune_series_time.argtypes = [ctypes.POINTER(Series), _i64, _i64, ctypes.POINTER(SeriesOutcome),
                                        ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    lib.ccltune_series_time.restype = ctypes.c_int
    lib.ccltune_series_capture.argtypes = [ctypes.POINTER(Series), ctypes.POINTER(GraphApi), _i64, _i64,
                                           ctypes.POINTER(_vp), ctypes.POINTER(SeriesOutcome)]
    lib.ccltune_series_capture.restype = ctypes.c_int
    lib.ccltune_graph_launch.argtypes = [ctypes.POINTER(GraphApi), _vp, _vp, _i64, ctypes.POINTER(SeriesOutcome)]
    lib.ccltune_graph_launch.restype = ctypes.c_int
    lib.ccltune_graph_destroy.argtypes = [ctypes.POINTER(GraphApi), _vp]
    lib.ccltune_graph_destroy.restype = ctypes.c_int
    _loaded = lib
    return lib


class Loop:
    """The launch loop bound to one NCCL library (``NcclLib``)."""

    def __init__(self, nccl: NcclLib):
        self.nccl = nccl
        self.native = library()
        self.run_fn = self.native.ccltune_series_run
        self.fns = {name: ctypes.cast(getattr(nccl.lib, name), _vp).value
                    for name in [*KINDS, "ncclGroupStart", "ncclGroupEnd", "ncclCommGetAsyncError"]
                    if hasattr(nccl.lib, name)}
        # the whole-call entry points this library offers (none before NCCL 2.28; RCCL's numbering is
        # NCCL's, and an RCCL that has them takes the same arguments)
        self.whole_calls = frozenset(self.fns) if nccl.version_code >= WHOLE_CALLS_FROM else frozenset()

    def operations(self, coll: Collective, lay: Layout, root: int, rank: int, nranks: int) -> list[NcclOp]:
        """One call of ``coll`` on ``rank``: NCCL's own entry point where this NCCL has it, else the
        collective's ``nccl_ops``."""
        if coll.nccl_call and coll.nccl_call in self.whole_calls:
            return [NcclOp(coll.nccl_call, root)]
        return coll.nccl_ops(lay, root, rank, nranks)

    def series(self, coll: Collective, lay: Layout, root: int, rank: int, nranks: int, *, send: int, recv: int,
               dtype: int, op: int, comm: Any, stream: int, shift_bytes: int = 0, shift_steps: int = 1,
               schedule: Schedule | None = None) -> Series:
        """One call of ``coll`` as the loop issues it (``send``/``recv``: the base pointers of call 0),
        iterations of them as ``schedule`` says (None: one call per iteration, back to back)."""
        ops = self.operations(coll, lay, root, rank, nranks)
        steps = (Step * len(ops))()
        for st, o in zip(steps, ops):
            if o.fn not in self.fns:
                raise EngineUnavailable(f"{o.fn} is not in {self.nccl.path} (NCCL {self.nccl.version})")
            st.fn, st.kind, st.peer, st.send_off, st.recv_off = self.fns[o.fn], KINDS[o.fn], o.peer, o.send_off, o.recv_off
        s = Series(send=send, recv=recv, count=lay.count, datatype=dtype, op=op, comm=getattr(comm, "value", comm),
                   stream=stream,
                   steps=steps, nsteps=len(ops), grouped=int(grouped(ops)),
                   group_start=self.fns.get("ncclGroupStart"), group_end=self.fns.get("ncclGroupEnd"),
                   shift_bytes=shift_bytes, shift_steps=max(1, shift_steps), agg=1)
        s._ops = ops  # the step array and names live as long as the series
        s._keep = [steps]
        s._barrier_error = []
        if schedule is not None:
            self._schedule(s, schedule)
        return s

    def _schedule(self, s: Series, sched: Schedule) -> None:
        s.agg, s.blocking = sched.agg, sched.blocking
        if sched.runtime is not None:
            s.stream_query, s.event_record = sched.runtime.stream_query, sched.runtime.event_record
        s.async_error = self.fns.get("ncclCommGetAsyncError")
        if sched.barrier is not None:
            meet, errors = sched.barrier, s._barrier_error

            def barrier(_arg: Any) -> int:  # from C: an exception cannot cross back, so it is kept
                try:
                    meet()
                    return 0
                except Exception as exc:  # noqa: BLE001 - re-raised by run()
                    errors.append(exc)
                    return 1
            fn = BARRIER_FN(barrier)
            s._keep.append(fn)  # the C pointer lives as long as the series
            s.barrier = ctypes.cast(fn, _vp).value
        if sched.events:
            arr = (_vp * len(sched.events))(*sched.events)
            s.events, s.nevents = ctypes.cast(arr, ctypes.POINTER(_vp)), len(sched.events)
            s._keep.append(arr)

    def run(self, s: Series, first: int, iterations: int) -> float:
        """Iterations ``first`` .. ``first + iterations - 1`` of ``s`` (one call each without a
        schedule); returns the loop's busy seconds (-z 3: waits, barriers left out; else 0). Raises
        NcclError naming the NCCL call, the index of the failing call and NCCL's message; a failed
        barrier's own error; EngineUnavailable for a GPU runtime failure."""
        out = SeriesOutcome()
        rc = self.run_fn(ctypes.byref(s), first, iterations, ctypes.byref(out))
        if rc == 0:
            return out.busy_s
        raise self._error(s, rc, out)

    def time(self, s: Series, first: int, iterations: int) -> tuple[float, float]:
        """Iterations ``first`` .. of ``s`` timed in C as nccl-tests' BenchTime times them: (seconds issuing
        them, seconds until the stream was idle), the stream waited for by polling (``s`` needs its
        runtime's stream query: ``Schedule.runtime``). Raises as ``run``."""
        out, cpu, elapsed = SeriesOutcome(), ctypes.c_double(), ctypes.c_double()
        rc = self.native.ccltune_series_time(ctypes.byref(s), first, iterations, ctypes.byref(out),
                                             ctypes.byref(cpu), ctypes.byref(elapsed))
        if rc != 0:
            raise self._error(s, rc, out)
        return cpu.value, elapsed.value

    def capture(self, s: Series, first: int, iterations: int, api: GraphApi) -> Graph:
        """A CUDA graph of iterations ``first`` .. ``first + iterations - 1`` of ``s``, captured on its
        stream and instantiated as nccl-tests does (no flags), not launched yet. Raises as ``run``,
        and EngineUnavailable naming the graph call the GPU runtime refused."""
        out, exec_ = SeriesOutcome(), _vp()
        rc = self.native.ccltune_series_capture(ctypes.byref(s), ctypes.byref(api), first, iterations,
                                                ctypes.byref(exec_), ctypes.byref(out))
        if rc != 0:
            raise self._error(s, rc, out)
        return Graph(self.native, api, exec_.value, s.stream)

    def _error(self, s: Series, rc: int, out: SeriesOutcome) -> Exception:
        if rc == INVALID:
            return EngineUnavailable("the launch loop refused the series (an entry point missing from "
                                     f"{self.nccl.path}?); rebuild it with `make -C native`")
        ops = s._ops
        name = (_AT[out.step] if out.step < 0 else "ncclGroupEnd" if out.step >= len(ops) else ops[out.step].fn)
        if out.source == FROM_BARRIER and s._barrier_error:
            return s._barrier_error.pop()
        if out.source == FROM_BARRIER:
            return DistError(f"the barrier of -z {s.blocking} failed at call {out.call} of the series")
        if out.source == FROM_GPU:
            return EngineUnavailable(f"{name} failed at call {out.call} of the series: GPU runtime error {rc}")
        return self.nccl.error(f"{name} (call {out.call} of the series)", rc)


class Graph:
    """An instantiated CUDA graph of the launch loop (``Loop.capture``): ``launch(n)`` launches it
    ``n`` times back to back from C, ``replay()`` once; freed by ``close()`` or when dropped."""

    def __init__(self, native: ctypes.CDLL, api: GraphApi, exec_: int | None, stream: int):
        self.native, self.api, self.exec, self.stream = native, api, exec_, stream

    def launch(self, n: int) -> None:
        out = SeriesOutcome()
        rc = self.native.ccltune_graph_launch(ctypes.byref(self.api), self.exec, self.stream, n, ctypes.byref(out))
        if rc == INVALID:
            raise EngineUnavailable("the launch loop refused to launch the CUDA graph (freed already?)")
        if rc != 0:
            raise EngineUnavailable(f"{_AT[-10]} failed at launch {out.call} of {n}: GPU runtime error {rc}")

    def replay(self) -> None:
        self.launch(1)

    def close(self) -> None:
        exec_, self.exec = self.exec, None
        if exec_:
            self.native.ccltune_graph_destroy(ctypes.byref(self.api), exec_)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass
