"""``ccltune check``'s verdicts: a profile's gates and monotonicity over bench records (pure but for
``judge``, which measures when it is given nothing to judge).

Records are the bench JSON's ``records``: dicts with ``collective``, ``size_bytes``,
``in_place``, ``busbw_gbps``, ``algbw_gbps`` (GB/s, 1e9 bytes). Several records at one point
(repetitions) count as their median. A gate whose point was not measured is an ERROR, never
a silent pass.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ccltune import collectives
from ccltune.diagnose.checks import linkmath
from ccltune.diagnose.checks.profiles import Gate, GateBench, Monotonic, Profile
from ccltune.diagnose.findings import Finding
from ccltune.diagnose.probes import benchrun
from ccltune.errors import UsageError
from ccltune.sizes import format_size
from ccltune.status import RowStatus, Verdict

if TYPE_CHECKING:
    from ccltune.diagnose.checks.context import Context

# A profile derived from the machine's own links: all_reduce in-place busbw at LINK_GATE_BYTES must reach
# RING_FRACTION of the ring ceiling (linkmath: the smallest over the GPUs of slowest link x peers, capped by
# the GPU's all-to-all aggregate, and by its fastest pair where its pairs share its NVLinks). NCCL's protocol
# overhead and the ring's own pipeline cost the rest: healthy nodes reached 88% of their ceiling (4 x H200,
# 346 of 393 GB/s, 2026-11-26) and 84.8% (2 of 4 H100, 330.9 of 390.2 GB/s, 2026-11-27), which the first
# default, 85%, failed. 80% leaves healthy nodes a margin; a node that lost a link or fell back to PCIe or
# SHM is far below it.
RING_FRACTION = 0.80
LINK_GATE_BYTES = 1 << 30

Record = Mapping[str, Any]


def _norm(name: str) -> str:
    """A collective's name in the registry's spelling (a name it does not know stays as given)."""
    return collectives.canonical(name) or str(name)


def _points(records: Sequence[Record], collective: str, in_place: bool, metric: str) -> dict[int, float]:
    """size_bytes -> median metric of the matching records that have it."""
    by_size: dict[int, list[float]] = {}
    for r in records:
        if _norm(r.get("collective", "")) != _norm(collective) or bool(r.get("in_place")) != in_place:
            continue
        value = r.get(metric)
        if value is not None and r.get("status", RowStatus.OK) == RowStatus.OK:
            by_size.setdefault(int(r["size_bytes"]), []).append(float(value))
    return {size: statistics.median(values) for size, values in sorted(by_size.items())}


def how_measured(bench_env: Mapping[str, Any], records: Sequence[Record], *, source: str) -> dict[str, Any]:
    """How the figures were taken (they depend on it): world size, engine, graph mode, process layout."""
    first = records[0] if records else {}
    launcher = bench_env.get("launcher")
    graph = first.get("graph", bench_env.get("graph"))
    return {
        "source": source,
        "world_size": bench_env.get("world_size") or first.get("n_ranks"),
        "engine": bench_env.get("engine"),
        "graph": None if graph is None else bool(graph),
        "launcher": launcher,
        "process_per_gpu": True if launcher in ("torchrun", "slurm", "mpirun") else bench_env.get("process_per_gpu"),
        "platform": bench_env.get("platform"),
        "nccl_version": bench_env.get("nccl_version"),
    }


def evaluate(profile: Profile, records: Sequence[Record], how: Mapping[str, Any]) -> list[Finding]:
    """One finding per gate, one for monotonicity; an ERROR first if the world size differs."""
    measured_ranks = how.get("world_size")
    if measured_ranks is not None and int(measured_ranks) != profile.world_size:
        reason = f"measured on {measured_ranks} ranks; profile {profile.name} needs {profile.world_size}"
        return [Finding("world_size", Verdict.ERROR, reason, f"measure with {profile.world_size} GPUs or pick another "
                        "--profile", data=dict(how))] + waive_all(profile, reason)
    out = [_gate(g, records, provisional=profile.provisional) for g in profile.gates]
    wrong = [(i, r) for i, r in enumerate(records) if (r.get("wrong") or 0) > 0]
    if wrong:  # a figure of wrong results gates nothing: the run FAILs whatever its bandwidth (nccl-tests' #wrong)
        i, r = wrong[0]
        out.insert(0, Finding("results_correct", Verdict.FAIL,
                              f"{len(wrong)} record(s) with wrong results (#wrong > 0), the first records[{i}]: "
                              f"{r.get('collective')} {r.get('size_bytes')} B, #wrong {r.get('wrong')}",
                              "find why the collective returns wrong data (a bad GPU, link or NCCL build) before "
                              "judging its speed"))
    if how.get("process_per_gpu") is False:  # the figures assume one process per GPU (nccl-tests -g 1)
        out.insert(0, Finding("process_per_gpu", Verdict.ERROR, "measured with one process driving several GPUs; "
                              f"profile {profile.name}'s figures are for one process per GPU",
                              "measure with one process per GPU (torchrun, mpirun -np N, nccl-tests -g 1)"))
    if profile.monotonic:  # up to the profile's own largest size: a run measured further is judged as far
        out.append(check_monotonic(profile.monotonic, records, up_to=profile.bench.max_bytes))
    return out


def link_profile(rows: Sequence[Record], *, world_size: int, where: str,
                 fraction: float = RING_FRACTION, egress: Mapping[int, float] | None = None) -> Profile | None:
    """A profile whose one gate is ``fraction`` of the ring ceiling of a links run's ``rows`` (None when the
    rows give no ceiling: one GPU, no bandwidth measured). ``egress``: per GPU the NVLink limit of all its
    links (NVML), which tells links shared through an NVSwitch (linkmath.per_gpu_bounds)."""
    if not 0 < fraction <= 1:
        raise UsageError(f"--ring-fraction must be in (0, 1], got {fraction}")
    summary, _ = linkmath.analyze(rows, egress=egress)
    ceiling = summary.get("ring_ceiling_gbps")
    if not ceiling:
        return None
    gate = Gate(name=f"all_reduce_busbw_{format_size(LINK_GATE_BYTES)}", collective="all_reduce",
                size_bytes=LINK_GATE_BYTES, in_place=True, metric="busbw_gbps",
                min_value=round(fraction * ceiling, 1))
    return Profile(name="links", world_size=world_size, gates=(gate,), source=where,
                   description=f"gate from the link measurement ({where}): {fraction:.0%} of the ring ceiling "
                               f"{ceiling:.1f} GB/s (slowest link x peers, capped by the all-to-all aggregate)",
                   bench=GateBench(64 << 20, LINK_GATE_BYTES),
                   monotonic=Monotonic("all_reduce", True, 64 << 20, 0.05))


def profile_misfit(profile: Profile, gpu_model: str | None, world_size: int | None) -> str | None:
    """Why ``profile`` is not for a run of ``world_size`` GPUs of ``gpu_model`` (None: it fits, or cannot tell)."""
    why = []
    if profile.gpu_match and gpu_model and profile.gpu_match.lower() not in gpu_model.lower():
        why.append(f"GPU model {gpu_model!r}, the profile's is {profile.gpu_match!r}")
    if world_size and world_size != profile.world_size:
        why.append(f"{world_size} GPUs, the profile's {profile.world_size}")
    return "; ".join(why) or None


def waive_all(profile: Profile, reason: str) -> list[Finding]:
    names = [g.name for g in profile.gates] + (["monotonic"] if profile.monotonic else [])
    return [Finding(n, Verdict.WAIVED, reason) for n in names]


def planned_how(profile: Profile) -> dict[str, Any]:
    """How ``judge`` measures ``profile``'s sweep: ``ccltune bench`` under torchrun, one process per GPU."""
    return {"source": "measured", "world_size": profile.world_size, "engine": "nccl", "graph": False,
            "launcher": "torchrun", "process_per_gpu": True}


