"""``check``: pass/fail gates of a platform profile, for CI: all_reduce measured (``diagnose.probes.benchrun``),
or a stored run or a bench JSON read, and held to the profile's gates (``diagnose.checks.gates``); without a
built-in profile for the machine, a gate derived from what its own links carry."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ccltune import environment
from ccltune.commands.bench_probe import bench_args
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.diagnosis import CheckResult, DiagnoseOptions, keep
from ccltune.commands.launching import check_timeout
from ccltune.commands.options import option, to_argv
from ccltune.diagnose.checks import gates, profiles
from ccltune.diagnose.checks.registry import Context, run_checks
from ccltune.diagnose.findings import Finding, format_findings, overall
from ccltune.diagnose.junit import to_junit
from ccltune.diagnose.probes import links, nvml
from ccltune.diagnose.record import record_run, write_json, write_text
from ccltune.errors import DataError, UsageError
from ccltune.status import Verdict
from ccltune.store import Store
from ccltune.tune.derive import gpu_model


@dataclass(frozen=True, kw_only=True)
class CheckOptions(DiagnoseOptions):
    """``ccltune check``'s options (``ccltune check --help`` says what each means). ``run`` and ``from_json``
    name what to judge (one of them; neither: measure now); ``timeout`` in seconds."""

    profile: str | None = option(None, flag="--profile",
                                 help="built-in profile (" + ", ".join(profiles.builtin_names()) + ") or a .toml file; "
                                      "default: the built-in matching the GPUs (of this machine, or of --run's run)")
    run: int | None = option(None, flag="--run", help="judge stored run N of --db (a ccltune bench run or an "
            "imported nccl-tests/rccl-tests run) instead of measuring")
    force_profile: bool = option(False, flag="--force-profile",
                                 help="judge with --profile even when its GPU model or GPU count differs from the run's")
    links_run: int | None = option(None, flag="--links-run",
                                   help="without a matching built-in profile, derive the gate "
                                        "from links run N of --db (ccltune links) instead of measuring the links")
    ring_fraction: float = option(gates.RING_FRACTION, flag="--ring-fraction",
                                  help="a gate derived from the links requires this fraction of their ring ceiling")
    from_json: str | None = option(None, flag="--from-json",
                                   help="judge a bench JSON written earlier (ccltune bench --json) "
                                        "instead of measuring")
    junit: str | None = option(None, flag="--junit", help="write JUnit XML for CI")
    timeout: float = option(1200.0, flag="--timeout", help="seconds the measurement may take")
    list_profiles: bool = option(False, flag="--list-profiles", help="list the built-in profiles and exit")

    def to_argv(self) -> list[str]:
        """The command line of these options (the CLI's parser reads it back to the same options)."""
        return to_argv(self, "check")


def run_check(o: CheckOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> CheckResult:
    """Judge (see the module's docstring), say the verdict to ``console``, write ``--json``/``--junit``, store
    a check run (and, when the gate came from links measured now, their links run). WAIVED, storing nothing,
    when there is nothing here to measure or judge. ``command_line``: what the user typed, recorded with the
    runs (default: the options' argv)."""
    check_outputs(o)
    check_timeout(o.timeout)
    if not 0 < o.ring_fraction <= 1:
        raise UsageError(f"--ring-fraction must be in (0, 1], got {o.ring_fraction}")
    if o.list_profiles:
        names = profiles.builtin_names()
        for name in names:
            prof = profiles.load_profile(name)
            console.say(f"{name:<12} {prof.world_size} GPUs  {prof.description}"
                        f"{'  (provisional)' if prof.provisional else ''}")
        return CheckResult([], {"profiles": names}, o.db, profiles=names)
    argv = command_line or o.to_argv()
    if o.run is not None:
        if o.from_json:
            raise UsageError("--run and --from-json both name what to judge; give one")
        return _judge_stored(o, argv, console)
    env = environment.collect(engine="nccl", argv=argv)
    names = [g["name"] for g in env["gpus"]]
    if not (o.profile or o.from_json or names):
        return _waived(o, "no GPU here and no --profile/--from-json/--run: nothing to measure or judge", console)
    profile, waived, links_run_id = _profile(o, names, env, console)
    if profile is None:
        return _waived(o, waived, console)
    ctx = Context(profile=profile, gpus=len(names), from_json=o.from_json, timeout_s=o.timeout, bench_args=bench_args)
    findings = run_checks("check", ctx)
    return _report(o, env, profile, findings, ctx.how, ctx.artifacts, console, links_run_id)


def _waived(o: CheckOptions, reason: str, console: Console) -> CheckResult:
    waived = [Finding("check", Verdict.WAIVED, reason)]
    console.say(format_findings(waived, title="ccltune check"))
    record = {"profile": None, "status": Verdict.WAIVED, "checks": [waived[0].to_record()]}
    if o.json_path:
        write_json(o.json_path, record)
    return CheckResult(waived, record, o.db, json_path=o.json_path)


def _report(o: CheckOptions, env: dict[str, Any], profile: profiles.Profile, findings: list[Finding],
            how: dict[str, Any], artifacts: dict[str, str], console: Console,
            links_run_id: int | None = None) -> CheckResult:
    verdict = {"profile": profile.name, "profile_source": profile.source, "status": overall(findings),
               "how": how, "checks": [f.to_record() for f in findings]}
    console.say(format_findings(findings, title=f"ccltune check --profile {profile.name} ({profile.description}); "
                                f"world size {how.get('world_size')}, engine {how.get('engine')}, "
                                f"graph {how.get('graph')}, process per GPU {how.get('process_per_gpu')}"))
    if o.junit:
        write_text(o.junit, to_junit(f"ccltune.check.{profile.name}", findings, how), flag="--junit")
    artifacts = {"verdict.json": json.dumps(verdict, indent=2, default=str), **artifacts}
    run_id = keep(o, "check", verdict, findings, env=env, artifacts=artifacts,
                  summary={"status": verdict["status"], "profile": profile.name})
    return CheckResult(findings, verdict, o.db, run_id, o.json_path, profile=profile.name, how=how, junit_path=o.junit,
                       links_run_id=links_run_id)


def _machine(gpu_names: list[str]) -> str:
    return f"{len(gpu_names)} x {gpu_names[0]}" if gpu_names else "no GPU"


def _profile(o: CheckOptions, gpu_names: list[str], env: dict[str, Any],
             console: Console) -> tuple[profiles.Profile | None, str, int | None]:
    """(the profile to judge this machine by, or None with why nothing can be judged, and the links run
    measured now to derive it, if one was)."""
    if o.profile:
        return profiles.load_profile(o.profile), "", None
    found = profiles.detect(gpu_names)
    if found is not None:
        return found, "", None
    if o.links_run is not None:
        return _stored_link_profile(o, len(gpu_names)), "", None
    seen = _machine(gpu_names)
    if len(gpu_names) == 1:
        return None, (f"{seen}: one GPU has no links, so there is no bandwidth to gate (and no built-in profile "
                      "matches it); with 2 or more GPUs check derives its gate from their links"), None
    why = links.available()
    if why is None and not o.from_json:
        profile, run_id = _measured_link_profile(o, env, len(gpu_names), console)
        if profile is not None:
            return profile, "", run_id
        why = "the link measurement gave no ring ceiling"
    raise UsageError(f"no built-in profile matches this machine ({seen}) and its links cannot give a gate ({why}); "
                     "pick a profile with --profile (" + ", ".join(profiles.builtin_names()) + ") or give a "
                     "links run with --links-run N")


def _stored_link_profile(o: CheckOptions, world_size: int) -> profiles.Profile:
    assert o.links_run is not None
    with Store(o.db, readonly=True) as store:
        run = store.run(o.links_run)
        rows = store.links(o.links_run)
    if run.kind != "links" or not rows:
        raise UsageError(f"--links-run {o.links_run}: run {o.links_run} is a {run.kind} run with "
                         f"{len(rows)} link rows, not a links run (ccltune links, ccltune import)")
    gpus = len({int(r["src"]) for r in rows} | {int(r["dst"]) for r in rows})
    egress = {int(g): float(v) for g, v in (run.summary.get("nvlink_egress_gbps") or {}).items()}
    profile = gates.link_profile(rows, world_size=world_size or gpus, where=f"links run {o.links_run}",
                                 fraction=o.ring_fraction, egress=egress)
    if profile is None:
        raise UsageError(f"--links-run {o.links_run}: its rows give no ring ceiling (no bandwidth between GPUs)")
    return profile


def _measured_link_profile(o: CheckOptions, env: dict[str, Any], world_size: int,
                           console: Console) -> tuple[profiles.Profile | None, int]:
    """Measure the links (as ``ccltune links`` does, copy engine only), keep them as a links run (its id
    returned), derive the gate."""
    run = links.measure(links.LinkPlan(methods=("ce",)), log=console.note)
    _limits, egress = nvml.link_limits(nvml.read_nvml(), run.bus_ids)
    links_env = {**env, "command": "ccltune check (its link measurement)"}
    run_id = record_run(o.db, "links", env=links_env, args=dataclasses.asdict(o), links=run.rows,
                        summary={"nvlink_egress_gbps": {str(g): v for g, v in egress.items()}})
    return gates.link_profile(run.rows, world_size=world_size, where=f"links run {run_id}, measured now",
                              fraction=o.ring_fraction, egress=egress), run_id


def _run_gpu_model(env: dict[str, Any], platform: str | None) -> str | None:
    try:
        return gpu_model(env, platform)
    except DataError:
        return None


def _judge_stored(o: CheckOptions, argv: list[str], console: Console) -> CheckResult:
    """``--run N``: judge a stored run's measurements, with a profile that fits its GPUs."""
    assert o.run is not None
    with Store(o.db, readonly=True) as store:
        run = store.run(o.run)
        records = [m.to_record() for m in store.measurements(o.run)]
    if not records:
        raise UsageError(f"--run {o.run}: run {o.run} ({run.kind}) holds no measurements to judge")
    model = _run_gpu_model(run.env, run.platform)
    ranks = run.world_size or run.env.get("world_size") or max(int(r.get("n_ranks") or 0) for r in records) or None
    what = f"run {o.run} ({ranks or '?'} x {model or 'unknown GPU'})"
    findings: list[Finding] = []
    profile: profiles.Profile | None
    if o.profile:
        profile = profiles.load_profile(o.profile)
        misfit = gates.profile_misfit(profile, model, ranks)
        if misfit and not o.force_profile:
            raise UsageError(f"--profile {profile.name} does not fit {what}: the run has {misfit}; pick the profile "
                             "for its GPUs (or leave --profile out), or pass --force-profile to judge it anyway")
        if misfit:
            findings.append(Finding("profile_fit", Verdict.WARN, f"--force-profile: profile {profile.name} judges {what}: "
                                    f"the run has {misfit}"))
    else:
        profile = next((p for p in map(profiles.load_profile, profiles.builtin_names())
                        if model and p.gpu_match and p.gpu_match.lower() in model.lower() and p.world_size == ranks),
                       None)
        if profile is None and o.links_run is not None:
            profile = _stored_link_profile(o, ranks or 0)
        if profile is None:
            raise UsageError(f"no built-in profile matches {what}; pick one with --profile ("
                             + ", ".join(profiles.builtin_names()) + ") or derive a gate with --links-run N")
    how = gates.how_measured(run.env, records, source=f"run {o.run}: {run.command}")
    how["world_size"] = ranks
    how["engine"] = how.get("engine") or run.engine  # an import: the tool that measured (nccl-tests, rccl-tests)
    if findings:  # forced: judge the gates, not the count
        how = {**how, "world_size": profile.world_size}
    findings += run_checks("check", Context(profile=profile, records=records, how=how))
    # the check is of run N's machine (its host, platform, GPUs), not of the one that read the database
    here = environment.collect(engine=run.engine, argv=argv)
    env = {**run.env, "host": run.host, "platform": run.platform, "world_size": run.world_size,
           "n_nodes": run.n_nodes, "command": here.get("command"), "ccltune_version": here.get("ccltune_version"),
           "judged_run": o.run, "judged_on_host": here.get("host")}
    return _report(o, env, profile, findings, how, {}, console)
