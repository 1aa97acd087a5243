"""ccltune check: pass/fail gates of a platform profile, for CI (exit 1 on any FAIL or ERROR)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ccltune import environment
from ccltune.cli._common import check_timeout
from ccltune.diagnose import benchrun, gates, profiles
from ccltune.diagnose.findings import Finding, exit_code, format_findings, overall
from ccltune.diagnose.junit import to_junit
from ccltune.diagnose.record import add_output_flags, record_run, write_json, write_text
from ccltune.errors import UsageError
from ccltune.sizes import format_size


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check", help="pass/fail gates of a platform profile (CI: exit 1 on FAIL or ERROR)",
        description="Measure all_reduce (or read a bench JSON) and hold it to a platform profile's gates. "
                    "Statuses: PASS, FAIL, WAIVED (cannot run here), ERROR (a gate could not be evaluated). "
                    "Exit 0 when every check passed or was waived, 1 when any FAILed or ERRORed, 2 on bad input.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--profile", metavar="NAME|PATH",
                   help="built-in profile (" + ", ".join(profiles.builtin_names()) + ") or a .toml file; "
                        "default: the built-in matching this machine's GPUs")
    p.add_argument("--from-json", metavar="FILE", help="judge a bench JSON written earlier (ccltune bench --json) "
                   "instead of measuring")
    p.add_argument("--junit", metavar="PATH", help="write JUnit XML for CI")
    p.add_argument("--timeout", type=float, default=1200.0, metavar="S", help="seconds the measurement may take")
    p.add_argument("--list-profiles", action="store_true", help="list the built-in profiles and exit")
    add_output_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_timeout(args.timeout)
    if args.list_profiles:
        for name in profiles.builtin_names():
            prof = profiles.load_profile(name)
            print(f"{name:<12} {prof.world_size} GPUs  {prof.description}{'  (provisional)' if prof.provisional else ''}")
        return 0
    env = environment.collect(engine="nccl")
    names = [g["name"] for g in env["gpus"]]
    if not (args.profile or args.from_json or names):
        waived = [Finding("check", "WAIVED", "no GPU here and no --profile/--from-json: nothing to measure or judge")]
        print(format_findings(waived, title="ccltune check"))
        if args.json_path:
            write_json(args.json_path, {"profile": None, "status": "WAIVED", "checks": [waived[0].to_record()]})
        return 0
    profile = _profile(args.profile, names)
    findings, how, output = _measure_and_judge(args, profile, names)
    verdict = {"profile": profile.name, "profile_source": profile.source, "status": overall(findings),
               "how": how, "checks": [f.to_record() for f in findings]}
    print(format_findings(findings, title=f"ccltune check --profile {profile.name} ({profile.description}); "
                          f"world size {how.get('world_size')}, engine {how.get('engine')}, "
                          f"graph {how.get('graph')}, process per GPU {how.get('process_per_gpu')}"))
    if args.json_path:
        write_json(args.json_path, verdict)
    if args.junit:
        write_text(args.junit, to_junit(f"ccltune.check.{profile.name}", findings, how), flag="--junit")
    artifacts = {"verdict.json": json.dumps(verdict, indent=2, default=str)}
    if output:
        artifacts["bench-output.txt"] = output
    record_run(args.db, "check", env=env, args=args, findings=findings, artifacts=artifacts,
               summary={"status": verdict["status"], "profile": profile.name})
    return exit_code(findings)


def _profile(spec: str | None, gpu_names: list[str]) -> profiles.Profile:
    if spec:
        return profiles.load_profile(spec)
    found = profiles.detect(gpu_names)
    if found is None:
        seen = f"{len(gpu_names)} x {gpu_names[0]}" if gpu_names else "no GPU"
        raise UsageError(f"no built-in profile matches this machine ({seen}); pick one with --profile: "
                         + ", ".join(profiles.builtin_names()))
    return found


def _measure_and_judge(args: argparse.Namespace, profile: profiles.Profile,
                       gpu_names: list[str]) -> tuple[list[Finding], dict[str, Any], str]:
    """(findings, how the figures were taken, the bench output to keep)."""
    if args.from_json:
        bench_env, records = benchrun.read_bench_json(args.from_json)
        how = gates.how_measured(bench_env, records, source=args.from_json)
        return gates.evaluate(profile, records, how), how, ""
    how = {"source": "measured", "world_size": profile.world_size, "engine": "nccl", "graph": False,
           "launcher": "torchrun", "process_per_gpu": True}
    if len(gpu_names) < profile.world_size:
        reason = f"profile {profile.name} needs {profile.world_size} GPUs, {len(gpu_names)} visible here"
        return gates.waive_all(profile, reason), how, ""
    plan = profile.bench
    run = benchrun.run_bench(profile.world_size, timeout_s=args.timeout, min_bytes=plan.min_bytes,
                             max_bytes=plan.max_bytes, step_factor=plan.step_factor, iters=plan.iters,
                             warmup=plan.warmup)
    if run.error:
        sweep = f"{format_size(plan.min_bytes)}..{format_size(plan.max_bytes)}"
        return [Finding("measure", "ERROR", f"bench {sweep} on {profile.world_size} GPUs failed: {run.error}",
                        "run the command in data.argv by hand", data={"argv": run.argv})], how, run.output
    how = gates.how_measured(run.bench_env, run.records, source="measured") | {"launcher": "torchrun",
                                                                             "process_per_gpu": True}
    return gates.evaluate(profile, run.records, how), how, run.output
