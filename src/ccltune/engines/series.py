"""The eager launch loop: a whole series of NCCL calls issued from C (``native/``), one ctypes
call per series instead of one per NCCL call.

Issued from Python, every eager call cost 8-11 us of host time on an H100 (NCCL 2.28.9), more
than NCCL's own time per call at latency-bound sizes, so eager tables showed Python's cost. The
loop takes NCCL's entry points from the library the engine already loaded (no link against
NCCL: one build serves any NCCL or RCCL) and each collective's operations from its
``nccl_ops`` (collectives/), so the C side knows signatures, not collectives.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ccltune import builtlib
from ccltune.collectives.base import Collective, Layout
from ccltune.engines.nccl_lib import NcclLib
from ccltune.errors import EngineUnavailable

LIBRARY_NAME = "libccltune-series.so"
ABI = 1  # CCLTUNE_SERIES_ABI in native/include/ccltune_series.h
INVALID = -1  # CCLTUNE_SERIES_INVALID
# enum ccltune_step_kind: the NCCL signature of each entry point the loop can issue
KINDS = {"ncclAllReduce": 0, "ncclAllGather": 1, "ncclReduceScatter": 2, "ncclBroadcast": 3,
         "ncclReduce": 4, "ncclSend": 5, "ncclRecv": 6}

_vp, _i32, _i64, _u64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64


class Step(ctypes.Structure):
    _fields_ = [("fn", _vp), ("kind", _i32), ("peer", _i32), ("send_off", _u64), ("recv_off", _u64)]


class Series(ctypes.Structure):
    _fields_ = [("send", _vp), ("recv", _vp), ("count", _u64), ("datatype", _i32), ("op", _i32),
                ("comm", _vp), ("stream", _vp), ("steps", ctypes.POINTER(Step)), ("nsteps", _i32),
                ("grouped", _i32), ("group_start", _vp), ("group_end", _vp), ("shift_bytes", _u64),
                ("shift_steps", _i64)]


class Failure(ctypes.Structure):
    _fields_ = [("call", _i64), ("step", _i32)]


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
            "tree, or `pip install .` to ship it in the package (--engine torch runs without it)")
    try:
        lib = ctypes.CDLL(str(found))
    except OSError as exc:
        raise EngineUnavailable(f"cannot load the launch loop {found}: {exc}; rebuild it with `make -C native`") from None
    lib.ccltune_series_abi.restype = ctypes.c_int
    if lib.ccltune_series_abi() != ABI:
        raise EngineUnavailable(f"the launch loop {found} is a stale build (ABI {lib.ccltune_series_abi()}, this "
                                f"ccltune needs {ABI}): rebuild it with `make -C native`")
    lib.ccltune_series_run.argtypes = [ctypes.POINTER(Series), _i64, _i64, ctypes.POINTER(Failure)]
    lib.ccltune_series_run.restype = ctypes.c_int
    _loaded = lib
    return lib


class Loop:
    """The launch loop bound to one NCCL library (``NcclLib``)."""

    def __init__(self, nccl: NcclLib):
        self.nccl = nccl
        self.run_fn = library().ccltune_series_run
        self.fns = {name: ctypes.cast(getattr(nccl.lib, name), _vp).value
                    for name in [*KINDS, "ncclGroupStart", "ncclGroupEnd"] if hasattr(nccl.lib, name)}

    def series(self, coll: Collective, lay: Layout, root: int, rank: int, nranks: int, *, send: int, recv: int,
               dtype: int, op: int, comm: Any, stream: int, shift_bytes: int = 0, shift_steps: int = 1) -> Series:
        """One call of ``coll`` as the loop issues it (``send``/``recv``: the base pointers of call 0)."""
        ops = coll.nccl_ops(lay, root, rank, nranks)
        steps = (Step * len(ops))()
        for st, o in zip(steps, ops):
            if o.fn not in self.fns:
                raise EngineUnavailable(f"{o.fn} is not in {self.nccl.path} (NCCL {self.nccl.version})")
            st.fn, st.kind, st.peer, st.send_off, st.recv_off = self.fns[o.fn], KINDS[o.fn], o.peer, o.send_off, o.recv_off
        s = Series(send=send, recv=recv, count=lay.count, datatype=dtype, op=op, comm=getattr(comm, "value", comm),
                   stream=stream,
                   steps=steps, nsteps=len(ops), grouped=int(coll.grouped or len(ops) > 1),
                   group_start=self.fns.get("ncclGroupStart"), group_end=self.fns.get("ncclGroupEnd"),
                   shift_bytes=shift_bytes, shift_steps=max(1, shift_steps))
        s._ops = ops  # the step array and names live as long as the series
        s._keep = steps
        return s

    def run(self, s: Series, first: int, calls: int) -> None:
        """Calls ``first`` .. ``first + calls - 1`` of ``s``. Raises NcclError naming the NCCL call, the
        index of the failing call and NCCL's message."""
        fail = Failure()
        rc = self.run_fn(ctypes.byref(s), first, calls, ctypes.byref(fail))
        if rc == 0:
            return
        if rc == INVALID:
            raise EngineUnavailable("the launch loop refused the series (an entry point missing from "
                                    f"{self.nccl.path}?); rebuild it with `make -C native`")
        ops = s._ops
        name = ("ncclGroupStart" if fail.step < 0 else "ncclGroupEnd" if fail.step >= len(ops)
                else ops[fail.step].fn)
        raise self.nccl.error(f"{name} (call {fail.call} of the series)", rc)
