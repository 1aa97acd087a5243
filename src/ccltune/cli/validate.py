"""ccltune validate RULES: A/B of NCCL's default against the plugin with RULES, interleaved."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

from ccltune import collectives, environment, files, rules, types
from ccltune.cli import _common
from ccltune.cli.sweep import check_timing, engine_opts
from ccltune.errors import CheckFailed, DataError, RuleFileError, UsageError
from ccltune.files import write_text
from ccltune.measure import sweep as S
from ccltune.sizes import parse_size, size_series
from ccltune.store import Store
from ccltune.tune.derive import Candidate
from ccltune.validate import capture as C
from ccltune.validate import junit
from ccltune.validate import verdict as V


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="A/B: NCCL's default vs the tuner plugin with RULES; PASS when no size got slower",
        description="Time NCCL's default and the ccltune plugin loaded with RULES side by side (interleaved, "
                    "repeated) at every size; verdict PASS when no size is slower beyond noise (and none by "
                    "more than --hard-limit). Exit code 1 on FAIL.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("rules", metavar="RULES", help="rule file (as written by ccltune tune)")
    p.add_argument("collective", nargs="*", default=["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])
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
    _common.add_virtual_nodes(p)
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    colls = collectives.select(args.collective)
    sizes = size_series(parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes"),
                        factor=args.stepfactor)
    args.rules, args._argv = files.regular_copy(args.rules, "RULES", args._argv)  # <(cat r.conf) read once
    try:
        diags = rules.load(args.rules, "RULES").diagnostics
    except RuleFileError as exc:
        raise UsageError(str(exc)) from None
    if diags:
        raise UsageError(f"{args.rules} has rejected lines (ccltune plugin check {args.rules}): "
                         + "; ".join(f"line {d.line}: {d.reason}" for d in diags[:3]))
    if args.reps < 2:
        raise UsageError(f"--reps must be >= 2 to know the noise, got {args.reps}")
    if args.retest < 0:
        raise UsageError(f"--retest must be >= 0, got {args.retest}")
    check_timing(args)
    if not 0 <= args.hard_limit < 100:
        raise UsageError(f"--hard-limit must be in [0, 100) percent, got {args.hard_limit:g}")
    types.dtype(args.datatype)
    types.op(args.op)
    if args.best_from:  # a missing or unusable database is said before any GPU work
        C.arms_from_db(args.best_from, 1, 1, None)
    engine_name, _ = _common.resolve_engine(args)
    _common.check_virtual_nodes(args, engine_name)
    if engine_name != "nccl":
        raise UsageError("validate needs the nccl engine (a GPU); "
                         + (f"got --engine {engine_name}" if args.engine else "no GPU is visible here"))
    _plugin_or_error()  # said once, before torchrun starts a process per GPU
    rc = _common.relaunch(args, args._argv, engine_name)
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
    from ccltune.engines.nccl import DEFAULT, CommConfig

    t_start = time.perf_counter()
    ctx = _common.join("nccl", args.timeout)
    _common.quiet_other_ranks(ctx)
    _common.apply_virtual_nodes(ctx, args.virtual_nodes)  # as the sweep whose rules are validated
    opts = engine_opts(args, tempfile.mkdtemp(prefix="ccltune-validate-"))
    if not opts.plugin_path:
        _plugin_or_error()
    engine = _common.make_engine("nccl", ctx, opts)
    settings = S.SweepSettings(dtype=types.dtype(args.datatype), op=types.op(args.op), reps=args.reps,
                               graph=not args.no_graph, target_us=args.target_us, max_iters=args.max_iters,
                               warmup=args.warmup_iters, timeout_s=args.timeout)
    settings.clock.add("start-up", time.perf_counter() - t_start)  # rendezvous, CUDA, NCCL library
    configs = [DEFAULT, CommConfig(rules_file=os.path.abspath(args.rules))]
    labels = [dict(config="default"), dict(config="rules")]
    env = (environment.collect(world_size=ctx.world_size, n_nodes=ctx.n_nodes, engine="nccl",
                               nccl=engine.info(), hosts=ctx.hosts, argv=args._argv) if ctx.is_root else {})
    _common.mark_virtual_nodes(env, args.virtual_nodes)
    gpu = (env.get("gpus") or [{}])[0].get("name") if ctx.is_root else None
    try:
        arms = _best_arms(args, ctx, gpu)
    except (UsageError, DataError):
        engine.close()
        raise
    # in one order on every rank (a set's order is not: string hashes differ between processes), as
    # the warm-up calls them in turn on every rank
    arm_configs = {c: CommConfig(c.algo, c.proto, c.channels) for c in sorted(set(arms.values()), key=Candidate.sort_key)}
    store = Store(args.db) if ctx.is_root else None
    run_id = None
    if store is not None:
        run_id = store.begin_run("validate", command=_common.command_line(args._argv), env=env,
                                 args={k: v for k, v in vars(args).items() if k not in ("func", "_argv")}, engine="nccl")
        store.add_artifact(run_id, "rules", open(args.rules, encoding="utf-8").read())
        engine.on_fatal = _common.fail_run_hook(args.db, run_id)
    rows, status, result, unjudged = [], "failed", None, None

    def judge(got: list[Any]) -> Any:
        return V.verdict(got, hard_slowdown=args.hard_limit / 100, covered=coverage(args.rules, gpu))

    def measure(coll: Any, size: int, note: str | None = None) -> list[Any]:
        if ctx.is_root:
            print(f"validate: {coll.name} {size} B{' (' + note + ')' if note else ''}", file=sys.stderr, flush=True)
        stored = coll.layout(size, settings.dtype.size, ctx.world_size, ctx.rank).size_bytes
        best = arms.get((coll.name, ctx.world_size, ctx.n_nodes, stored))
        extra = ([arm_configs[best]], [C.arm_label(best)]) if best is not None else ([], [])
        got = S.measure_size(engine, coll, size, configs + extra[0], labels + extra[1], settings)
        for m in got:
            m.note = m.note or note
        rows.extend(got)
        if store is not None:
            store.add_measurements(run_id, got)
        return got

    try:
        with _common.terminate_as_interrupt():
            for coll in colls:
                if ctx.is_root:
                    print(f"validate: {coll.name} {min(sizes)} B (warm-up, not stored)", file=sys.stderr, flush=True)
                S.warm_collective(engine, coll, min(sizes), configs + list(arm_configs.values()), settings)
                for size in sizes:
                    measure(coll, size)
            if store is not None:
                try:
                    result = judge(rows)
                except DataError as exc:  # nothing comparable was measured: said after the teardown
                    unjudged = exc
            by_name = {c.name: c for c in colls}
            for attempt in range(1, args.retest + 1):
                # rank 0 judges; every rank measures what it names again
                failing = ([[s.collective, s.size_bytes] for s in result.sizes if s.status == "FAIL"]
                           if result is not None else None)
                failing = json.loads(ctx.broadcast_bytes(json.dumps(failing).encode() if ctx.is_root else None,
                                                         "sizes to measure again"))
                if not failing:
                    break
                again = [m for name, size in failing for m in measure(by_name[name], size, f"retest {attempt}")]
                if result is not None:
                    result = V.retested(result, judge(again))
            status = "complete"
    except KeyboardInterrupt as exc:
        code = _common.interrupted(ctx, exc, f"validate interrupted; {len(rows)} rows kept in {args.db}")
        status = "interrupted"
        return code
    finally:
        S.close_timed(engine, settings.clock)
        wall = time.perf_counter() - t_start
        if store is not None and status != "complete":
            store.finish_run(run_id, status, {"rows": len(rows)})
        if status == "complete":
            ctx.close()
    if unjudged is not None:
        raise unjudged
    if store is None or result is None:
        return 0
    summary = result.to_dict()
    cap = C.capture(rows) if arms else None
    if cap is not None:
        summary["capture"] = cap.to_dict()
    summary.update(wall_s=round(wall, 3), time=settings.clock.summary())
    store.finish_run(run_id, "complete", summary)
    store.close()
    _print(result, args)
    if cap is not None:
        _print_capture(cap, args.best_from)
    print(f"# time on rank 0: {settings.clock.line(wall)}")
    if args.json:
        write_text(args.json, json.dumps(summary, indent=1, default=str), flag="--json")
    if args.junit:
        write_text(args.junit, junit.to_junit(result), flag="--junit")
    if result.status != "PASS":
        raise CheckFailed(f"validate: {result.status}: rules in {args.rules} made some size slower (see above)")
    return 0


def _best_arms(args: argparse.Namespace, ctx: Any, gpu: str | None) -> dict[Any, Any]:
    """The third arm's candidate per (collective, n_ranks, n_nodes, size), the same on every rank:
    rank 0 reads --best-from and sends what it found (an error there stops every rank)."""
    if not args.best_from:
        return {}
    blob = None
    if ctx.is_root:
        try:
            found = C.arms_from_db(args.best_from, ctx.world_size, ctx.n_nodes, gpu)
            blob = json.dumps({"arms": [[*k, c.algo, c.proto, c.channels] for k, c in found.items()]})
        except (UsageError, DataError) as exc:
            blob = json.dumps({"error": str(exc), "usage": isinstance(exc, UsageError)})
    got = json.loads(ctx.broadcast_bytes(blob.encode() if blob is not None else None, "best arms"))
    if "error" in got:
        raise (UsageError if got["usage"] else DataError)(got["error"])
    return {(coll, int(n), int(nn), int(size)): Candidate(algo, proto, ch)
            for coll, n, nn, size, algo, proto, ch in got["arms"]}


def _print_capture(cap: Any, source: str) -> None:
    counted = cap.counted
    print(f"# capture: the sweep's best candidate ({source}) timed as a third arm at {len(cap.sizes)} sizes; it "
          f"beat the default beyond noise at {len(counted)}")
    for s in counted:
        print(f"  {s.collective:<15} {s.size_bytes:>12} best {s.candidate:<20} available {100 * s.available:5.1f}%"
              f"  captured {100 * s.captured:5.1f}%")
    if cap.ratio is not None:
        print(f"# capture: the rules kept {100 * cap.ratio:.1f}% of the available gain (sum over those sizes)")


def coverage(path: str, gpu: str | None) -> Any:
    """covered(collective, n_ranks, n_nodes, size) by the rules in ``path``, as the plugin
    would see it on this machine (graph-captured calls report regBuff=1)."""
    ruleset = rules.load(path)
    facts = rules.PlatformFacts(gpu=gpu)

    def covered(collective: str, n_ranks: int, n_nodes: int, size: int) -> bool:
        q = rules.Query(collective.replace("_", ""), size, n_ranks, n_nodes, reg_buff=1, platform=facts)
        return rules.match(ruleset, q).rule is not None
    return covered


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

