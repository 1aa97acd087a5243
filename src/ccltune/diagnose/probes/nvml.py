"""NVIDIA GPUs through NVML (``import pynvml`` from nvidia-ml-py, imported lazily).

Every query is best effort: a call this driver or GPU does not support leaves its field None.
``read_nvml`` returns None when NVML cannot be loaded or sees no GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ccltune.errors import DataError

# nvmlDeviceGetTopologyCommonAncestor levels -> nvidia-smi's words
_ANCESTOR = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_FABRIC = {0: None, 1: "not started", 2: "in progress", 3: "completed"}
_NVLINK_DEVICE_SWITCH = 2
_FI_NVLINK_SPEED_COMMON = 90  # NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
# GB/s per link per direction when NVML gives no speed: NVLink 4 (Hopper) 26.5625, 3 (Ampere) 25, 5 (Blackwell) 50
_LINK_GBPS_BY_NAME = (("H100", 26.5625), ("H200", 26.5625), ("H800", 26.5625), ("H20", 26.5625), ("GH200", 26.5625),
                      ("B200", 50.0), ("B300", 50.0), ("GB200", 50.0), ("A100", 25.0), ("A800", 25.0), ("V100", 25.0))


@dataclass
class NvmlGpu:
    index: int
    name: str
    bus_id: str  # "0000:18:00.0"
    nvlinks: int = 0  # active links
    nvlink_gbps: float | None = None  # per link per direction
    nvlink_to_switch: bool = False
    nvlink_peers: dict[str, int] = field(default_factory=dict)  # peer bus id -> links (direct GPU links)
    fabric: str | None = None  # "completed", "in progress", "not started", "completed with error ..."
    mig: str | None = None  # "on", "off", None when unsupported


@dataclass
class NvmlTopo:
    driver: str | None
    gpus: list[NvmlGpu]
    pcie: dict[tuple[int, int], str]  # (i, j) -> PIX/PXB/PHB/NODE/SYS


MAX_GPUS = 1024  # a saved record naming more GPUs than this is refused, not looped over


def to_record(t: NvmlTopo) -> dict[str, Any]:
    """The NVML answers as JSON-ready data (a PCIe pair's key "i-j"): saved on a GPU machine, read back by
    ``from_record`` where there is none (the CPU tests of everything that renders them)."""
    out = asdict(t)
    out["pcie"] = {f"{i}-{j}": level for (i, j), level in t.pcie.items()}
    return out


def from_record(data: Any, where: str) -> NvmlTopo:
    """``to_record``'s output read back; DataError naming ``where`` and the field when it is not one."""
    def fail(what: str) -> DataError:
        return DataError(f"{where}: {what}: not a saved NVML record (ccltune's nvml.to_record)")

    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise fail("no 'gpus' list")
    if len(data["gpus"]) > MAX_GPUS:
        raise fail(f"{len(data['gpus'])} GPUs, more than {MAX_GPUS}")
    names = {f.name for f in fields(NvmlGpu)}
    gpus = []
    for n, g in enumerate(data["gpus"]):
        if not isinstance(g, dict) or not {"index", "name", "bus_id"} <= set(g) or set(g) - names:
            raise fail(f"gpus[{n}] has fields {sorted(g) if isinstance(g, dict) else type(g).__name__}")
        try:
            gpus.append(NvmlGpu(**{**g, "index": int(g["index"]), "nvlinks": int(g.get("nvlinks") or 0),
                                   "nvlink_peers": {str(k): int(v) for k, v in (g.get("nvlink_peers") or {}).items()}}))
        except (TypeError, ValueError, AttributeError) as exc:
            raise fail(f"gpus[{n}]: {exc}") from None
    pcie = {}
    for key, level in (data.get("pcie") or {}).items():
        i, sep, j = str(key).partition("-")
        if not (sep and i.isdigit() and j.isdigit()) or level not in {*_ANCESTOR.values(), "?"}:
            raise fail(f"pcie entry {key!r}: {level!r}")
        pcie[(int(i), int(j))] = level
    return NvmlTopo(data.get("driver"), gpus, pcie)


def normalize_bus_id(bus_id: str | bytes) -> str:
    """'00000000:18:00.0' / '0000:18:00' -> '0000:18:00.0' (sysfs spelling, lower case)."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    parts = text.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    domain, bus, devfn = parts[-3], parts[-2], parts[-1]
    if "." not in devfn:
        devfn += ".0"
    return f"{int(domain, 16):04x}:{bus}:{devfn}"


def link_gbps_from_name(name: str) -> float | None:
    return next((gbps for key, gbps in _LINK_GBPS_BY_NAME if key in name), None)


def pair_nvlink_gbps(a: NvmlGpu, b: NvmlGpu) -> float | None:
    """The NVLink limit of one direction between two GPUs: links x per-link speed. Through NVSwitch a
    pair can use all of the smaller side's links; direct links count only those between the two."""
    speed = a.nvlink_gbps or b.nvlink_gbps
    if not speed:
        return None
    links = min(a.nvlinks, b.nvlinks) if a.nvlink_to_switch and b.nvlink_to_switch else a.nvlink_peers.get(b.bus_id, 0)
    return links * speed if links else None


def link_limits(t: NvmlTopo | None, bus_ids: list[str | None]) -> tuple[dict[tuple[int, int], float], dict[int, float]]:
    """For GPUs named by PCI bus id in device order (CUDA's): (per ordered pair the NVLink limit of one direction,
    per GPU the limit of all its links: links x per-link speed). Empty where NVML has no answer."""
    if t is None:
        return {}, {}
    by_bus = {g.bus_id: g for g in t.gpus}
    gpus = [by_bus.get(normalize_bus_id(b)) if b else None for b in bus_ids]
    pairs = {(s, d): limit for s, a in enumerate(gpus) for d, b in enumerate(gpus)
             if s != d and a and b and (limit := pair_nvlink_gbps(a, b))}
    egress = {i: g.nvlinks * g.nvlink_gbps for i, g in enumerate(gpus) if g and g.nvlinks and g.nvlink_gbps}
    return pairs, egress


def classify_switch_links(gpus: list[NvmlGpu]) -> list[NvmlGpu]:
    """Links whose far end is no GPU of this host end at an NVSwitch (for drivers or nvidia-ml-py
    versions that cannot tell the remote device type)."""
    ours = {g.bus_id for g in gpus}
    for g in gpus:
        foreign = [b for b in g.nvlink_peers if b not in ours]
        if foreign:
            g.nvlink_to_switch = True
            for b in foreign:
                del g.nvlink_peers[b]
    return gpus


def read_nvml() -> NvmlTopo | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return None
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus = classify_switch_links([_gpu(pynvml, i, h) for i, h in enumerate(handles)])
        pcie = {}
        for i in range(count):
            for j in range(count):
                if i != j:
                    level = _try(lambda: pynvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j]))
                    pcie[(i, j)] = _ANCESTOR.get(level, "?") if level is not None else "?"
        driver = _try(pynvml.nvmlSystemGetDriverVersion)
        return NvmlTopo(driver.decode() if isinstance(driver, bytes) else driver, gpus, pcie)
    finally:
        _try(pynvml.nvmlShutdown)


