"""The registry of checks that ``ccltune doctor`` and ``ccltune check`` run: one entry per check.

Each entry says, once: its key, what it checks, the command that runs it, when it applies here
and how it runs. The commands iterate ``CHECKS`` in order (``run_checks``) and never name a
check. ``applies(ctx)`` answers None (run it), a reason (the check cannot run here: it is
reported WAIVED with that reason) or ``SKIP`` (the check is not this platform's, such as an AMD
check on NVIDIA GPUs: it is left out of the report). Adding a check means adding one entry here
(and its function in the module of its concern).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ccltune.diagnose.checks import gates, host, rccl, transport
from ccltune.diagnose.checks.context import Context
from ccltune.diagnose.checks.envrules import check_env
from ccltune.diagnose.checks.logcheck import check_log
from ccltune.diagnose.checks.topo import topo_findings
from ccltune.diagnose.findings import Finding
from ccltune.diagnose.probes import sysfs
from ccltune.diagnose.probes import topo as topo_probe
from ccltune.status import Verdict

SKIP = "\0skip"  # applies(): not this platform's check; no line in the report
# the commands (and doctor's one mode that reads a saved log instead of this host) whose checks are listed here
COMMANDS = ("doctor", "doctor --nccl-log", "check")


@dataclass(frozen=True)
class Check:
    key: str  # the finding name it reports under when waived
    description: str
    command: str  # the command that runs it: one of COMMANDS
    run: Callable[[Context], list[Finding]]
    applies: Callable[[Context], str | None] = lambda ctx: None
    waive: Callable[[Context, str], list[Finding]] | None = None  # default: one WAIVED finding named ``key``


def _amd_only(ctx: Context) -> str | None:
    return None if topo_probe.is_amd(ctx.topology) else SKIP


def _rccl_log(ctx: Context) -> str | None:
    return None if ctx.nccl_log.library == "RCCL" else SKIP


def _log_findings(ctx: Context) -> list[Finding]:
    """The log's findings; in an RCCL log of AMD GPUs, SHM between a pair the node joins by P2P is a FAIL.
    The node is looked at only for an RCCL log (an NCCL log is judged on its own)."""
    capable = None
    if ctx.nccl_log.library == "RCCL" and topo_probe.is_amd(ctx.topology):
        capable = rccl.rank_p2p_capable(ctx.nccl_log_text or "", topo_probe.p2p_capable_from(ctx.topology))
    return check_log(ctx.nccl_log, p2p_capable=capable)


def _rccl_log_findings(ctx: Context) -> list[Finding]:
    # environ None: a log records only the job's RCCL_/NCCL_ variables, not HSA_FORCE_FINE_GRAIN_PCIE
    return rccl.rccl_findings(ctx.nccl_log_text or "", ctx.nccl_log, ctx.topology, None, ctx.root)


def _gates_apply(ctx: Context) -> str | None:
    profile = ctx.profile
    if ctx.records is None and not ctx.from_json and profile is not None and ctx.gpus < profile.world_size:
        return f"profile {profile.name} needs {profile.world_size} GPUs, {ctx.gpus} visible here"
    return None


CHECKS: tuple[Check, ...] = (
    Check("numa_balancing", "kernel.numa_balancing off (page migration stalls transfers)", "doctor",
          lambda ctx: [host.check_numa_balancing(ctx.root)]),
    Check("numad", "numad not running (it moves processes between NUMA nodes)", "doctor",
          lambda ctx: [host.check_numad(ctx.root)]),
    Check("iommu", "IOMMU off or in passthrough mode", "doctor", lambda ctx: [host.check_iommu(ctx.root)]),
    Check("pcie_acs", "PCIe ACS redirect off (P2P would detour through the root complex)", "doctor",
          lambda ctx: [host.check_acs(ctx.lspci)]),
    Check("env", "NCCL/RCCL variables that hurt performance (the rules of checks.envrules)", "doctor",
          lambda ctx: check_env(ctx.environ, source="this environment",
                                has_infiniband=sysfs.has_infiniband(ctx.root), files_here=True)),
    Check("topo:gpus", "the GPUs of this host and how they were found", "doctor",
          lambda ctx: topo_findings(ctx.topology)[:1]),
    Check("rccl:fine_grain_pcie", "HSA_FORCE_FINE_GRAIN_PCIE=1 on PCIe-only AMD GPUs", "doctor",
          lambda ctx: [rccl.fine_grain_here(ctx.topology, ctx.environ)], applies=_amd_only),
    Check("transport", "a short all_reduce's NCCL log: transports, channels, tuner, process layout; "
          "NCCL_P2P_LEVEL=SYS measured where SHM joined P2P-capable GPUs", "doctor",
          transport.transport, applies=transport.why_not_run),
    Check("channels", "busbw by channel count when fewer GPUs are used than present", "doctor",
          transport.channels, applies=transport.why_not_run),
    Check("log", "a saved NCCL/RCCL log: version, init, transports, channels, tuner, process layout, warnings, "
          "variables", "doctor --nccl-log", _log_findings),
    Check("rccl:log", "an RCCL log's AMD checks: MSCCL/MSCCL++/LL128, NCCL_MIN_NCHANNELS on part of an xGMI node, "
          "each rank's core against its GPU's NUMA node, HSA_FORCE_FINE_GRAIN_PCIE", "doctor --nccl-log",
          _rccl_log_findings, applies=_rccl_log),
    Check("gates", "a platform profile's gates and monotonicity over all_reduce busbw", "check",
          gates.judge, applies=_gates_apply, waive=gates.waive),
)


def checks_of(command: str) -> list[Check]:
    """The entries ``command`` runs, in order."""
    if command not in COMMANDS:
        raise ValueError(f"command must be one of {COMMANDS}, got {command!r}")
    return [c for c in CHECKS if c.command == command]


def run_checks(command: str, ctx: Context) -> list[Finding]:
    """Every check of ``command``: its findings, or WAIVED with the reason where it cannot run here."""
    out: list[Finding] = []
    for check in checks_of(command):
        why = check.applies(ctx)
        if why == SKIP:
            continue
        if why:
            out += check.waive(ctx, why) if check.waive else [Finding(check.key, Verdict.WAIVED, why)]
        else:
            out += check.run(ctx)
    return out