def waive(ctx: Context, reason: str) -> list[Finding]:
    """Every gate of the context's profile WAIVED with ``reason`` (the sweep cannot run here)."""
    assert ctx.profile is not None
    ctx.how = ctx.how or planned_how(ctx.profile)
    return waive_all(ctx.profile, reason)


def judge(ctx: Context) -> list[Finding]:
    """The context's profile over its records, else over a bench JSON (``from_json``), else over a sweep measured
    now. Leaves how the figures were taken in ``ctx.how`` and the bench output in ``ctx.artifacts``."""
    profile = ctx.profile
    assert profile is not None
    if ctx.records is not None:
        return evaluate(profile, ctx.records, ctx.how)
    if ctx.from_json:
        bench_env, records = benchrun.read_bench_json(ctx.from_json)
        ctx.how = how_measured(bench_env, records, source=ctx.from_json)
        return evaluate(profile, records, ctx.how)
    ctx.how = planned_how(profile)
    plan = profile.bench
    run = benchrun.run_bench(profile.world_size, bench_args=ctx.bench_args, timeout_s=ctx.timeout_s,
                             min_bytes=plan.min_bytes,
                             max_bytes=plan.max_bytes, step_factor=plan.step_factor, iters=plan.iters,
                             warmup=plan.warmup)
    if run.output:
        ctx.artifacts["bench-output.txt"] = run.output
    if run.error:
        sweep = f"{format_size(plan.min_bytes)}..{format_size(plan.max_bytes)}"
        return [Finding("measure", Verdict.ERROR, f"bench {sweep} on {profile.world_size} GPUs failed: {run.error}",
                        "run the command in data.argv by hand", data={"argv": run.argv})]
    ctx.how = how_measured(run.bench_env, run.records, source="measured") | {"launcher": "torchrun",
                                                                          "process_per_gpu": True}
    return evaluate(profile, run.records, ctx.how)


