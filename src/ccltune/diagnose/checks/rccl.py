"""The AMD checks of an RCCL run (pure but for ``node_cpus``' read of sysfs).

What RCCL_LL128_FORCE_ENABLE / RCCL_MSCCL_ENABLE / RCCL_MSCCLPP_ENABLE and RCCL_MSCCLPP_THRESHOLD
change; NCCL_MIN_NCHANNELS when a job uses fewer than all GPUs of an 8-GPU xGMI node; each rank's
core against its GPU's NUMA node; HSA_FORCE_FINE_GRAIN_PCIE=1 where AMD GPUs reach each other
over PCIe only (from the job's environment, or from the WARN RCCL prints at init where the build has it); RCCL's
NUMA auto balancing WARN. The facts come from ``parsers.rcclog`` (what only RCCL prints) and
``parsers.ncclog`` (what NCCL and RCCL share).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ccltune.diagnose.findings import Finding
from ccltune.diagnose.parsers import rcclog
from ccltune.diagnose.parsers.ncclog import NcclLog
from ccltune.diagnose.parsers.rcclog import RcclFacts
from ccltune.diagnose.probes import topo
from ccltune.diagnose.probes.sysfs import node_cpus
from ccltune.status import Verdict

MIN_CHANNELS_ADVICE = 32  # the largest count `ccltune doctor --nproc N` measures (checks.transport.CHANNEL_VARIANTS)
# ROCm/rccl src/init.cc ncclInit: the HSA_FORCE_FINE_GRAIN_PCIE WARN came in 2.16 (rocm-5.6.0, 3dcebc7c: on every
# node, whatever its links); from 2.17 (rocm-5.7.0) it is compiled only without HIP_UNCACHED_MEMORY, which CMake
# defines from HIP 5.7.31920 on (0cbce2a7, 2.21.5: CMakeLists.txt), so ROCm 5.7 and later builds never print it.
FINE_GRAIN_WARN_FROM = (2, 16)
FINE_GRAIN_IFNDEF_FROM = (2, 17)
UNCACHED_HIP = (5, 7, 31920)
FINE_GRAIN_FIX = "export HSA_FORCE_FINE_GRAIN_PCIE=1"


def version_tuple(text: str | None) -> tuple[int, ...]:
    """``2.21.5-HEAD:0cbce2a`` -> (2, 21, 5); ``6.2.41134-65d174c3e`` -> (6, 2, 41134); () when there is none."""
    m = re.match(r"\d+(?:\.\d+)*", text or "")
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def checks_fine_grain(version: str | None, hip: str | None) -> bool | None:
    """Whether this RCCL build warns at init when HSA_FORCE_FINE_GRAIN_PCIE is not 1 (None: unknown)."""
    v, h = version_tuple(version), version_tuple(hip)
    if not v:
        return None
    if v < FINE_GRAIN_IFNDEF_FROM:
        return v >= FINE_GRAIN_WARN_FROM
    return h < UNCACHED_HIP if h else None


# The gfx architecture of the GPU models doctor meets (AMD's product pages); RCCL's LL128 rule depends on it.
GFX_OF_MODEL = (("MI355", "gfx950"), ("MI350", "gfx950"), ("MI325", "gfx942"), ("MI300", "gfx942"),
                ("MI250", "gfx90a"), ("MI210", "gfx90a"), ("MI100", "gfx908"))
_ARCH_IN_LOG = re.compile(r"NCCL WARN MSCCL\+\+: Cannot enable MSCCL\+\+ on (gfx[0-9a-f]+)")  # init.cc, gcnArchName
# RCCL's LL128 rule changed after 2.21: at 2.21.5 (0cbce2a7 src/graph/tuning.cc, ncclTopoTuneModel) NCCL_PROTO unset
# leaves LL128 on only on gfx90a whose topology enables it (RCCL_LL128_FORCE_ENABLE=1 does, init.cc), and an explicit
# NCCL_PROTO that enables LL128 skips that check; at ROCm/rocm-systems projects/rccl 03a89144 the check applies to
# every enabled LL128 and accepts gfx90a, gfx942 and gfx950. Both need a build with ENABLE_LL128 and xGMI links.
LL128_OLD_RULE_UNTIL = (2, 21)
LL128_ARCHS_OLD, LL128_ARCHS_NEW = ("gfx90a",), ("gfx90a", "gfx942", "gfx950")


def gfx_arch(text: str, topology: topo.Topology | None) -> str | None:
    """The GPUs' gfx architecture: from the log (RCCL names it only in its MSCCL++ WARN), else from the node's GPU model."""
    if m := _ARCH_IN_LOG.search(text):
        return m.group(1)
    names = {g.name.upper() for g in (topology.gpus if topology else [])}
    found = {arch for key, arch in GFX_OF_MODEL for name in names if key in name}
    return found.pop() if len(found) == 1 else None


def proto_enables_ll128(proto: str | None) -> bool | None:
    """Whether NCCL_PROTO explicitly enables LL128 (True), disables it (False), or is unset (None). A list
    starting with ^ names what is off; ``allreduce:LL128`` prefixes (newer RCCL) count for any function."""
    if proto is None:
        return None
    enabled = False
    for part in proto.split(";"):
        elems = part.split(":")[-1].strip()
        negate = elems.startswith("^")
        named = "ll128" in {e.strip().lower() for e in elems.lstrip("^").split(",")}
        enabled = enabled or (named != negate)
    return enabled


def ll128_finding(facts: RcclFacts, log: NcclLog, arch: str | None) -> Finding:
    """What RCCL_LL128_FORCE_ENABLE and NCCL_PROTO do to LL128 for this RCCL version and gfx architecture."""
    name, forced = "rccl:ll128", bool(facts.params.get("RCCL_LL128_FORCE_ENABLE"))
    proto, version = log.env.get("NCCL_PROTO"), version_tuple(log.version)
    explicit = proto_enables_ll128(proto)
    old = bool(version) and version[:2] <= LL128_OLD_RULE_UNTIL
    archs = LL128_ARCHS_OLD if old else LL128_ARCHS_NEW
    lib = f"RCCL {log.version}" if log.version else "RCCL (version not in the log)"
    on_arch = None if arch is None else arch in archs
    where = f"{arch or 'gfx architecture unknown'}"
    data = {"RCCL_LL128_FORCE_ENABLE": facts.params.get("RCCL_LL128_FORCE_ENABLE"), "NCCL_PROTO": proto,
            "arch": arch, "version": log.version}
    rule = (f"{lib} enables LL128 only on {'/'.join(archs)} with xGMI links, in a build with ENABLE_LL128, when "
            "the topology model or RCCL_LL128_FORCE_ENABLE=1 allows it")
    if explicit is False:
        return Finding(name, Verdict.PASS, f"NCCL_PROTO={proto} leaves LL128 off ({where})", data=data)
    if explicit and old:
        return Finding(name, Verdict.WARN, f"NCCL_PROTO={proto} enables LL128 on any GPU in {lib} (its gfx90a check "
                       f"applies only when NCCL_PROTO is unset; {where})", "keep it only where a measured sweep shows "
                       "LL128 winning (ccltune sweep on RCCL)", data=data)
    explicit_note = (f"; NCCL_PROTO={proto} does not bypass that in this version" if explicit else "")
    if forced and on_arch is False:
        return Finding(name, Verdict.WARN, f"RCCL_LL128_FORCE_ENABLE=1 has no effect on {arch}: {rule}{explicit_note}; "
                       "tuner rules naming LL128 are ignored", "drop RCCL_LL128_FORCE_ENABLE" + (
                           ", or set NCCL_PROTO to include LL128 (this version then enables it on any GPU)"
                           if old else ""), data=data)
    if forced:
        maybe = "" if on_arch else f" if the GPUs are {'/'.join(archs)}"
        return Finding(name, Verdict.WARN, f"RCCL_LL128_FORCE_ENABLE=1: LL128 is forced on{maybe} ({where}; {rule})"
                       f"{explicit_note}", "keep it only where a measured sweep shows LL128 winning "
                       "(ccltune sweep on RCCL)", data=data)
    return Finding(name, Verdict.PASS, f"LL128 as RCCL decides (RCCL_LL128_FORCE_ENABLE not set, {where}): {rule}"
                   f"{explicit_note}; tuner rules naming LL128 are ignored where it is off", data=data)


def feature_findings(facts: RcclFacts, log: NcclLog | None = None, arch: str | None = None) -> list[Finding]:
    """What RCCL's MSCCL, MSCCL++ and LL128 switches did in this run, and what each changes."""
    out = [ll128_finding(facts, log or NcclLog(), arch)]
    enable = facts.params.get("RCCL_MSCCL_ENABLE")
    state = {True: "on (MSCCL initialized)", False: "off", None: "not reported"}[facts.msccl]
    out.append(Finding("rccl:msccl", Verdict.PASS if enable != 0 or not facts.msccl else Verdict.WARN,
                       f"MSCCL {state}" + (f", RCCL_MSCCL_ENABLE={enable}" if enable is not None else "")
                       + ": collectives an MSCCL XML algorithm matches run MSCCL's kernels, not RCCL's ring/tree, "
                       "and never reach a tuner plugin", data={"msccl": facts.msccl, "RCCL_MSCCL_ENABLE": enable}))
    threshold = facts.mscclpp_threshold or facts.params.get("RCCL_MSCCLPP_THRESHOLD")
    if facts.mscclpp:
        out.append(Finding("rccl:mscclpp", Verdict.PASS, f"MSCCL++ on, threshold {threshold} bytes: graph-captured "
                           f"all_reduce up to {threshold} B (all_gather: bytes x ranks) runs MSCCL++ kernels and "
                           "bypasses RCCL's algorithms and the tuner plugin; larger sizes go to RCCL",
                           data={"threshold_bytes": threshold}))
    else:
        why = f" ({facts.mscclpp_off_reason})" if facts.mscclpp_off_reason else ""
        out.append(Finding("rccl:mscclpp", Verdict.PASS, f"MSCCL++ {'off' if facts.mscclpp is False else 'not reported'}"
                           f"{why}: every size goes through RCCL (and a tuner plugin)", data={"mscclpp": facts.mscclpp}))
    return out


