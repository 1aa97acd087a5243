"""AMD GPUs from sysfs: product, compute partition (SPX/DPX/QPX/CPX), memory partition
(NPS1/NPS4), NUMA node, and xGMI links from the KFD topology.

Read under ``root`` (see ``sysfs.sys_root``):
- ``sys/class/drm/cardN/device/{vendor,product_name,current_compute_partition,
  current_memory_partition,numa_node}`` (vendor 0x1002 is AMD);
- ``sys/class/kfd/kfd/topology/nodes/K/properties`` (GPU nodes have ``simd_count`` > 0) and
  ``.../nodes/K/io_links/L/properties`` (``type 11`` is xGMI, ``node_to`` the peer node).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

IOLINK_XGMI = 11


@dataclass
class AmdGpu:
    card: str
    product: str | None
    compute_partition: str | None
    memory_partition: str | None
    numa_node: int | None


@dataclass
class AmdTopo:
    gpus: list[AmdGpu] = field(default_factory=list)
    xgmi: set[tuple[int, int]] = field(default_factory=set)  # GPU index pairs, both orders
    notes: list[str] = field(default_factory=list)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() or None
    except OSError:
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
    topo.xgmi = _xgmi(root / "sys/class/kfd/kfd/topology/nodes", topo.notes)
    return topo


def _xgmi(nodes_dir: Path, notes: list[str]) -> set[tuple[int, int]]:
    try:
        nodes = sorted((p for p in nodes_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    except OSError:
        notes.append("no KFD topology: xGMI links unknown")
        return set()
    gpu_nodes = [int(n.name) for n in nodes if _properties(n / "properties").get("simd_count", 0) > 0]
    index = {node: i for i, node in enumerate(gpu_nodes)}
    pairs = set()
    for node in gpu_nodes:
        try:
            links = list((nodes_dir / str(node) / "io_links").iterdir())
        except OSError:
            continue
        for link in links:
            props = _properties(link / "properties")
            peer = props.get("node_to")
            if props.get("type") == IOLINK_XGMI and peer in index:
                pairs.add((index[node], index[peer]))
    return pairs
