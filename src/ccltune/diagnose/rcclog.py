"""RCCL-only facts of an INFO log and the AMD checks built on them (pure).

The lines NCCL and RCCL share (version, transports, rings, trees, channels) are read by
``ncclog``; this module reads what only RCCL prints (formats from ROCm/rccl 0cbce2a7, 2.21.5):

- ``... - Init COMPLETE`` ends with ``on core N`` in RCCL: the CPU core the rank's thread ran on;
  with ``cudaDev`` and ``busId`` it places each rank against its GPU's NUMA node;
- ``MSCCL: Initialization finished, localSize N`` (MSCCL on), ``MSCCL++: Enabled! Msg size
  threshold=N`` (MSCCL++ on), ``MSCCL++: Cannot enable ...`` WARN lines (off, and why);
- ``RCCL_X set by environment to V.`` for RCCL's own parameters (``src/misc/param.cc``).

Checks (each a :class:`Finding`): what RCCL_LL128_FORCE_ENABLE / RCCL_MSCCL_ENABLE /
RCCL_MSCCLPP_ENABLE and RCCL_MSCCLPP_THRESHOLD change; NCCL_MIN_NCHANNELS when a job uses
fewer than all GPUs of an 8-GPU xGMI node; each rank's core against its GPU's NUMA node;
HSA_FORCE_FINE_GRAIN_PCIE=1 where AMD GPUs reach each other over PCIe only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ccltune.diagnose.findings import Finding

_COMPLETE = re.compile(r"rank (?P<rank>\d+) nranks (?P<n>\d+) cudaDev (?P<dev>\d+).*?busId (?P<bus>[0-9a-fA-F]+)"
                       r".*?on core (?P<core>\d+) - Init COMPLETE")
_MSCCL_ON = re.compile(r"MSCCL: Initialization finished")
_MSCCLPP_ON = re.compile(r"MSCCL\+\+: Enabled! Msg size threshold=(?P<t>\d+)")
_MSCCLPP_OFF = re.compile(r"MSCCL\+\+: (?P<why>Cannot enable .*|Feature not enabled.*)")
_PARAM = re.compile(r"NCCL INFO (?P<var>RCCL_[A-Z0-9_]+) set by environment to (?P<val>-?\d+)\.?\s*$")
_LOCAL = re.compile(r"comm 0x[0-9a-fA-F]+ rank \d+ nRanks \d+ nNodes \d+ localRanks (?P<local>\d+)")

MIN_CHANNELS_ADVICE = 32  # the largest count `ccltune doctor --nproc N` measures (doctor.CHANNEL_VARIANTS)


@dataclass
class RcclFacts:
    cores: dict[int, int] = field(default_factory=dict)  # rank -> CPU core at init
    devices: dict[int, int] = field(default_factory=dict)  # rank -> cudaDev (HIP device)
    bus_ids: dict[int, str] = field(default_factory=dict)  # rank -> busId as RCCL prints it (hex)
    msccl: bool | None = None
    mscclpp: bool | None = None
    mscclpp_threshold: int | None = None
    mscclpp_off_reason: str | None = None
    params: dict[str, int] = field(default_factory=dict)  # RCCL_* set by environment
    local_ranks: int | None = None


def parse(text: str) -> RcclFacts:
    facts = RcclFacts()
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        if m := _COMPLETE.search(line):
            rank = int(m.group("rank"))
            facts.cores[rank], facts.devices[rank], facts.bus_ids[rank] = (
                int(m.group("core")), int(m.group("dev")), m.group("bus").lower())
        elif _MSCCL_ON.search(line):
            facts.msccl = True
        elif m := _MSCCLPP_ON.search(line):
            facts.mscclpp, facts.mscclpp_threshold = True, int(m.group("t"))
        elif m := _MSCCLPP_OFF.search(line):
            facts.mscclpp, facts.mscclpp_off_reason = False, m.group("why")
        elif m := _PARAM.search(line):
            facts.params[m.group("var")] = int(m.group("val"))
        elif (m := _LOCAL.search(line)) and facts.local_ranks is None:
            facts.local_ranks = int(m.group("local"))
    return facts


def bus_to_int(bdf: str) -> int | None:
    """``0000:05:00.0`` -> 0x5000, RCCL's busId integer (hex digits of the address, ':' and '.' skipped)."""
    digits = bdf.replace(":", "").replace(".", "")
    try:
        return int(digits, 16)
    except ValueError:
        return None