def min_channels_finding(used: int, node_gpus: int, xgmi_node: bool, environ: Mapping[str, str],
                         coll_channels: int | None = None) -> Finding:
    """NCCL_MIN_NCHANNELS when a job uses fewer than all GPUs of an 8-GPU xGMI node."""
    name = "rccl:min_nchannels"
    if not xgmi_node or node_gpus < 8:
        return Finding(name, Verdict.WAIVED, f"not an 8-GPU xGMI node ({node_gpus} GPUs{'' if xgmi_node else ', no xGMI'})")
    if used >= node_gpus:
        return Finding(name, Verdict.PASS, f"all {node_gpus} GPUs used: RCCL's channel count is tuned for that")
    set_to = environ.get("NCCL_MIN_NCHANNELS")
    chosen = f"; RCCL chose {coll_channels} channels" if coll_channels else ""
    if set_to:
        return Finding(name, Verdict.PASS, f"{used} of {node_gpus} GPUs, NCCL_MIN_NCHANNELS={set_to}{chosen}",
                       data={"NCCL_MIN_NCHANNELS": set_to})
    return Finding(name, Verdict.WARN, f"{used} of {node_gpus} xGMI GPUs used and NCCL_MIN_NCHANNELS not set{chosen}: "
                   "with fewer GPUs each uses fewer xGMI links and RCCL's default channel count leaves bandwidth unused",
                   f"export NCCL_MIN_NCHANNELS={MIN_CHANNELS_ADVICE}; measure the gain with "
                   f"`ccltune doctor --nproc {used}` (it times 8, 16, 24 and 32 channels)",
                   data={"used": used, "node_gpus": node_gpus, "recommended": MIN_CHANNELS_ADVICE})


