"""How the GPUs of this host are connected, from the first source that answers: NVML,
``nvidia-smi topo -m``, amd-smi, AMD sysfs: one record (``Topology``); its findings are in
``diagnose.checks.topo``.

Link labels, nvidia-smi's words: ``NV<n>`` (n NVLink links), ``XGMI`` (AMD), or the PCIe
path: ``PIX`` (one switch) < ``PXB`` (several switches) < ``PHB`` (host bridge) < ``NODE``
(across host bridges of one NUMA node) < ``SYS`` (across NUMA nodes). From amd-smi: ``XGMI`` or
``PCIE`` with ``+<hops>`` when the pair is more than one hop apart (``XGMI+2``), ``NOP2P`` when
amd-smi reports the pair's P2P access disabled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ccltune.diagnose.probes import amdsmi, amdsysfs, nvml, smitopo
from ccltune.diagnose.probes.sysfs import read_text


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
    partition_id: int | None = None  # AMD: which partition of its physical GPU this device is
    physical: int | None = None  # AMD: index of the physical GPU this device is a partition of


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

    def physical_gpus(self) -> int:
        """How many physical GPUs the devices are (fewer than ``len(gpus)`` when a GPU is partitioned)."""
        known = {g.physical for g in self.gpus if g.physical is not None}
        return len(known) + sum(1 for g in self.gpus if g.physical is None)

    def pair_labels(self) -> list[str]:
        """The link label of every ordered pair of distinct GPUs."""
        return [c for i, row in enumerate(self.links) for j, c in enumerate(row) if i != j]


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
    """One row per card, or on a partitioned node one per KFD GPU node (a partition), each with its physical
    GPU's card (cards and KFD nodes are both made in probe order); links from the KFD io_links."""
    if amd.partitioned():
        return _from_amd_partitions(amd)
    rows = [GpuRow(i, g.product or "AMD GPU", g.card, g.numa_node, compute_partition=g.compute_partition,
                   memory_partition=g.memory_partition) for i, g in enumerate(amd.gpus)]
    return Topology("amd-sysfs", rows, _kfd_links(amd, len(rows)), notes=amd.notes)


def _kfd_links(amd: amdsysfs.AmdTopo, n: int) -> list[list[str]]:
    return [["X" if i == j else "XGMI" if (i, j) in amd.xgmi else "PCIe" for j in range(n)] for i in range(n)]


def _from_amd_partitions(amd: amdsysfs.AmdTopo) -> Topology:
    groups = amdsmi.physical_groups(amd.devices)
    physical = {i: n for n, group in enumerate(groups) for i in group}
    notes = list(amd.notes)
    if len(groups) != len(amd.gpus):
        notes.append(f"{len(amd.devices)} KFD GPU nodes make {len(groups)} physical GPUs but {len(amd.gpus)} cards "
                     "have the GPU's attributes: product, partition and NUMA node taken by position")
    rows = []
    for i, d in enumerate(amd.devices):
        card = amd.gpus[physical[i]] if physical[i] < len(amd.gpus) else None
        rows.append(GpuRow(i, (card.product if card else None) or "AMD GPU", d.pci_address(),
                           card.numa_node if card else None,
                           compute_partition=card.compute_partition if card else None,
                           memory_partition=card.memory_partition if card else None,
                           partition_id=d.partition_id, physical=physical[i]))
    return Topology("amd-sysfs", rows, _kfd_links(amd, len(rows)), notes=notes)


def from_amdsmi(smi: amdsmi.AmdSmiTopo, sysfs: amdsysfs.AmdTopo | None = None) -> Topology:
    """amd-smi's view; what it left unsaid (product, partition, NUMA) taken from sysfs by GPU index."""
    side = (sysfs.gpus if sysfs else [])
    physical = {i: n for n, group in enumerate(amdsmi.physical_groups(smi.gpus)) for i in group}
    rows = []
    for i, g in enumerate(smi.gpus):
        # sysfs lists one card per physical GPU (a partition's own card has no attributes of its own)
        fs = side[physical[i]] if physical[i] < len(side) else None
        rows.append(GpuRow(i, g.product or (fs.product if fs else None) or "AMD GPU", g.bdf,
                           g.numa_node if g.numa_node is not None else (fs.numa_node if fs else None),
                           compute_partition=g.compute_partition or (fs.compute_partition if fs else None),
                           memory_partition=g.memory_partition or (fs.memory_partition if fs else None),
                           partition_id=g.partition_id, physical=physical[i]))
    ids = [g.index for g in smi.gpus]
    links = [["X" if a == b else amdsmi.label(smi.links.get((a, b))) for b in ids] for a in ids]
    return Topology("amd-smi", rows, links, notes=_partition_links(smi, physical))


def _partition_links(smi: amdsmi.AmdSmiTopo, physical: dict[int, int]) -> list[str]:
    """On a partitioned node, what amd-smi gives the pairs inside one GPU and across GPUs besides the label (every
    pair is XGMI, 1 hop, in CPX): KFD's weight and min-max bandwidth (MB/s), which tell the two apart."""
    group = {g.index: physical[i] for i, g in enumerate(smi.gpus)}
    kinds: tuple[set[str], set[str]] = (set(), set())
    for (a, b), link in smi.links.items():
        if a in group and b in group:
            kinds[group[a] != group[b]].add(f"weight {link.get('weight', '?')}, bandwidth {link.get('bandwidth', '?')}")
    if not kinds[0]:
        return []
    return [f"amd-smi, partitions of one GPU: {'; '.join(sorted(kinds[0]))}; of different GPUs: "
            f"{'; '.join(sorted(kinds[1])) or 'none'} (KFD's figures, MB/s; 0-0: none given)"]


def p2p_capable_from(topology: Topology) -> Callable[[int, int], bool]:
    """Whether two local GPUs can reach each other peer-to-peer: CUDA's answer when torch sees the
    GPUs, else the topology's link labels (NVLink/xGMI yes, PCIe unknown so no)."""
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.device_count() >= len(topology.gpus):
            return lambda a, b: a != b and bool(torch.cuda.can_device_access_peer(a, b))
    except Exception:  # noqa: BLE001 - no CUDA, a broken driver: use the labels
        pass
    links = topology.links
    return lambda a, b: a < len(links) and b < len(links) and links[a][b].startswith(("NV", "XGMI"))


def is_amd(topology: Topology | None) -> bool:
    """Whether ``topology`` holds AMD GPUs (read by amd-smi or from AMD sysfs)."""
    return topology is not None and topology.source in ("amd-smi", "amd-sysfs") and bool(topology.gpus)
