"""``ccltune ab [options] -- COMMAND...``: A/B the user's own job, NCCL's default against named arms
(rule files, environment settings, another NCCL library), interleaved in shuffled rounds (docs/ab.md; the
rounds themselves: ``ccltune.ab.rounds``, the statistics: ``ab.judge``)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shlex
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccltune import environment, files, rules
from ccltune.ab import job, judge, prune, rounds
from ccltune.ab.rounds import CONTROL, DEFAULT, Arm
from ccltune.ab.steplines import direction
from ccltune.commands import launching
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option, to_argv
from ccltune.commands.results import Outcome
from ccltune.errors import CcltuneError, CheckFailed, Interrupted, UsageError
from ccltune.measure.session import terminate_as_interrupt
from ccltune.status import RunStatus
from ccltune.store import DEFAULT_DB, Store

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_ARM_NAME = re.compile(r"[A-Za-z0-9_.=:+-]{1,64}\Z")
ARM_KINDS = ("env", "unset", "rules", "nccl-lib")


@dataclass(frozen=True, kw_only=True)
class AbOptions:
    """``ccltune ab``'s options (``ccltune ab --help``): ``command`` is the user's job, one argument a
    word; the arms' flags (``--rules``, ``--env``, ``--nccl-lib``, ``--arm``) are given once per arm."""

    command: tuple[str, ...] = option((), positional=True, help="your job")
    rules: tuple[str, ...] = option((), flag="--rules", repeat=True,
                                    help="an arm per rule file, through ccltune's tuner plugin (NCCL_TUNER_PLUGIN, CCLTUNE_RULES); "
                                         "named after the file")
    env: tuple[str, ...] = option((), flag="--env", repeat=True, help="an arm per setting, named NAME=VALUE")
    nccl_lib: tuple[str, ...] = option((), flag="--nccl-lib", repeat=True,
                                       help="an arm per NCCL/RCCL library, put first with LD_PRELOAD (a job whose NCCL is loaded "
                                            "dynamically, as PyTorch's wheels load libnccl.so.2); named nccl-lib:FILE")
    arm: tuple[str, ...] = option((), flag="--arm", repeat=True,
                                  help="a named arm; KIND env (VALUE NAME=VALUE), unset (VALUE a variable of your environment to "
                                       "remove), rules (a file) or nccl-lib (a library); "
                                       "repeat a NAME to combine settings into one arm (--arm fix:env:NCCL_P2P_LEVEL=SYS "
                                       "--arm fix:rules:r.conf)")
    no_aa: bool = option(False, flag="--no-aa", help="leave out the A/A control arm (default-2)")
    metric: str = option("auto", flag="--metric",
                         help="wall: the run's wall time; comm: its collectives' GPU time from ccltune's profiler "
                              "plugin (NCCL_PROFILER_PLUGIN); REGEX: group 1 of every match in the job's output is a "
                              "sample, the run's value their median; auto: comm when the profiler plugin is built, "
                              "else wall; with --in-run: a REGEX, or gpu: each block's GPU step period from the "
                              "profiler plugin, nothing from the job")
    skip: int = option(0, flag="--skip", help="REGEX: leave out each run's first N matches "
            "(warm-up steps)")
    rounds: int | None = option(None, flag="--rounds",
                                help="rounds (each arm once per round; default 5, or the fewest that can reach a 95%% verdict "
                                     "across the arms, 7 for two; at most 50 with --until-confident)")
    until_confident: bool = option(False, flag="--until-confident",
                                   help="stop when every arm's interval excludes 1 or lies inside the --min-effect band")
    budget: float | None = option(None, flag="--budget",
                                  help="stop before a round that would end past this many seconds")
    min_effect: float = option(1.0, flag="--min-effect",
                               help="effects smaller than this many percent are 'no difference'")
    seed: int | None = option(None, flag="--seed", help="the shuffle's seed (default: random; "
            "recorded)")
    run_timeout: float | None = option(None, flag="--run-timeout", help="end a run after S seconds "
            "(it counts as failed)")
    echo: bool = option(False, flag="--echo", help="show the job's output as it runs")
    prune: str | None = option(None, flag="--prune",
                               help="with one --rules file: A/B its rules (one arm per group of rules sharing a collective "
                                    f"and size range when there are <= {prune.MAX_GROUPS} groups, else the whole file) and "
                                    "write OUT.conf with only the rules whose arm was faster")
    json: str | None = option(None, flag="--json", help="the verdict and every run as JSON")
    db: str = option(DEFAULT_DB, flag="--db", help="results database (default: %(default)s)")
    # in-run arms (docs/ab.md "In-run arms"; commands/ab_inrun.py): the --rules arms switched inside one run
    in_run: bool = option(False, flag="--in-run",
                          help="run the job once: ccltune's tuner plugin switches between default, its A/A twin and each "
                               "--rules arm in blocks of whole steps (CCLTUNE_ARMS); each arm is judged against default "
                               "paired by round, on the step lines --metric REGEX matches")
    better: str = option("auto", flag="--better", choices=("auto", "lower", "higher"),
                         help="the direction of --metric REGEX: lower (a step time) or higher (tokens/s); auto: higher "
                              "when the REGEX names a throughput (tps, tokens/s, samples/s, it/s, throughput, mfu, "
                              "tflops), else lower; the header says which")
    block_steps: int = option(5, flag="--block-steps",
                              help="steps per block (the first step of each block is not judged)")
    warmup_blocks: int = option(2, flag="--warmup-blocks",
                                help="blocks on default before the schedule (then one warm-up round, each arm once, not judged)")
    max_blocks: int | None = option(None, flag="--max-blocks",
                                    help="after this many blocks the plugin stays on default (default: no limit)")
    period: str = option("auto", flag="--period",
                         help="tuner calls per step per communicator; auto: found by the plugin from the call sequence")
    workload: str | None = option(None, flag="--workload",
                                  help="with --in-run and --period auto: the job's workload (ccltune workload import); its "
                                       "calls per step make the period the plugin finds whole steps (a decode loop's "
                                       "calls are all one key: alone, the plugin finds a period of one call)")

    def to_argv(self) -> list[str]:
        """The command line of these options: the flags, then ``--`` and the job."""
        return [*to_argv(dataclasses.replace(self, command=()), "ab"), "--", *self.command]