def node_cpus(root: Path) -> dict[int, set[int]]:
    """NUMA node -> its CPUs, from ``sys/devices/system/node/nodeN/cpulist`` under ``root``."""
    out: dict[int, set[int]] = {}
    base = root / "sys/devices/system/node"
    try:
        nodes = [p for p in base.iterdir() if re.fullmatch(r"node\d+", p.name)]
    except OSError:
        return out
    for p in nodes:
        try:
            text = (p / "cpulist").read_text().strip()
        except OSError:
            continue
        cpus: set[int] = set()
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            if lo.isdigit() and (not hi or hi.isdigit()):
                cpus.update(range(int(lo), int(hi or lo) + 1))
        out[int(p.name[4:])] = cpus
    return out


def feature_findings(facts: RcclFacts) -> list[Finding]:
    """What RCCL's MSCCL, MSCCL++ and LL128 switches did in this run, and what each changes."""
    out = []
    ll128 = facts.params.get("RCCL_LL128_FORCE_ENABLE")
    if ll128:
        out.append(Finding("rccl:ll128", "WARN", "RCCL_LL128_FORCE_ENABLE=1: the LL128 protocol is forced on "
                           "(RCCL keeps it off by default on AMD except gfx90a with a topology model that enables it)",
                           "keep it only where a measured sweep shows LL128 winning (ccltune sweep on RCCL)",
                           data={"RCCL_LL128_FORCE_ENABLE": ll128}))
    else:
        out.append(Finding("rccl:ll128", "PASS", "LL128 as RCCL decides (RCCL_LL128_FORCE_ENABLE not set): off on "
                           "most AMD GPUs, so tuner rules naming LL128 are ignored unless it is forced"))
    enable = facts.params.get("RCCL_MSCCL_ENABLE")
    state = {True: "on (MSCCL initialized)", False: "off", None: "not reported"}[facts.msccl]
    out.append(Finding("rccl:msccl", "PASS" if enable != 0 or not facts.msccl else "WARN",
                       f"MSCCL {state}" + (f", RCCL_MSCCL_ENABLE={enable}" if enable is not None else "")
                       + ": collectives an MSCCL XML algorithm matches run MSCCL's kernels, not RCCL's ring/tree, "
                       "and never reach a tuner plugin", data={"msccl": facts.msccl, "RCCL_MSCCL_ENABLE": enable}))
    threshold = facts.mscclpp_threshold or facts.params.get("RCCL_MSCCLPP_THRESHOLD")
    if facts.mscclpp:
        out.append(Finding("rccl:mscclpp", "PASS", f"MSCCL++ on, threshold {threshold} bytes: graph-captured "
                           f"all_reduce up to {threshold} B (all_gather: bytes x ranks) runs MSCCL++ kernels and "
                           "bypasses RCCL's algorithms and the tuner plugin; larger sizes go to RCCL",
                           data={"threshold_bytes": threshold}))
    else:
        why = f" ({facts.mscclpp_off_reason})" if facts.mscclpp_off_reason else ""
        out.append(Finding("rccl:mscclpp", "PASS", f"MSCCL++ {'off' if facts.mscclpp is False else 'not reported'}"
                           f"{why}: every size goes through RCCL (and a tuner plugin)", data={"mscclpp": facts.mscclpp}))
    return out