def affinity_finding(facts: RcclFacts, gpu_numa: Callable[[int, str], int | None],
                     cpus_of_node: Mapping[int, set[int]]) -> Finding:
    """Each rank's init core against its GPU's NUMA node. ``gpu_numa(dev, bus)`` -> node or None."""
    name = "rccl:affinity"
    if not facts.cores:
        return Finding(name, Verdict.WAIVED, "no 'on core N - Init COMPLETE' lines (RCCL prints them at NCCL_DEBUG=INFO)")
    if not cpus_of_node:
        return Finding(name, Verdict.WAIVED, "CPU lists of the NUMA nodes unknown (sys/devices/system/node)")
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
        return Finding(name, Verdict.WAIVED, "NUMA node of the GPUs unknown")
    if not bad:
        return Finding(name, Verdict.PASS, f"{checked} ranks run on cores of their GPU's NUMA node")
    shown = ", ".join(f"rank {b['rank']} (GPU {b['gpu']}, NUMA {b['gpu_node']}) on core {b['core']} (NUMA "
                      f"{b['core_node']})" for b in bad[:4])
    return Finding(name, Verdict.WARN, f"{len(bad)} of {checked} ranks run away from their GPU's NUMA node: {shown}",
                   "bind each rank to its GPU's NUMA node: mpirun --bind-to numa, or numactl --cpunodebind=N "
                   "--membind=N per rank", data={"misplaced": bad})


