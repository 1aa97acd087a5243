"""NCCL's C API through ctypes: the library PyTorch loads, or one the user names.

Only what ccltune calls is declared. Every call goes through ``NcclLib.call`` which turns a
non-success ``ncclResult_t`` into an exception naming the call and NCCL's own message.
RCCL keeps NCCL's API and symbol names, so ``librccl.so`` loads the same way.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ccltune.environment import loaded_library
from ccltune.errors import EngineUnavailable

if TYPE_CHECKING:
    from _ctypes import CFuncPtr  # a loaded function's type; ctypes does not export its name

NCCL_SUCCESS = 0
NCCL_IN_PROGRESS = 7
CONFIG_UNDEF_INT = -(2**31)
WIN_COLL_SYMMETRIC = 0x01

_vp, _sz, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class Config(ctypes.Structure):
    """ncclConfig_t as of NCCL 2.28 (fields in header order). NCCL reads ``size`` and
    ``version`` to know which fields the caller filled."""

    _fields_ = [
        ("size", _sz), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
        ("blocking", _int), ("cgaClusterSize", _int), ("minCTAs", _int), ("maxCTAs", _int),
        ("netName", ctypes.c_char_p), ("splitShare", _int), ("trafficClass", _int),
        ("commName", ctypes.c_char_p), ("collnetEnable", _int), ("CTAPolicy", _int),
        ("shrinkShare", _int), ("nvlsCTAs", _int), ("nChannelsPerNetPeer", _int),
        ("nvlinkCentricSched", _int),
    ]


# argtypes of the calls ccltune makes: (name, argtypes)
_SIGNATURES: dict[str, list[type]] = {
    "ncclGetVersion": [ctypes.POINTER(_int)],
    "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
    "ncclCommInitRankConfig": [ctypes.POINTER(_vp), _int, UniqueId, _int, ctypes.POINTER(Config)],
    "ncclCommInitRank": [ctypes.POINTER(_vp), _int, UniqueId, _int],
    "ncclCommSplit": [_vp, _int, _int, ctypes.POINTER(_vp), ctypes.POINTER(Config)],
    "ncclCommDestroy": [_vp],
    "ncclCommAbort": [_vp],
    "ncclAllReduce": [_vp, _vp, _sz, _int, _int, _vp, _vp],
    "ncclReduce": [_vp, _vp, _sz, _int, _int, _int, _vp, _vp],
    "ncclBroadcast": [_vp, _vp, _sz, _int, _int, _vp, _vp],
    "ncclAllGather": [_vp, _vp, _sz, _int, _vp, _vp],
    "ncclReduceScatter": [_vp, _vp, _sz, _int, _int, _vp, _vp],
    "ncclSend": [_vp, _sz, _int, _int, _vp, _vp],
    "ncclRecv": [_vp, _sz, _int, _int, _vp, _vp],
    "ncclRedOpCreatePreMulSum": [ctypes.POINTER(_int), _vp, _int, _int, _vp],
    "ncclRedOpDestroy": [_int, _vp],
    "ncclGroupStart": [],
    "ncclGroupEnd": [],
    "ncclMemAlloc": [ctypes.POINTER(_vp), _sz],
    "ncclMemFree": [_vp],
    "ncclCommWindowRegister": [_vp, _vp, _sz, ctypes.POINTER(_vp), _int],
    "ncclCommWindowDeregister": [_vp, _vp],
    "ncclCommRegister": [_vp, _vp, _sz, ctypes.POINTER(_vp)],
    "ncclCommDeregister": [_vp, _vp],
}


class NcclError(RuntimeError):
    def __init__(self, call: str, code: int, message: str):
        super().__init__(f"{call} failed: {message} (ncclResult_t {code})")
        self.call, self.code = call, code


def find_library(explicit: str | None = None) -> str:
    """Path of the NCCL/RCCL library to use: ``explicit`` (--nccl-lib), CCLTUNE_NCCL_LIBRARY,
    the one this process (PyTorch) already mapped, PyTorch's wheel, then the system's."""
    for cand in (explicit, os.environ.get("CCLTUNE_NCCL_LIBRARY")):
        if cand:
            if not Path(cand).exists() and "/" in cand:
                raise EngineUnavailable(f"NCCL library {cand!r} does not exist (--nccl-lib)")
            return cand
    mapped = loaded_library("libnccl.so") or loaded_library("librccl.so")
    if mapped:
        return mapped
    try:  # the nvidia-nccl wheel PyTorch depends on
        import nvidia.nccl  # type: ignore[import-not-found]

        for base in getattr(nvidia.nccl, "__path__", []):
            lib = Path(base) / "lib" / "libnccl.so.2"
            if lib.exists():
                return str(lib)
    except ImportError:
        pass
    for name in ("nccl", "rccl"):
        found = ctypes.util.find_library(name)
        if found:
            return found
    raise EngineUnavailable("no NCCL or RCCL library found: install PyTorch with CUDA/ROCm, "
                            "or name one with --nccl-lib PATH")


class NcclLib:
    def __init__(self, path: str):
        try:
            self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise EngineUnavailable(f"cannot load NCCL library {path!r}: {exc}") from None
        self.path = loaded_library(Path(path).name.split(".so")[0]) or path
        self._fns: dict[str, CFuncPtr] = {}
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(self.lib, name, None)
            if fn is None:
                continue  # older NCCL: feature detected once, here
            fn.argtypes, fn.restype = argtypes, _int
            self._fns[name] = fn
        err = getattr(self.lib, "ncclGetErrorString")
        err.argtypes, err.restype = [_int], ctypes.c_char_p
        last = getattr(self.lib, "ncclGetLastError", None)
        if last is not None:
            last.argtypes, last.restype = [_vp], ctypes.c_char_p
        self._err, self._last = err, last
        v = _int()
        self.call("ncclGetVersion", ctypes.byref(v))
        self.version_code = v.value

    @property
    def version(self) -> str:
        code = self.version_code
        if code >= 10000:  # NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9
            return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        return f"{code // 1000}.{code // 100 % 10}.{code % 100}"

    def has(self, name: str) -> bool:
        return name in self._fns

    def exports(self, symbol: str) -> bool:
        """Whether the library exports ``symbol`` at all (declared for calling or not)."""
        try:
            getattr(self.lib, symbol)
        except AttributeError:
            return False
        return True

    def call(self, name: str, *args: object) -> int:
        fn = self._fns.get(name)
        if fn is None:
            raise EngineUnavailable(f"{name} is not in {self.path} (NCCL {getattr(self, 'version', '?')})")
        rc = fn(*args)
        if rc not in (NCCL_SUCCESS, NCCL_IN_PROGRESS):
            raise self.error(name, rc)
        return rc

    def error(self, call: str, rc: int) -> NcclError:
        """``call``'s failure with NCCL's message for ``rc`` (and its last error, when NCCL keeps one)."""
        detail = self._err(rc).decode(errors="replace")
        if self._last is not None:
            last = self._last(None)
            if last:
                detail += f": {last.decode(errors='replace')}"
        return NcclError(call, rc, detail)

    # -- helpers ----------------------------------------------------------------------
    def unique_id(self) -> bytes:
        uid = UniqueId()
        self.call("ncclGetUniqueId", ctypes.byref(uid))
        # not bytes(uid.internal): a c_char array field reads as a C string, cut at the
        # first NUL, and the id is binary
        return ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))

    def config(self, *, min_ctas: int | None = None, max_ctas: int | None = None,
               name: str | None = None, cta_policy: int | None = None) -> Config:
        cfg = Config()
        cfg.size = ctypes.sizeof(Config)
        cfg.magic = 0xCAFEBEEF
        cfg.version = self.version_code
        for field, *_ in Config._fields_[3:]:
            if field in ("netName", "commName"):
                continue
            setattr(cfg, field, CONFIG_UNDEF_INT)
        if min_ctas is not None:
            cfg.minCTAs = min_ctas
        if max_ctas is not None:
            cfg.maxCTAs = max_ctas
        if cta_policy is not None:  # NCCL_CTA_POLICY_DEFAULT 0, _EFFICIENCY 1, _ZERO 2 (NCCL >= 2.27)
            cfg.CTAPolicy = cta_policy
        if name:
            self._name = name.encode()
            cfg.commName = self._name
        return cfg

    def comm_init(self, nranks: int, uid: bytes, rank: int, cfg: Config | None = None) -> ctypes.c_void_p:
        comm = _vp()
        if len(uid) != ctypes.sizeof(UniqueId):
            raise ValueError(f"an NCCL unique id is {ctypes.sizeof(UniqueId)} bytes, got {len(uid)}")
        u = UniqueId.from_buffer_copy(uid)
        if cfg is not None and self.has("ncclCommInitRankConfig"):
            self.call("ncclCommInitRankConfig", ctypes.byref(comm), nranks, u, rank, ctypes.byref(cfg))
        else:
            self.call("ncclCommInitRank", ctypes.byref(comm), nranks, u, rank)
        return comm

    def comm_split(self, parent: ctypes.c_void_p, color: int, key: int, cfg: Config | None = None) -> ctypes.c_void_p:
        """ncclCommSplit (NCCL >= 2.18): the communicator of ``parent``'s ranks of ``color``, ordered by ``key``."""
        comm = _vp()
        self.call("ncclCommSplit", parent, color, key, ctypes.byref(comm), ctypes.byref(cfg) if cfg is not None else None)
        return comm

    def mem_alloc(self, nbytes: int) -> int:
        ptr = _vp()
        self.call("ncclMemAlloc", ctypes.byref(ptr), nbytes)
        return int(ptr.value or 0)

    def register(self, comm: ctypes.c_void_p, ptr: int, nbytes: int) -> ctypes.c_void_p:
        """ncclCommRegister: the handle ncclCommDeregister takes."""
        handle = _vp()
        self.call("ncclCommRegister", comm, ptr, nbytes, ctypes.byref(handle))
        return handle

    def window_register(self, comm: ctypes.c_void_p, ptr: int, nbytes: int) -> ctypes.c_void_p:
        win = _vp()
        self.call("ncclCommWindowRegister", comm, ptr, nbytes, ctypes.byref(win), WIN_COLL_SYMMETRIC)
        return win
