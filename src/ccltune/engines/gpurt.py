"""The GPU runtime entry points the nccl engine's launch loop needs for nccl-tests' schedule: a
stream query (-z: wait for the stream after each call, as nccl-tests' testStreamSynchronize polls
it), events (-I: per-iteration timing) and CUDA graphs (-G: capture, instantiate, launch, free,
as nccl-tests' BenchTime makes them). Taken from the driver library the GPU already has
(libcuda.so.1 on NVIDIA, libamdhip64.so on AMD): the same shapes, so one C loop calls either
(CUstream and cudaStream_t are one handle; 600 is "not ready" in CUDA's driver and runtime and in
HIP). PyTorch has made the device's primary context current on this thread before any call here."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from ccltune.engines.series import GraphApi
from ccltune.errors import EngineUnavailable

_vp = ctypes.c_void_p
# (library, stream query, event record, event create with flags, elapsed time, event destroy)
_CUDA = ("libcuda.so.1", "cuStreamQuery", "cuEventRecord", "cuEventCreate", "cuEventElapsedTime", "cuEventDestroy_v2")
_HIP = ("libamdhip64.so", "hipStreamQuery", "hipEventRecord", "hipEventCreateWithFlags", "hipEventElapsedTime",
        "hipEventDestroy")
# struct ccltune_graph_api's fields, in order (cuStreamBeginCapture is cuStreamBeginCapture_v2 in cuda.h)
_CUDA_GRAPH = ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
               "cuGraphExecDestroy", "cuGraphDestroy")
_HIP_GRAPH = ("hipStreamBeginCapture", "hipStreamEndCapture", "hipGraphInstantiateWithFlags", "hipGraphLaunch",
              "hipGraphExecDestroy", "hipGraphDestroy")


@dataclass
class Runtime:
    """Addresses for the C loop, and the event calls for Python."""

    name: str
    stream_query: int
    event_record: int
    create: Any
    elapsed: Any
    destroy: Any
    graph: GraphApi

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise EngineUnavailable(f"{what} failed in {self.name}: error {rc}")


def load(hip: bool) -> Runtime:
    """The runtime of this GPU's driver. Raises EngineUnavailable naming the library."""
    lib_name, query, record, create, elapsed, destroy = _HIP if hip else _CUDA
    try:
        lib = ctypes.CDLL(lib_name)
    except OSError as exc:
        raise EngineUnavailable(f"the nccl engine needs {lib_name} (the GPU driver's library) for -G, -z and -I: "
                                f"{exc}") from None
    try:
        fns = [getattr(lib, n) for n in (query, record, create, elapsed, destroy)]
        graph = GraphApi(*(ctypes.cast(getattr(lib, n), _vp).value for n in (_HIP_GRAPH if hip else _CUDA_GRAPH)))
    except AttributeError as exc:
        raise EngineUnavailable(f"{lib_name} lacks an entry point the nccl engine needs for -G, -z and -I: {exc}") from None
    fns[2].argtypes, fns[2].restype = [ctypes.POINTER(_vp), ctypes.c_uint], ctypes.c_int
    fns[3].argtypes, fns[3].restype = [ctypes.POINTER(ctypes.c_float), _vp, _vp], ctypes.c_int
    fns[4].argtypes, fns[4].restype = [_vp], ctypes.c_int
    return Runtime(lib_name, ctypes.cast(fns[0], _vp).value or 0, ctypes.cast(fns[1], _vp).value or 0,
                   fns[2], fns[3], fns[4], graph)


class Events:
    """``n`` timing events (flags 0: timing enabled), recorded by the C loop; destroyed when dropped."""

    def __init__(self, rt: Runtime, n: int):
        self.rt, self.handles = rt, []
        for _ in range(n):
            ev = _vp()
            rt.check(rt.create(ctypes.byref(ev), 0), "creating an event")
            self.handles.append(ev.value)

    def elapsed(self, a: int, b: int) -> float:
        """Seconds from event ``a`` to event ``b`` (both complete: the caller has waited for the stream)."""
        ms = ctypes.c_float()
        self.rt.check(self.rt.elapsed(ctypes.byref(ms), self.handles[a], self.handles[b]), "reading an event")
        return ms.value / 1e3

    def __del__(self) -> None:
        for h in getattr(self, "handles", []):
            try:
                self.rt.destroy(h)
            except Exception:  # noqa: BLE001 - interpreter teardown
                pass