def min_channels_finding(used: int, node_gpus: int, xgmi_node: bool, environ: Mapping[str, str],
                         coll_channels: int | None = None) -> Finding:
    """NCCL_MIN_NCHANNELS when a job uses fewer than all GPUs of an 8-GPU xGMI node."""
    name = "rccl:min_nchannels"
    if not xgmi_node or node_gpus < 8:
        return Finding(name, "WAIVED", f"not an 8-GPU xGMI node ({node_gpus} GPUs{'' if xgmi_node else ', no xGMI'})")
    if used >= node_gpus:
        return Finding(name, "PASS", f"all {node_gpus} GPUs used: RCCL's channel count is tuned for that")
    set_to = environ.get("NCCL_MIN_NCHANNELS")
    chosen = f"; RCCL chose {coll_channels} channels" if coll_channels else ""
    if set_to:
        return Finding(name, "PASS", f"{used} of {node_gpus} GPUs, NCCL_MIN_NCHANNELS={set_to}{chosen}",
                       data={"NCCL_MIN_NCHANNELS": set_to})
    return Finding(name, "WARN", f"{used} of {node_gpus} xGMI GPUs used and NCCL_MIN_NCHANNELS not set{chosen}: "
                   "with fewer GPUs each uses fewer xGMI links and RCCL's default channel count leaves bandwidth unused",
                   f"export NCCL_MIN_NCHANNELS={MIN_CHANNELS_ADVICE}; measure the gain with "
                   f"`ccltune doctor --nproc {used}` (it times 8, 16, 24 and 32 channels)",
                   data={"used": used, "node_gpus": node_gpus, "recommended": MIN_CHANNELS_ADVICE})


def affinity_finding(facts: RcclFacts, gpu_numa: Callable[[int, str], int | None],
                     cpus_of_node: Mapping[int, set[int]]) -> Finding:
    """Each rank's init core against its GPU's NUMA node. ``gpu_numa(dev, bus)`` -> node or None."""
    name = "rccl:affinity"
    if not facts.cores:
        return Finding(name, "WAIVED", "no 'on core N - Init COMPLETE' lines (RCCL prints them at NCCL_DEBUG=INFO)")
    if not cpus_of_node:
        return Finding(name, "WAIVED", "CPU lists of the NUMA nodes unknown (sys/devices/system/node)")
    bad, checked = [], 0
    for rank, core in sorted(facts.cores.items()):
        want = gpu_numa(facts.devices[rank], facts.bus_ids[rank])
        have = next((n for n, cpus in cpus_of_node.items() if core in cpus), None)
        if want is None or have is None:
            continue
        checked += 1
        if want != have:
            bad.append({"rank": rank, "gpu": facts.devices[rank], "core": core, "core_node": have, "gpu_node": want})
    if not checked:
        return Finding(name, "WAIVED", "NUMA node of the GPUs unknown")
    if not bad:
        return Finding(name, "PASS", f"{checked} ranks run on cores of their GPU's NUMA node")
    shown = ", ".join(f"rank {b['rank']} (GPU {b['gpu']}, NUMA {b['gpu_node']}) on core {b['core']} (NUMA "
                      f"{b['core_node']})" for b in bad[:4])
    return Finding(name, "WARN", f"{len(bad)} of {checked} ranks run away from their GPU's NUMA node: {shown}",
                   "bind each rank to its GPU's NUMA node: mpirun --bind-to numa, or numactl --cpunodebind=N "
                   "--membind=N per rank", data={"misplaced": bad})


def fine_grain_finding(amd_pcie_only: bool, environ: Mapping[str, str]) -> Finding:
    """HSA_FORCE_FINE_GRAIN_PCIE=1 where AMD GPUs reach each other over PCIe only."""
    name = "rccl:fine_grain_pcie"
    value = environ.get("HSA_FORCE_FINE_GRAIN_PCIE")
    if not amd_pcie_only:
        return Finding(name, "WAIVED", "no PCIe-only AMD GPU pair (xGMI or no AMD GPU)")
    if value == "1":
        return Finding(name, "PASS", "PCIe-connected AMD GPUs and HSA_FORCE_FINE_GRAIN_PCIE=1")
    return Finding(name, "WARN", f"AMD GPUs connected over PCIe only and HSA_FORCE_FINE_GRAIN_PCIE="
                   f"{value if value is not None else 'unset'}: RCCL's peer transfers over PCIe need fine-grained "
                   "host-visible memory", "export HSA_FORCE_FINE_GRAIN_PCIE=1", data={"value": value})
