"""``topo``: the GPUs of this host and how each pair is connected (NVML, nvidia-smi, amd-smi, AMD sysfs; or
saved amd-smi outputs), and the topology checks (``diagnose.checks.topo``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ccltune import environment
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.diagnosis import DiagnoseOptions, TopoResult, keep
from ccltune.commands.options import option, to_argv
from ccltune.diagnose.checks.topo import topo_findings
from ccltune.diagnose.findings import format_findings, overall
from ccltune.diagnose.probes import amdsmi, topo
from ccltune.diagnose.probes.sysfs import ROOT_ENV, sys_root
from ccltune.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class TopoOptions(DiagnoseOptions):
    """``ccltune topo``'s options: the folder standing for / (``sysfs_root``), or saved amd-smi outputs to
    read instead of this host (``from_amd_smi``, one path per file)."""

    sysfs_root: str | None = option(None, flag="--sysfs-root",
                                    help=f"folder standing for / when reading sys/ and proc/ (default: ${ROOT_ENV} or /)")
    from_amd_smi: tuple[str, ...] | None = option(None, flag="--from-amd-smi", repeat=True,
                                                  help="read saved `amd-smi topology --json` and/or `amd-smi static --asic --partition --numa "
                                                       "--json` output instead of asking this host (give the flag once per file)")

    def to_argv(self) -> list[str]:
        """The command line of these options (the CLI's parser reads it back to the same options)."""
        return to_argv(self, "topo")


def render(t: topo.Topology) -> str:
    """The GPU table and the link matrix as fixed-width text."""
    physical = t.physical_gpus()
    if not t.gpus:  # the check below says where it looked
        return "# no GPU found"
    lines = [f"# {len(t.gpus)} GPU{'s' if len(t.gpus) > 1 else ''} via {t.source}"
             + (f", driver {t.driver}" if t.driver else "")
             + (f" ({physical} physical GPUs, partitioned)" if physical < len(t.gpus) else "")]
    lines.append(f"# {'gpu':>3}  {'name':<24} {'bus_id':<13} {'numa':>4}  {'cpus':<12} {'nvlinks':>7} "
                 f"{'link_GBps':>9}  {'fabric':<10} {'mig':<4} partition")
    for g in t.gpus:
        part = f"{g.compute_partition}/{g.memory_partition}" if g.compute_partition or g.memory_partition else "-"
        if g.physical is not None and physical < len(t.gpus):
            part += f" (GPU{g.physical} part {g.partition_id if g.partition_id is not None else '?'})"
        lines.append(f"  {g.index:>3}  {g.name[:24]:<24} {g.bus_id or '-':<13} {_s(g.numa_node):>4}  "
                     f"{(g.cpu_affinity or '-')[:12]:<12} {_s(g.nvlinks):>7} {_s(g.nvlink_gbps):>9}  "
                     f"{g.fabric or '-':<10} {g.mig or '-':<4} {part}")
    lines.append("# links: NV<n> = n NVLink links, XGMI (+h: h hops), or PCIe path PIX < PXB < PHB < NODE < SYS"
                 " (PCIE from amd-smi); NOP2P = no P2P access")
    if all(c in ("X", "?") for row in t.links for c in row):
        lines.append("# links not reported (no amd-smi topology output)")
        lines += [f"# note: {n}" for n in t.notes]
        return "\n".join(lines)
    lines += _matrix(t, physical)
    lines += _limits(t.nvlink_limit_gbps)
    lines += [f"# note: {n}" for n in t.notes]
    return "\n".join(lines)


def _matrix(t: topo.Topology, physical: int) -> list[str]:
    """The link matrix; on a partitioned node one row per physical GPU, read from its first partition (every
    partition of a GPU has its GPU's links)."""
    heads = list(range(len(t.gpus)))
    lines = []
    if physical < len(t.gpus):
        first: dict[int | None, int] = {}
        for g in t.gpus:
            first.setdefault(g.physical, g.index)
        heads = list(first.values())
        lines.append(f"# links between the {len(heads)} physical GPUs (a partition has its GPU's links; "
                     f"partitions of one GPU: {_inside(t)})")
    width = max(6, *(len(t.links[i][j]) + 2 for i in heads for j in heads))
    lines.append("      " + "".join(f"{'GPU' + str(n):<{width}}" for n in range(len(heads))))
    for n, i in enumerate(heads):
        lines.append(f"{'GPU' + str(n):<6}" + "".join(f"{t.links[i][j]:<{width}}" for j in heads))
    return lines


def _limits(limits: list[list[float | None]]) -> list[str]:
    """The NVLink limit matrix (GB/s, one direction), its columns as wide as its widest figure."""
    if not any(v for row in limits for v in row):
        return []
    cells = [["-" if v is None else f"{v:.0f}" for v in row] for row in limits]
    width = max(6, *(len(c) + 2 for row in cells for c in row))
    lines = ["# NVLink limit per pair, one direction (GB/s): links x per-link speed",
             "      " + "".join(f"{'GPU' + str(n):<{width}}" for n in range(len(cells)))]
    lines += [f"{'GPU' + str(i):<6}" + "".join(f"{c:<{width}}" for c in row) for i, row in enumerate(cells)]
    return lines


def _inside(t: topo.Topology) -> str:
    """The link labels between partitions of one physical GPU, as one word list."""
    kinds = {t.links[a.index][b.index] for a in t.gpus for b in t.gpus if a.physical == b.physical and a != b}
    return ", ".join(sorted(kinds)) or "none"


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def run_topo(o: TopoOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> TopoResult:
    """Discover the topology (or read it from ``o.from_amd_smi``), say its table and checks to ``console``,
    store a topo run. ``command_line``: what the user typed, recorded with the run (default: the options' argv)."""
    check_outputs(o)
    if o.from_amd_smi:
        texts = amdsmi.read_saved(list(o.from_amd_smi))
        t = topo.from_amdsmi(amdsmi.parse(texts))
        if not t.gpus:
            raise UsageError(f"--from-amd-smi: no GPU in {', '.join(o.from_amd_smi)}")
    else:
        t = topo.discover(sys_root(o.sysfs_root))
    found = topo_findings(t)
    console.say(render(t))
    console.say(format_findings(found, title="ccltune topo checks"))
    record = {"status": overall(found), "topology": t.to_record(), "checks": [f.to_record() for f in found]}
    run_id = keep(o, "topo", record, found, env=environment.collect(argv=command_line or o.to_argv()),
                  artifacts={"topo.json": json.dumps(record, indent=2, default=str)},
                  summary={"status": record["status"], "gpus": len(t.gpus), "physical_gpus": t.physical_gpus(),
                           "source": t.source})
    return TopoResult(found, record, o.db, run_id, o.json_path, topology=t)
