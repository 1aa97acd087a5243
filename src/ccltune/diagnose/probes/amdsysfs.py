"""AMD GPUs from sysfs: product, compute partition (SPX/DPX/QPX/CPX), memory partition
(NPS1/NPS4), NUMA node, and xGMI links from the KFD topology.

Read under ``root`` (see ``sysfs.sys_root``):
- ``sys/class/drm/cardN/device/{vendor,product_name,current_compute_partition,
  current_memory_partition,numa_node}`` (vendor 0x1002 is AMD);
- ``sys/class/kfd/kfd/topology/nodes/K/properties`` (GPU nodes have ``simd_count`` > 0; ``location_id``,
  ``domain``, ``unique_id``) and ``.../nodes/K/io_links/L/properties`` (``type 11`` is xGMI, ``node_to`` the peer
  node).

A partitioned GPU (CPX on MI300X: 8 partitions) is one KFD node per partition but one card with these files
(a partition's own card sits on an ``amdgpu_xcp`` platform device): 8 GPUs in CPX are 64 KFD GPU nodes and 8
cards. kfd_topology.c (gregkh/linux 213edb43) gives every partition its GPU's ``unique_id`` and
``location_id = pci_dev_id | partition`` (an earlier kernel put the partition in bits [31:28]); ``devices`` holds
the GPU nodes, which ``probes.amdsmi.physical_groups`` gathers into physical GPUs as it does amd-smi's entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ccltune.errors import UsageError
from ccltune.inputs import read_system_text

IOLINK_XGMI = 11


@dataclass
class AmdGpu:
    card: str
    product: str | None
    compute_partition: str | None
    memory_partition: str | None
    numa_node: int | None


@dataclass
class KfdGpu:
    """One KFD GPU node: a whole GPU, or one partition of it."""
    node: int
    location_id: int | None = None
    domain: int | None = None
    asic_serial: str | None = None  # KFD's unique_id as amd-smi prints it (0x%016X); shared by a GPU's partitions
    partition_id: int | None = None  # location_id bits [31:28], else [2:0]

    def pci_address(self) -> str | None:
        """The physical GPU's PCI address (the partition bits cleared), ``0000:05:00.0``."""
        if self.location_id is None:
            return None
        return f"{self.domain or 0:04x}:{(self.location_id >> 8) & 0xff:02x}:{(self.location_id >> 3) & 0x1f:02x}.0"

    @property
    def socket(self) -> str | None:
        """The physical GPU's ``domain:bus:device`` (``probes.amdsmi.physical_groups`` groups by it)."""
        address = self.pci_address()
        return address[:-2] if address else None


@dataclass
class AmdTopo:
    gpus: list[AmdGpu] = field(default_factory=list)  # cards with the attributes: one per physical GPU
    devices: list[KfdGpu] = field(default_factory=list)  # KFD GPU nodes: one per GPU or per partition
    xgmi: set[tuple[int, int]] = field(default_factory=set)  # indices into ``devices``, both orders
    notes: list[str] = field(default_factory=list)

    def partitioned(self) -> bool:
        """More KFD GPU nodes than cards: the GPUs are split into partitions (CPX, DPX, ...)."""
        return bool(self.gpus) and len(self.devices) > len(self.gpus)


def _read(path: Path) -> str | None:
    try:
        return read_system_text(path).strip() or None  # bounded; no device, no FIFO waited for
    except (OSError, UsageError):
        return None


def _properties(path: Path) -> dict[str, int]:
    out = {}
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def read_amd(root: Path) -> AmdTopo:
    topo = AmdTopo()
    drm = root / "sys/class/drm"
    try:
        cards = sorted((p for p in drm.iterdir() if re.fullmatch(r"card\d+", p.name)), key=lambda p: int(p.name[4:]))
    except OSError:
        return topo
    for card in cards:
        dev = card / "device"
        if (_read(dev / "vendor") or "").lower() != "0x1002":
            continue
        numa = _read(dev / "numa_node")
        topo.gpus.append(AmdGpu(card.name, _read(dev / "product_name"), _read(dev / "current_compute_partition"),
                                _read(dev / "current_memory_partition"),
                                int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None))
    topo.devices, topo.xgmi = _kfd(root / "sys/class/kfd/kfd/topology/nodes", topo.notes)
    return topo


def _device(node: int, props: dict[str, int]) -> KfdGpu:
    loc, serial = props.get("location_id"), props.get("unique_id")
    part = None if loc is None else (loc >> 28) & 0xF or loc & 0x7
    return KfdGpu(node, loc, props.get("domain"), f"0x{serial:016X}" if serial else None, part)


def _kfd(nodes_dir: Path, notes: list[str]) -> tuple[list[KfdGpu], set[tuple[int, int]]]:
    """The KFD GPU nodes in node order, and the xGMI pairs between them (indices into that list)."""
    try:
        nodes = sorted((p for p in nodes_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    except OSError:
        notes.append("no KFD topology: xGMI links unknown")
        return [], set()
    devices = []
    for n in nodes:
        props = _properties(n / "properties")
        if props.get("simd_count", 0) > 0:
            devices.append(_device(int(n.name), props))
    index = {d.node: i for i, d in enumerate(devices)}
    pairs = set()
    for node in index:
        try:
            links = list((nodes_dir / str(node) / "io_links").iterdir())
        except OSError:
            continue
        for link in links:
            props = _properties(link / "properties")
            peer = props.get("node_to")
            if props.get("type") == IOLINK_XGMI and peer in index:
                pairs.add((index[node], index[peer]))
    return devices, pairs
