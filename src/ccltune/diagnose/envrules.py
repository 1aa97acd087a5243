"""NCCL/RCCL environment variables that hurt performance: one table, one rule a row.

Each rule names the variable, when its value is harmful, the status that earns, why, and
the fix. RCCL reads the same ``NCCL_*`` names, so one table serves both. Applied to the
process environment (``ccltune doctor``) or to the "X set by environment to Y" lines of a
log (``ccltune doctor --nccl-log``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ccltune.diagnose.findings import Finding


def _int_below(limit: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return int(value) < limit
        except ValueError:
            return False
    return check


def _one_of(*values: str) -> Callable[[str], bool]:
    wanted = {v.upper() for v in values}
    return lambda value: value.strip().upper() in wanted


def _any(value: str) -> bool:
    return value.strip() != ""


@dataclass(frozen=True)
class EnvRule:
    var: str
    matches: Callable[[str], bool]
    status: str  # the status a match earns
    why: str
    fix: str


RULES: tuple[EnvRule, ...] = (
    EnvRule("NCCL_P2P_DISABLE", _one_of("1"), "FAIL",
            "peer-to-peer (NVLink/xGMI/PCIe) is off: GPUs exchange data through host memory",
            "unset NCCL_P2P_DISABLE"),
    EnvRule("NCCL_P2P_LEVEL", _one_of("LOC", "0"), "FAIL",
            "P2P level LOC forbids peer-to-peer between any two GPUs",
            "unset NCCL_P2P_LEVEL (or set SYS to allow P2P across the CPU interconnect)"),
    EnvRule("NCCL_SHM_DISABLE", _one_of("1"), "WARN",
            "shared memory is off: pairs without P2P fall back to the network transport",
            "unset NCCL_SHM_DISABLE"),
    EnvRule("NCCL_ALGO", _any, "WARN",
            "forces one algorithm for every collective and size; NCCL's own choice is best at most sizes",
            "unset NCCL_ALGO; use a tuner plugin (ccltune tune) for per-size choices"),
    EnvRule("NCCL_PROTO", _any, "WARN",
            "forces protocols for every collective and size; NCCL's own choice is best at most sizes",
            "unset NCCL_PROTO; use a tuner plugin (ccltune tune) for per-size choices"),
    EnvRule("NCCL_MAX_NCHANNELS", _int_below(16), "WARN",
            "caps NCCL at fewer than 16 channels: large messages cannot reach the link bandwidth",
            "unset NCCL_MAX_NCHANNELS, or measure counts with `ccltune doctor --nproc N`"),
    EnvRule("NCCL_MAX_CTAS", _int_below(16), "WARN",
            "caps NCCL at fewer than 16 CTAs (channels): large messages cannot reach the link bandwidth",
            "unset NCCL_MAX_CTAS"),
    EnvRule("NCCL_BUFFSIZE", _int_below(1 << 22), "WARN",
            "buffers below the 4 MiB default lower large-message bandwidth",
            "unset NCCL_BUFFSIZE"),
    EnvRule("NCCL_DEBUG", _one_of("INFO", "TRACE"), "WARN",
            "verbose logging slows communicator creation and floods the job's output",
            "unset NCCL_DEBUG or set NCCL_DEBUG=WARN outside diagnosis"),
    EnvRule("NCCL_IB_DISABLE", _one_of("1"), "WARN",
            "InfiniBand is off: traffic between nodes goes over TCP sockets",
            "unset NCCL_IB_DISABLE on hosts with InfiniBand adapters"),
    EnvRule("NCCL_NET_GDR_LEVEL", _one_of("LOC", "0"), "WARN",
            "GPUDirect RDMA is off: network traffic is staged through host memory",
            "unset NCCL_NET_GDR_LEVEL"),
    EnvRule("NCCL_NVLS_ENABLE", _one_of("0"), "PASS",
            "NVLink SHARP (multicast) is off; on this project's machines that is mandatory, "
            "elsewhere it can cost all_reduce bandwidth on NVSwitch systems",
            "keep it on the project's machines; elsewhere unset it to let NCCL use NVLS"),
    EnvRule("CUDA_LAUNCH_BLOCKING", _one_of("1"), "FAIL",
            "every CUDA launch is synchronous: communication cannot overlap anything",
            "unset CUDA_LAUNCH_BLOCKING"),
    EnvRule("TORCH_NCCL_BLOCKING_WAIT", _one_of("1"), "WARN",
            "the host blocks on every collective", "unset TORCH_NCCL_BLOCKING_WAIT"),
)


def check_env(environ: Mapping[str, str], *, source: str, has_infiniband: bool | None = None) -> list[Finding]:
    """One finding per rule that matches ``environ``, or one PASS naming what was checked.

    ``has_infiniband`` False turns NCCL_IB_DISABLE=1 into a PASS (nothing to disable);
    None (unknown) keeps the rule's WARN.
    """
    out = []
    for rule in RULES:
        value = environ.get(rule.var)
        if value is None or not rule.matches(value):
            continue
        status = rule.status
        why = rule.why
        if rule.var == "NCCL_IB_DISABLE" and has_infiniband is False:
            status, why = "PASS", "no InfiniBand adapter on this host, so nothing is lost"
        out.append(Finding(f"env:{rule.var}", status, f"{rule.var}={value} ({source}): {why}", rule.fix,
                           data={"variable": rule.var, "value": value, "source": source}))
    if not out:
        out.append(Finding("env", "PASS", f"no harmful NCCL/RCCL variable in {source} "
                           f"({len(RULES)} rules checked)", data={"source": source}))
    return out
