"""``ccltune ab [options] -- COMMAND...``: A/B the user's own job, NCCL's default against named arms
(rule files, environment settings, another NCCL library), interleaved in shuffled rounds (docs/ab.md)."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from ccltune import environment, files, rules
from ccltune.cli import _common
from ccltune.commands import launching
from ccltune.errors import CheckFailed, Interrupted, UsageError
from ccltune.measure import jobrun
from ccltune.measure.session import terminate_as_interrupt
from ccltune.status import RunStatus
from ccltune.store import Store
from ccltune.validate import jobab, jobprune, jobrounds, jobstore
from ccltune.validate.jobrounds import CONTROL, DEFAULT, Arm

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_ARM_NAME = re.compile(r"[A-Za-z0-9_.=:+-]{1,64}\Z")
ARM_KINDS = ("env", "unset", "rules", "nccl-lib")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ab", help="A/B your own job: NCCL's default vs rules, variables or another NCCL, with a 95%% interval",
        description="Run COMMAND (your job: torchrun, srun, mpirun, a script) again and again, NCCL's default "
                    "and each arm once per round in a shuffled order, with an A/A control (default twice: the "
                    "job's own noise). Per arm: faster / no difference / slower than default, the effect as a "
                    f"ratio and in the metric's unit, with its interval ({jobab.METHOD}). Exit 0 when no arm is "
                    "slower, 1 when an arm is slower or failed in every run, 2 on bad input (before anything "
                    "runs), 130 on Ctrl-C (the verdict so far is printed and every finished run is kept).",
        formatter_class=_common.DefaultsFormatter)
    g = p.add_argument_group("arms (NCCL's default is always one, named default)")
    g.add_argument("--rules", action="append", default=[], metavar="R.conf",
                   help="an arm per rule file, through ccltune's tuner plugin (NCCL_TUNER_PLUGIN, CCLTUNE_RULES); "
                        "named after the file")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an arm per setting, named NAME=VALUE")
    g.add_argument("--nccl-lib", action="append", default=[], metavar="PATH",
                   help="an arm per NCCL/RCCL library, put first with LD_PRELOAD (a job whose NCCL is loaded "
                        "dynamically, as PyTorch's wheels load libnccl.so.2); named nccl-lib:FILE")
    g.add_argument("--arm", action="append", default=[], metavar="NAME:KIND:VALUE",
                   help="a named arm; KIND env (VALUE NAME=VALUE), unset (VALUE a variable of your environment to "
                        "remove), rules (a file) or nccl-lib (a library); "
                        "repeat a NAME to combine settings into one arm (--arm fix:env:NCCL_P2P_LEVEL=SYS "
                        "--arm fix:rules:r.conf)")
    g.add_argument("--no-aa", action="store_true", help="leave out the A/A control arm (default-2)")
    m = p.add_argument_group("metric (one value per run; lower is better)")
    m.add_argument("--metric", default="auto", metavar="wall|comm|REGEX",
                   help="wall: the run's wall time; comm: its collectives' GPU time from ccltune's profiler "
                        "plugin (NCCL_PROFILER_PLUGIN); REGEX: group 1 of every match in the job's output is a "
                        "sample, the run's value their median; auto: comm when the profiler plugin is built, "
                        "else wall")
    m.add_argument("--skip", type=int, default=0, metavar="N", help="REGEX: leave out each run's first N matches "
                                                                    "(warm-up steps)")
    r = p.add_argument_group("rounds")
    r.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="rounds (each arm once per round; default 5, or at most 50 with --until-confident)")
    r.add_argument("--until-confident", action="store_true",
                   help="stop when every arm's interval excludes 1 or lies inside the --min-effect band")
    r.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="stop before a round that would end past this many seconds")
    r.add_argument("--min-effect", type=float, default=1.0, metavar="PCT",
                   help="effects smaller than this many percent are 'no difference'")
    r.add_argument("--seed", type=int, default=None, metavar="N", help="the shuffle's seed (default: random; "
                                                                       "recorded)")
    r.add_argument("--run-timeout", type=float, default=None, metavar="S", help="end a run after S seconds "
                                                                               "(it counts as failed)")
    p.add_argument("--echo", action="store_true", help="show the job's output as it runs")
    p.add_argument("--prune", default=None, metavar="OUT.conf",
                   help="with one --rules file: A/B its rules (one arm per group of rules sharing a collective "
                        f"and size range when there are <= {jobprune.MAX_GROUPS} groups, else the whole file) and "
                        "write OUT.conf with only the rules whose arm was faster")
    p.add_argument("--json", default=None, metavar="PATH", help="the verdict and every run as JSON")
    _common.add_db(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...", help="your job")
    p.set_defaults(func=main)


def _command(args: argparse.Namespace) -> list[str]:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command to A/B: give your job after --, e.g. ccltune ab --env NCCL_P2P_LEVEL=SYS "
                         "-- torchrun --nproc-per-node 4 train.py")
    return cmd


def _rule_file(path: str, flag: str) -> str:
    launching.check_rule_file(path, flag)
    if not rules.load(path, flag).rules:
        raise UsageError(f"{flag} {path}: the file has no rule")
    return str(Path(path).resolve())


def _lib(path: str, flag: str) -> str:
    if not Path(path).is_file():
        raise UsageError(f"{flag} {path}: no such file")
    return str(Path(path).resolve())


def _env_pair(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not _ENV_NAME.match(name):
        raise UsageError(f"{flag} {text!r}: expected NAME=VALUE with NAME a variable name")
    return name, value


def arms(args: argparse.Namespace) -> list[Arm]:
    """Every arm from the flags, checked (module doc); default (and default-2) first."""
    out = [Arm(DEFAULT)] + ([] if args.no_aa else [Arm(CONTROL)])
    out += [Arm(Path(r).stem or "rules", rules=_rule_file(r, "--rules")) for r in args.rules]
    out += [Arm(e, env=(_env_pair(e, "--env"),)) for e in args.env]
    out += [Arm(f"nccl-lib:{Path(p).name}", nccl_lib=_lib(p, "--nccl-lib")) for p in args.nccl_lib]
    named: dict[str, dict[str, Any]] = {}
    for spec in args.arm:
        name, _, rest = spec.partition(":")
        kind, _, value = rest.partition(":")
        if not _ARM_NAME.match(name) or kind not in ARM_KINDS or not value:
            raise UsageError(f"--arm {spec!r}: expected NAME:KIND:VALUE with KIND one of {', '.join(ARM_KINDS)}")
        a = named.setdefault(name, {"env": {}, "unset": [], "rules": None, "nccl_lib": None})
        if kind == "env":
            k, v = _env_pair(value, "--arm")
            a["env"][k] = v
        elif kind == "unset":
            if not _ENV_NAME.match(value):
                raise UsageError(f"--arm {spec!r}: {value!r} is not a variable name")
            a["unset"].append(value)
        else:
            key = kind.replace("-", "_")
            if a[key]:
                raise UsageError(f"--arm {name}: two {kind} values ({a[key]}, {value})")
            a[key] = _rule_file(value, "--arm") if kind == "rules" else _lib(value, "--arm")
    out += [Arm(n, tuple(a["env"].items()), a["rules"], a["nccl_lib"], tuple(a["unset"])) for n, a in named.items()]
    seen: set[str] = set()
    for a in out:
        if a.name in seen:
            raise UsageError(f"two arms are named {a.name!r}: name them apart with --arm NAME:KIND:VALUE")
        seen.add(a.name)
    if len(out) == (1 if args.no_aa else 2) and not args.prune:
        raise UsageError("no arm to compare with NCCL's default: give --rules, --env, --nccl-lib or --arm")
    return out


def metric(args: argparse.Namespace) -> jobrounds.Metric:
    if args.skip < 0:
        raise UsageError(f"--skip must be >= 0, got {args.skip}")
    prof = jobrun.profiler_path()
    if args.metric == "wall":
        return jobrounds.Metric("wall")
    if args.metric in ("comm", "auto"):
        if prof is None:
            if args.metric == "auto":
                return jobrounds.Metric("wall")
            raise UsageError("--metric comm needs ccltune's profiler plugin (libnccl-profiler-ccltune.so), not built "
                             "here: build it (make -C profiler, or pip install .) or use --metric wall or a REGEX")
        return jobrounds.Metric("comm", profiler=str(prof), auto=args.metric == "auto")
    try:
        pattern = re.compile(args.metric)
    except re.error as exc:
        raise UsageError(f"--metric {args.metric!r} is not a regular expression: {exc}") from None
    if pattern.groups < 1:
        raise UsageError(f"--metric {args.metric!r} has no group: put ( ) around the number, e.g. "
                         "'step time ([0-9.]+) ms'")
    return jobrounds.Metric("regex", pattern, args.skip)


def _rounds(args: argparse.Namespace) -> int:
    n = args.rounds if args.rounds is not None else (50 if args.until_confident else 5)
    if n < 1:
        raise UsageError(f"--rounds must be >= 1, got {n}")
    if args.budget is not None:
        launching.check_timeout(args.budget, "--budget")
    if args.until_confident and args.budget is None:
        raise UsageError("--until-confident needs --budget SECONDS (the most time it may take)")
    if args.run_timeout is not None:
        launching.check_timeout(args.run_timeout, "--run-timeout")
    if not 0 <= args.min_effect < 100:
        raise UsageError(f"--min-effect must be in [0, 100) percent, got {args.min_effect:g}")
    return n


def main(args: argparse.Namespace) -> int:
    cmd = _command(args)
    all_arms = arms(args)
    met = metric(args)
    rounds = _rounds(args)
    prune_how, parts, tmp = "", [], None
    if args.prune:
        files.check_output(args.prune, "--prune", {"the input --rules": a.rules for a in all_arms if a.rules})
        rule_arms = [a for a in all_arms if a.rules]
        if len(rule_arms) != 1 or len(all_arms) != (1 if args.no_aa else 2) + 1:
            raise UsageError("--prune takes exactly one --rules file and no other arm")
        tmp = tempfile.TemporaryDirectory(prefix="ccltune-prune-")
        rs = rules.load(rule_arms[0].rules, "--rules")
        parts, prune_how = jobprune.parts(rs, rule_arms[0].name, Path(tmp.name))
        all_arms = [a for a in all_arms if not a.rules] + [Arm(p.name, rules=p.path) for p in parts]
    tuner = _tuner() if any(a.rules for a in all_arms) else None
    base, removed = jobrun.base_env(os.environ)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    plan = jobrounds.Plan(cmd, all_arms, met, rounds, seed, args.min_effect / 100, args.until_confident,
                          args.budget, tuner, base, args.echo, args.run_timeout)
    try:
        return _run(args, plan, removed, parts, prune_how)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _tuner() -> str:
    from ccltune import tuner_plugin

    try:
        return str(tuner_plugin.library_path())
    except Exception as exc:  # noqa: BLE001 - EngineUnavailable, with how to build it
        raise UsageError(f"a rules arm needs the ccltune tuner plugin: {exc}") from None


def _header(plan: jobrounds.Plan, removed: list[str], how: str) -> list[str]:
    out = [f"# ccltune ab: {shlex.join(plan.argv)}",
           f"# {len(plan.arms)} arms, up to {plan.rounds} rounds, shuffled order per round (seed {plan.seed})",
           f"# metric: {plan.metric.describe()}", f"# statistic: {jobab.METHOD}"]
    out += [f"#   arm {a.name}: {a.describe()}" for a in plan.arms]
    if removed:
        out.append(f"# note: {', '.join(removed)} removed from every arm's environment, so 'default' is NCCL's own "
                   "choice")
    if how:
        out.append(f"# prune: {how}")
    return out


def _run(args: argparse.Namespace, plan: jobrounds.Plan, removed: list[str], parts: list[Any], how: str) -> int:
    store = Store(args.db)
    env = {"host": environment.socket.gethostname(), "ccltune_version": environment.__version__,
           "variables": environment.comm_env(), "command": shlex.join(plan.argv)}
    run_id = store.begin_run("ab", command="ccltune " + shlex.join(args._argv), env=env,
                             args={**launching.args_record(args), "seed": plan.seed})
    jobstore.add_arms(store, run_id, {a.name: a.spec() for a in plan.arms})
    for line in _header(plan, removed, how):
        print(line, flush=True)
    try:
        with terminate_as_interrupt():
            out = jobrounds.run(plan, store, run_id, lambda s: print(s, flush=True))
    except UsageError:
        store.finish_run(run_id, RunStatus.FAILED, {"error": "the metric read nothing from the first default run"})
        store.close()
        raise
    per_rule = fired_tables(plan, out)
    summary = {"seed": plan.seed, "metric": plan.metric.describe(), "unit": plan.metric.unit,
               "rounds": out.rounds_done, "stop": out.stop_reason, "method": jobab.METHOD,
               "arms": [v.to_dict() for v in out.verdicts],
               **({"fired": {name: [f.to_dict() for f in got] for name, (got, _) in per_rule.items()}}
                  if per_rule else {})}
    store.finish_run(run_id, RunStatus.INTERRUPTED if out.interrupted else RunStatus.COMPLETE, summary)
    store.close()
    for line in render(out, plan.metric.unit):
        print(line)
    for line in fired_lines(plan, per_rule):
        print(line)
    if args.json:
        doc = {**summary, "run_id": run_id, "command": plan.argv,
               "runs": [vars(s) for s in out.samples], "notes": out.notes}
        files.write_text(args.json, json.dumps(doc, indent=1, default=str), flag="--json")
    if args.prune and not out.interrupted:
        text, kept = jobprune.kept_text(parts, out.verdicts, source=args.rules[0], argv=plan.argv, how=how)
        files.write_text(args.prune, text, flag="--prune")
        print(f"# prune: wrote {args.prune}: {sum(len(p.rules) for p in kept)} rule(s) of {len(kept)} part(s) "
              f"kept, of {len(parts)}")
    elif args.prune:
        print(f"# prune: interrupted: {args.prune} not written")
    return _exit(out)


def _exit(out: jobrounds.Outcome) -> int:
    if out.interrupted:
        print("ccltune: interrupted", file=sys.stderr)
        return Interrupted.exit_code
    bad = [v for v in out.verdicts if not v.control and v.status in (jobab.Status.SLOWER, jobab.Status.FAILED)]
    if bad:
        raise CheckFailed("ab: " + "; ".join(f"{v.name} {v.status.value}" for v in bad))
    return 0


def render(out: jobrounds.Outcome, unit: str) -> list[str]:
    """The verdict table: per arm its runs, median, ratio to default and shift, each with its interval."""
    u = f" {unit}" if unit else ""
    lines = [f"# {'arm':<24} {'runs':>4} {'failed':>6} {'median':>11}  {'ratio':>7} {'95% interval':>18}  "
             f"{'shift':>10} {'95% interval':>24}  verdict"]
    for v in out.verdicts:
        med = "-" if v.median is None else f"{v.median:.5g}"
        e = v.effect
        if e is None:
            cols = f"{'-':>7} {'-':>18}  {'-':>10} {'-':>24}"
        else:
            cols = (f"{e.ratio:7.4f} {_iv(e.ratio_lo, e.ratio_hi, '.4f'):>18}  {e.shift:+10.4g} "
                    f"{_iv(e.shift_lo, e.shift_hi, '+.4g'):>24}")
        word = v.status.value.upper() if v.status in (jobab.Status.SLOWER, jobab.Status.FASTER) else v.status.value
        if v.control:
            word += " (A/A control" + ("" if e is None or not e.bounded else ": the job's noise is inside the interval"
                                       if v.status is jobab.Status.NO_DIFFERENCE else
                                       ": default differs from itself, the job drifts") + ")"
        lines.append(f"  {v.name:<24} {v.runs:>4} {v.failed:>6} {med:>11}  {cols}  {word}"
                     + (f"  ({v.note})" if v.note else ""))
    lines.append(f"# ratio = arm / default (< 1: faster); shift in the metric's unit{u}; {out.rounds_done} "
                 f"round(s)" + (f"; stopped: {out.stop_reason}" if out.stop_reason else ""))
    for f in out.failures:
        lines.append(f"# failed run: arm {f.arm}, round {f.round}: {f.reason}")
    return lines


def fired_tables(plan: jobrounds.Plan, out: jobrounds.Outcome) -> dict[str, tuple[list[Any], Any]]:
    """Per rules arm whose runs left profiler files: each rule's calls and what NCCL ran (validate.fired)."""
    from ccltune.validate import fired

    got = {}
    for a in plan.arms:
        if a.rules and a.name in out.fired:
            rs = rules.load(a.rules, "--rules")
            got[a.name] = (fired.firings(rs, out.fired[a.name]), out.fired[a.name])
    return got


def fired_lines(plan: jobrounds.Plan, per_rule: dict[str, tuple[list[Any], Any]]) -> list[str]:
    """The per-rule tables of the rules arms, or why there is none."""
    from ccltune.validate import fired

    lines: list[str] = []
    for a in plan.arms:
        if not a.rules:
            continue
        if a.name not in per_rule:
            lines.append(f"# arm {a.name}: no profiler record of which rules fired (ccltune's profiler plugin was "
                         "not loaded: --metric comm loads it; or its runs wrote no file)")
            continue
        got, tally = per_rule[a.name]
        lines.append(f"# arm {a.name}: {a.rules}, over its runs")
        lines += fired.lines(got, tally)
    return lines


def _iv(lo: float, hi: float, fmt: str) -> str:
    if not (lo > float("-inf") and hi < float("inf")) or (fmt == ".4f" and lo <= 0):
        return "[unbounded]"
    return f"[{lo:{fmt}}, {hi:{fmt}}]"
