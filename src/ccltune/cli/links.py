"""ccltune links: per GPU pair bandwidth (copy engine and SM kernel) and latency, slowest-link analysis."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import environment
from ccltune.cli import linkshow
from ccltune.diagnose.checks import linkmath
from ccltune.diagnose.probes import links, nvml
from ccltune.diagnose.findings import Finding, exit_code, format_findings, overall
from ccltune.cli._common import add_output_flags
from ccltune.diagnose.record import record_run, write_json
from ccltune.errors import UsageError
from ccltune.sizes import format_size, parse_size
from ccltune.status import Verdict


def register(sub: Any) -> None:
    p = sub.add_parser(
        "links", help="per GPU pair bandwidth/latency matrix and slowest-link analysis",
        description="Measure every GPU pair from one process: copy engine (ce) and SM copy kernel (sm-read: "
                    "the receiver loads over NVLink; sm-write: the sender stores), one direction, both at once, "
                    "all pairs at once, and 4-byte copy latency. Then: per GPU bound (slowest link x peers), "
                    "ring ceiling, links below --threshold x median. Without 2 GPUs: WAIVED, exit 0. "
                    "Exit 1 on FAIL/ERROR (a copy that came out wrong). Use CUDA_VISIBLE_DEVICES to pick GPUs.",
        formatter_class=DefaultsFormatter)
    p.add_argument("-s", "--size", default="256M", help="bytes per bandwidth copy (K/M/G)")
    p.add_argument("-n", "--iters", type=int, default=10, help="timed copies per measurement (median)")
    p.add_argument("-w", "--warmup", type=int, default=2, help="untimed copies first")
    p.add_argument("--latency-iters", type=int, default=100, help="4-byte copies per pair for latency (median)")
    p.add_argument("--method", default="ce,sm-read,sm-write", help="comma-separated: " + ", ".join(links.METHODS))
    p.add_argument("--threshold", type=float, default=0.8,
                   help="flag links below this fraction of their median; flagged links are measured again, and "
                        "a WARN names only those slow both times (an all-to-all's pair: also slow alone)")
    p.add_argument("--run", type=int, default=None, metavar="N",
                   help="show stored links run N (measured, or imported from TransferBench/nvbandwidth) instead "
                        "of measuring: matrix, per GPU slowest link and bound, node ceiling, slow links")
    add_output_flags(p)
    p.set_defaults(func=main)


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


def main(args: argparse.Namespace) -> int:
    if args.run is not None:
        return linkshow.show(args)
    started = time.monotonic()
    if not 0 < args.threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {args.threshold}")
    plan = links.LinkPlan(size_bytes=parse_size(args.size, "-s/--size"), iters=args.iters, warmup=args.warmup,
                          latency_iters=args.latency_iters, threshold=args.threshold,
                          methods=tuple(m.strip() for m in args.method.split(",") if m.strip()))
    env = environment.collect()
    why = links.available()
    if why:
        findings = [Finding("links", Verdict.WAIVED, why)]
        run, summary = links.LinkRun(), {}
    else:
        run = links.measure(plan, log=lambda line: print(line, file=sys.stderr, flush=True))
        limits, egress = nvml.link_limits(nvml.read_nvml(), run.bus_ids)  # matched to CUDA devices by bus id
        summary, findings = linkmath.analyze(run.rows, threshold=args.threshold, nvlink_limit=limits, egress=egress)
        summary["nvlink_limit_gbps"] = {f"{s}-{d}": v for (s, d), v in limits.items()}
        summary["nvlink_egress_gbps"] = {str(g): v for g, v in egress.items()}
        findings += [Finding(f"links:{k}", Verdict.WAIVED, v) for k, v in run.waived.items()]
        findings += [Finding(f"links:{m}/verify", Verdict.ERROR, f"{m}: destination bytes differ from the source after the "
                             "copies: the measurement is not trustworthy") for m in run.failed_checks]
        print(f"# ccltune links: {run.n_gpus} x {run.gpu_names[0]}, {format_size(plan.size_bytes)} per copy, "
              f"median of {plan.iters} after {plan.warmup} warmup")
        for method in plan.methods:
            for direction in ("uni", "bidir", "all2all"):
                if any(r["method"] == method and r["direction"] == direction for r in run.rows):
                    print(linkshow.render_matrix(run.rows, run.n_gpus, method, direction))
        print(linkshow.render_matrix(run.rows, run.n_gpus, "ce", "latency", key="latency_us"))
        print(render_summary(summary))
    summary["elapsed_s"] = run.elapsed_s
    summary["command_s"] = time.monotonic() - started
    print(format_findings(findings, title="ccltune links checks"))
    print(f"# elapsed: {summary['command_s']:.1f} s, nothing measured" if why else
          f"# elapsed: {run.elapsed_s:.1f} s measuring, {summary['command_s']:.1f} s in all (CUDA start included)")
    result = {"status": overall(findings), "n_gpus": run.n_gpus, "gpus": run.gpu_names, "plan": {k: v for k, v in vars(args).items() if k != "func"},
              "rows": run.rows, "summary": summary, "checks": [f.to_record() for f in findings]}
    if args.json_path:
        write_json(args.json_path, result)
    record_run(args.db, "links", env=env, args=args, findings=findings, links=run.rows,
               artifacts={"links.json": json.dumps(result, indent=2, default=str)}, summary=summary)
    return exit_code(findings)
