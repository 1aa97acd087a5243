"""``ccltune doctor``: host settings, harmful variables, GPUs, and — where GPUs exist — a short
collective run whose NCCL log is read for transports, channels and tuner, with measured
follow-ups (NCCL_P2P_LEVEL=SYS where a P2P-capable pair used SHM; channel counts when fewer
GPUs are used than present).

The decisions are pure functions (``p2p_level_finding``, ``channels_finding``); ``run_doctor``
wires them to the subprocess runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ccltune.diagnose import benchrun, rcclog, sysconf
from ccltune.diagnose import topo as topo_mod
from ccltune.diagnose.envrules import check_env
from ccltune.diagnose.findings import Finding
from ccltune.diagnose.logcheck import check_log
from ccltune.diagnose.ncclog import NcclLog, parse_log

CHANNEL_VARIANTS = (8, 16, 24, 32)
CHANNEL_SIZE = 128 << 20  # the gains from a channel count show from 16 MB up
NOISE = 0.03  # differences below 3% are run-to-run noise on one node


@dataclass
class DoctorResult:
    findings: list[Finding] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    topology: topo_mod.Topology | None = None


def p2p_capable_from(topology: topo_mod.Topology) -> Callable[[int, int], bool]:
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


def is_amd(topology: topo_mod.Topology | None) -> bool:
    return topology is not None and topology.source in ("amd-smi", "amd-sysfs") and bool(topology.gpus)


def rccl_findings(text: str, log: NcclLog, topology: topo_mod.Topology | None, environ: Mapping[str, str] | None,
                  root: Path) -> list[Finding]:
    """The AMD checks of an RCCL log: MSCCL/MSCCL++/LL128, NCCL_MIN_NCHANNELS on part of an xGMI node, each
    rank's core against its GPU's NUMA node, and HSA_FORCE_FINE_GRAIN_PCIE on PCIe-only GPUs. ``environ``:
    the job's environment when known (a live run); a log alone records only the RCCL_/NCCL_ variables."""
    facts = rcclog.parse(text)
    out = rcclog.feature_findings(facts)
    amd = topology if is_amd(topology) else None
    labels = [c for i, row in enumerate(amd.links) for j, c in enumerate(row) if i != j] if amd else []
    env = {**log.env, **(environ or {})}
    used = facts.local_ranks or log.nranks or len(facts.cores)
    if amd and used:
        out.append(rcclog.min_channels_finding(used, len(amd.gpus), any(c.startswith("XGMI") for c in labels), env,
                                               log.coll_channels))
    else:
        out.append(Finding("rccl:min_nchannels", "WAIVED", "the node's GPUs are unknown: give --from-amd-smi or run on "
                           "the node"))
    by_bus = {rcclog.bus_to_int(g.bus_id): g for g in (amd.gpus if amd else []) if g.bus_id}

    def gpu_numa(dev: int, bus: str) -> int | None:
        g = by_bus.get(int(bus, 16)) or (amd.gpus[dev] if amd and dev < len(amd.gpus) else None)
        return g.numa_node if g else None

    out.append(rcclog.affinity_finding(facts, gpu_numa, rcclog.node_cpus(root)))
    pcie_only = bool(labels) and not any(c.startswith("XGMI") for c in labels)
    if environ is None and pcie_only:
        out.append(Finding("rccl:fine_grain_pcie", "WAIVED", "PCIe-only AMD GPUs, but a log does not record "
                           "HSA_FORCE_FINE_GRAIN_PCIE: check the job's environment sets it to 1"))
    else:
        out.append(rcclog.fine_grain_finding(pcie_only, environ or {}))
    return out


def rank_p2p_capable(text: str, capable: Callable[[int, int], bool]) -> Callable[[int, int], bool]:
    """RCCL puts bus ids, not devices, in an edge's brackets, so logcheck passes ranks: map them to devices."""
    devices = rcclog.parse(text).devices
    return lambda a, b: capable(devices.get(a, a), devices.get(b, b))


def p2p_level_finding(before_gbps: float | None, after_gbps: float | None, shm_left: int | None) -> Finding:
    """The measured effect of NCCL_P2P_LEVEL=SYS on in-place all_reduce busbw."""
    if before_gbps is None or after_gbps is None:
        return Finding("transport:p2p_level", "ERROR", "could not measure busbw before and after NCCL_P2P_LEVEL=SYS",
                       "run `ccltune bench all_reduce` with and without NCCL_P2P_LEVEL=SYS")
    gain = after_gbps / before_gbps - 1 if before_gbps else 0.0
    left = "no SHM edges left" if shm_left == 0 else f"{shm_left} SHM edges left" if shm_left else "edges not logged"
    evidence = f"NCCL_P2P_LEVEL=SYS: busbw {before_gbps:.1f} -> {after_gbps:.1f} GB/s ({gain:+.0%}); {left}"
    data = {"before_gbps": before_gbps, "after_gbps": after_gbps, "gain": gain}
    if gain > NOISE:
        return Finding("transport:p2p_level", "WARN", evidence, "export NCCL_P2P_LEVEL=SYS", value=gain, data=data)
    return Finding("transport:p2p_level", "PASS", evidence + ": no measurable gain", value=gain, data=data)