def fine_grain_finding(amd_pcie_only: bool, environ: Mapping[str, str]) -> Finding:
    """HSA_FORCE_FINE_GRAIN_PCIE=1 where AMD GPUs reach each other over PCIe only."""
    name = "rccl:fine_grain_pcie"
    value = environ.get("HSA_FORCE_FINE_GRAIN_PCIE")
    if not amd_pcie_only:
        return Finding(name, Verdict.WAIVED, "no PCIe-only AMD GPU pair (xGMI or no AMD GPU)")
    if value == "1":
        return Finding(name, Verdict.PASS, "PCIe-connected AMD GPUs and HSA_FORCE_FINE_GRAIN_PCIE=1")
    return Finding(name, Verdict.WARN, f"AMD GPUs connected over PCIe only and HSA_FORCE_FINE_GRAIN_PCIE="
                   f"{value if value is not None else 'unset'}: RCCL's peer transfers over PCIe need fine-grained "
                   "host-visible memory", FINE_GRAIN_FIX, data={"value": value})


def numa_finding(facts: RcclFacts) -> Finding:
    """kernel.numa_balancing as RCCL saw it at init (it warns when /proc/sys/kernel/numa_balancing is 1)."""
    name = "rccl:numa_balancing"
    if facts.numa_warned:
        return Finding(name, Verdict.WARN, "RCCL warned at init: NUMA auto balancing enabled (kernel.numa_balancing = 1): "
                       "the kernel migrates pages under running transfers", "sudo sysctl -w kernel.numa_balancing=0 "
                       "(persist in /etc/sysctl.d/)")
    if facts.init_seen:
        return Finding(name, Verdict.PASS, "RCCL read kernel.numa_balancing at init and did not warn")
    return Finding(name, Verdict.WAIVED, "the log does not start at RCCL's init (no 'Bootstrap : Using' line), where RCCL "
                   "checks kernel.numa_balancing")


def log_fine_grain_finding(facts: RcclFacts, log: NcclLog, pcie_only: bool) -> Finding:
    """HSA_FORCE_FINE_GRAIN_PCIE from an RCCL log: the WARN RCCL prints at init when it is not 1, where the build
    prints it (:func:`checks_fine_grain`); ``pcie_only``: the node's AMD GPUs reach each other over PCIe only."""
    name, lib = "rccl:fine_grain_pcie", f"RCCL {log.version or '(version unknown)'}"
    if not pcie_only:
        said = f"; {lib} warned that it is not 1 (it warns on every node)" if facts.fine_grain_warned else ""
        return Finding(name, Verdict.WAIVED, f"no PCIe-only AMD GPU pair (xGMI, or the node's GPUs unknown){said}")
    if facts.fine_grain_warned:
        return Finding(name, Verdict.WARN, f"{lib} warned at init: HSA_FORCE_FINE_GRAIN_PCIE=1 missing from the job's "
                       "environment, and these AMD GPUs reach each other over PCIe only: RCCL's peer transfers over "
                       "PCIe need fine-grained host-visible memory", FINE_GRAIN_FIX, data={"warned": True})
    checks = checks_fine_grain(log.version, log.hip_version)
    if checks and facts.init_seen:
        return Finding(name, Verdict.PASS, f"HSA_FORCE_FINE_GRAIN_PCIE=1: {lib} checks it at init and did not warn")
    if checks:
        return Finding(name, Verdict.WAIVED, f"the log does not start at RCCL's init (no 'Bootstrap : Using' line), where "
                       f"{lib} warns when HSA_FORCE_FINE_GRAIN_PCIE is not 1")
    why = ("does not check it (a build against HIP 5.7.31920 or later, or before 2.16)" if checks is False
           else "may not check it (HIP version not in the log)")
    return Finding(name, Verdict.WAIVED, f"PCIe-only AMD GPUs, but {lib} {why}, so the log does not record "
                   "HSA_FORCE_FINE_GRAIN_PCIE: check that the job's environment sets it to 1", FINE_GRAIN_FIX)