def _gate(gate: Gate, records: Sequence[Record], *, provisional: bool) -> Finding:
    points = _points(records, gate.collective, gate.in_place, gate.metric)
    where = f"{'in-place' if gate.in_place else 'out-of-place'} {gate.collective} {gate.metric} at " \
            f"{format_size(gate.size_bytes)}"
    data = {"size_bytes": gate.size_bytes, "min": gate.min_value, "metric": gate.metric}
    if gate.size_bytes not in points:
        have = ", ".join(format_size(s) for s in points) or "none"
        return Finding(gate.name, Verdict.ERROR, f"no measurement of {where} (sizes measured: {have})",
                       f"measure {format_size(gate.size_bytes)} (-e/--maxbytes)", data=data)
    value = points[gate.size_bytes]
    note = " (provisional threshold)" if provisional else ""
    ok = value >= gate.min_value
    return Finding(gate.name, Verdict.PASS if ok else Verdict.FAIL,
                   f"{where}: {value:.1f} {'>=' if ok else '<'} {gate.min_value:g} GB/s{note}",
                   "" if ok else "run `ccltune doctor` for what limits it", value=value, data=data)


def check_monotonic(rule: Monotonic, records: Sequence[Record], up_to: int | None = None) -> Finding:
    """FAIL where busbw at a size (up to ``up_to`` bytes) falls more than ``tolerance`` below the best smaller size."""
    points = {s: v for s, v in _points(records, rule.collective, rule.in_place, "busbw_gbps").items()
              if s >= rule.from_bytes and (up_to is None or s <= up_to)}
    label = f"{rule.collective} busbw from {format_size(rule.from_bytes)}"
    if len(points) < 2:
        return Finding("monotonic", Verdict.WAIVED, f"{label}: {len(points)} sizes measured, need 2")
    drops: list[dict[str, Any]] = []  # the record's data: sizes in bytes, busbw in GB/s
    best_size, best = 0, 0.0
    for size, value in points.items():
        if best and value < best * (1 - rule.tolerance):
            drops.append({"size_bytes": size, "busbw_gbps": value, "best_size_bytes": best_size, "best_gbps": best})
        if value > best:
            best_size, best = size, value
    data = {"points": {str(s): v for s, v in points.items()}, "drops": drops, "tolerance": rule.tolerance}
    if not drops:
        return Finding("monotonic", Verdict.PASS, f"{label}: never falls more than {rule.tolerance:.0%} "
                       f"over {len(points)} sizes", data=data)
    d = drops[0]
    return Finding("monotonic", Verdict.FAIL, f"{label}: {d['busbw_gbps']:.1f} GB/s at {format_size(d['size_bytes'])} "
                   f"< {d['best_gbps']:.1f} at {format_size(d['best_size_bytes'])} (-{1 - d['busbw_gbps'] / d['best_gbps']:.0%}"
                   f", tolerance {rule.tolerance:.0%}); {len(drops)} such sizes",
                   "look for memory pressure, clock throttling or a protocol switch at that size", data=data)
