"""Measure every GPU pair in one process: copy engine and SM copy kernel, one direction, both
directions at once, all pairs at once (all-to-all), and small-copy latency.

- ``ce``: ``dst.copy_(src)`` across devices with peer access (cudaMemcpyAsync on a peer
  pointer, i.e. the copy engine). torch fences the copy with the destination device's current
  stream; each transfer gets its own idle stream there so concurrent copies never wait on
  each other through that fence.
- ``sm-read``: a kernel on the destination GPU loads the peer's memory over NVLink and stores
  locally; ``sm-write``: a kernel on the source GPU stores into the peer's memory. 16-byte
  vector accesses, grid-stride, 4 loads in flight per thread, 4 blocks per SM (cupy RawKernel).
- Timing: CUDA events on each transfer's stream, ``warmup`` untimed then the median of
  ``iters``; concurrent transfers start together behind a short sleep kernel on each device,
  so launching them from Python does not stagger them. The copies do not go through the nccl
  engine's launch loop in C (engines/series.py): they are CUDA copies and kernels, not NCCL
  calls, and the bandwidth rows time ``BURST`` copies of 256 MB (milliseconds each) where a
  launch's microseconds do not show; the small-copy latency rows do include one Python launch.
- Every copy is checked: sources hold ``src + 1`` in every byte, destinations are compared.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccltune.diagnose.checks.linkmath import REPEAT, slow_links
from ccltune.errors import UsageError

METHODS = ("ce", "sm-read", "sm-write")
THREADS = 512
BURST = 4  # copies per timed pair of events for one-direction bandwidth
BLOCKS_PER_SM = 4
GATE_CYCLES_PER_TRANSFER = 500_000  # ~0.25 ms at ~2 GHz: covers launching one transfer from Python

_KERNEL = r"""
extern "C" __global__ void copy_int4(const int4* __restrict__ src, int4* __restrict__ dst, unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}
"""


@dataclass(frozen=True)
class LinkPlan:
    size_bytes: int = 256 << 20
    iters: int = 10
    warmup: int = 2
    latency_bytes: int = 4
    latency_iters: int = 100
    methods: tuple[str, ...] = METHODS
    threshold: float = 0.8  # links below this x their series' median are measured again (``remeasure``)

    def __post_init__(self) -> None:
        if self.size_bytes <= 0 or self.size_bytes % 16:
            raise UsageError(f"--size must be a positive multiple of 16 bytes, got {self.size_bytes}")
        for flag, value, least in (("--iters", self.iters, 1), ("--warmup", self.warmup, 0),
                                   ("--latency-iters", self.latency_iters, 1)):
            if value < least:
                raise UsageError(f"{flag} must be >= {least}, got {value}")
        for m in self.methods:
            if m not in METHODS:
                raise UsageError(f"unknown method {m!r}; valid: {', '.join(METHODS)}")


@dataclass
class LinkRun:
    rows: list[dict[str, Any]] = field(default_factory=list)
    n_gpus: int = 0
    gpu_names: list[str] = field(default_factory=list)
    bus_ids: list[str | None] = field(default_factory=list)
    elapsed_s: float = 0.0
    waived: dict[str, str] = field(default_factory=dict)  # what could not run here -> why
    failed_checks: list[str] = field(default_factory=list)  # methods whose copies came out wrong


@dataclass(frozen=True)
class Transfer:
    src: int
    dst: int
    method: str

    @property
    def runner(self) -> int:
        """The device whose stream carries it: the destination for sm-read, else the source."""
        return self.dst if self.method == "sm-read" else self.src


def available() -> str | None:
    """None when links can run here, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible"
    if torch.cuda.device_count() < 2:
        return f"needs at least 2 GPUs, {torch.cuda.device_count()} visible"
    return None


