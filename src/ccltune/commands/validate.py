"""``validate RULES``: A/B of NCCL's default against the tuner plugin with RULES, interleaved, at every
size; PASS when no size got slower beyond noise (the A/B run itself: ``ccltune.validate.ab``)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ccltune import collectives, datatypes, engines, files, launch
from ccltune.commands import launching
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.launching import LaunchOptions
from ccltune.commands.options import option, to_argv
from ccltune.commands.results import Outcome
from ccltune.errors import CheckFailed, EngineUnavailable, UsageError
from ccltune.files import write_text
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import check as check_load
from ccltune.measure.session import Session
from ccltune.sizes import parse_size, size_series
from ccltune.status import Verdict
from ccltune.validate import ab, capture, junit


@dataclass(frozen=True, kw_only=True)
class ValidateOptions(LaunchOptions):
    """``ccltune validate``'s options (``ccltune validate --help``); percentages in percent."""

    rules: str = option(positional=True, help="rule file (as written by ccltune tune)")
    collective: tuple[str, ...] = option(tuple(c.name for c in collectives.TUNABLE), positional=True)
    minbytes: str = option("8", flag="--minbytes", keyword="min_bytes", help="smallest size (whole buffer, as bench)")
    maxbytes: str = option("1G", flag="--maxbytes", keyword="max_bytes", help="largest size")
    stepfactor: float = option(2.0, flag="--stepfactor", keyword="step_factor", help="multiply the size by this")
    datatype: str = option("float", flag="--datatype", help="datatype")
    op: str = option("sum", flag="--op", help="reduction op")
    reps: int = option(7, flag="--reps", help="timed rounds per side and size")
    target_us: float = option(1000.0, flag="--target-us", help="length of one timed replay")
    max_iters: int = option(100, flag="--max-iters", help="most calls in one replay")
    warmup_iters: int = option(2, flag="--warmup_iters", help="untimed replays before each arm is timed")
    no_graph: bool = option(False, flag="--no-graph", help="time eager calls instead of CUDA graphs")
    hard_limit: float = option(2.0, flag="--hard-limit", help="a size slower than this fails whatever the noise")
    retest: int = option(1, flag="--retest",
                         help="measure the sizes that fail again, up to N times (--reps interleaved rounds each); a "
                              "size is judged by its latest measurement, and the first judgement is kept in the report")
    best_from: str | None = option(None, flag="--best-from",
                                   help="also time, at every size where the sweep in this database found a candidate faster than "
                                        "NCCL's own choice, that candidate forced (a third arm, interleaved with the other two), "
                                        "and report the share of its gain the rules capture")
    json: str | None = option(None, flag="--json", help="verdict as JSON")
    junit: str | None = option(None, flag="--junit", help="verdict as JUnit XML (one testcase per size)")
    under_load: int | None = option(None, flag="--under-load",
                                    help="while collectives are timed, run an M x M bf16 matrix multiply back to back on a second "
                                         "stream of each rank's GPU, so configurations compete for SMs as in training (recorded "
                                         "with the run; `ccltune tune --under-load M` derives from such runs). Not on gloo")
    virtual_nodes: int = option(1, flag="--virtual-nodes",
                                help="SIMULATION AID: split this host's ranks into K groups NCCL treats as nodes (NCCL_HOSTID); "
                                     "rows and rules then carry nNodes=K; never real multi-node figures")

    def to_argv(self) -> list[str]:
        """The command line of these options (a job's workers parse it back with the CLI's parser)."""
        return to_argv(self, "validate")


def run_validate(o: ValidateOptions, console: Console = Console(), *, caller: launch.Caller | None = None,
                 command_line: list[str] | None = None) -> Outcome:
    """Check ``o``, then time NCCL's default against the plugin with ``o.rules``: in this process, or as a
    job whose workers run ``ccltune <to_argv(o)>``; the verdict's table goes to ``console``. A FAIL verdict
    raises CheckFailed here (the job's: its exit code), with the run."""
    check_outputs(o)
    colls = collectives.select(list(o.collective))
    sizes = size_series(parse_size(o.minbytes, "-b/--minbytes"), parse_size(o.maxbytes, "-e/--maxbytes"),
                        factor=o.stepfactor)
    rules_path, command_line = files.regular_copy(o.rules, "RULES", command_line or [])  # <(cat r.conf) read once
    o = dataclasses.replace(o, rules=rules_path)
    launching.check_rule_file(o.rules, "RULES")
    if o.reps < 2:
        raise UsageError(f"--reps must be >= 2 to know the noise, got {o.reps}")
    if o.retest < 0:
        raise UsageError(f"--retest must be >= 0, got {o.retest}")
    launching.check_timing(o)
    if not 0 <= o.hard_limit < 100:
        raise UsageError(f"--hard-limit must be in [0, 100) percent, got {o.hard_limit:g}")
    datatypes.dtype(o.datatype)
    datatypes.op(o.op)
    if o.best_from:  # a missing or unusable database is said before any GPU work
        capture.arms_from_db(o.best_from, 1, 1, None)
    engine_name, _ = launching.resolve_engine(o)
    launching.check_virtual_nodes(o, engine_name)
    check_load(o.under_load, engine_name)
    if not engines.kind(engine_name).own_comm:  # a flag that cannot work: 2; no GPU here: 4, as --help says
        error = UsageError if o.engine else EngineUnavailable
        raise error("validate needs the nccl engine (a GPU); "
                    + (f"got --engine {engine_name}" if o.engine else "no GPU is visible here"))
    _plugin_or_error()  # said once, before torchrun starts a process per GPU
    argv = o.to_argv()
    rc = launching.relaunch(o, argv, engine_name, caller, command_line or None, console)
    if rc is not None:
        return Outcome.of_job(o.db, rc, caller)
    return _run(o, colls, sizes, console, command_line or argv)