def _command(o: AbOptions) -> list[str]:
    cmd = list(o.command)
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
        raise UsageError(f"{flag} {files.printable(text, 80)!r}: expected NAME=VALUE with NAME a variable name")
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf")), None)
    if bad is not None:  # a newline in a value printed in the verdict's table would forge lines of it
        raise UsageError(f"{flag} {name}=...: the value holds the control character {bad!r} (U+{ord(bad):04X}); "
                         "an arm's value is printed in the verdict, so control characters are refused")
    return name, value


def arms(o: AbOptions) -> list[Arm]:
    """Every arm from the flags, checked (module doc); default (and default-2) first."""
    out = [Arm(DEFAULT)] + ([] if o.no_aa else [Arm(CONTROL)])
    out += [Arm(Path(r).stem or "rules", rules=_rule_file(r, "--rules")) for r in o.rules]
    out += [Arm(e, env=(_env_pair(e, "--env"),)) for e in o.env]
    out += [Arm(f"nccl-lib:{Path(p).name}", nccl_lib=_lib(p, "--nccl-lib")) for p in o.nccl_lib]
    named: dict[str, dict[str, Any]] = {}
    for spec in o.arm:
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
    for arm in out:
        if arm.name in seen:
            raise UsageError(f"two arms are named {arm.name!r}: name them apart with --arm NAME:KIND:VALUE")
        seen.add(arm.name)
    if len(out) == (1 if o.no_aa else 2) and not o.prune:
        raise UsageError("no arm to compare with NCCL's default: give --rules, --env, --nccl-lib or --arm")
    return out


