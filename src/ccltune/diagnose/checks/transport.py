"""``ccltune doctor``'s measured checks: a short collective run whose NCCL log is read for
transports, channels and tuner, with measured follow-ups (NCCL_P2P_LEVEL=SYS where a
P2P-capable pair used SHM; channel counts when fewer GPUs are used than present).

The decisions are pure functions (``p2p_level_finding``, ``channels_finding``); ``transport``
and ``channels`` wire them to the subprocess runs. Both are entries of ``checks.registry``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ccltune.diagnose.checks.logcheck import check_log
from ccltune.diagnose.checks.rccl import rank_p2p_capable, rccl_findings
from ccltune.diagnose.findings import Finding
from ccltune.diagnose.parsers.ncclog import parse_log
from ccltune.diagnose.probes import benchrun
from ccltune.diagnose.probes.topo import p2p_capable_from
from ccltune.gpus import cuda_visible
from ccltune.status import Verdict

if TYPE_CHECKING:
    from ccltune.diagnose.checks.context import Context

CHANNEL_VARIANTS = (8, 16, 24, 32)
CHANNEL_SIZE = 128 << 20  # the gains from a channel count show from 16 MB up
NOISE = 0.03  # differences below 3% are run-to-run noise on one node


# The variables that hide GPUs from a process (HIP and ROCm read the last two, HIP the first too)
VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def visible(ctx: Context) -> tuple[int, str]:
    """GPUs the job's processes see: the topology's (every GPU of the node) less those hidden by
    CUDA/HIP/ROCR_VISIBLE_DEVICES in the job's environment, and what limited it (for messages). A
    value that names GPUs by UUID counts as all of them (NCCL's own count will say)."""
    present, why = len(ctx.topology.gpus), "present"
    for var in VISIBLE_VARS:
        seen = cuda_visible(ctx.environ.get(var), present) if var in ctx.environ else None
        if seen is not None and seen < present:
            present, why = seen, f"visible ({var}={ctx.environ[var]})"
    return present, why


def why_not_run(ctx: Context) -> str | None:
    """Why the collective runs cannot happen here (no GPU, --no-run, --nproc out of range), or None."""
    present, why = visible(ctx)
    if present == 0:
        return "no GPU found" if why == "present" else f"no GPU {why}"
    if not ctx.run:
        return "not run (--no-run)"
    if ctx.nproc is not None and not 1 <= ctx.nproc <= present:
        return f"--nproc {ctx.nproc} is not between 1 and the {present} GPUs {why}"
    return None


def p2p_level_finding(before_gbps: float | None, after_gbps: float | None, shm_left: int | None) -> Finding:
    """The measured effect of NCCL_P2P_LEVEL=SYS on in-place all_reduce busbw."""
    if before_gbps is None or after_gbps is None:
        return Finding("transport:p2p_level", Verdict.ERROR, "could not measure busbw before and after NCCL_P2P_LEVEL=SYS",
                       "run `ccltune bench all_reduce` with and without NCCL_P2P_LEVEL=SYS")
    gain = after_gbps / before_gbps - 1 if before_gbps else 0.0
    left = "no SHM edges left" if shm_left == 0 else f"{shm_left} SHM edges left" if shm_left else "edges not logged"
    evidence = f"NCCL_P2P_LEVEL=SYS: busbw {before_gbps:.1f} -> {after_gbps:.1f} GB/s ({gain:+.0%}); {left}"
    data = {"before_gbps": before_gbps, "after_gbps": after_gbps, "gain": gain}
    if gain > NOISE:
        return Finding("transport:p2p_level", Verdict.WARN, evidence, "export NCCL_P2P_LEVEL=SYS", value=gain, data=data)
    return Finding("transport:p2p_level", Verdict.PASS, evidence + ": no measurable gain", value=gain, data=data)


def channels_finding(used: int, present: int, busbw: Mapping[int | None, float | None]) -> Finding:
    """Best channel count from measured busbw per NCCL_MIN/MAX_NCHANNELS value (None = NCCL's default)."""
    base = busbw.get(None)
    if base is None:
        return Finding("channels", Verdict.ERROR, f"{used} of {present} GPUs: the run with NCCL's default channels failed")
    measured = {c: v for c, v in busbw.items() if c is not None and v is not None}
    shown = ", ".join(f"{c}:{v:.1f}" for c, v in sorted(measured.items()))
    data = {"used": used, "present": present, "default_gbps": base, "busbw_by_channels": measured}
    if not measured:
        return Finding("channels", Verdict.ERROR, f"{used} of {present} GPUs: every fixed-channel run failed", data=data)
    best = max(measured, key=lambda c: measured[c])
    gain = measured[best] / base - 1
    evidence = (f"{used} of {present} GPUs used; busbw default {base:.1f} GB/s, by channel count {shown}")
    if gain > NOISE:
        return Finding("channels", Verdict.WARN, f"{evidence}: {best} channels {gain:+.0%}",
                       f"export NCCL_MIN_NCHANNELS={best} NCCL_MAX_NCHANNELS={best} for jobs on {used} GPUs "
                       "(or a ccltune tune rule)", value=gain, data=data | {"best": best})
    return Finding("channels", Verdict.PASS, f"{evidence}: NCCL's default is within {NOISE:.0%} of the best",
                   value=gain, data=data)


def transport(ctx: Context) -> list[Finding]:
    """all_reduce on the GPUs in use with NCCL_DEBUG=INFO, its log checked; again with NCCL_P2P_LEVEL=SYS where
    SHM joined P2P-capable GPUs."""
    used, timeout_s, log = ctx.nproc or visible(ctx)[0], ctx.timeout_s, ctx.log
    out: list[Finding] = []
    p2p_capable = p2p_capable_from(ctx.topology)
    log(f"doctor: running all_reduce on {used} GPUs with NCCL_DEBUG=INFO ...")
    first = benchrun.run_bench(used, bench_args=ctx.bench_args, env_overrides=benchrun.DEBUG_ENV, timeout_s=timeout_s)
    ctx.artifacts["nccl-debug.log"] = first.output
    if first.error:
        out.append(Finding("transport", Verdict.ERROR, first.error, "run the command in data.argv by hand",
                           data={"argv": first.argv}))
    parsed = parse_log(first.output)
    if parsed.library == "RCCL":
        p2p_capable = rank_p2p_capable(first.output, p2p_capable)
    found = check_log(parsed, p2p_capable=p2p_capable)
    out += found
    if parsed.library == "RCCL":
        out += [f for f in rccl_findings(first.output, parsed, ctx.topology, ctx.environ, ctx.root)
                if f.name not in ("rccl:fine_grain_pcie", "rccl:min_nchannels", "rccl:numa_balancing")]
    transport = next((f for f in found if f.name == "log:transport"), None)
    if first.error or transport is None or not transport.data.get("shm_pairs_p2p_capable"):
        return out
    log("doctor: SHM between P2P-capable GPUs; measuring again with NCCL_P2P_LEVEL=SYS ...")
    second = benchrun.run_bench(used, bench_args=ctx.bench_args, env_overrides={**benchrun.DEBUG_ENV, "NCCL_P2P_LEVEL": "SYS"},
                                timeout_s=timeout_s)
    ctx.artifacts["nccl-debug-p2p-level-sys.log"] = second.output
    after = parse_log(second.output)
    shm_left = sum(e.family == "SHM" for e in after.edges) if after.edges else None
    out.append(p2p_level_finding(first.busbw(), None if second.error else second.busbw(), shm_left))
    return out


def channels(ctx: Context) -> list[Finding]:
    """busbw at NCCL's default channel count and at each of ``CHANNEL_VARIANTS``, when fewer GPUs are used than
    present."""
    return [_channels(ctx.nproc or visible(ctx)[0], len(ctx.topology.gpus), ctx.timeout_s, ctx.log, ctx.bench_args)]


def _channels(used: int, present: int, timeout_s: float, log: Callable[[str], None],
              bench_args: benchrun.BenchArgs | None) -> Finding:
    if used >= present:
        return Finding("channels", Verdict.PASS, f"all {present} GPUs used: NCCL's channel choice is tuned for that")
    busbw: dict[int | None, float | None] = {}
    for count in (None, *CHANNEL_VARIANTS):
        env = {} if count is None else {"NCCL_MIN_NCHANNELS": str(count), "NCCL_MAX_NCHANNELS": str(count)}
        log(f"doctor: {used} of {present} GPUs, channels {count or 'default'} ...")
        r = benchrun.run_bench(used, bench_args=bench_args, env_overrides=env, timeout_s=timeout_s, min_bytes=CHANNEL_SIZE,
                               max_bytes=CHANNEL_SIZE, iters=20, warmup=5)
        busbw[count] = None if r.error else r.busbw(CHANNEL_SIZE)
    return channels_finding(used, present, busbw)
