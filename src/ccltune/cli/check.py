"""ccltune check: pass/fail gates of a platform profile, for CI (exit 1 on any FAIL or ERROR)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import environment
from ccltune.commands.launching import check_timeout
from ccltune.diagnose.checks import gates, profiles
from ccltune.diagnose.checks.registry import Context, run_checks
from ccltune.diagnose.probes import links, nvml
from ccltune.diagnose.findings import Finding, exit_code, format_findings, overall
from ccltune.diagnose.junit import to_junit
from ccltune.cli._common import add_output_flags
from ccltune.diagnose.record import record_run, write_json, write_text
from ccltune.errors import DataError, UsageError
from ccltune.status import Verdict
from ccltune.store import Store
from ccltune.tune.derive import gpu_model


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check", help="pass/fail gates of a platform profile (CI: exit 1 on FAIL or ERROR)",
        description="Measure all_reduce (or read a stored run or a bench JSON) and hold it to a platform profile's "
                    "gates. Without a built-in profile for this machine, the gate is derived from what its own "
                    f"links carry: {gates.RING_FRACTION:.0%} of the ring ceiling (docs/diagnose.md). "
                    "Statuses: PASS, FAIL, WAIVED (cannot run here), ERROR (a gate could not be evaluated). "
                    "Exit 0 when every check passed or was waived, 1 when any FAILed or ERRORed, 2 on bad input.",
        formatter_class=DefaultsFormatter)
    p.add_argument("--profile", metavar="NAME|PATH",
                   help="built-in profile (" + ", ".join(profiles.builtin_names()) + ") or a .toml file; "
                        "default: the built-in matching the GPUs (of this machine, or of --run's run)")
    p.add_argument("--run", type=int, metavar="N", help="judge stored run N of --db (a ccltune bench run or an "
                   "imported nccl-tests/rccl-tests run) instead of measuring")
    p.add_argument("--force-profile", action="store_true",
                   help="judge with --profile even when its GPU model or GPU count differs from the run's")
    p.add_argument("--links-run", type=int, metavar="N", help="without a matching built-in profile, derive the gate "
                   "from links run N of --db (ccltune links) instead of measuring the links")
    p.add_argument("--ring-fraction", type=float, default=gates.RING_FRACTION, metavar="F",
                   help="a gate derived from the links requires this fraction of their ring ceiling")
    p.add_argument("--from-json", metavar="FILE", help="judge a bench JSON written earlier (ccltune bench --json) "
                   "instead of measuring")
    p.add_argument("--junit", metavar="PATH", help="write JUnit XML for CI")
    p.add_argument("--timeout", type=float, default=1200.0, metavar="S", help="seconds the measurement may take")
    p.add_argument("--list-profiles", action="store_true", help="list the built-in profiles and exit")
    add_output_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_timeout(args.timeout)
    if not 0 < args.ring_fraction <= 1:
        raise UsageError(f"--ring-fraction must be in (0, 1], got {args.ring_fraction}")
    if args.list_profiles:
        for name in profiles.builtin_names():
            prof = profiles.load_profile(name)
            print(f"{name:<12} {prof.world_size} GPUs  {prof.description}{'  (provisional)' if prof.provisional else ''}")
        return 0
    if args.run is not None:
        if args.from_json:
            raise UsageError("--run and --from-json both name what to judge; give one")
        return _judge_stored(args)
    env = environment.collect(engine="nccl")
    names = [g["name"] for g in env["gpus"]]
    if not (args.profile or args.from_json or names):
        return _waived(args, "no GPU here and no --profile/--from-json/--run: nothing to measure or judge")
    profile, waived = _profile(args, names, env)
    if profile is None:
        return _waived(args, waived)
    ctx = Context(profile=profile, gpus=len(names), from_json=args.from_json, timeout_s=args.timeout)
    findings = run_checks("check", ctx)
    return _report(args, env, profile, findings, ctx.how, ctx.artifacts)


def _waived(args: argparse.Namespace, reason: str) -> int:
    waived = [Finding("check", Verdict.WAIVED, reason)]
    print(format_findings(waived, title="ccltune check"))
    if args.json_path:
        write_json(args.json_path, {"profile": None, "status": Verdict.WAIVED, "checks": [waived[0].to_record()]})
    return 0


def _report(args: argparse.Namespace, env: dict[str, Any], profile: profiles.Profile, findings: list[Finding],
            how: dict[str, Any], artifacts: dict[str, str]) -> int:
    verdict = {"profile": profile.name, "profile_source": profile.source, "status": overall(findings),
               "how": how, "checks": [f.to_record() for f in findings]}
    print(format_findings(findings, title=f"ccltune check --profile {profile.name} ({profile.description}); "
                          f"world size {how.get('world_size')}, engine {how.get('engine')}, "
                          f"graph {how.get('graph')}, process per GPU {how.get('process_per_gpu')}"))
    if args.json_path:
        write_json(args.json_path, verdict)
    if args.junit:
        write_text(args.junit, to_junit(f"ccltune.check.{profile.name}", findings, how), flag="--junit")
    artifacts = {"verdict.json": json.dumps(verdict, indent=2, default=str), **artifacts}
    record_run(args.db, "check", env=env, args=args, findings=findings, artifacts=artifacts,
               summary={"status": verdict["status"], "profile": profile.name})
    return exit_code(findings)


def _machine(gpu_names: list[str]) -> str:
    return f"{len(gpu_names)} x {gpu_names[0]}" if gpu_names else "no GPU"


def _profile(args: argparse.Namespace, gpu_names: list[str],
             env: dict[str, Any]) -> tuple[profiles.Profile | None, str]:
    """(the profile to judge this machine by, or None with why nothing can be judged)."""
    if args.profile:
        return profiles.load_profile(args.profile), ""
    found = profiles.detect(gpu_names)
    if found is not None:
        return found, ""
    if args.links_run is not None:
        return _stored_link_profile(args, len(gpu_names)), ""
    seen = _machine(gpu_names)
    if len(gpu_names) == 1:
        return None, (f"{seen}: one GPU has no links, so there is no bandwidth to gate (and no built-in profile "
                      "matches it); with 2 or more GPUs check derives its gate from their links")
    why = links.available()
    if why is None and not args.from_json:
        profile = _measured_link_profile(args, env, len(gpu_names))
        if profile is not None:
            return profile, ""
        why = "the link measurement gave no ring ceiling"
    raise UsageError(f"no built-in profile matches this machine ({seen}) and its links cannot give a gate ({why}); "
                     "pick a profile with --profile (" + ", ".join(profiles.builtin_names()) + ") or give a "
                     "links run with --links-run N")


def _stored_link_profile(args: argparse.Namespace, world_size: int) -> profiles.Profile:
    with Store(args.db, readonly=True) as store:
        run = store.run(args.links_run)
        rows = store.links(args.links_run)
    if run.kind != "links" or not rows:
        raise UsageError(f"--links-run {args.links_run}: run {args.links_run} is a {run.kind} run with "
                         f"{len(rows)} link rows, not a links run (ccltune links, ccltune import)")
    gpus = len({int(r["src"]) for r in rows} | {int(r["dst"]) for r in rows})
    egress = {int(g): float(v) for g, v in (run.summary.get("nvlink_egress_gbps") or {}).items()}
    profile = gates.link_profile(rows, world_size=world_size or gpus, where=f"links run {args.links_run}",
                                 fraction=args.ring_fraction, egress=egress)
    if profile is None:
        raise UsageError(f"--links-run {args.links_run}: its rows give no ring ceiling (no bandwidth between GPUs)")
    return profile


def _measured_link_profile(args: argparse.Namespace, env: dict[str, Any], world_size: int) -> profiles.Profile | None:
    """Measure the links (as ``ccltune links`` does, copy engine only), keep them as a links run, derive the gate."""
    run = links.measure(links.LinkPlan(methods=("ce",)), log=lambda line: print(line, file=sys.stderr, flush=True))
    _limits, egress = nvml.link_limits(nvml.read_nvml(), run.bus_ids)
    links_env = {**env, "command": "ccltune check (its link measurement)"}
    run_id = record_run(args.db, "links", env=links_env, args=args, links=run.rows,
                        summary={"nvlink_egress_gbps": {str(g): v for g, v in egress.items()}})
    return gates.link_profile(run.rows, world_size=world_size, where=f"links run {run_id}, measured now",
                              fraction=args.ring_fraction, egress=egress)


def _run_gpu_model(env: dict[str, Any], platform: str | None) -> str | None:
    try:
        return gpu_model(env, platform)
    except DataError:
        return None


def _judge_stored(args: argparse.Namespace) -> int:
    """``--run N``: judge a stored run's measurements, with a profile that fits its GPUs."""
    with Store(args.db, readonly=True) as store:
        run = store.run(args.run)
        records = [m.to_record() for m in store.measurements(args.run)]
    if not records:
        raise UsageError(f"--run {args.run}: run {args.run} ({run.kind}) holds no measurements to judge")
    model = _run_gpu_model(run.env, run.platform)
    ranks = run.world_size or run.env.get("world_size") or max(int(r.get("n_ranks") or 0) for r in records) or None
    what = f"run {args.run} ({ranks or '?'} x {model or 'unknown GPU'})"
    findings: list[Finding] = []
    if args.profile:
        profile = profiles.load_profile(args.profile)
        misfit = gates.profile_misfit(profile, model, ranks)
        if misfit and not args.force_profile:
            raise UsageError(f"--profile {profile.name} does not fit {what}: the run has {misfit}; pick the profile "
                             "for its GPUs (or leave --profile out), or pass --force-profile to judge it anyway")
        if misfit:
            findings.append(Finding("profile_fit", Verdict.WARN, f"--force-profile: profile {profile.name} judges {what}: "
                                    f"the run has {misfit}"))
    else:
        profile = next((p for p in map(profiles.load_profile, profiles.builtin_names())
                        if model and p.gpu_match and p.gpu_match.lower() in model.lower() and p.world_size == ranks),
                       None)
        if profile is None and args.links_run is not None:
            profile = _stored_link_profile(args, ranks or 0)
        if profile is None:
            raise UsageError(f"no built-in profile matches {what}; pick one with --profile ("
                             + ", ".join(profiles.builtin_names()) + ") or derive a gate with --links-run N")
    how = gates.how_measured(run.env, records, source=f"run {args.run}: {run.command}")
    how["world_size"] = ranks
    how["engine"] = how.get("engine") or run.engine  # an import: the tool that measured (nccl-tests, rccl-tests)
    if findings:  # forced: judge the gates, not the count
        how = {**how, "world_size": profile.world_size}
    findings += run_checks("check", Context(profile=profile, records=records, how=how))
    # the check is of run N's machine (its host, platform, GPUs), not of the one that read the database
    here = environment.collect(engine=run.engine)
    env = {**run.env, "host": run.host, "platform": run.platform, "world_size": run.world_size,
           "n_nodes": run.n_nodes, "command": here.get("command"), "ccltune_version": here.get("ccltune_version"),
           "judged_run": args.run, "judged_on_host": here.get("host")}
    return _report(args, env, profile, findings, how, {})
