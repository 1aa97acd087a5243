"""AMD GPUs from ``amd-smi``'s JSON: ``amd-smi topology --json`` (per pair link type, hop count,
weight, P2P access) and ``amd-smi static --asic --partition --numa --json`` (product, compute and
memory partition, NUMA node). Parse (pure) and run (when ``amd-smi`` is on PATH).

Shapes, from ROCm/amdsmi ``amdsmi_cli/amdsmi_commands.py`` (``topology``, ``static``) and
``amdsmi_logger.py`` (``_print_json_output``: a JSON list, one object per GPU):

- topology: ``[{"gpu": 0, "bdf": "0000:05:00.0", "links": [{"gpu": 1, "bdf": ..., "weight": 15,
  "link_status": "ENABLED", "link_type": "XGMI", "num_hops": 1, "bandwidth": "50000-50000",
  ...}, ...]}, ...]``; ``link_type`` is SELF, PCIE, XGMI, N/A or UNKNOWN.
- static: ``[{"gpu": 0, "asic": {"market_name": ...}, "partition": {"compute_partition": "SPX",
  "memory_partition": "NPS1", "partition_id": 0}, "numa": {"node": 0, "affinity": 0}}, ...]``.

A partitioned GPU is one entry per partition: an 8-GPU MI300X node in CPX mode lists 64, each physical GPU's
8 in a row with ``partition_id`` 0..7 (rocm_smi sorts devices by BDF with the partition bits cleared, and
reads a secondary partition's modes from its primary card's sysfs); ``physical_groups`` gathers them. In the
topology, a partition's BDF is its GPU's with the partition in the function (``0000:05:00.3``; ``.0`` on kernels
that put it in bits [31:28]), and every pair of partitions is ``XGMI``, 1 hop, as KFD links them: of one GPU
weight 13, bandwidth ``819200-819200``; of two GPUs weight 41, ``0-0`` (``tests/fixtures/amd-smi/cpx_topology.py``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ccltune.errors import UsageError
from ccltune.inputs import MAX_GPUS, load_json, read_input_text

TOPOLOGY_ARGS = ("topology", "--json")
STATIC_ARGS = ("static", "--asic", "--partition", "--numa", "--json")


@dataclass
class AmdSmiGpu:
    index: int
    bdf: str | None = None
    product: str | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    partition_id: int | None = None  # which partition of its physical GPU (0..7 in CPX on MI300X)
    asic_serial: str | None = None  # the same on every partition of one physical GPU
    numa_node: int | None = None

    @property
    def socket(self) -> str | None:
        """``domain:bus:device`` of the BDF: amd-smi's socket id, shared by a physical GPU's partitions."""
        return pci_socket(self.bdf)


@dataclass
class AmdSmiTopo:
    gpus: list[AmdSmiGpu] = field(default_factory=list)
    links: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)  # (src, dst) -> link object


def _doc(text: str, where: str) -> list[dict[str, Any]]:
    doc = load_json(text, where, what="not amd-smi JSON")
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not all(isinstance(e, dict) and isinstance(e.get("gpu"), int) for e in doc):
        raise UsageError(f"{where}: amd-smi --json output is a list of objects with an integer 'gpu'")
    if len(doc) > MAX_GPUS or not all(0 <= e["gpu"] < MAX_GPUS for e in doc):  # topology work is n^2 in GPUs
        raise UsageError(f"{where}: {len(doc)} entries, 'gpu' {max(e['gpu'] for e in doc)}: more than the "
                         f"{MAX_GPUS} GPUs of one host ccltune reads (or a negative index)")
    return doc


def _object(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a missing or mistyped section)."""
    return value if isinstance(value, dict) else {}