def metric(o: AbOptions) -> rounds.Metric:
    if o.skip < 0:
        raise UsageError(f"--skip must be >= 0, got {o.skip}")
    prof = job.profiler_path()
    if o.metric == "wall":
        return rounds.Metric("wall")
    if o.metric == "gpu":
        raise UsageError("--metric gpu (the GPU step period of each block) is for --in-run; whole runs take "
                         "wall, comm or a REGEX of the job's step lines")
    if o.metric in ("comm", "auto"):
        if prof is None:
            if o.metric == "auto":
                return rounds.Metric("wall")
            raise UsageError("--metric comm needs ccltune's profiler plugin (libnccl-profiler-ccltune.so), not built "
                             "here: build it (make -C profiler, or pip install .) or use --metric wall or a REGEX")
        return rounds.Metric("comm", profiler=str(prof), auto=o.metric == "auto")
    try:
        pattern = re.compile(o.metric)
    except re.error as exc:
        raise UsageError(f"--metric {o.metric!r} is not a regular expression: {exc}") from None
    if pattern.groups < 1:
        raise UsageError(f"--metric {o.metric!r} has no group: put ( ) around the number, e.g. "
                         "'step time ([0-9.]+) ms'")
    return rounds.Metric("regex", pattern, o.skip)


def _rounds(o: AbOptions, judged: int) -> int:
    """--rounds, or by default: 50 under --until-confident, else 5 or the fewest whose pairs can reach a
    95% verdict for the ``judged`` arms under Holm (7 for two arms)."""
    n = o.rounds if o.rounds is not None else (50 if o.until_confident else max(5, judge.min_rounds(judged)))
    if n < 1:
        raise UsageError(f"--rounds must be >= 1, got {n}")
    if o.budget is not None:
        launching.check_timeout(o.budget, "--budget")
    if o.until_confident and o.budget is None:
        raise UsageError("--until-confident needs --budget SECONDS (the most time it may take)")
    if o.run_timeout is not None:
        launching.check_timeout(o.run_timeout, "--run-timeout")
    if not 0 <= o.min_effect < 100:
        raise UsageError(f"--min-effect must be in [0, 100) percent, got {o.min_effect:g}")
    return n