def _plugin_or_error() -> None:
    from ccltune import tuner_plugin

    try:
        tuner_plugin.library_path()
    except Exception as exc:  # noqa: BLE001 - EngineUnavailable, with how to build it
        raise UsageError(f"validate needs the ccltune tuner plugin: {exc}") from None


def _run(args: ValidateOptions, colls: list[Any], sizes: list[int], console: Console, argv: list[str]) -> Outcome:
    settings = measure_sweep.SweepSettings(dtype=datatypes.dtype(args.datatype), op=datatypes.op(args.op),
                                           reps=args.reps, graph=not args.no_graph, target_us=args.target_us,
                                           max_iters=args.max_iters, warmup=args.warmup_iters, timeout_s=args.timeout)
    plan = ab.ABPlan(args.rules, colls, sizes, settings, hard_limit_pct=args.hard_limit, retest=args.retest,
                     best_from=args.best_from, under_load=args.under_load, args=launching.args_record(args))
    session = Session("validate", "nccl", db=args.db, argv=argv, timeout_s=args.timeout,
                      virtual_nodes=args.virtual_nodes)  # virtual nodes as the sweep whose rules are validated
    res = ab.run(plan, session, launching.engine_options(args), require_plugin=_plugin_or_error)
    if session.interrupted:
        return Outcome(args.db, session.run_id, session.exit_code)
    if res.unjudged is not None:
        res.unjudged.run_id = session.run_id
        raise res.unjudged
    if res.verdict is None:
        return Outcome(args.db, session.run_id)
    _print(res.verdict, args, console)
    if res.capture is not None:
        _print_capture(res.capture, args.best_from, console)
    if res.load:
        console.say(f"# under load: {res.load}")
    console.say(f"# time on rank 0: {settings.clock.line(res.wall_s)}")
    if args.json:
        write_text(args.json, json.dumps(res.summary, indent=1, default=str), flag="--json")
    if args.junit:
        write_text(args.junit, junit.to_junit(res.verdict), flag="--junit")
    if res.verdict.status != Verdict.PASS:
        failed = CheckFailed(f"validate: {res.verdict.status}: rules in {args.rules} made some size slower (see above)")
        failed.run_id = session.run_id
        raise failed
    return Outcome(args.db, session.run_id)


def _print_capture(cap: Any, source: str | None, console: Console) -> None:
    counted = cap.counted
    console.say(f"# capture: the sweep's best candidate ({source}) timed as a third arm at {len(cap.sizes)} sizes; it "
          f"beat the default beyond noise at {len(counted)}")
    for s in counted:
        console.say(f"  {s.collective:<15} {s.size_bytes:>12} best {s.candidate:<20} available {100 * s.available:5.1f}%"
              f"  captured {100 * s.captured:5.1f}%")
    if cap.ratio is not None:
        console.say(f"# capture: the rules kept {100 * cap.ratio:.1f}% of the available gain (sum over those sizes)")


def _print(result: Any, args: ValidateOptions, console: Console) -> None:
    console.say(f"# ccltune validate {args.rules}: NCCL default vs plugin+rules, {args.reps} interleaved rounds")
    console.say(f"# {'collective':<15} {'size':>12} {'default_us':>11} {'rules_us':>10} {'speedup':>8} {'noise%':>7}  verdict")
    for sv in result.sizes:
        d = sv.default.median_us if sv.default else float("nan")
        r = sv.rules.median_us if sv.rules else float("nan")
        sp = sv.speedup if sv.speedup is not None else float("nan")
        nz = 100 * sv.noise if sv.noise is not None else float("nan")
        tail = f"  ({sv.reason})" if sv.status != Verdict.PASS or sv.first else ""
        console.say(f"  {sv.collective:<15} {sv.size_bytes:>12} {d:11.2f} {r:10.2f} {sp:8.3f} {nz:7.1f}  {sv.status}{tail}")
    gm = result.geomean_speedup
    console.say(f"# verdict: {result.status}" + (f" (geometric-mean speedup {gm:.3f}x)" if gm else ""))