def parse(texts: list[tuple[str, str]]) -> AmdSmiTopo:
    """(text, where) pairs of topology and/or static JSON (told apart by their keys), merged per GPU."""
    topo = AmdSmiTopo()
    gpus: dict[int, AmdSmiGpu] = {}
    for text, where in texts:
        entries = _doc(text, where)
        kinds = {"links" in e for e in entries}
        if kinds == {True}:
            for e in entries:
                g = gpus.setdefault(e["gpu"], AmdSmiGpu(e["gpu"]))
                g.bdf = g.bdf or e.get("bdf")
                for link in e["links"] if isinstance(e["links"], list) else []:
                    if isinstance(link, dict) and isinstance(link.get("gpu"), int) and link["gpu"] != e["gpu"]:
                        topo.links[(e["gpu"], link["gpu"])] = link
        elif any(k in e for e in entries for k in ("partition", "asic", "numa")):
            for e in entries:
                g = gpus.setdefault(e["gpu"], AmdSmiGpu(e["gpu"]))
                part = _object(e.get("partition"))
                g.compute_partition = _text(part.get("compute_partition")) or g.compute_partition
                g.memory_partition = _text(part.get("memory_partition")) or g.memory_partition
                pid = part.get("partition_id")
                g.partition_id = pid if isinstance(pid, int) and not isinstance(pid, bool) else g.partition_id
                asic = _object(e.get("asic"))
                g.product = _text(asic.get("market_name")) or g.product
                g.asic_serial = _text(asic.get("asic_serial")) or g.asic_serial
                node = _object(e.get("numa")).get("node")
                g.numa_node = node if isinstance(node, int) and node >= 0 else g.numa_node
        else:
            raise UsageError(f"{where}: neither 'amd-smi topology --json' (objects with 'links') nor "
                             "'amd-smi static --partition --json' output (objects with 'partition')")
    topo.gpus = [gpus[i] for i in sorted(gpus)]
    return topo


class Partition(Protocol):
    """What ``physical_groups`` reads of a device: amd-smi's entry, or a KFD node (``amdsysfs.KfdGpu``)."""
    @property
    def asic_serial(self) -> str | None: ...
    @property
    def partition_id(self) -> int | None: ...
    @property
    def socket(self) -> str | None: ...


def pci_socket(bdf: str | None) -> str | None:
    """``0000:05:00.3`` -> ``0000:05:00``: the PCI device without the function, which amd-smi takes for the
    physical GPU (``amd_smi_system.cc`` ``get_gpu_socket_id``)."""
    head, dot, _ = (bdf or "").strip().lower().rpartition(".")
    return head if dot and head.count(":") == 2 else None


def physical_groups(gpus: Sequence[Partition]) -> list[list[int]]:
    """The indices of ``gpus`` grouped by physical GPU, in order: entries sharing an ASIC serial or a PCI socket
    (``domain:bus:device``), else a new group at every ``partition_id`` 0 (or unknown), each physical GPU's
    partitions being listed in a row."""
    groups: list[list[int]] = []
    group_of: dict[tuple[str, str], int] = {}
    for i, g in enumerate(gpus):
        keys = [(kind, key) for kind, key in (("serial", g.asic_serial), ("socket", g.socket)) if key is not None]
        known = next((group_of[k] for k in keys if k in group_of), None)
        if known is None and not keys and groups and g.partition_id and not _keyed(gpus[groups[-1][-1]]):
            groups[-1].append(i)
            continue
        if known is None:
            known = len(groups)
            groups.append([])
        groups[known].append(i)
        for k in keys:
            group_of.setdefault(k, known)
    return groups


def _keyed(g: Partition) -> bool:
    return g.asic_serial is not None or g.socket is not None


def label(link: dict[str, Any] | None) -> str:
    """One matrix cell: ``XGMI`` / ``PCIE`` with the hop count when it is known and not 1 (``XGMI+2``)."""
    if link is None:
        return "?"
    kind = str(link.get("link_type") or "?").upper()
    if link.get("link_status") == "DISABLED":
        return "NOP2P"
    hops = link.get("num_hops")
    return f"{kind}+{hops}" if isinstance(hops, int) and hops > 1 else kind


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "", "N/A") else None


def run() -> list[tuple[str, str]] | None:
    """The two JSON outputs of the local ``amd-smi`` (text, command), or None when it is absent or fails."""
    exe = shutil.which("amd-smi")
    if exe is None:
        return None
    out = []
    for args in (TOPOLOGY_ARGS, STATIC_ARGS):
        try:
            done = subprocess.run([exe, *args], capture_output=True, text=True, errors="replace", timeout=60,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0 or not done.stdout.strip():
            return None
        out.append((done.stdout, "amd-smi " + " ".join(args)))
    return out


def read_saved(paths: list[str]) -> list[tuple[str, str]]:
    """(text, path) of each saved amd-smi output named with --from-amd-smi."""
    out = []
    for path in paths:
        out.append((read_input_text(path, "--from-amd-smi"), path))  # no device, no FIFO, 64 MiB at most
    return out
