"""ccltune validate RULES: A/B of NCCL's default against the plugin with RULES, interleaved."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import collectives, datatypes, engines, files
from ccltune.cli import _common
from ccltune.commands import launching
from ccltune.errors import CheckFailed, EngineUnavailable, UsageError
from ccltune.files import write_text
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import check as check_load
from ccltune.measure.session import Session
from ccltune.sizes import parse_size, size_series
from ccltune.validate import ab, junit
from ccltune.validate import capture


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="A/B: NCCL's default vs the tuner plugin with RULES; PASS when no size got slower",
        description="Time NCCL's default and the ccltune plugin loaded with RULES side by side (interleaved, "
                    "repeated) at every size; verdict PASS when no size is slower beyond noise (and none by "
                    "more than --hard-limit). Exit code 1 on FAIL.",
        formatter_class=DefaultsFormatter)
    p.add_argument("rules", metavar="RULES", help="rule file (as written by ccltune tune)")
    p.add_argument("collective", nargs="*", default=[c.name for c in collectives.TUNABLE])
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="1G")
    p.add_argument("-f", "--stepfactor", type=float, default=2)
    p.add_argument("-d", "--datatype", default="float")
    p.add_argument("-o", "--op", default="sum")
    p.add_argument("--reps", type=int, default=7, help="timed rounds per side and size")
    p.add_argument("--target-us", type=float, default=1000.0)
    p.add_argument("--max-iters", type=int, default=100)
    p.add_argument("-w", "--warmup_iters", type=int, default=2)
    p.add_argument("--no-graph", action="store_true")
    p.add_argument("--hard-limit", type=float, default=2.0, metavar="PCT",
                   help="a size slower than this fails whatever the noise")
    p.add_argument("--retest", type=int, default=1, metavar="N",
                   help="measure the sizes that fail again, up to N times (--reps interleaved rounds each); a "
                        "size is judged by its latest measurement, and the first judgement is kept in the report")
    p.add_argument("--best-from", default=None, metavar="SWEEP_DB",
                   help="also time, at every size where the sweep in this database found a candidate faster than "
                        "NCCL's own choice, that candidate forced (a third arm, interleaved with the other two), "
                        "and report the share of its gain the rules capture")
    p.add_argument("--json", default=None, metavar="PATH", help="verdict as JSON")
    p.add_argument("--junit", default=None, metavar="PATH", help="verdict as JUnit XML (one testcase per size)")
    _common.add_under_load(p)
    _common.add_virtual_nodes(p)
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    colls = collectives.select(args.collective)
    sizes = size_series(parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes"),
                        factor=args.stepfactor)
    args.rules, args._argv = files.regular_copy(args.rules, "RULES", args._argv)  # <(cat r.conf) read once
    _common.check_rule_file(args.rules, "RULES")
    if args.reps < 2:
        raise UsageError(f"--reps must be >= 2 to know the noise, got {args.reps}")
    if args.retest < 0:
        raise UsageError(f"--retest must be >= 0, got {args.retest}")
    _common.check_timing(args)
    if not 0 <= args.hard_limit < 100:
        raise UsageError(f"--hard-limit must be in [0, 100) percent, got {args.hard_limit:g}")
    datatypes.dtype(args.datatype)
    datatypes.op(args.op)
    if args.best_from:  # a missing or unusable database is said before any GPU work
        capture.arms_from_db(args.best_from, 1, 1, None)
    engine_name, _ = launching.resolve_engine(args)
    _common.check_virtual_nodes(args, engine_name)
    check_load(args.under_load, engine_name)
    if not engines.kind(engine_name).own_comm:  # a flag that cannot work: 2; no GPU here: 4, as --help says
        error = UsageError if args.engine else EngineUnavailable
        raise error("validate needs the nccl engine (a GPU); "
                    + (f"got --engine {engine_name}" if args.engine else "no GPU is visible here"))
    _plugin_or_error()  # said once, before torchrun starts a process per GPU
    rc = launching.relaunch(args, args._argv, engine_name, getattr(args, "_caller", None))
    if rc is not None:
        return rc
    return _run(args, colls, sizes)


def _plugin_or_error() -> None:
    from ccltune import tuner_plugin

    try:
        tuner_plugin.library_path()
    except Exception as exc:  # noqa: BLE001 - EngineUnavailable, with how to build it
        raise UsageError(f"validate needs the ccltune tuner plugin: {exc}") from None


def _run(args: argparse.Namespace, colls: list[Any], sizes: list[int]) -> int:
    settings = measure_sweep.SweepSettings(dtype=datatypes.dtype(args.datatype), op=datatypes.op(args.op),
                                           reps=args.reps, graph=not args.no_graph, target_us=args.target_us,
                                           max_iters=args.max_iters, warmup=args.warmup_iters, timeout_s=args.timeout)
    plan = ab.ABPlan(args.rules, colls, sizes, settings, hard_limit_pct=args.hard_limit, retest=args.retest,
                     best_from=args.best_from, under_load=args.under_load, args=launching.args_record(args))
    session = Session("validate", "nccl", db=args.db, argv=args._argv, timeout_s=args.timeout,
                      virtual_nodes=args.virtual_nodes)  # virtual nodes as the sweep whose rules are validated
    res = ab.run(plan, session, launching.engine_options(args), require_plugin=_plugin_or_error)
    if session.interrupted:
        return session.exit_code
    if res.unjudged is not None:
        raise res.unjudged
    if res.verdict is None:
        return 0
    _print(res.verdict, args)
    if res.capture is not None:
        _print_capture(res.capture, args.best_from)
    if res.load:
        print(f"# under load: {res.load}")
    print(f"# time on rank 0: {settings.clock.line(res.wall_s)}")
    if args.json:
        write_text(args.json, json.dumps(res.summary, indent=1, default=str), flag="--json")
    if args.junit:
        write_text(args.junit, junit.to_junit(res.verdict), flag="--junit")
    if res.verdict.status != "PASS":
        raise CheckFailed(f"validate: {res.verdict.status}: rules in {args.rules} made some size slower (see above)")
    return 0


def _print_capture(cap: Any, source: str) -> None:
    counted = cap.counted
    print(f"# capture: the sweep's best candidate ({source}) timed as a third arm at {len(cap.sizes)} sizes; it "
          f"beat the default beyond noise at {len(counted)}")
    for s in counted:
        print(f"  {s.collective:<15} {s.size_bytes:>12} best {s.candidate:<20} available {100 * s.available:5.1f}%"
              f"  captured {100 * s.captured:5.1f}%")
    if cap.ratio is not None:
        print(f"# capture: the rules kept {100 * cap.ratio:.1f}% of the available gain (sum over those sizes)")


def _print(result: Any, args: argparse.Namespace) -> None:
    print(f"# ccltune validate {args.rules}: NCCL default vs plugin+rules, {args.reps} interleaved rounds")
    print(f"# {'collective':<15} {'size':>12} {'default_us':>11} {'rules_us':>10} {'speedup':>8} {'noise%':>7}  verdict")
    for sv in result.sizes:
        d = sv.default.median_us if sv.default else float("nan")
        r = sv.rules.median_us if sv.rules else float("nan")
        sp = sv.speedup if sv.speedup is not None else float("nan")
        nz = 100 * sv.noise if sv.noise is not None else float("nan")
        tail = f"  ({sv.reason})" if sv.status != "PASS" or sv.first else ""
        print(f"  {sv.collective:<15} {sv.size_bytes:>12} {d:11.2f} {r:10.2f} {sp:8.3f} {nz:7.1f}  {sv.status}{tail}")
    gm = result.geomean_speedup
    print(f"# verdict: {result.status}" + (f" (geometric-mean speedup {gm:.3f}x)" if gm else ""))

