"""Findings on how the GPUs are connected (pure): GPUs found, uniform links, NVSwitch fabric,
MIG, AMD partitions, NUMA placement. The record comes from ``probes.topo``."""

from __future__ import annotations

from ccltune.diagnose.findings import Finding
from ccltune.diagnose.probes.topo import Topology
from ccltune.status import Verdict


def topo_findings(topo: Topology) -> list[Finding]:
    """GPUs found, uniform links, NVSwitch fabric, MIG, AMD partitions, NUMA placement."""
    if not topo.gpus:
        return [Finding("topo:gpus", Verdict.WAIVED, "no GPU found: " + "; ".join(topo.notes))]
    names = sorted({g.name for g in topo.gpus})
    physical = topo.physical_gpus()
    parts = "" if physical == len(topo.gpus) else f": {physical} physical GPUs, {_partitions(topo)}"
    out = [Finding("topo:gpus", Verdict.PASS, f"{len(topo.gpus)} x {', '.join(names)} ({topo.source}){parts}",
                   value=len(topo.gpus), data={"devices": len(topo.gpus), "physical_gpus": physical})]
    out.append(_links(topo))
    out.append(_state("topo:fabric", {g.index: g.fabric for g in topo.gpus}, good="completed", bad_status=Verdict.FAIL,
                      what="NVSwitch fabric", fix="start nvidia-fabricmanager and wait for the fabric to complete"))
    out.append(_state("topo:mig", {g.index: g.mig for g in topo.gpus}, good="off", bad_status=Verdict.WARN,
                      what="MIG mode", fix="NCCL cannot use P2P between MIG instances: nvidia-smi -mig 0"))
    if topo.source in ("amd-sysfs", "amd-smi"):
        modes = {g.index: f"{g.compute_partition}/{g.memory_partition}" if g.compute_partition or g.memory_partition
                 else None for g in topo.gpus}
        out.append(_state("topo:partition", modes, good="SPX/NPS1", bad_status=Verdict.WARN, what="compute/memory partition",
                          fix="AMD's RCCL criteria assume SPX/NPS1; compare figures only within one mode",
                          noun="devices"))
    numa = {g.index: g.numa_node for g in topo.gpus}
    if all(v is None for v in numa.values()):
        out.append(Finding("topo:numa", Verdict.WAIVED, "NUMA node of the GPUs unknown"))
    else:
        nodes = sorted({v for v in numa.values() if v is not None})
        out.append(Finding("topo:numa", Verdict.PASS, f"GPUs on NUMA node(s) {', '.join(map(str, nodes))}: "
                           + ", ".join(f"GPU{i}:{v}" for i, v in numa.items()), data={"numa": numa}))
    return out


def _links(topo: Topology) -> Finding:
    n = len(topo.gpus)
    pairs = {(i, j): topo.links[i][j] for i in range(n) for j in range(n) if i != j}
    if not pairs:
        return Finding("topo:links", Verdict.PASS, "one GPU: no links")
    kinds = sorted(set(pairs.values()))
    if kinds == ["?"]:
        return Finding("topo:links", Verdict.WAIVED, "links between the GPUs not reported (amd-smi static output without "
                       "its topology: add `amd-smi topology --json`)")
    fast = [k for k in kinds if k.startswith(("NV", "XGMI"))]
    if len(kinds) == 1:
        return Finding("topo:links", Verdict.PASS, f"every pair {kinds[0]}", data={"kinds": kinds})
    best = max(fast, key=_link_rank) if fast else None
    slow = sorted(p for p, k in pairs.items() if k != best and p[0] < p[1])
    shown = ", ".join(f"{i}-{j}:{pairs[(i, j)]}" for i, j in slow[:8])
    return Finding("topo:links", Verdict.WARN if best else Verdict.PASS,
                   f"links differ ({', '.join(kinds)}); " + (f"pairs below {best}: {shown}" if best else "PCIe only"),
                   "a ring through a slower pair runs at its speed; check cabling/NVLink errors (nvidia-smi nvlink -s)"
                   if best else "", data={"kinds": kinds, "slow_pairs": slow})


def _link_rank(label: str) -> int:
    """Higher is faster: NV<n> by link count; XGMI by fewer hops (XGMI > XGMI+2)."""
    if label.startswith("NV"):
        return int(label[2:]) if label[2:].isdigit() else 0
    hops = label.partition("+")[2]
    return -int(hops) if hops.isdigit() else -1


def _partitions(topo: Topology) -> str:
    """'8 devices each (CPX/NPS4)': how the physical GPUs are split, for the topo:gpus line."""
    sizes = sorted({sum(1 for g in topo.gpus if g.physical == p) for p in {g.physical for g in topo.gpus}})
    modes = sorted({f"{g.compute_partition}/{g.memory_partition}" for g in topo.gpus
                    if g.compute_partition or g.memory_partition})
    return (f"{'/'.join(map(str, sizes))} devices each" + (f" ({', '.join(modes)})" if modes else ""))


def _state(name: str, states: dict[int, str | None], *, good: str, bad_status: Verdict, what: str, fix: str,
           noun: str = "GPUs") -> Finding:
    known = {i: s for i, s in states.items() if s is not None}
    if not known:
        return Finding(name, Verdict.WAIVED, f"{what} not reported for these GPUs")
    bad = {i: s for i, s in known.items() if s != good}
    if not bad:
        return Finding(name, Verdict.PASS, f"{what} {good} on {len(known)} {noun}")
    if len(bad) > 8 and len(set(bad.values())) == 1:  # a partitioned node: one mode on every device, said once
        evidence = f"{what} {next(iter(bad.values()))} on {len(bad)} of {len(known)} {noun}"
    else:
        evidence = f"{what}: " + ", ".join(f"GPU{i} {s}" for i, s in bad.items())
    return Finding(name, bad_status, evidence, fix, data={"states": known})
