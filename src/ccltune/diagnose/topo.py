"""How the GPUs of this host are connected, from the first source that answers: NVML,
``nvidia-smi topo -m``, AMD sysfs. One record (``Topology``) and its findings (pure).

Link labels, nvidia-smi's words: ``NV<n>`` (n NVLink links), ``XGMI`` (AMD), or the PCIe
path: ``PIX`` (one switch) < ``PXB`` (several switches) < ``PHB`` (host bridge) < ``NODE``
(across host bridges of one NUMA node) < ``SYS`` (across NUMA nodes). From amd-smi: ``XGMI`` or
``PCIE`` with ``+<hops>`` when the pair is more than one hop apart (``XGMI+2``), ``NOP2P`` when
amd-smi reports the pair's P2P access disabled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ccltune.diagnose import amdsmi, amdsysfs, nvml, smitopo
from ccltune.diagnose.findings import Finding
from ccltune.diagnose.sysconf import read_text


@dataclass
class GpuRow:
    index: int
    name: str
    bus_id: str | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    mig: str | None = None
    fabric: str | None = None
    nvlinks: int | None = None
    nvlink_gbps: float | None = None  # per link per direction
    compute_partition: str | None = None
    memory_partition: str | None = None


@dataclass
class Topology:
    source: str  # "nvml", "nvidia-smi", "amd-smi", "amd-sysfs" or "none"
    gpus: list[GpuRow] = field(default_factory=list)
    links: list[list[str]] = field(default_factory=list)  # links[i][j], "X" on the diagonal
    nvlink_limit_gbps: list[list[float | None]] = field(default_factory=list)  # per pair, one direction
    driver: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


def discover(root: Path) -> Topology:
    """NVML first, then nvidia-smi, then amd-smi, then AMD sysfs; ``Topology('none')`` with notes when none
    sees a GPU."""
    notes = []
    nv = nvml.read_nvml()
    if nv is not None:
        return _from_nvml(nv, root)
    notes.append("NVML: pynvml not installed or no NVIDIA GPU")
    smi_text = smitopo.run_topo_matrix()
    if smi_text is not None:
        smi = smitopo.parse_topo_matrix(smi_text)
        if smi.gpus:
            return from_smi(smi)
    notes.append("nvidia-smi: not found or no GPU")
    smi_json = amdsmi.run()
    if smi_json is not None:
        parsed = amdsmi.parse(smi_json)
        if parsed.gpus:
            return from_amdsmi(parsed, amdsysfs.read_amd(root))
    notes.append("amd-smi: not found or no GPU")
    amd = amdsysfs.read_amd(root)
    if amd.gpus:
        return from_amd(amd)
    notes.append(f"AMD sysfs: no AMD card under {root / 'sys/class/drm'}")
    return Topology("none", notes=notes)


def _from_nvml(nv: nvml.NvmlTopo, root: Path) -> Topology:
    rows = []
    for g in nv.gpus:
        numa, _ = read_text(root, f"sys/bus/pci/devices/{g.bus_id}/numa_node")
        cpus, _ = read_text(root, f"sys/bus/pci/devices/{g.bus_id}/local_cpulist")
        rows.append(GpuRow(g.index, g.name, g.bus_id, _numa(numa), cpus.strip() if cpus else None, g.mig, g.fabric,
                           g.nvlinks, g.nvlink_gbps))
    n = len(nv.gpus)
    limits = [[None if i == j else nvml.pair_nvlink_gbps(nv.gpus[i], nv.gpus[j]) for j in range(n)] for i in range(n)]
    links = [["X" if i == j else _nv_label(nv.gpus[i], nv.gpus[j]) or nv.pcie.get((i, j), "?") for j in range(n)]
             for i in range(n)]
    return Topology("nvml", rows, links, limits, nv.driver)


def _nv_label(a: nvml.NvmlGpu, b: nvml.NvmlGpu) -> str | None:
    if a.nvlink_to_switch and b.nvlink_to_switch:
        return f"NV{min(a.nvlinks, b.nvlinks)}"
    count = a.nvlink_peers.get(b.bus_id, 0)
    return f"NV{count}" if count else None


def _numa(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if value.lstrip("-").isdigit() and int(value) >= 0 else None


def from_smi(smi: smitopo.SmiTopo) -> Topology:
    rows = [GpuRow(i, name, numa_node=_numa(smi.numa_affinity[i]), cpu_affinity=smi.cpu_affinity[i])
            for i, name in enumerate(smi.gpus)]
    return Topology("nvidia-smi", rows, smi.links, notes=["names, MIG and fabric state need NVML (nvidia-ml-py)"])


def from_amd(amd: amdsysfs.AmdTopo) -> Topology:
    rows = [GpuRow(i, g.product or "AMD GPU", g.card, g.numa_node, compute_partition=g.compute_partition,
                   memory_partition=g.memory_partition) for i, g in enumerate(amd.gpus)]
    n = len(rows)
    links = [["X" if i == j else "XGMI" if (i, j) in amd.xgmi else "PCIe" for j in range(n)] for i in range(n)]
    return Topology("amd-sysfs", rows, links, notes=amd.notes)


def from_amdsmi(smi: amdsmi.AmdSmiTopo, sysfs: amdsysfs.AmdTopo | None = None) -> Topology:
    """amd-smi's view; what it left unsaid (product, partition, NUMA) taken from sysfs by GPU index."""
    side = (sysfs.gpus if sysfs else [])
    rows = []
    for i, g in enumerate(smi.gpus):
        fs = side[i] if i < len(side) else None
        rows.append(GpuRow(i, g.product or (fs.product if fs else None) or "AMD GPU", g.bdf,
                           g.numa_node if g.numa_node is not None else (fs.numa_node if fs else None),
                           compute_partition=g.compute_partition or (fs.compute_partition if fs else None),
                           memory_partition=g.memory_partition or (fs.memory_partition if fs else None)))
    ids = [g.index for g in smi.gpus]
    links = [["X" if a == b else amdsmi.label(smi.links.get((a, b))) for b in ids] for a in ids]
    return Topology("amd-smi", rows, links)


