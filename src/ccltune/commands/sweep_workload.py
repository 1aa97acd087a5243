"""``sweep --workload W.json``: the workload's (collective, size) points this launch can sweep, each in
the job's own datatype and op unless ``-d``/``-o`` say otherwise, and under load when the job's own
times show its calls far slower than idle (issue 28; docs/workload.md)."""

from __future__ import annotations

import os
from typing import Any

from ccltune import collectives, datatypes
from ccltune.commands.options import OmittedStr, default
from ccltune.commands.sweep_options import DEFAULT_LOAD_M, SweepOptions
from ccltune.errors import UsageError

# -b/-e/-f, which --workload replaces
_SIZES = {"minbytes": "-b", "maxbytes": "-e", "stepfactor": "-f"}


def load(path: str, o: SweepOptions, colls: list[Any], ranks: int) -> Any:
    """The workload of --workload ``path``, checked before any process starts: no -b/-e/-f beside it, and at
    least one point this launch can sweep (the node count is checked once the job runs)."""
    from ccltune.workload import model
    from ccltune.workload import plan as workload_plan

    given = [flag for key, flag in _SIZES.items() if getattr(o, key) != default(SweepOptions, key)]
    if given:
        raise UsageError(f"--workload sweeps the workload's own sizes; {', '.join(given)} do not apply with it")
    wl = model.load(path)
    points, skipped = workload_plan.sweep_points(wl, ranks, None, datatypes.dtype(o.datatype),
                                                 [c.name for c in colls], job_dtypes(o, wl))
    if not points:
        raise UsageError(f"--workload {path}: nothing this launch can sweep: "
                         + "; ".join(f"{s.entry.key.collective} {s.entry.key.size_bytes} B: {s.reason}"
                                     for s in skipped[:5]) + (f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""))
    return wl


def job_dtypes(o: SweepOptions, wl: Any) -> dict[tuple[str, int], Any] | None:
    """Without -d: each point in the datatype the job issues at that size (``workload.plan.job_dtypes``); with -d,
    None."""
    from ccltune.workload import plan as workload_plan

    return workload_plan.job_dtypes(wl) if isinstance(o.datatype, OmittedStr) else None


def job_ops(o: SweepOptions, wl: Any) -> dict[tuple[str, int], str] | None:
    """Without -o: each reduction point in the job's own op (``workload.plan.job_ops``); with -o, None."""
    from ccltune.workload import plan as workload_plan

    return workload_plan.job_ops(wl) if isinstance(o.op, OmittedStr) else None


def op_lines(o: SweepOptions, wl: Any) -> list[str]:
    """What ``sweep --workload`` says about the ops it measures the job's reductions in."""
    ops = job_ops(o, wl)
    if ops is None:
        return []
    unknown = sorted({(e.key.collective, e.key.size_bytes) for e in wl.entries
                      if collectives.REGISTRY.get(e.key.collective) is not None
                      and collectives.REGISTRY[e.key.collective].reduces and (e.key.collective, e.key.size_bytes) not in ops})
    out = []
    other = {k: v for k, v in ops.items() if v != o.op}
    if other:
        out.append("# in the job's reduction op (-o to override): "
                   + ", ".join(f"{c} {n} B {op}" for (c, n), op in sorted(other.items())))
    if unknown:
        out.append(f"# the workload does not say the op of {len(unknown)} reduction point(s) ("
                   + ", ".join(f"{c} {n} B" for c, n in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
                   + f"): measured with -o {o.op}; a COLL log of the job (NCCL_DEBUG_SUBSYS=COLL) gives it")
    return out


def load_from_job(o: SweepOptions, wl: Any) -> tuple[list[str], int | None]:
    """The sweep of a workload whose calls the job runs far slower than idle is made under load (issue 28;
    docs/workload.md, "In-job times"). Returns what to say and the ``--under-load`` to sweep under
    (``o.under_load`` unless the job's times call for a load)."""
    from ccltune.workload import compute, show
    from ccltune.workload.estimate import idle_estimates

    if o.under_load is not None or not any(show.job_us(e) is not None for e in wl.entries):
        return [], o.under_load
    if not os.path.exists(o.db):
        return [f"# the workload has the job's own times, but {o.db} holds no idle measurement to compare them "
                "with: sweeping idle (then `ccltune workload show W.json --db` compares them)"], None
    slow = show.slow_entries(wl, idle_estimates(o.db, wl))
    if not slow:
        return [], None
    worst = ", ".join(f"{wl.entries[i].key.collective} {wl.entries[i].key.size_bytes} B x{r:.1f}" for i, r in slow[:3])
    if o.idle:
        return [f"# the job runs its calls far slower than idle ({worst}): sweeping idle as --idle asks; "
                "tune --workload will give those sizes no rule"], None
    m, why = compute.load_for(wl.compute)
    said = (f"# the job runs its calls far slower than NCCL's default idle in {o.db} ({worst}; at least "
            f"x{show.SLOW_RATIO:g} at the median)")
    if m is None and wl.compute is not None:  # the job's own kernels say a load would not be its conditions
        return [f"{said}; {why}: sweeping idle, and tune --workload gives those sizes no rule (--under-load M "
                "sweeps under a load anyway)"], None
    m = m or DEFAULT_LOAD_M
    sized = f" ({why})" if wl.compute is not None else f" (the default: {why})"
    return [f"{said}: sweeping under load, --under-load {m}{sized} (--idle to sweep idle); then tune with "
            f"--under-load {m}"], m
