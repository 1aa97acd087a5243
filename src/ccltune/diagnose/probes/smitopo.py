"""``nvidia-smi topo -m``: parse its matrix (pure) and run it (the fallback when NVML is absent).

The table is tab-separated; a row's cells line up with the header once empty cells are
dropped (nvidia-smi pads with double tabs)::

            GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    SYS     0-63            0               N/A
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class SmiTopo:
    gpus: list[str] = field(default_factory=list)  # "GPU0", ...
    links: list[list[str]] = field(default_factory=list)  # links[i][j]: "X", "NV18", "PIX", ...
    cpu_affinity: list[str | None] = field(default_factory=list)
    numa_affinity: list[str | None] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)


def parse_topo_matrix(text: str) -> SmiTopo:
    """Parse ``nvidia-smi topo -m``. Returns an empty SmiTopo when there is no GPU row."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header_at is None:
        return SmiTopo()
    header = [c.strip() for c in lines[header_at].split("\t") if c.strip()]
    topo = SmiTopo()
    for line in lines[header_at + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if len(cells) < 2:
            continue
        row = dict(zip(header, cells[1:]))
        if cells[0].startswith("GPU"):
            topo.gpus.append(cells[0])
            topo.cpu_affinity.append(row.get("CPU Affinity"))
            topo.numa_affinity.append(row.get("NUMA Affinity"))
            topo.links.append([row.get(f"GPU{j}", "?") for j in range(sum(h.startswith("GPU") and h[3:].isdigit()
                                                                             for h in header))])
        elif cells[0].startswith("NIC"):
            topo.nics.append(cells[0])
    return topo


def run_topo_matrix() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, errors="replace",
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None