def run_ab(o: AbOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> Outcome:
    """Check ``o`` (every arm, the metric, the rounds) before anything runs, then run the job again and
    again, NCCL's default and each arm once per round; the verdict's lines go to ``console``. An arm slower
    or failed in every run raises CheckFailed, with the run; Ctrl-C returns the verdict so far (exit code
    130). ``command_line``: what the user typed, recorded with the run (default: the options' own argv)."""
    check_outputs(o)
    cmd = _command(o)
    if o.in_run:
        from ccltune.commands import ab_inrun

        return ab_inrun.run_in_run(o, cmd, arms(o), console, command_line or o.to_argv())
    defaults = {f.name: f.default for f in dataclasses.fields(AbOptions)}
    in_run_only = ["--" + n.replace("_", "-") for n in ("block_steps", "warmup_blocks", "max_blocks", "period", "workload")
                   if getattr(o, n) != defaults[n]]
    if in_run_only:
        raise UsageError(f"{', '.join(in_run_only)}: for --in-run only (blocks inside one run); whole runs take "
                         "--rounds, --until-confident, --budget")
    all_arms = arms(o)
    met = metric(o)
    n_rounds = _rounds(o, len(all_arms) - 1)
    prune_how, tmp = "", None
    parts: list[Any] = []
    if o.prune:
        rule_arms = [(a.name, a.rules) for a in all_arms if a.rules]
        files.check_output(o.prune, "--prune", {"the input --rules": [path for _, path in rule_arms]})
        if len(rule_arms) != 1 or len(all_arms) != (1 if o.no_aa else 2) + 1:
            raise UsageError("--prune takes exactly one --rules file and no other arm")
        (name, path), = rule_arms
        tmp = tempfile.TemporaryDirectory(prefix="ccltune-prune-")
        parts, prune_how = prune.parts(rules.load(path, "--rules"), name, Path(tmp.name))
        all_arms = [a for a in all_arms if not a.rules] + [Arm(p.name, rules=p.path) for p in parts]
        n_rounds = _rounds(o, len(all_arms) - 1)
    tuner = _tuner() if any(a.rules for a in all_arms) else None
    base, removed = job.base_env(os.environ)
    seed = o.seed if o.seed is not None else random.SystemRandom().randrange(1 << 31)
    higher = met.kind == "regex" and direction(o.metric, o.better)[0]
    plan = rounds.Plan(cmd, all_arms, met, n_rounds, seed, o.min_effect / 100, o.until_confident,
                       o.budget, tuner, base, o.echo, o.run_timeout, higher_better=higher)
    try:
        return _run(o, plan, removed, parts, prune_how, console, command_line or o.to_argv())
    finally:
        if tmp is not None:
            tmp.cleanup()


def _tuner() -> str:
    from ccltune import tuner_plugin

    try:
        return str(tuner_plugin.library_path())
    except Exception as exc:  # noqa: BLE001 - EngineUnavailable, with how to build it
        raise UsageError(f"a rules arm needs the ccltune tuner plugin: {exc}") from None


def _header(plan: rounds.Plan, removed: list[str], how: str) -> list[str]:
    out = [f"# ccltune ab: {shlex.join(plan.argv)}",
           f"# {len(plan.arms)} arms, up to {plan.rounds} rounds, shuffled order per round (seed {plan.seed})",
           f"# metric: {plan.metric.describe()}"
           + (" (higher is better: judged as 1 / value, a ratio below 1 is faster)" if plan.higher_better else ""),
           f"# statistic: {judge.METHOD}"]
    out += [f"#   arm {a.name}: {a.describe()}" for a in plan.arms]
    if removed:
        out.append(f"# note: {', '.join(removed)} removed from every arm's environment, so 'default' is NCCL's own "
                   "choice")
    if how:
        out.append(f"# prune: {how}")
    return out


def _run(o: AbOptions, plan: rounds.Plan, removed: list[str], parts: list[Any], how: str, console: Console,
         argv: list[str]) -> Outcome:
    store = Store(o.db)
    env = {"host": environment.socket.gethostname(), "ccltune_version": environment.__version__,
           "variables": environment.comm_env(), "command": shlex.join(plan.argv)}
    run_id = store.begin_run("ab", command="ccltune " + shlex.join(argv), env=env,
                             args={**launching.args_record(o), "seed": plan.seed})
    try:
        store.add_ab_arms(run_id, {a.name: a.spec() for a in plan.arms})
        for line in _header(plan, removed, how):
            console.say(line)
        with terminate_as_interrupt():
            out = rounds.run(plan, store, run_id, console.say)
        per_rule = fired_tables(plan, out)
        summary = {"seed": plan.seed, "metric": plan.metric.describe(), "unit": plan.metric.unit,
                   "rounds": out.rounds_done, "stop": out.stop_reason, "method": judge.METHOD,
                   "arms": [v.to_dict() for v in out.verdicts],
                   **({"fired": {name: [f.to_dict() for f in got] for name, (got, _) in per_rule.items()}}
                      if per_rule else {})}
    except BaseException as exc:  # whatever it was, the run is not left 'running'
        store.finish_run(run_id, RunStatus.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else RunStatus.FAILED,
                         {"error": _error_text(exc)})
        store.close()
        raise
    store.finish_run(run_id, RunStatus.INTERRUPTED if out.interrupted else RunStatus.COMPLETE, summary)
    store.close()
    for line in [*render(out, plan.metric.unit), *fired_lines(plan, per_rule)]:
        console.say(line)
    if o.json:
        doc = {**summary, "run_id": run_id, "command": plan.argv,
               "runs": [vars(s) for s in out.samples], "notes": out.notes}
        files.write_text(o.json, json.dumps(doc, indent=1, default=str), flag="--json")
    if o.prune and not out.interrupted:
        text, kept = prune.kept_text(parts, out.verdicts, source=o.rules[0], argv=plan.argv, how=how)
        files.write_text(o.prune, text, flag="--prune")
        console.say(f"# prune: wrote {o.prune}: {sum(len(p.rules) for p in kept)} rule(s) of {len(kept)} part(s) "
                    f"kept, of {len(parts)}")
    elif o.prune:
        console.say(f"# prune: interrupted: {o.prune} not written")
    return _exit(out, o.db, run_id, console)


def _error_text(exc: BaseException) -> str:
    """What the database records of an error that ended an ab run: a ccltune error's first line (the
    metric's, without the job's lines after it), else the exception's type and text."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, CcltuneError):
        return str(exc).split("\n", 1)[0]
    return f"{type(exc).__name__}: {exc}"


def _exit(out: rounds.RoundsResult, db: str, run_id: int, console: Console) -> Outcome:
    if out.interrupted:
        console.warn("ccltune: interrupted")
        return Outcome(db, run_id, Interrupted.exit_code)
    bad = [v for v in out.verdicts if not v.control and v.status in (judge.Status.SLOWER, judge.Status.FAILED)]
    if bad:
        failed = CheckFailed("ab: " + "; ".join(f"{v.name} {v.status.value}" for v in bad))
        failed.run_id = run_id
        raise failed
    return Outcome(db, run_id)


def render(out: rounds.RoundsResult, unit: str) -> list[str]:
    """The verdict table: per arm its runs, median, ratio to default and shift, each with its interval."""
    u = f" {unit}" if unit else ""
    lines = [f"# {'arm':<24} {'runs':>4} {'failed':>6} {'median':>11}  {'ratio':>7} {'interval':>18} {'level':>6}  "
             f"{'shift':>10} {'interval':>24}  verdict"]
    for v in out.verdicts:
        med = "-" if v.median is None else f"{v.median:.5g}"
        e = v.effect
        if e is None or v.shift is None:
            cols = f"{'-':>7} {'-':>18} {'-':>6}  {'-':>10} {'-':>24}"
        else:
            sh, sh_lo, sh_hi = v.shift
            cols = (f"{e.ratio:7.4f} {_iv(e.low, e.high, '.4f'):>18} {f'{100 * e.level:.4g}%':>6}  {sh:+10.4g} "
                    f"{_iv(sh_lo, sh_hi, '+.4g'):>24}")
        word = v.status.value.upper() if v.status in (judge.Status.SLOWER, judge.Status.FASTER) else v.status.value
        if v.control:
            word += " (A/A control" + ("" if e is None or not e.bounded else ": the job's noise is inside the interval"
                                       if v.status is judge.Status.NO_DIFFERENCE else
                                       ": default differs from itself, the job drifts") + ")"
        lines.append(f"  {v.name:<24} {v.runs:>4} {v.failed:>6} {med:>11}  {cols}  {word}"
                     + (f"  ({v.note})" if v.note else ""))
    lines.append(f"# ratio = arm / default (< 1: faster); shift in the metric's unit{u}; test: {judge.METHOD}; "
                 f"{out.rounds_done} round(s)" + (f"; stopped: {out.stop_reason}" if out.stop_reason else ""))
    for f in out.failures:
        lines.append(f"# failed run: arm {f.arm}, round {f.round}: {f.reason}")
    return lines


def fired_tables(plan: rounds.Plan, out: rounds.RoundsResult) -> dict[str, tuple[list[Any], Any]]:
    """Per rules arm whose runs left profiler files: each rule's calls and what NCCL ran (ab.fired)."""
    from ccltune.ab import fired

    got = {}
    for a in plan.arms:
        if a.rules and a.name in out.fired:
            rs = rules.load(a.rules, "--rules")
            got[a.name] = (fired.firings(rs, out.fired[a.name]), out.fired[a.name])
    return got


def fired_lines(plan: rounds.Plan, per_rule: dict[str, tuple[list[Any], Any]]) -> list[str]:
    """The per-rule tables of the rules arms, or why there is none."""
    from ccltune.ab import fired

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
