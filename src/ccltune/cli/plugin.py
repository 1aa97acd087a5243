"""`ccltune plugin`: where the NCCL/RCCL tuner plugin is, and checking rule files."""

from __future__ import annotations

import argparse
import sys
from typing import Any
from pathlib import Path

from ccltune import collectives, profiler_plugin, rules, tuner_plugin
from ccltune.errors import CheckFailed, DataError, EngineUnavailable, RuleFileError, UsageError, verdict_exit_code
from ccltune.commands.launching import check_nproc, check_timeout, gpu_count
from ccltune.sizes import format_size, parse_size, size_series
from ccltune.status import RuleCheck, Verdict

VERIFY_COLLECTIVES = tuple(collectives.PLUGIN_NAMES)  # the collectives NCCL passes to a tuner



def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plugin", help="the NCCL/RCCL tuner and profiler plugins: library paths, rule-file check",
        description="The ccltune tuner plugin (libnccl-tuner-ccltune.so) and its rule files, and the "
        "profiler plugin (libnccl-profiler-ccltune.so, docs/profiler.md).",
    )
    sub = parser.add_subparsers(dest="plugin_command", metavar="ACTION")
    path = sub.add_parser(
        "path", help="print the absolute path of the built plugin library",
        description="Print the absolute path of the built tuner plugin (for NCCL_TUNER_PLUGIN), or with "
        "--profiler of the profiler plugin (for NCCL_PROFILER_PLUGIN, with CCLTUNE_PROFILE=DIR). "
        f"Exit {EngineUnavailable.exit_code} when it is not built.",
    )
    path.add_argument("--profiler", action="store_true",
                      help="the profiler plugin libnccl-profiler-ccltune.so instead of the tuner")
    path.set_defaults(func=_path)
    check = sub.add_parser(
        "check", help="check a rule file as the plugin reads it",
        description="Print each rejected line to stderr as FILE:LINE: REASON, and a summary on stdout. "
        "Exit 1 when a line was rejected, 0 otherwise, 2 when the file cannot be read.",
    )
    check.add_argument("file", metavar="FILE", help="rule file (NCCL_TUNER_CONFIG_FILE format)")
    check.add_argument(
        "--platform", action="append", default=[], metavar="KEY=VALUE",
        help="also count the rules that apply on this platform "
        f"(keys: {', '.join(rules.PLATFORM_KEYS)}); repeatable",
    )
    check.set_defaults(func=_check)
    verify = sub.add_parser(
        "verify", help="run collectives with the plugin and RULES, and check NCCL's TUNING log obeys them",
        description="Run `ccltune bench` (one process per GPU, under torchrun) with the plugin loaded and "
        "NCCL_TUNER_CONFIG_FILE=RULES, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING; read the algorithm, "
        "protocol and channel range NCCL logs for every call and compare them with the rule the plugin "
        "applies at that size (APPLIED / NOT APPLIED / NO RULE). --from-log FILE checks a log you already "
        "have and runs nothing. Exit 1 when a rule was not applied or the log has no TUNING lines, "
        "0 otherwise, 2 on bad input.",
    )
    verify.add_argument("file", metavar="RULES", help="rule file to deploy and check")
    verify.add_argument("collective", nargs="*", default=None, metavar="COLLECTIVE",
                        help=f"collectives to run (default: those the rules name; choices {', '.join(VERIFY_COLLECTIVES)})")
    verify.add_argument("-b", "--minbytes", default="8", help="smallest size (whole buffer, as bench)")
    verify.add_argument("-e", "--maxbytes", default="1G", help="largest size")
    verify.add_argument("-f", "--stepfactor", type=int, default=2, help="size multiplier")
    verify.add_argument("--nproc", type=int, default=None, metavar="N", help="GPUs (default: all present)")
    verify.add_argument("--from-log", default=None, metavar="FILE",
                        help="check this NCCL_DEBUG=INFO log (with TUNING lines) instead of running")
    verify.add_argument("--profile", default=None, metavar="DIR",
                        help="check the profiler files (CCLTUNE_PROFILE=DIR, docs/profiler.md) of a job that ran with "
                             "RULES instead of running: per rule, the calls it covered and what NCCL ran for them "
                             "(APPLIED / NOT APPLIED / NEVER FIRED)")
    verify.add_argument("--platform", action="append", default=[], metavar="KEY=VALUE",
                        help="platform facts for --from-log and --profile when the log lacks the plugin's own line")
    verify.add_argument("--save-log", default=None, metavar="PATH", help="write the NCCL log of the run here")
    verify.add_argument("--json", dest="json_path", default=None, metavar="PATH", help="the checks as JSON")
    verify.add_argument("--timeout", type=float, default=600.0, metavar="S", help="seconds the run may take")
    verify.set_defaults(func=_verify)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _path(args: argparse.Namespace) -> int:
    print(profiler_plugin.library_path() if args.profiler else tuner_plugin.library_path())
    return 0


