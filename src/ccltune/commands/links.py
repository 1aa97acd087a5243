"""``links``: every GPU pair's bandwidth (copy engine and SM kernel) and latency, measured from this one
process, then the slowest-link analysis (``diagnose.checks.linkmath``); ``run``: a stored links run shown
again instead (``commands.linkshow``)."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from ccltune import environment
from ccltune.commands import linkshow
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.diagnosis import DiagnoseOptions, LinksResult, keep
from ccltune.commands.options import option, to_argv
from ccltune.diagnose.checks import linkmath
from ccltune.diagnose.findings import Finding, format_findings, overall
from ccltune.diagnose.probes import links, nvml
from ccltune.errors import UsageError
from ccltune.sizes import format_size, parse_size
from ccltune.status import Verdict


@dataclass(frozen=True, kw_only=True)
class LinksOptions(DiagnoseOptions):
    """``ccltune links``'s options (``ccltune links --help`` says what each means). ``size`` is text as
    ``-s`` takes it (K/M/G suffixes); ``method`` a comma-separated list of ``links.METHODS``."""

    size: str = option("256M", flag="--size", help="bytes per bandwidth copy (K/M/G)")
    iters: int = option(10, flag="--iters", help="timed copies per measurement (median)")
    warmup: int = option(2, flag="--warmup", help="untimed copies first")
    latency_iters: int = option(100, flag="--latency-iters", help="4-byte copies per pair for latency (median)")
    method: str = option("ce,sm-read,sm-write", flag="--method", comma=True,
                         help="comma-separated: " + ", ".join(links.METHODS))
    threshold: float = option(0.8, flag="--threshold",
                              help="flag links below this fraction of their median; flagged links are measured again, and "
                                   "a WARN names only those slow both times (an all-to-all's pair: also slow alone)")
    run: int | None = option(None, flag="--run",
                             help="show stored links run N (measured, or imported from TransferBench/nvbandwidth) instead "
                                  "of measuring: matrix, per GPU slowest link and bound, node ceiling, slow links")

    def to_argv(self) -> list[str]:
        """The command line of these options (the CLI's parser reads it back to the same options)."""
        return to_argv(self, "links")


def render_summary(summary: dict[str, Any]) -> str:
    lines = ["# slowest-link analysis: bound = slowest outgoing link x peers (capped by the all-to-all aggregate)"]
    for name, s in summary["series"].items():
        if not name.endswith("/uni"):
            continue
        lines.append(f"# {name}: ring ceiling {s['ring_ceiling_gbps']:.1f} GB/s" +
                     (f", median {s['nvlink_ratio']:.1%} of the NVLink limit" if s.get("nvlink_ratio") else ""))
        lines.append(f"{'gpu':>5} {'slowest_GBps':>13} {'to':>4} {'peers':>6} {'aggregate_GBps':>15} {'bound_GBps':>11}")
        for b in s["per_gpu"]:
            agg = "-" if b["aggregate_gbps"] is None else f"{b['aggregate_gbps']:.1f}"
            lines.append(f"{b['gpu']:>5} {b['slowest_gbps']:>13.1f} {b['slowest_peer']:>4} {b['peers']:>6} "
                         f"{agg:>15} {b['bound_gbps']:>11.1f}")
    if "ring_ceiling_gbps" in summary:
        lines.append(f"# predicted ceiling for ring collectives: {summary['ring_ceiling_gbps']:.1f} GB/s per GPU")
    return "\n".join(lines)


def run_links(o: LinksOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> LinksResult:
    """Measure every pair (WAIVED without 2 GPUs), say the matrices, the analysis and the checks to ``console``
    (progress lines as notes), store a links run; with ``o.run``, show that stored run instead and store
    nothing. ``command_line``: what the user typed, recorded with the run (default: the options' argv)."""
    check_outputs(o)
    if not 0 < o.threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {o.threshold}")
    if o.run is not None:
        return linkshow.show(o.db, o.run, o.threshold, o.json_path, console)
    started = time.monotonic()
    plan = links.LinkPlan(size_bytes=parse_size(o.size, "-s/--size"), iters=o.iters, warmup=o.warmup,
                          latency_iters=o.latency_iters, threshold=o.threshold,
                          methods=tuple(m.strip() for m in o.method.split(",") if m.strip()))
    env = environment.collect(argv=command_line or o.to_argv())
    why = links.available()
    summary: dict[str, Any]
    if why:
        findings = [Finding("links", Verdict.WAIVED, why)]
        run, summary = links.LinkRun(), {}
    else:
        run = links.measure(plan, log=console.note)
        limits, egress = nvml.link_limits(nvml.read_nvml(), run.bus_ids)  # matched to CUDA devices by bus id
        summary, findings = linkmath.analyze(run.rows, threshold=o.threshold, nvlink_limit=limits, egress=egress)
        summary["nvlink_limit_gbps"] = {f"{s}-{d}": v for (s, d), v in limits.items()}
        summary["nvlink_egress_gbps"] = {str(g): v for g, v in egress.items()}
        findings += [Finding(f"links:{k}", Verdict.WAIVED, v) for k, v in run.waived.items()]
        findings += [Finding(f"links:{m}/verify", Verdict.ERROR, f"{m}: destination bytes differ from the source after the "
                             "copies: the measurement is not trustworthy") for m in run.failed_checks]
        console.say(f"# ccltune links: {run.n_gpus} x {run.gpu_names[0]}, {format_size(plan.size_bytes)} per copy, "
                    f"median of {plan.iters} after {plan.warmup} warmup")
        for method in plan.methods:
            for direction in ("uni", "bidir", "all2all"):
                if any(r["method"] == method and r["direction"] == direction for r in run.rows):
                    console.say(linkshow.render_matrix(run.rows, run.n_gpus, method, direction))
        console.say(linkshow.render_matrix(run.rows, run.n_gpus, "ce", "latency", key="latency_us"))
        console.say(render_summary(summary))
    summary["elapsed_s"] = run.elapsed_s
    summary["command_s"] = time.monotonic() - started
    console.say(format_findings(findings, title="ccltune links checks"))
    console.say(f"# elapsed: {summary['command_s']:.1f} s, nothing measured" if why else
                f"# elapsed: {run.elapsed_s:.1f} s measuring, {summary['command_s']:.1f} s in all (CUDA start included)")
    record = {"status": overall(findings), "n_gpus": run.n_gpus, "gpus": run.gpu_names, "plan": dataclasses.asdict(o),
              "rows": run.rows, "summary": summary, "checks": [f.to_record() for f in findings]}
    run_id = keep(o, "links", record, findings, env=env, links=run.rows, summary=summary,
                  artifacts={"links.json": json.dumps(record, indent=2, default=str)})
    return LinksResult(findings, record, o.db, run_id, o.json_path)