def rccl_findings(text: str, log: NcclLog, topology: topo.Topology | None, environ: Mapping[str, str] | None,
                  root: Path) -> list[Finding]:
    """The AMD checks of an RCCL log: MSCCL/MSCCL++/LL128, NCCL_MIN_NCHANNELS on part of an xGMI node, each
    rank's core against its GPU's NUMA node, and HSA_FORCE_FINE_GRAIN_PCIE on PCIe-only GPUs. ``environ``:
    the job's environment when known (a live run); a log alone records only the RCCL_/NCCL_ variables."""
    facts = rcclog.parse(text)
    out = feature_findings(facts, log, gfx_arch(text, topology))
    amd = topology if topo.is_amd(topology) else None
    labels = amd.pair_labels() if amd else []
    env = {**log.env, **(environ or {})}
    used = facts.local_ranks or log.nranks or len(facts.cores)
    if amd and used and amd.physical_gpus() < len(amd.gpus):
        out.append(Finding("rccl:min_nchannels", Verdict.WAIVED, f"{len(amd.gpus)} devices on {amd.physical_gpus()} "
                           "partitioned GPUs: the NCCL_MIN_NCHANNELS advice is for whole (SPX) GPUs of an 8-GPU node"))
    elif amd and used:
        out.append(min_channels_finding(used, len(amd.gpus), any(c.startswith("XGMI") for c in labels), env,
                                        log.coll_channels))
    else:
        out.append(Finding("rccl:min_nchannels", Verdict.WAIVED, "the node's GPUs are unknown: give --from-amd-smi or run on "
                           "the node"))
    by_bus = {rcclog.bus_to_int(g.bus_id): g for g in (amd.gpus if amd else []) if g.bus_id}

    def gpu_numa(dev: int, bus: str) -> int | None:
        g = by_bus.get(int(bus, 16)) or (amd.gpus[dev] if amd and dev < len(amd.gpus) else None)
        return g.numa_node if g else None

    out.append(affinity_finding(facts, gpu_numa, node_cpus(root)))
    out.append(numa_finding(facts))
    pcie_only = pcie_only_links(labels)
    out.append(log_fine_grain_finding(facts, log, pcie_only) if environ is None
               else fine_grain_finding(pcie_only, environ))
    return out


def rank_p2p_capable(text: str, capable: Callable[[int, int], bool]) -> Callable[[int, int], bool]:
    """RCCL puts bus ids, not devices, in an edge's brackets, so logcheck passes ranks: map them to devices."""
    devices = rcclog.parse(text).devices
    return lambda a, b: capable(devices.get(a, a), devices.get(b, b))


def pcie_only_links(labels: list[str]) -> bool:
    """Whether GPU pairs with these link labels reach each other over PCIe only (no xGMI). Pairs of unknown
    link ("?": amd-smi's static output alone, no topology) say nothing either way."""
    known = [c for c in labels if c != "?"]
    return bool(known) and not any(c.startswith("XGMI") for c in known)


def fine_grain_here(topology: topo.Topology, environ: Mapping[str, str]) -> Finding:
    """HSA_FORCE_FINE_GRAIN_PCIE on this node's AMD GPUs, from its topology and this environment."""
    return fine_grain_finding(pcie_only_links(topology.pair_labels()), environ)