def _try(call: Any) -> Any:
    try:
        return call()
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: the fact stays unknown
        return None


def _gpu(nv: Any, index: int, h: Any) -> NvmlGpu:
    name = _try(lambda: nv.nvmlDeviceGetName(h)) or "?"
    name = name.decode() if isinstance(name, bytes) else name
    pci = nv.nvmlDeviceGetPciInfo(h)
    gpu = NvmlGpu(index, name, normalize_bus_id(getattr(pci, "busId", b"0:0:0")))
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        if _try(lambda: nv.nvmlDeviceGetNvLinkState(h, link)) != 1:
            continue
        gpu.nvlinks += 1
        if _try(lambda: nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)) == _NVLINK_DEVICE_SWITCH:
            gpu.nvlink_to_switch = True
            continue
        remote = _try(lambda: nv.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link))
        if remote is not None:
            peer = normalize_bus_id(remote.busId)
            gpu.nvlink_peers[peer] = gpu.nvlink_peers.get(peer, 0) + 1
    if gpu.nvlinks:
        gpu.nvlink_gbps = _field_speed(nv, h) or link_gbps_from_name(name)
    fabric = _try(lambda: nv.nvmlDeviceGetGpuFabricInfo(h))
    if fabric is not None:
        state = _FABRIC.get(getattr(fabric, "state", 0))
        status = getattr(fabric, "status", 0)
        gpu.fabric = state if state != "completed" or status == 0 else f"completed with error {status}"
    mig = _try(lambda: nv.nvmlDeviceGetMigMode(h))
    if mig is not None:
        gpu.mig = "on" if mig[0] == 1 else "off"
    return gpu


def _field_speed(nv: Any, h: Any) -> float | None:
    """Per-link speed in GB/s from NVML's field values (MB/s), when plausible."""
    values = _try(lambda: nv.nvmlDeviceGetFieldValues(h, [_FI_NVLINK_SPEED_COMMON]))
    if not values or getattr(values[0], "nvmlReturn", 1) != 0:
        return None
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}.get(values[0].valueType, "uiVal")
    mbps = _try(lambda: float(getattr(values[0].value, member)))
    return mbps / 1000.0 if mbps and 1000 <= mbps <= 500_000 else None