def measure(plan: LinkPlan, log: Callable[[str], None] = lambda _: None) -> LinkRun:
    """Run the whole matrix. Call ``available()`` first; this assumes CUDA and >= 2 GPUs."""
    import torch

    start = time.monotonic()
    run = LinkRun(n_gpus=torch.cuda.device_count())
    for d in range(run.n_gpus):
        p = torch.cuda.get_device_properties(d)
        run.gpu_names.append(p.name)
        run.bus_ids.append(_bus_id(p))
    rig = _Rig(torch, run.n_gpus, plan.size_bytes)
    no_peer = [(s, d) for s, d in rig.pairs if not torch.cuda.can_device_access_peer(s, d)]
    if no_peer:
        run.waived["peer access"] = f"no peer access for pairs {no_peer}: copies between them are staged by the driver"
    methods = list(plan.methods)
    if any(m.startswith("sm") for m in methods):
        why = rig.load_kernel()
        if why:
            run.waived["sm"] = why
            methods = [m for m in methods if not m.startswith("sm")]
    rig.enable_peers()
    log(f"links: {run.n_gpus} GPUs, latency ({plan.latency_bytes} B x {plan.latency_iters}) ...")
    for s, d in rig.pairs:
        (ms,) = rig.time([Transfer(s, d, "ce")], plan.latency_bytes, plan.latency_iters, 5)
        run.rows.append(_row(s, d, "ce", "latency", plan.latency_bytes, None, ms * 1000.0))
    for method in methods:
        log(f"links: {method}: one direction, both directions, all at once ...")
        rig.clear()
        for s, d in rig.pairs:
            (ms,) = rig.time([Transfer(s, d, method)], plan.size_bytes, plan.iters, plan.warmup, BURST)
            run.rows.append(_row(s, d, method, "uni", plan.size_bytes, _gbps(plan.size_bytes, ms)))
        if not rig.verify():
            run.failed_checks.append(method)
        for s, d in rig.pairs:
            if s < d:
                both = [Transfer(s, d, method), Transfer(d, s, method)]
                for t, ms in zip(both, rig.time(both, plan.size_bytes, plan.iters, plan.warmup)):
                    run.rows.append(_row(t.src, t.dst, method, "bidir", plan.size_bytes, _gbps(plan.size_bytes, ms)))
        every = [Transfer(s, d, method) for s, d in rig.pairs]
        for t, ms in zip(every, rig.time(every, plan.size_bytes, plan.iters, plan.warmup)):
            run.rows.append(_row(t.src, t.dst, method, "all2all", plan.size_bytes, _gbps(plan.size_bytes, ms)))
        remeasure(rig, run, plan, method, log)
    run.elapsed_s = time.monotonic() - start
    return run


def remeasure(rig: Any, run: LinkRun, plan: LinkPlan, method: str, log: Callable[[str], None]) -> None:
    """Time again, as they were timed, the links of ``method``'s series below ``plan.threshold`` x their median:
    a pair alone (uni), a pair both ways (bidir), the whole all-to-all (its split depends on every copy at
    once). Their rows get the direction ``<direction>-repeat``; the analysis warns only of links slow both
    times (checks/linkmath.py)."""
    for direction in ("uni", "bidir", "all2all"):
        first = {(r["src"], r["dst"]): r["bandwidth_gbps"] for r in run.rows
                 if r["method"] == method and r["direction"] == direction}
        slow = {(x["src"], x["dst"]) for x in slow_links(first, plan.threshold)}
        if not slow:
            continue
        log(f"links: {method} {direction}: {len(slow)} links below {plan.threshold:g} x median, measuring again ...")
        if direction == "uni":
            groups, burst = [[Transfer(s, d, method)] for s, d in sorted(slow)], BURST
        elif direction == "bidir":
            groups, burst = [[Transfer(a, b, method), Transfer(b, a, method)]
                             for a, b in sorted({(min(p), max(p)) for p in slow})], 1
        else:
            groups, burst = [[Transfer(s, d, method) for s, d in rig.pairs]], 1
        for group in groups:
            for t, ms in zip(group, rig.time(group, plan.size_bytes, plan.iters, plan.warmup, burst)):
                if (t.src, t.dst) in slow:
                    run.rows.append(_row(t.src, t.dst, method, direction + REPEAT, plan.size_bytes,
                                         _gbps(plan.size_bytes, ms)))


def _gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e6) if ms > 0 else 0.0


def _row(src: int, dst: int, method: str, direction: str, size: int, gbps: float | None,
         latency_us: float | None = None) -> dict[str, Any]:
    return {"src": src, "dst": dst, "method": method, "direction": direction, "size_bytes": size,
            "bandwidth_gbps": gbps, "latency_us": latency_us, "note": None}


def _bus_id(props: Any) -> str | None:
    try:
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        return None


