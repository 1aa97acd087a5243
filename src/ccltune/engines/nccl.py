"""The nccl engine: NCCL's C API called directly, as nccl-tests does: set-up through ctypes,
the calls of a point through the launch loop in C (engines/series.py, ``native/``), so an eager
series costs the host what nccl-tests' loop costs it, not Python's per-call overhead.

Buffers come from ``ncclMemAlloc`` by default, as nccl-tests allocates them with NCCL >= 2.19
(in a CUDA graph NCCL then registers them and reaches peers' buffers directly, which cudaMalloc
buffers do not allow: docs/performance.md, "Finding: buffer allocation"), or from PyTorch's caching
allocator (``--buffers torch``, what a PyTorch program passes by default); ``--symmetric``
also registers them as symmetric windows (NCCL >= 2.27). CUDA graphs (-G) are captured,
instantiated and launched by the launch loop too, through the GPU driver's graph calls, as
nccl-tests' BenchTime makes them (no instantiation flags, nothing else enqueued around a launch);
the torch engine keeps PyTorch's graph API, which is what a PyTorch program gets.

Communicators are created per configuration (``ccltune.commconfig.CommConfig``) so one process can compare
NCCL's own choice with forced candidates side by side:
- algorithm/protocol: NCCL_ALGO/NCCL_PROTO are read at each ncclCommInitRank, so they are
  set in the environment around that call only (NCCL then refuses what it cannot run);
- library-specific variables (engines/library.py): on RCCL an LL128 candidate's communicator is
  made with RCCL_LL128_FORCE_ENABLE=1, which RCCL reads once per process;
- channels and tuned rules: through the ccltune tuner plugin, loaded once per process;
  each communicator's plugin instance reads the rule file named by CCLTUNE_RULES at its
  init, so a communicator made with an empty rule file is NCCL's default.
"""

from __future__ import annotations

import ctypes
import os
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ccltune import rules
from ccltune.commconfig import ALIGN, BASELINE, CommConfig
from ccltune.datatypes import DTYPES, OPS, mulsum_scalar
from ccltune.engines import gpurt, library
from ccltune.engines.base import Buffers, CudaEngine, EngineOptions, Point
from ccltune.engines.nccl_lib import NcclError, NcclLib, find_library
from ccltune.engines.series import Loop, Schedule
from ccltune.errors import EngineUnavailable