def _check(args: argparse.Namespace) -> int:
    facts = rules.parse_platform_args(args.platform) if args.platform else None
    try:
        ruleset = rules.load(args.file, "FILE")
    except RuleFileError as exc:  # unreadable: a usage problem, not a bad line
        raise UsageError(str(exc)) from exc
    for d in ruleset.diagnostics:
        print(d, file=sys.stderr)
    print(f"{len(ruleset.rules)} rules loaded, {len(ruleset.diagnostics)} lines rejected")
    if not ruleset.rules and not ruleset.diagnostics:
        print(f"note: {args.file} holds no rules (empty, or comments only): with it the plugin leaves every "
              "choice to NCCL", file=sys.stderr)
    if facts is not None:
        n = sum(1 for r in ruleset.rules if r.platform.matches(facts))
        print(f"{n} rules apply to platform {','.join(args.platform)}")
    if ruleset.diagnostics:
        raise RuleFileError(f"{args.file}: {len(ruleset.diagnostics)} lines rejected (the plugin skips them)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    try:
        ruleset = rules.load(args.file, "RULES")
    except RuleFileError as exc:
        raise UsageError(str(exc)) from exc
    for d in ruleset.diagnostics:
        print(f"warning: {d} (the plugin skips this line too)")
    facts = rules.parse_platform_args(args.platform) if args.platform else None
    if args.profile is not None:
        if args.from_log:
            raise UsageError("plugin verify: give --from-log or --profile, not both")
        return verdict_exit_code(_profile_table(ruleset, args.profile, facts))
    with _profiler_dir(args) as prof:  # removed however the check ends
        return _check_log(args, ruleset, facts, prof)


def _check_log(args: argparse.Namespace, ruleset: rules.RuleSet, facts: rules.PlatformFacts | None,
               prof: str | None) -> int:
    """The TUNING-log checks (a run's, or --from-log's), then the profiler's per-rule table when ``prof`` holds
    the run's profiler files."""
    from ccltune.diagnose.parsers.ncclog import parse_log
    from ccltune.tune.verify import verify

    text, source, sizes = _verify_log(args, ruleset, prof)
    log = parse_log(text)
    if not log.choices:
        raise DataError(f"{source} has no TUNING lines ('<Coll>: N Bytes -> Algo A proto P ...'): "
                        "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING (NCCL >= 2.19 prints them)")
    # NCCL_DEBUG_SUBSYS=TUNING alone prints no 'comm ... nRanks' line (INIT does): the plugin's own load line
    # names its communicator's size too, which settles it when every load in the log names the same one
    sizes_loaded = {(p.n_ranks, p.n_nodes) for p in log.plugin_loads}
    loaded = next(iter(sizes_loaded)) if len(sizes_loaded) == 1 else (None, None)
    n_ranks = log.nranks or args.nproc or loaded[0]
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
        print(f"warning: {source} has no 'ccltune tuner: loaded N rules' line for {n_ranks} ranks: "
              "the plugin may not have loaded" + ("" if facts else "; platform sections cannot match"))
    checks = verify(ruleset, log.choices, n_ranks=n_ranks, n_nodes=n_nodes, platform=facts or rules.PlatformFacts(),
                    sizes=sizes)
    _print_checks(checks, n_ranks, n_nodes)
    if args.json_path:
        from ccltune.diagnose.record import write_json
        write_json(args.json_path, {"rules": str(Path(args.file).resolve()), "n_ranks": n_ranks, "n_nodes": n_nodes,
                                    "plugin_loaded": load is not None, "checks": [c.to_dict() for c in checks]})
    # the run's profiler record, beside the log: evidence against a rule counts (NOT APPLIED); a rule it saw no call
    # of does not (bench's calls in CUDA graphs reach the profiler only as far as NCCL sends their events)
    prof_statuses = [st for st in _profile_table(ruleset, prof, facts, quiet_empty=True)
                     if st == RuleCheck.NOT_APPLIED] if prof is not None else []
    return verdict_exit_code([c.status for c in checks] + prof_statuses or [Verdict.FAIL])  # no check: nothing verified


def _profiler_dir(args: argparse.Namespace) -> Any:
    """A run of verify loads the profiler plugin too when it is built, into a folder of its own: a context giving
    the folder, or None when it is not loaded."""
    import contextlib
    import tempfile

    from ccltune.measure.jobrun import profiler_path

    if args.from_log or profiler_path() is None:
        return contextlib.nullcontext(None)
    return tempfile.TemporaryDirectory(prefix="ccltune-verify-prof-")


def _profile_table(ruleset: rules.RuleSet, folder: str, facts: rules.PlatformFacts | None,
                   quiet_empty: bool = False) -> list[str]:
    """Print the per-rule table from the profiler files in ``folder``; their statuses (validate.fired).
    ``quiet_empty``: a folder without files (the run's profiler wrote none) is a note, not an error."""
    from ccltune.validate import fired
    from ccltune.workload import profile_file

    try:
        files = profile_file.read_dir(folder)
    except UsageError as exc:
        if not quiet_empty:
            raise
        print(f"# no per-rule record from the profiler plugin: {exc}")
        return []
    if facts is None and any(r.platform != rules.ANY_PLATFORM for r in ruleset.rules):
        print("warning: rules under a platform section match no call without --platform KEY=VALUE (the profiler "
              "files do not name the GPU)")
    t = fired.tally(ruleset, files, facts or rules.PlatformFacts())
    found = fired.firings(ruleset, t)
    for line in fired.lines(found, t):
        print(line)
    return fired.statuses(found)


def _verify_log(args: argparse.Namespace, ruleset: rules.RuleSet,
                prof: str | None = None) -> tuple[str, str, set[tuple[str, int]] | None]:
    """(the NCCL log, where it came from, the sizes run): --from-log, or a bench run with the rules."""
    from ccltune.diagnose.probes import benchrun
    from ccltune.diagnose.parsers.ncclog import read_log
    from ccltune.files import write_text

    if args.from_log:
        return read_log(args.from_log, "--from-log"), args.from_log, None
    colls = _verify_collectives(args.collective, ruleset)
    lo, hi = parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes")
    if lo > hi:
        raise UsageError(f"-b {args.minbytes} is larger than -e {args.maxbytes}")
    size_series(lo, hi, factor=args.stepfactor)  # refuses a bad -f and too many sizes
    check_nproc(args.nproc)
    check_timeout(args.timeout)
    nproc = args.nproc or _gpu_count()
    env = {**tuner_plugin.nccl_env(args.file), "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING"}
    if prof is not None:  # the profiler's record of the same calls: what NCCL ran, per rule
        env.update(profiler_plugin.nccl_env(prof))
    print(f"plugin verify: {', '.join(colls)} {format_size(lo)}..{format_size(hi)} on {nproc} GPUs with "
          f"NCCL_TUNER_CONFIG_FILE={env['NCCL_TUNER_CONFIG_FILE']}", flush=True)
    run = benchrun.run_bench(nproc, env_overrides=env, timeout_s=args.timeout, collective=colls,
                             min_bytes=lo, max_bytes=hi, step_factor=args.stepfactor, iters=1, warmup=1)
    if args.save_log:
        write_text(args.save_log, run.output, flag="--save-log")
    if run.error:
        raise CheckFailed(run.error)
    sizes = {(collectives.PLUGIN_NAMES[r["collective"]], int(r["size_bytes"])) for r in run.records
             if r.get("collective") in collectives.PLUGIN_NAMES}
    return run.output, "the run", sizes


def _verify_collectives(given: list[str] | None, ruleset: rules.RuleSet) -> list[str]:
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


def _print_checks(checks: list[Any], n_ranks: int, n_nodes: int) -> None:
    print(f"# nRanks {n_ranks} nNodes {n_nodes}")
    print(f"# {'collective':<14} {'size':>8}  {'status':<11} {'rule':<36} what NCCL ran / why")
    for c in checks:
        rule = "-"
        if c.rule:
            r = c.rule
            rule = (f"line {r.line}: {format_size(r.min_bytes)}..{format_size(r.max_bytes)} {r.algo}/{r.proto}"
                    + (f"/{r.channels}ch" if r.channels >= 1 else ""))
        print(f"  {c.collective:<14} {format_size(c.size_bytes):>8}  {c.status:<11} {rule:<36} {c.reason}")
    counts = {st: sum(c.status == st for c in checks) for st in RuleCheck}
    print(f"# {counts['APPLIED']} applied, {counts['NOT APPLIED']} not applied, {counts['NO RULE']} without a rule")