def channels_finding(used: int, present: int, busbw: Mapping[int | None, float | None]) -> Finding:
    """Best channel count from measured busbw per NCCL_MIN/MAX_NCHANNELS value (None = NCCL's default)."""
    base = busbw.get(None)
    if base is None:
        return Finding("channels", "ERROR", f"{used} of {present} GPUs: the run with NCCL's default channels failed")
    measured = {c: v for c, v in busbw.items() if c is not None and v is not None}
    shown = ", ".join(f"{c}:{v:.1f}" for c, v in sorted(measured.items()))
    data = {"used": used, "present": present, "default_gbps": base, "busbw_by_channels": measured}
    if not measured:
        return Finding("channels", "ERROR", f"{used} of {present} GPUs: every fixed-channel run failed", data=data)
    best = max(measured, key=lambda c: measured[c])
    gain = measured[best] / base - 1
    evidence = (f"{used} of {present} GPUs used; busbw default {base:.1f} GB/s, by channel count {shown}")
    if gain > NOISE:
        return Finding("channels", "WARN", f"{evidence}: {best} channels {gain:+.0%}",
                       f"export NCCL_MIN_NCHANNELS={best} NCCL_MAX_NCHANNELS={best} for jobs on {used} GPUs "
                       "(or a ccltune tune rule)", value=gain, data=data | {"best": best})
    return Finding("channels", "PASS", f"{evidence}: NCCL's default is within {NOISE:.0%} of the best",
                   value=gain, data=data)


def run_doctor(root: Path, *, lspci: str | None, environ: Mapping[str, str], nproc: int | None, run: bool,
               timeout_s: float, log: Callable[[str], None] = lambda _: None) -> DoctorResult:
    """All checks. ``log`` receives progress lines (the CLI prints them to stderr)."""
    res = DoctorResult()
    res.findings += sysconf.host_checks(root, lspci)
    res.findings += check_env(environ, source="this environment", has_infiniband=sysconf.has_infiniband(root),
                              files_here=True)
    topology = res.topology = topo_mod.discover(root)
    present = len(topology.gpus)
    res.findings.append(topo_mod.findings(topology)[0])
    if is_amd(topology):
        labels = [c for i, row in enumerate(topology.links) for j, c in enumerate(row) if i != j]
        res.findings.append(rcclog.fine_grain_finding(bool(labels) and not any(c.startswith("XGMI") for c in labels),
                                                      environ))
    if present == 0:
        why = "no GPU found"
    elif not run:
        why = "not run (--no-run)"
    elif nproc is not None and not 1 <= nproc <= present:
        why = f"--nproc {nproc} is not between 1 and the {present} GPUs present"
    else:
        why = ""
    if why:
        res.findings += [Finding("transport", "WAIVED", why), Finding("channels", "WAIVED", why)]
        return res
    used = nproc or present
    _transport(res, used, p2p_capable_from(topology), timeout_s, log, environ, root)
    res.findings.append(_channels(used, present, timeout_s, log))
    return res


def _transport(res: DoctorResult, used: int, p2p_capable: Callable[[int, int], bool], timeout_s: float,
               log: Callable[[str], None], environ: Mapping[str, str], root: Path) -> None:
    log(f"doctor: running all_reduce on {used} GPUs with NCCL_DEBUG=INFO ...")
    first = benchrun.run_bench(used, env_overrides=benchrun.DEBUG_ENV, timeout_s=timeout_s)
    res.artifacts["nccl-debug.log"] = first.output
    if first.error:
        res.findings.append(Finding("transport", "ERROR", first.error, "run the command in data.argv by hand",
                                    data={"argv": first.argv}))
    parsed = parse_log(first.output)
    if parsed.library == "RCCL":
        p2p_capable = rank_p2p_capable(first.output, p2p_capable)
    found = check_log(parsed, p2p_capable=p2p_capable)
    res.findings += found
    if parsed.library == "RCCL":
        res.findings += [f for f in rccl_findings(first.output, parsed, res.topology, environ, root)
                         if f.name not in ("rccl:fine_grain_pcie", "rccl:min_nchannels")]
    transport = next((f for f in found if f.name == "log:transport"), None)
    if first.error or transport is None or not transport.data.get("shm_pairs_p2p_capable"):
        return
    log("doctor: SHM between P2P-capable GPUs; measuring again with NCCL_P2P_LEVEL=SYS ...")
    second = benchrun.run_bench(used, env_overrides={**benchrun.DEBUG_ENV, "NCCL_P2P_LEVEL": "SYS"},
                                timeout_s=timeout_s)
    res.artifacts["nccl-debug-p2p-level-sys.log"] = second.output
    after = parse_log(second.output)
    shm_left = sum(e.family == "SHM" for e in after.edges) if after.edges else None
    res.findings.append(p2p_level_finding(first.busbw(), None if second.error else second.busbw(), shm_left))


def _channels(used: int, present: int, timeout_s: float, log: Callable[[str], None]) -> Finding:
    if used >= present:
        return Finding("channels", "PASS", f"all {present} GPUs used: NCCL's channel choice is tuned for that")
    busbw: dict[int | None, float | None] = {}
    for count in (None, *CHANNEL_VARIANTS):
        env = {} if count is None else {"NCCL_MIN_NCHANNELS": str(count), "NCCL_MAX_NCHANNELS": str(count)}
        log(f"doctor: {used} of {present} GPUs, channels {count or 'default'} ...")
        r = benchrun.run_bench(used, env_overrides=env, timeout_s=timeout_s, min_bytes=CHANNEL_SIZE,
                               max_bytes=CHANNEL_SIZE, iters=20, warmup=5)
        busbw[count] = None if r.error else r.busbw(CHANNEL_SIZE)
    return channels_finding(used, present, busbw)