@contextmanager
def _env(**values: str | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class NcclEngine(CudaEngine):
    name = "nccl"

    def __init__(self, ctx: Any, opts: EngineOptions = EngineOptions()):
        super().__init__(ctx, opts)
        torch = self.torch
        if not torch.cuda.is_available():
            raise EngineUnavailable("the nccl engine needs a CUDA GPU; use --engine gloo on this machine")
        self.lib = NcclLib(find_library(opts.nccl_lib))
        self.loop = Loop(self.lib)  # before anything else: without the built loop the engine cannot time
        self.facts = library.facts_of(self.lib, _gfx_arch(torch))  # NCCL or RCCL, detected once
        self.comm_env = library.CommEnv(self.facts)
        self.symmetric = opts.symmetric
        if self.symmetric and not (self.lib.has("ncclMemAlloc") and self.lib.has("ncclCommWindowRegister")):
            raise EngineUnavailable(f"--symmetric needs NCCL >= 2.27 (ncclMemAlloc, ncclCommWindowRegister); "
                                    f"{self.lib.path} is NCCL {self.lib.version}")
        # nccl-tests allocates with ncclMemAlloc from NCCL 2.19 on; so does this engine unless told otherwise
        buffers = opts.buffers
        if buffers in ("ncclmem", "ncclmem-max") and not self.lib.has("ncclMemAlloc"):
            raise EngineUnavailable(f"--buffers {buffers} needs NCCL >= 2.19 (ncclMemAlloc); "
                                    f"{self.lib.path} is NCCL {self.lib.version}")
        # The layout is the command's choice (``opts.shared_buffers``): `bench` lays its buffers out
        # as nccl-tests does (one pair at the largest size, which the calls and the series warm-ups
        # step through); sweeps and validate give every size a pair of its own.
        wanted = buffers or (("ncclmem-max" if opts.shared_buffers else "ncclmem") if self.lib.has("ncclMemAlloc")
                             else "torch")
        self.buffers = "ncclmem" if self.symmetric else wanted
        self.cta_policy = opts.cta_policy  # -x: ncclConfig_t.CTAPolicy, as nccl-tests sets it
        if self.cta_policy is not None and self.lib.version_code < (22800 if self.cta_policy > 1 else 22700):
            raise EngineUnavailable(f"-x/--cta_policy {self.cta_policy} needs NCCL >= "
                                    f"{'2.28' if self.cta_policy > 1 else '2.27'} (ncclConfig_t.CTAPolicy); "
                                    f"{self.lib.path} is NCCL {self.lib.version}")
        self.register = opts.local_register  # -R 1: ncclCommRegister of the buffers
        if self.register and not self.lib.has("ncclCommRegister"):
            raise EngineUnavailable(f"-R/--local_register 1 needs NCCL >= 2.19 (ncclCommRegister); "
                                    f"{self.lib.path} is NCCL {self.lib.version}")
        self._handles: list[tuple[Any, Any]] = []
        self.plugin = opts.plugin_path
        self.empty_rules = opts.empty_rules
        if self.plugin and "NCCL_TUNER_PLUGIN" not in os.environ:
            os.environ["NCCL_TUNER_PLUGIN"] = str(self.plugin)  # before the first communicator
        self.comms: dict[CommConfig, Any] = {}
        self._runtime: gpurt.Runtime | None = None
        self._parked: list[Any] = []  # refused communicators, left to the process's exit (park_comm)
        # seconds and count of communicator inits and aborts/destroys (a sweep reports where its time went)
        self.comm_time: dict[str, list[float]] = {"init": [0.0, 0], "abort": [0.0, 0]}
        self._windows: list[tuple[Any, Any]] = []
        self._align: Any = None
        self._pool: list[Any] = []  # --buffers ncclmem-max: [send, recv] (uint8 tensors), allocated once
        self._premul: dict[tuple[CommConfig, int], int] = {}  # mulsum op handles, per communicator and datatype
        major, minor = torch.cuda.get_device_capability(self.device)
        self.sm = major * 10 + minor

    def info(self) -> dict[str, Any]:
        return {"version": self.lib.version, "library": self.lib.path, "flavor": self.facts.kind,
                "symmetric": self.symmetric,
                "buffers": self.buffers,
                "tuner_plugin": os.environ.get("NCCL_TUNER_PLUGIN")}

    def waive_reason(self, pt: Point) -> str | None:
        dt = pt.dt
        if dt.min_nccl and self.lib.version_code < dt.min_nccl:
            return f"{dt.name} needs NCCL >= {dt.min_nccl // 10000}.{dt.min_nccl // 100 % 100}; this is NCCL {self.lib.version}"
        if dt.min_sm and self.sm < dt.min_sm:
            return f"{dt.name} needs an sm_{dt.min_sm}+ GPU (NCCL reduces FP8 on Hopper and newer); this is sm_{self.sm}"
        return None

    def _op(self, pt: Point, comm: Any) -> int:
        """ncclRedOp_t of ``pt.op``; mulsum: a pre-multiplied sum with this rank's scalar, made once
        per communicator and datatype (ncclRedOpCreatePreMulSum, the scalar held on the host)."""
        op = OPS[pt.op]
        if op is not None:
            return op
        key = (pt.config or BASELINE, pt.dt.nccl)
        if key not in self._premul:
            scalar = self.torch.tensor([mulsum_scalar(self.ctx.comm_rank)], dtype=getattr(self.torch, pt.dt.torch_name))
            raw = ctypes.create_string_buffer(scalar.view(self.torch.uint8).numpy().tobytes(), 16)
            handle = ctypes.c_int()
            self.lib.call("ncclRedOpCreatePreMulSum", ctypes.byref(handle), raw, pt.dt.nccl, 1, comm)  # 1: ncclScalarHostImmediate
            self._premul[key] = handle.value
        return self._premul[key]

    # -- communicators ----------------------------------------------------------------
    def connect(self, config: Any = None) -> None:
        self.comm(config)

    def comm(self, cfg: CommConfig | None) -> Any:
        cfg = cfg or BASELINE
        if cfg not in self.comms:
            self.comms[cfg] = self._make_comm(cfg)
        return self.comms[cfg]

    def _make_comm(self, cfg: CommConfig) -> Any:
        """The communicator of ``cfg``: over every rank, or (NCCL_TESTS_SPLIT) over this rank's group,
        split from the world's alignment communicator where NCCL has ncclCommSplit (>= 2.18), else
        from a unique id of the group's first rank (as nccl-tests makes it, over its split MPI group).
        The alignment communicator (``start_together``) spans every rank, as nccl-tests' barrier does."""
        ctx, grouped = self.ctx, self.ctx.members is not None and not cfg.align
        parent = self._align_comm() if grouped and self.lib.has("ncclCommSplit") else None
        uid = self._unique_id(grouped, cfg.label) if parent is None else b""
        nranks, rank = (ctx.comm_size, ctx.comm_rank) if grouped else (ctx.world_size, ctx.rank)
        ctas = 1 if cfg.align else cfg.channels if cfg.channels and not self.plugin else None
        ncfg = self.lib.config(min_ctas=ctas, max_ctas=ctas, name=f"ccltune-{cfg.label}", cta_policy=self.cta_policy)
        rule_file = cfg.rules_file or (self._channel_rules(cfg) if cfg.channels and self.plugin and not cfg.align
                                       else self.empty_rules)
        with _env(NCCL_ALGO=cfg.algo or os.environ.get("NCCL_ALGO"),
                  NCCL_PROTO=cfg.proto or os.environ.get("NCCL_PROTO"),
                  CCLTUNE_RULES=rule_file or os.environ.get("CCLTUNE_RULES"),
                  NCCL_TUNER_CONFIG_FILE=None if rule_file else os.environ.get("NCCL_TUNER_CONFIG_FILE"),
                  **self.comm_env.for_comm(cfg.proto, cfg.label)):  # RCCL: LL128 needs RCCL_LL128_FORCE_ENABLE
            with self.torch.cuda.device(self.device):
                t0 = time.perf_counter()
                try:
                    if parent is not None:  # key: the world rank, so the group keeps world order
                        return self.lib.comm_split(parent, ctx.color, ctx.rank, ncfg)
                    return self.lib.comm_init(nranks, uid, rank, ncfg)
                finally:
                    self._count("init", t0)

    def _unique_id(self, grouped: bool, label: str) -> bytes:
        """The NCCL unique id of this rank's communicator: rank 0's, or (``grouped``) its group's first
        rank's, each group's first rank making one and every rank taking its own group's."""
        ctx = self.ctx
        if not grouped:
            return ctx.broadcast_bytes(self.lib.unique_id() if ctx.is_root else None, f"NCCL unique id for {label}")
        assert ctx.members is not None
        uids = ctx.gather_bytes(self.lib.unique_id() if ctx.comm_rank == 0 else None,
                                f"NCCL unique ids of the groups for {label}")
        uid = uids[ctx.members[0]]
        assert uid is not None
        return uid

    def _channel_rules(self, cfg: CommConfig) -> str:
        """A rule file that caps every tuned collective at ``cfg.channels`` (plugin path)."""
        path = os.path.join(self.opts.workdir, f"ccltune-channels-{cfg.channels}-r{self.ctx.rank}.conf")
        lines = [f"{c},0,16T,default,default,{cfg.channels},-1,-1" for c in rules.COLLECTIVES]
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("# ccltune sweep: channel candidate\n" + "\n".join(lines) + "\n")
        return path

    def park_comm(self, cfg: CommConfig) -> None:
        """A communicator on which NCCL refused a forced configuration's first call on this rank
        (no algorithm/protocol available for that collective): nothing was enqueued on it, so
        nothing waits on it. It is set aside, neither aborted nor destroyed, and left to the
        process's exit: aborting every refused communicator took a third of a sweep's time
        (docs/tuning.md, docs/performance.md "where a sweep's time goes"). The configuration gets a new communicator
        when it is next used (another collective); one that never connected holds little memory."""
        self._premul = {k: v for k, v in self._premul.items() if k[0] != cfg}
        comm = self.comms.pop(cfg, None)
        if comm is not None:
            self._parked.append(comm)

    def drop_comm(self, cfg: CommConfig, abort: bool = False) -> None:
        self._premul = {k: v for k, v in self._premul.items() if k[0] != cfg}  # die with their communicator
        comm = self.comms.pop(cfg, None)
        if comm is not None:
            t0 = time.perf_counter()
            try:
                self.lib.call("ncclCommAbort" if abort else "ncclCommDestroy", comm)
            finally:
                self._count("abort", t0)

    def _count(self, what: str, t0: float) -> None:
        self.comm_time[what][0] += time.perf_counter() - t0
        self.comm_time[what][1] += 1

    # -- buffers ----------------------------------------------------------------------
    def _mem_alloc(self, nbytes: int) -> Any:
        """``nbytes`` from ncclMemAlloc as a uint8 tensor (freed with ncclMemFree when dropped)."""
        with self.torch.cuda.device(self.device):
            ptr = self.lib.mem_alloc(nbytes)
        return self.torch.as_tensor(_DeviceArray(ptr, nbytes, self.lib), device=self.device)

    def reserve(self, nbytes: int) -> None:
        """``--buffers ncclmem-max``: one send and one recv buffer of ``nbytes``, as nccl-tests
        allocates its two buffers once at the largest size and runs every size on their start.
        Where they do not fit, sizes allocate their own (and a size that does not fit either is
        reported skipped)."""
        if self.buffers != "ncclmem-max" or (self._pool and self._pool[0].numel() >= nbytes):
            return
        self._pool = []  # the old pair goes before the larger one is allocated
        try:
            self._pool = [self._mem_alloc(max(nbytes, 1)), self._mem_alloc(max(nbytes, 1))]
        except NcclError:
            pass

    def alloc(self, pt: Point) -> Any:
        if self.buffers not in ("ncclmem", "ncclmem-max"):
            return None
        tdt, elem = getattr(self.torch, pt.dt.torch_name), pt.dt.size
        # nccl-tests' slots: out-of-place sends from one buffer and receives into the other;
        # in place, it works in its receive buffer
        slots = iter([1] if pt.in_place else [0, 1])

        def alloc(n: int) -> Any:
            nbytes = max(n, 1) * elem
            slot = next(slots, None)
            if self._pool and slot is not None and nbytes <= self._pool[slot].numel():
                return self._pool[slot][:nbytes].view(tdt)
            return self._mem_alloc(nbytes).view(tdt)  # bytes, viewed as the datatype
        return alloc

    def arrange(self, pt: Point, bufs: Buffers) -> None:
        """On the buffers of the largest size (``--buffers ncclmem-max``), timed call i starts
        ``i % steps`` sizes further on, steps being how many of this size fit, as nccl-tests'
        calls do "to avoid cache effects": at 1-16 MB a buffer used again by every call stays in
        the GPU's L2 cache and the call runs faster (docs/performance.md, "The 1-16 MB gap
        explained")."""
        if not self._pool or not all(self._in_pool(t) for t in bufs.keep):
            return
        total = max(pt.lay.send_elems, pt.lay.recv_elems) * pt.dt.size
        room = min(p.numel() for p in self._pool) - pt.unalign * pt.dt.size  # -u: the views start further in
        if total > 0:
            bufs.shift_bytes, bufs.steps = total, max(1, room // total)

    def _in_pool(self, t: Any) -> bool:
        ptr = t.data_ptr()
        return any(p.data_ptr() <= ptr < p.data_ptr() + p.numel() for p in self._pool)

    def prepare(self, pt: Point, bufs: Buffers) -> None:
        if self.symmetric or self.register:
            comm = self.comm(pt.config)
            for t in bufs.keep:
                nbytes = t.numel() * t.element_size()
                if self.symmetric:
                    self._windows.append((comm, self.lib.window_register(comm, t.data_ptr(), nbytes)))
                else:  # -R 1: as nccl-tests registers its send and receive buffers with ncclCommRegister
                    self._handles.append((comm, self.lib.register(comm, t.data_ptr(), nbytes)))

    def release(self, pt: Point, bufs: Buffers) -> None:
        while self._windows:
            comm, win = self._windows.pop()
            self.lib.call("ncclCommWindowDeregister", comm, win)
        while self._handles:
            comm, handle = self._handles.pop()
            self.lib.call("ncclCommDeregister", comm, handle)

    # -- calls ------------------------------------------------------------------------
    # Every NCCL call of a point goes through the launch loop (engines/series.py), the single
    # first call as the timed series: one ctypes call per series, not per NCCL call.
    def launch(self, pt: Point, bufs: Buffers) -> None:
        self._run(pt, bufs, 0, 1, step=False)

    def launch_at(self, pt: Point, bufs: Buffers, i: int) -> None:
        self._run(pt, bufs, i, 1, step=True)

    def issue(self, pt: Point, bufs: Buffers, calls: int, *, step: bool = True) -> None:
        self._run(pt, bufs, 0, calls, step=step)

    def series(self, pt: Point, bufs: Buffers, calls: int, *, step: bool = True) -> Callable[[], None]:
        s = self._series(pt, bufs, step)  # on the stream current now (the caller's stream context)

        def run() -> None:  # the loop's busy seconds (-z 3) are not this call's to report
            self.loop.run(s, 0, calls)
        return run

    def _series(self, pt: Point, bufs: Buffers, step: bool, schedule: Schedule | None = None) -> Any:
        """The launch loop's description of ``pt`` on the current stream (the capture stream in a
        CUDA graph): call i ``bufs.shift(i)`` bytes into the buffers when ``step``."""
        stream = self.torch.cuda.current_stream(self.device).cuda_stream
        comm = self.comm(pt.config)
        return self.loop.series(pt.coll, pt.lay, pt.root, self.ctx.comm_rank, self.ctx.comm_size,
                                send=bufs.send.data_ptr(), recv=bufs.recv.data_ptr(), dtype=pt.dt.nccl,
                                op=self._op(pt, comm), comm=comm, stream=stream,
                                shift_bytes=bufs.shift_bytes if step else 0, shift_steps=bufs.steps if step else 1,
                                schedule=schedule)

    def capture(self, pt: Point, bufs: Buffers, calls: int | None, *, step: bool = True) -> Any:
        """A CUDA graph of ``calls`` calls of ``pt`` (None: its timed calls, ``pt.agg`` a group), captured
        on this engine's stream by the launch loop and instantiated, not launched (series.Graph)."""
        with self.stream_context():
            if calls is None:  # -z and -I are refused with -G; -m groups each iteration's calls
                s, n = self._series(pt, bufs, True, Schedule(agg=pt.agg)), pt.iters
            else:
                s, n = self._series(pt, bufs, step), calls
        return self.loop.capture(s, 0, n, self.runtime().graph)

    def clocked(self, pt: Point, bufs: Buffers, events: Any) -> Callable[[], tuple[float, float]]:
        """The timed calls issued, waited for and timed in C (the launch loop's ``ccltune_series_time``): between
        its two clock readings only the loop and the stream polls run, as in nccl-tests' BenchTime. Timed from
        Python, the clock also held a ctypes call and torch's stream sync: a fixed cost a point, which -n spreads
        over its calls (4 x H200, -n 20: a 0-byte all_gather row took 1.6 us a call against nccl-tests' 0.1)."""
        sched = Schedule(agg=pt.agg, blocking=pt.blocking, events=events.handles if events is not None else (),
                         runtime=self.runtime(), barrier=lambda: self.ctx.barrier("-z barrier"))
        s = self._series(pt, bufs, True, sched)
        if not pt.blocking:
            # the final wait polls the stream only: on a hang the watchdog aborts the communicator from its own
            # thread (ncclCommAbort frees it, and its kernels end, which ends the wait), so asking that
            # communicator for its error from here could read freed memory
            s.async_error = None
        return lambda: self.loop.time(s, 0, pt.iters)

    def runtime(self) -> gpurt.Runtime:
        """The GPU runtime's stream query and events (libcuda or libamdhip64), loaded when first needed."""
        if self._runtime is None:
            self._runtime = gpurt.load(self.facts.kind == "rccl")
        return self._runtime

    def events(self, n: int) -> Any:
        return gpurt.Events(self.runtime(), n)

    def _run(self, pt: Point, bufs: Buffers, first: int, calls: int, *, step: bool) -> None:
        """Calls ``first`` .. ``first + calls - 1`` of ``pt``'s series."""
        self.loop.run(self._series(pt, bufs, step), first, calls)

    def start_together(self, config: Any = None) -> None:
        super().start_together(config)
        if self._align is None:
            self._align = self.torch.zeros(1, dtype=self.torch.float32, device=self.device)
        ptr = self._align.data_ptr()
        comm = self._align_comm()
        self.lib.call("ncclAllReduce", ptr, ptr, 1, DTYPES["float"].nccl, OPS["sum"], comm, self.stream.cuda_stream)
        self.sync()

    def _align_comm(self) -> Any:
        """The communicator ``start_together`` lines the ranks up on, over every rank (also the parent
        the groups' communicators are split from). On a communicator of its own, never the measured
        one: a forced candidate may not run all_reduce at all, and a collective issued just before the
        timed calls on the measured communicator made NCCL's default slower and noisier than the same
        configuration on another communicator (docs/performance.md, "4 GPUs, all_reduce")."""
        with _env(NCCL_ALGO=None, NCCL_PROTO=None):
            return self.comm(ALIGN)

    def abort(self) -> None:
        for comm in list(self.comms.values()):
            try:
                self.lib.call("ncclCommAbort", comm)
            except NcclError:
                pass
        self.comms.clear()
        self._premul.clear()

    def close(self) -> None:
        self._pool = []
        for cfg in list(self.comms):
            try:
                self.drop_comm(cfg)
            except NcclError:
                pass


class _DeviceArray:
    """Exposes ``nbytes`` of an ncclMemAlloc pointer to torch (as uint8) through
    __cuda_array_interface__; frees it with ncclMemFree when torch drops the last tensor."""

    def __init__(self, ptr: int, nbytes: int, lib: NcclLib):
        self.ptr, self.lib = ptr, lib
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}

    def __del__(self) -> None:
        try:
            self.lib.call("ncclMemFree", ctypes.c_void_p(self.ptr))
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass


def _gfx_arch(torch: Any) -> str | None:
    """The GPU's gfx architecture on ROCm (``gcnArchName``, e.g. 'gfx942:sramecc+:xnack-'), else None."""
    try:
        return getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "gcnArchName", None) or None
    except Exception:  # noqa: BLE001 - unknown: the facts then assume the strictest case
        return None