class _Rig:
    """Buffers, streams and the copy kernel for one process driving every GPU."""

    def __init__(self, torch: Any, n: int, size: int):
        self.torch, self.n, self.size = torch, n, size
        self.pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
        self.src = [torch.full((size,), s + 1, dtype=torch.uint8, device=f"cuda:{s}") for s in range(n)]
        self.dst = {(s, d): torch.zeros(size, dtype=torch.uint8, device=f"cuda:{d}") for s, d in self.pairs}
        self.streams: dict[Any, Any] = {}
        self.kernel: Any = None
        self.cupy: Any = None   # cupy and numpy, set by load_kernel: the SM copy kernel's modules
        self.numpy: Any = None
        self.cp_streams: dict[int, Any] = {}
        self.blocks = [torch.cuda.get_device_properties(d).multi_processor_count * BLOCKS_PER_SM for d in range(n)]

    def load_kernel(self) -> str | None:
        if getattr(getattr(self.torch, "version", None), "hip", None):  # ROCm PyTorch: torch.cuda is HIP; cupy's kernel is CUDA C
            return ("the SM copy kernel is compiled with cupy for CUDA: on ROCm only the copy engine (ce) is "
                    "measured here; for the GFX-kernel matrix run TransferBench a2a and `ccltune import transferbench`")
        try:
            import cupy
            import numpy  # pointer arguments are passed as numpy.uint64
        except ImportError:
            return "cupy is not installed: the SM copy kernel needs it (pip install cupy-cuda12x / cupy-cuda13x)"
        self.cupy, self.numpy = cupy, numpy
        try:
            self.kernel = cupy.RawKernel(_KERNEL, "copy_int4")
            with cupy.cuda.Device(0):  # compile and launch once (zero elements) to fail early, outside timing
                self.kernel((1,), (1,), (numpy.uint64(0), numpy.uint64(0), numpy.uint64(0)))
                cupy.cuda.Device(0).synchronize()
        except Exception as exc:  # noqa: BLE001 - NVRTC missing or failing: report, measure the rest
            return f"cupy could not compile or launch the copy kernel: {exc}"
        return None

    def stream(self, key: Any, device: int) -> Any:
        if key not in self.streams:
            self.streams[key] = self.torch.cuda.Stream(device=device)
        return self.streams[key]

    def enable_peers(self) -> None:
        """A tiny copy per ordered pair: torch enables peer access (both ways over all pairs)."""
        for s, d in self.pairs:
            self.dst[(s, d)][:16].copy_(self.src[s][:16])
        for d in range(self.n):
            self.torch.cuda.synchronize(d)

    def clear(self) -> None:
        for buf in self.dst.values():
            buf.zero_()
        for d in range(self.n):
            self.torch.cuda.synchronize(d)

    def verify(self) -> bool:
        return all(bool((self.dst[(s, d)] == s + 1).all()) for s, d in self.pairs)

    def launch(self, t: Transfer, nbytes: int, stream: Any) -> None:
        src, dst = self.src[t.src][:nbytes], self.dst[(t.src, t.dst)][:nbytes]
        if t.method == "ce":
            try:  # a plain cudaMemcpyPeerAsync on our stream: no cross-stream fences around it
                import cupy

                cupy.cuda.runtime.memcpyPeerAsync(dst.data_ptr(), t.dst, src.data_ptr(), t.src, nbytes,
                                                  stream.cuda_stream)
                return
            except ImportError:
                pass
            fence = self.stream(("fence", t.src, t.dst), t.dst)
            with self.torch.cuda.stream(stream), self.torch.cuda.stream(fence):
                dst.copy_(src)
            return
        cupy, numpy = self.cupy, self.numpy   # an "sm" transfer is planned only once load_kernel succeeded
        dev = t.runner
        with cupy.cuda.Device(dev):
            if stream.cuda_stream not in self.cp_streams:
                self.cp_streams[stream.cuda_stream] = _cupy_stream(cupy, stream, dev)
            with self.cp_streams[stream.cuda_stream]:  # RawKernel launches on cupy's current stream
                self.kernel((self.blocks[dev],), (THREADS,),
                            (numpy.uint64(src.data_ptr()), numpy.uint64(dst.data_ptr()), numpy.uint64(nbytes // 16)))

    def time(self, transfers: list[Transfer], nbytes: int, iters: int, warmup: int, burst: int = 1) -> list[float]:
        """Median milliseconds of each transfer, all of ``transfers`` running at once; ``burst``
        back-to-back copies between one pair of events, so event overhead is amortised."""
        torch = self.torch
        devices = sorted({t.src for t in transfers} | {t.dst for t in transfers})
        samples: list[list[float]] = [[] for _ in transfers]
        for rep in range(warmup + iters):
            gates = self._gates({t.runner for t in transfers}, len(transfers)) if len(transfers) > 1 else {}
            events = []
            for t in transfers:
                stream = self.stream((t.method, t.src, t.dst), t.runner)
                if gates:
                    stream.wait_event(gates[t.runner])
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record(stream)
                for _ in range(burst):
                    self.launch(t, nbytes, stream)
                end.record(stream)
                events.append((begin, end))
            for d in devices:
                torch.cuda.synchronize(d)
            if rep >= warmup:
                for i, (begin, end) in enumerate(events):
                    samples[i].append(begin.elapsed_time(end) / burst)
        return [statistics.median(s) for s in samples]

    def _gates(self, devices: set[int], n_transfers: int) -> dict[int, Any]:
        torch, gates = self.torch, dict[int, Any]()
        if not hasattr(torch.cuda, "_sleep"):  # private in torch; without it transfers start as launched
            return gates
        for d in devices:
            stream = self.stream(("gate", d), d)
            with torch.cuda.device(d), torch.cuda.stream(stream):
                torch.cuda._sleep(GATE_CYCLES_PER_TRANSFER * n_transfers)
                gates[d] = torch.cuda.Event()
                gates[d].record(stream)
        return gates


def _cupy_stream(cupy: Any, stream: Any, dev: int) -> Any:
    """A cupy view of a torch CUDA stream: ``Stream.from_external`` (cupy >= 14, through the
    CUDA stream protocol), else ``ExternalStream`` (deprecated there, without a device id before 11)."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        try:
            return from_external(stream)
        except (TypeError, AttributeError, ValueError):  # a torch stream without __cuda_stream__
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return cupy.cuda.ExternalStream(stream.cuda_stream, dev)
        except TypeError:
            return cupy.cuda.ExternalStream(stream.cuda_stream)
