"""``plugin verify``: whether NCCL ran what a rule file says, from its TUNING log (a bench run this command
starts with the plugin loaded, or ``--from-log``) and from the profiler plugin's record (``--profile``, or
the run's own when the profiler is built). The judge is ``ccltune.tune.verify``, the profiler's tally
``ccltune.ab.fired``."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccltune import collectives, profiler_plugin, rules, tuner_plugin
from ccltune.commands.bench_probe import bench_args
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.launching import check_nproc, check_timeout, gpu_count
from ccltune.commands.options import option
from ccltune.errors import CheckFailed, DataError, EngineUnavailable, RuleFileError, UsageError, verdict_exit_code
from ccltune.sizes import format_size, parse_size, size_series
from ccltune.status import RuleCheck, Verdict

VERIFY_COLLECTIVES = tuple(collectives.PLUGIN_NAMES)  # the collectives NCCL passes to a tuner


@dataclass(frozen=True)
class PluginVerifyOptions:
    """``ccltune plugin verify``'s options (``ccltune plugin verify --help``): the rule file, the collectives
    and sizes of the run (as bench's), or a log (``from_log``) or profiler folder (``profile``) to check instead
    of running."""

    file: str = option(positional=True, help="rule file to deploy and check")
    collective: tuple[str, ...] = option((), positional=True,
                                         help=f"collectives to run (default: those the rules name; choices {', '.join(VERIFY_COLLECTIVES)})")
    minbytes: str = option("8", flag="--minbytes", keyword="min_bytes", help="smallest size (whole buffer, as bench)")
    maxbytes: str = option("1G", flag="--maxbytes", keyword="max_bytes", help="largest size")
    stepfactor: int = option(2, flag="--stepfactor", keyword="step_factor", help="size multiplier")
    nproc: int | None = option(None, flag="--nproc", help="GPUs (default: all present)")
    from_log: str | None = option(None, flag="--from-log",
                                  help="check this NCCL_DEBUG=INFO log (with TUNING lines) instead of running")
    profile: str | None = option(None, flag="--profile",
                                 help="check the profiler files (CCLTUNE_PROFILE=DIR, docs/profiler.md) of a job that ran with "
                                      "RULES instead of running: per rule, the calls it covered and what NCCL ran for them "
                                      "(APPLIED / NOT APPLIED / NEVER FIRED)")
    platform: tuple[str, ...] = option((), flag="--platform", repeat=True,
                                       help="platform facts for --from-log and --profile when the log lacks the plugin's own line")
    save_log: str | None = option(None, flag="--save-log", help="write the NCCL log of the run here")
    json_path: str | None = option(None, flag="--json", keyword="json", help="the checks as JSON")
    timeout: float = option(600.0, flag="--timeout", help="seconds the run may take")


@dataclass
class VerifyResult:
    """What one verify found: ``checks`` one ``ccltune.tune.verify.SizeCheck`` per (collective, size) of the log
    (collective, size_bytes, rule, status APPLIED / NOT APPLIED / NO RULE, reason; none with ``profile``),
    ``firings`` one ``ccltune.ab.fired.RuleFiring`` per rule from the profiler's record (none without
    one), the communicator's ``n_ranks`` and ``n_nodes``, and ``exit_code``: 1 when a rule was not applied or
    nothing was verified (the command's exit code)."""

    checks: list[Any] = field(default_factory=list)
    firings: list[Any] = field(default_factory=list)
    n_ranks: int | None = None
    n_nodes: int | None = None
    plugin_loaded: bool | None = None
    exit_code: int = 0

    @property
    def verdict(self) -> Verdict:
        """PASS when every rule that was seen was applied, else FAIL (the exit code's word)."""
        return Verdict.FAIL if self.exit_code else Verdict.PASS


def run_plugin_verify(o: PluginVerifyOptions, console: Console = Console()) -> VerifyResult:
    """Check the rules against the log (or the profiler's record) and say the table to ``console``; a rule
    not applied is the answer (``exit_code`` 1), not an error. Bad input raises UsageError; a log without
    TUNING lines DataError; a run that failed CheckFailed."""
    check_outputs(o)
    try:
        ruleset = rules.load(o.file, "RULES")
    except RuleFileError as exc:
        raise UsageError(str(exc)) from exc
    for d in ruleset.diagnostics:
        console.say(f"warning: {d} (the plugin skips this line too)")
    facts = rules.parse_platform_args(o.platform) if o.platform else None
    if o.profile is not None:
        if o.from_log:
            raise UsageError("plugin verify: give --from-log or --profile, not both")
        found = _profile_table(ruleset, o.profile, facts, console)
        return VerifyResult(firings=found, exit_code=verdict_exit_code(_fired_statuses(found)))
    with _profiler_dir(o) as prof:  # removed however the check ends
        return _check_log(o, ruleset, facts, prof, console)


def _check_log(o: PluginVerifyOptions, ruleset: rules.RuleSet, facts: rules.PlatformFacts | None,
               prof: str | None, console: Console) -> VerifyResult:
    """The TUNING-log checks (a run's, or --from-log's), then the profiler's per-rule table when ``prof`` holds
    the run's profiler files."""
    from ccltune.diagnose.parsers.ncclog import parse_log
    from ccltune.tune.verify import verify

    text, source, sizes = _verify_log(o, ruleset, prof, console)
    log = parse_log(text)
    if not log.choices:
        raise DataError(f"{source} has no TUNING lines ('<Coll>: N Bytes -> Algo A proto P ...'): "
                        "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING (NCCL >= 2.19 prints them)")
    # NCCL_DEBUG_SUBSYS=TUNING alone prints no 'comm ... nRanks' line (INIT does): the plugin's own load line
    # names its communicator's size too, which settles it when every load in the log names the same one
    sizes_loaded = {(p.n_ranks, p.n_nodes) for p in log.plugin_loads}
    loaded = next(iter(sizes_loaded)) if len(sizes_loaded) == 1 else (None, None)
    n_ranks = log.nranks or o.nproc or loaded[0]
    if not n_ranks:
        seen = f"; its plugin lines name {', '.join(str(n) for n, _ in sorted(sizes_loaded))} ranks" if sizes_loaded else ""
        raise UsageError(f"{source} says nothing of the communicator size (no 'comm ... nRanks N' line){seen}; "
                         "pass --nproc N")
    n_nodes = log.nnodes or (loaded[1] if loaded[0] == n_ranks else None) or 1
    load = next((p for p in log.plugin_loads if p.n_ranks == n_ranks), None)
    if facts is None and load is not None:
        facts = rules.PlatformFacts(load.gpu, load.nvl_domains, load.nvl_ranks[0], load.nvl_ranks[1],
                                    load.partition, load.nps)
    if load is None:
        console.say(f"warning: {source} has no 'ccltune tuner: loaded N rules' line for {n_ranks} ranks: "
                    "the plugin may not have loaded" + ("" if facts else "; platform sections cannot match"))
    checks = verify(ruleset, log.choices, n_ranks=n_ranks, n_nodes=n_nodes, platform=facts or rules.PlatformFacts(),
                    sizes=sizes)
    for line in _check_lines(checks, n_ranks, n_nodes):
        console.say(line)
    if o.json_path:
        from ccltune.diagnose.record import write_json
        write_json(o.json_path, {"rules": str(Path(o.file).resolve()), "n_ranks": n_ranks, "n_nodes": n_nodes,
                                 "plugin_loaded": load is not None, "checks": [c.to_dict() for c in checks]})
    # the run's profiler record, beside the log: evidence against a rule counts (NOT APPLIED); a rule it saw no call
    # of does not (bench's calls in CUDA graphs reach the profiler only as far as NCCL sends their events)
    found = _profile_table(ruleset, prof, facts, console, quiet_empty=True) if prof is not None else []
    prof_statuses = [st for st in _fired_statuses(found) if st == RuleCheck.NOT_APPLIED] if found else []
    code = verdict_exit_code([c.status for c in checks] + prof_statuses or [Verdict.FAIL])  # no check: nothing verified
    return VerifyResult(checks, found, n_ranks, n_nodes, load is not None, code)


def _profiler_dir(o: PluginVerifyOptions) -> Any:
    """A run of verify loads the profiler plugin too when it is built, into a folder of its own: a context giving
    the folder, or None when it is not loaded."""
    from ccltune.ab.job import profiler_path

    if o.from_log or profiler_path() is None:
        return contextlib.nullcontext(None)
    return tempfile.TemporaryDirectory(prefix="ccltune-verify-prof-")


def _fired_statuses(found: list[Any]) -> list[str]:
    from ccltune.ab import fired

    return fired.statuses(found)


def _profile_table(ruleset: rules.RuleSet, folder: str, facts: rules.PlatformFacts | None, console: Console,
                   quiet_empty: bool = False) -> list[Any]:
    """Say the per-rule table from the profiler files in ``folder``; return its firings (ab.fired).
    ``quiet_empty``: a folder without files (the run's profiler wrote none) is a note, not an error."""
    from ccltune.ab import fired
    from ccltune.workload import profile_file

    try:
        files = profile_file.read_dir(folder)
    except UsageError as exc:
        if not quiet_empty:
            raise
        console.say(f"# no per-rule record from the profiler plugin: {exc}")
        return []
    for w in (w for f in files for w in f.warnings if w.startswith(profile_file.LEFT_OUT)):
        console.say(f"# {w}")  # a copy of a rank's file counted once
    if facts is None and any(r.platform != rules.ANY_PLATFORM for r in ruleset.rules):
        console.say("warning: rules under a platform section match no call without --platform KEY=VALUE (the "
                    "profiler files do not name the GPU)")
    t = fired.tally(ruleset, files, facts or rules.PlatformFacts())
    found = fired.firings(ruleset, t)
    for line in fired.lines(found, t):
        console.say(line)
    return found


def _verify_log(o: PluginVerifyOptions, ruleset: rules.RuleSet, prof: str | None,
                console: Console) -> tuple[str, str, set[tuple[str, int]] | None]:
    """(the NCCL log, where it came from, the sizes run): --from-log, or a bench run with the rules."""
    from ccltune.diagnose.parsers.ncclog import read_log
    from ccltune.diagnose.probes import benchrun
    from ccltune.files import write_text

    if o.from_log:
        return read_log(o.from_log, "--from-log"), o.from_log, None
    colls = _verify_collectives(o.collective, ruleset)
    lo, hi = parse_size(o.minbytes, "-b/--minbytes"), parse_size(o.maxbytes, "-e/--maxbytes")
    if lo > hi:
        raise UsageError(f"-b {o.minbytes} is larger than -e {o.maxbytes}")
    size_series(lo, hi, factor=o.stepfactor)  # refuses a bad -f and too many sizes
    check_nproc(o.nproc)
    check_timeout(o.timeout)
    nproc = o.nproc or _gpu_count()
    env = {**tuner_plugin.nccl_env(o.file), "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING"}
    if prof is not None:  # the profiler's record of the same calls: what NCCL ran, per rule
        env.update(profiler_plugin.nccl_env(prof))
    console.say(f"plugin verify: {', '.join(colls)} {format_size(lo)}..{format_size(hi)} on {nproc} GPUs with "
                f"NCCL_TUNER_CONFIG_FILE={env['NCCL_TUNER_CONFIG_FILE']}")
    run = benchrun.run_bench(nproc, bench_args=bench_args, env_overrides=env, timeout_s=o.timeout, collective=colls,
                             min_bytes=lo, max_bytes=hi, step_factor=o.stepfactor, iters=1, warmup=1)
    if o.save_log:
        write_text(o.save_log, run.output, flag="--save-log")
    if run.error:
        raise CheckFailed(run.error)
    sizes = {(collectives.PLUGIN_NAMES[r["collective"]], int(r["size_bytes"])) for r in run.records
             if r.get("collective") in collectives.PLUGIN_NAMES}
    return run.output, "the run", sizes


def _verify_collectives(given: tuple[str, ...], ruleset: rules.RuleSet) -> list[str]:
    if given:
        bad = [c for c in given if c not in VERIFY_COLLECTIVES]
        if bad:
            raise UsageError(f"plugin verify: {bad[0]!r} is not a collective a tuner sees "
                             f"(choose from {', '.join(VERIFY_COLLECTIVES)})")
        return list(dict.fromkeys(given))
    named = {r.collective for r in ruleset.rules}
    picked = [c for c in VERIFY_COLLECTIVES if collectives.PLUGIN_NAMES[c] in named]
    if not picked:
        raise UsageError(f"{ruleset.path} has no rules; name the collectives to run")
    return picked


def _gpu_count() -> int:
    n = gpu_count()
    if n < 1:
        raise EngineUnavailable("plugin verify runs NCCL and needs CUDA GPUs (none found); "
                                "check an existing log with --from-log FILE")
    return n


def _check_lines(checks: list[Any], n_ranks: int, n_nodes: int) -> list[str]:
    out = [f"# nRanks {n_ranks} nNodes {n_nodes}",
           f"# {'collective':<14} {'size':>8}  {'status':<11} {'rule':<36} what NCCL ran / why"]
    for c in checks:
        rule = "-"
        if c.rule:
            r = c.rule
            rule = (f"line {r.line}: {format_size(r.min_bytes)}..{format_size(r.max_bytes)} {r.algo}/{r.proto}"
                    + (f"/{r.channels}ch" if r.channels >= 1 else ""))
        out.append(f"  {c.collective:<14} {format_size(c.size_bytes):>8}  {c.status:<11} {rule:<36} {c.reason}")
    counts = {st: sum(c.status == st for c in checks) for st in RuleCheck}
    out.append(f"# {counts[RuleCheck.APPLIED]} applied, {counts[RuleCheck.NOT_APPLIED]} not applied, "
               f"{counts[RuleCheck.NO_RULE]} without a rule")
    return out