def findings(topo: Topology) -> list[Finding]:
    """GPUs found, uniform links, NVSwitch fabric, MIG, AMD partitions, NUMA placement."""
    if not topo.gpus:
        return [Finding("topo:gpus", "WAIVED", "no GPU found: " + "; ".join(topo.notes))]
    names = sorted({g.name for g in topo.gpus})
    out = [Finding("topo:gpus", "PASS", f"{len(topo.gpus)} x {', '.join(names)} ({topo.source})",
                   value=len(topo.gpus))]
    out.append(_links(topo))
    out.append(_state("topo:fabric", {g.index: g.fabric for g in topo.gpus}, good="completed", bad_status="FAIL",
                      what="NVSwitch fabric", fix="start nvidia-fabricmanager and wait for the fabric to complete"))
    out.append(_state("topo:mig", {g.index: g.mig for g in topo.gpus}, good="off", bad_status="WARN",
                      what="MIG mode", fix="NCCL cannot use P2P between MIG instances: nvidia-smi -mig 0"))
    if topo.source in ("amd-sysfs", "amd-smi"):
        modes = {g.index: f"{g.compute_partition}/{g.memory_partition}" if g.compute_partition or g.memory_partition
                 else None for g in topo.gpus}
        out.append(_state("topo:partition", modes, good="SPX/NPS1", bad_status="WARN", what="compute/memory partition",
                          fix="AMD's RCCL criteria assume SPX/NPS1; compare figures only within one mode"))
    numa = {g.index: g.numa_node for g in topo.gpus}
    if all(v is None for v in numa.values()):
        out.append(Finding("topo:numa", "WAIVED", "NUMA node of the GPUs unknown"))
    else:
        nodes = sorted({v for v in numa.values() if v is not None})
        out.append(Finding("topo:numa", "PASS", f"GPUs on NUMA node(s) {', '.join(map(str, nodes))}: "
                           + ", ".join(f"GPU{i}:{v}" for i, v in numa.items()), data={"numa": numa}))
    return out


def _links(topo: Topology) -> Finding:
    n = len(topo.gpus)
    pairs = {(i, j): topo.links[i][j] for i in range(n) for j in range(n) if i != j}
    if not pairs:
        return Finding("topo:links", "PASS", "one GPU: no links")
    kinds = sorted(set(pairs.values()))
    fast = [k for k in kinds if k.startswith(("NV", "XGMI"))]
    if len(kinds) == 1:
        return Finding("topo:links", "PASS", f"every pair {kinds[0]}", data={"kinds": kinds})
    best = max(fast, key=_link_rank) if fast else None
    slow = sorted(p for p, k in pairs.items() if k != best and p[0] < p[1])
    shown = ", ".join(f"{i}-{j}:{pairs[(i, j)]}" for i, j in slow[:8])
    return Finding("topo:links", "WARN" if best else "PASS",
                   f"links differ ({', '.join(kinds)}); " + (f"pairs below {best}: {shown}" if best else "PCIe only"),
                   "a ring through a slower pair runs at its speed; check cabling/NVLink errors (nvidia-smi nvlink -s)"
                   if best else "", data={"kinds": kinds, "slow_pairs": slow})


def _link_rank(label: str) -> int:
    """Higher is faster: NV<n> by link count; XGMI by fewer hops (XGMI > XGMI+2)."""
    if label.startswith("NV"):
        return int(label[2:]) if label[2:].isdigit() else 0
    hops = label.partition("+")[2]
    return -int(hops) if hops.isdigit() else -1


def _state(name: str, states: dict[int, str | None], *, good: str, bad_status: str, what: str, fix: str) -> Finding:
    known = {i: s for i, s in states.items() if s is not None}
    if not known:
        return Finding(name, "WAIVED", f"{what} not reported for these GPUs")
    bad = {i: s for i, s in known.items() if s != good}
    if not bad:
        return Finding(name, "PASS", f"{what} {good} on {len(known)} GPUs")
    return Finding(name, bad_status, f"{what}: " + ", ".join(f"GPU{i} {s}" for i, s in bad.items()), fix,
                   data={"states": known})
