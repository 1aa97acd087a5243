"""ccltune sweep: NCCL's default against forced algorithm x protocol x channel candidates."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from ccltune import collectives, environment, types
from ccltune.cli import _common
from ccltune.errors import CheckFailed, UsageError
from ccltune.measure import sweep as S
from ccltune.sizes import parse_size, size_series
from ccltune.store import Store
from ccltune.tune.derive import TWIN, Candidate, tunable

ALGOS = ("tree", "ring", "pat", "collnetdirect", "collnetchain", "nvls", "nvlstree")
PROTOS = ("ll", "ll128", "simple")
MODES = ("exhaustive", "model")
GRIDS = ("axes", "full")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="measure NCCL's default against forced algorithm/protocol/channel candidates",
        description="For each tunable collective and size, time NCCL's own choice and every candidate "
                    "side by side (interleaved, repeated, CUDA graphs), one process per GPU.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("collective", nargs="*", default=["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"],
                   help="tunable collectives (all_reduce, all_gather, reduce_scatter, broadcast, reduce)")
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="1G")
    p.add_argument("-f", "--stepfactor", type=float, default=2)
    p.add_argument("-d", "--datatype", default="float")
    p.add_argument("-o", "--op", default="sum")
    p.add_argument("--algos", default="tree,ring,pat", help="algorithms to force (NCCL_ALGO names)")
    p.add_argument("--protos", default="ll,ll128,simple", help="protocols to force (NCCL_PROTO names)")
    p.add_argument("--channels", default="4,8,16,32",
                   help="channel counts to try with NCCL's algorithm/protocol ('' for none)")
    p.add_argument("--grid", choices=GRIDS, default="full",
                   help="full: every algorithm x protocol x channel count, besides each pair with NCCL's channel "
                        "count and each count with NCCL's pair; axes: only those two (about a third of the points "
                        "and half the time; rules like ring/LL128 at 32 channels need the full grid)")
    p.add_argument("--reps", type=int, default=5, help="timed rounds per point (noise is estimated from them)")
    p.add_argument("--target-us", type=float, default=1000.0, help="length of one timed replay")
    p.add_argument("--max-iters", type=int, default=100, help="most calls in one replay")
    p.add_argument("-w", "--warmup_iters", type=int, default=2)
    p.add_argument("--no-graph", action="store_true", help="time eager calls instead of CUDA graphs")
    p.add_argument("--mode", choices=MODES, default="exhaustive",
                   help="exhaustive: every size x candidate; model: NCCL's default at every size, every candidate "
                        "at a few sizes, then candidates only where their alpha-beta lines predict a win "
                        "(docs/tuning.md)")
    p.add_argument("--no-twin", action="store_true",
                   help="do not measure NCCL's default a second time on another communicator (the A/A control "
                        "whose gap every candidate must beat; see docs/tuning.md)")
    _common.add_virtual_nodes(p)
    p.add_argument("--resume", type=int, default=None, metavar="RUN", help="continue an interrupted sweep run")
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)


def _names(text: str, valid: tuple[str, ...], flag: str) -> list[str]:
    from ccltune.errors import unknown_name

    out = []
    # rule files and NCCL_ALGO spell collnet_direct / CollNetDirect: one spelling for both here
    for t in filter(None, (x.strip().lower().replace("_", "") for x in text.split(","))):
        if t not in valid:
            raise unknown_name(flag.lstrip("-").rstrip("s"), t, valid, flag)
        out.append(t)
    return out


def candidates(args: argparse.Namespace) -> list[Candidate]:
    algos, protos = _names(args.algos, ALGOS, "--algos"), _names(args.protos, PROTOS, "--protos")
    chans = []
    for c in filter(None, (x.strip() for x in args.channels.split(","))):
        if not c.isdigit() or not 1 <= int(c) <= 64:
            raise UsageError(f"--channels: {c!r} is not a channel count between 1 and 64")
        chans.append(int(c))
    out = [Candidate()]
    out += [Candidate(a, p, None) for a in algos for p in protos]
    out += [Candidate(None, None, c) for c in chans]
    if getattr(args, "grid", "axes") == "full":  # each pair before its channel counts: a refused pair refuses them
        out += [Candidate(a, p, c) for a in algos for p in protos for c in chans]
    return out


def check_timing(args: argparse.Namespace) -> None:
    """--target-us, --max-iters and -w (sweep's and validate's): a finite length, at least one call."""
    if not (math.isfinite(args.target_us) and args.target_us > 0):
        raise UsageError(f"--target-us must be a number of microseconds > 0, got {args.target_us:g}")
    if args.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1, got {args.max_iters}")
    if args.warmup_iters < 0:
        raise UsageError(f"-w/--warmup_iters must be >= 0, got {args.warmup_iters}")


# what a resumed sweep must keep of the run it continues (besides its collectives, sizes and candidates)
_RESUME_SAME = {"datatype": "-d", "op": "-o", "reps": "--reps", "target_us": "--target-us", "max_iters": "--max-iters",
                "warmup_iters": "-w", "no_graph": "--no-graph", "mode": "--mode", "no_twin": "--no-twin",
                "virtual_nodes": "--virtual-nodes"}


def _measures(args: argparse.Namespace) -> dict[str, Any]:
    """What a sweep's rows are of: its collectives, sizes and candidates."""
    colls, sizes, cands = validate_args(args)
    return {"collectives": [c.name for c in colls], "sizes": sizes, "candidates": cands}


def check_resume(run: Any, args: argparse.Namespace, world_size: int) -> None:
    """--resume continues ``run`` only with what it measured: a sweep, on as many ranks, of the same
    collectives, sizes, candidates and settings; else its rows would mix two different sweeps."""
    if run.kind != "sweep":
        raise UsageError(f"--resume {run.id}: run {run.id} is a {run.kind} run, not a sweep")
    diffs = []
    if run.world_size and run.world_size != world_size:
        diffs.append(f"{run.world_size} ranks, now {world_size}")
    now = _measures(args)
    try:
        before = _measures(argparse.Namespace(**{**vars(args), "grid": "axes", **run.args}))  # runs before --grid: axes
    except UsageError:  # recorded by another ccltune version, with values this one refuses
        before = None
    diffs += [f"other {what}" for what in now if before is None or before[what] != now[what]]
    for key, flag in _RESUME_SAME.items():
        if key in run.args and run.args[key] != getattr(args, key, None):
            diffs.append(f"{flag} {run.args[key]!r}, now {getattr(args, key, None)!r}")
    if diffs:
        raise UsageError(f"--resume {run.id}: this command is not the sweep run {run.id} was ({'; '.join(diffs)}); "
                         f"resume with the run's own command (`ccltune runs` shows it) and --resume {run.id}, "
                         "or start a new sweep")


def validate_args(args: argparse.Namespace) -> tuple[list[Any], list[int], list[Candidate]]:
    colls = collectives.select(args.collective)
    for c in colls:
        if c.tuner_func is None:
            raise UsageError(f"{c.name} is not tuned by NCCL's tuner interface; sweep one of: "
                             + ", ".join(x.name for x in collectives.TUNABLE))
    sizes = size_series(parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes"),
                        factor=args.stepfactor)
    if args.reps < 1:
        raise UsageError(f"--reps must be >= 1, got {args.reps}")
    check_timing(args)
    types.dtype(args.datatype)
    types.op(args.op)
    return colls, sizes, candidates(args)


def main(args: argparse.Namespace) -> int:
    colls, sizes, cands = validate_args(args)
    engine_name, note = _common.resolve_engine(args)
    _common.check_virtual_nodes(args, engine_name)
    if engine_name != "nccl" and len(cands) > 1:
        raise UsageError(f"forced candidates (--algos/--protos/--channels) need the nccl engine (a GPU); "
                         f"the {engine_name} engine can only sweep its default: pass --algos '' --protos '' "
                         f"--channels ''" + (f" ({note})" if note else ""))
    if args.resume is not None and not _common.under_launcher():  # before any process starts
        with Store(args.db, readonly=True) as store:
            check_resume(store.run(args.resume), args, _common.job_size(args, engine_name))
    rc = _common.relaunch(args, args._argv, engine_name)
    if rc is not None:
        return rc
    if engine_name == "nccl" and not args.no_twin and len(cands) > 1:
        cands = [*cands, TWIN]
    return run_sweep(args, colls, sizes, cands, engine_name)


def engine_opts(args: argparse.Namespace, workdir: str) -> argparse.Namespace:
    """Engine options: the plugin (for channels and rules) and an empty rule file for the default."""
    from ccltune import tuner_plugin

    opts = argparse.Namespace(**vars(args))
    opts.workdir = workdir
    try:
        opts.plugin_path = str(tuner_plugin.library_path())
    except Exception:  # noqa: BLE001 - without the plugin, channels go through min/maxCTAs
        opts.plugin_path = None
    opts.empty_rules = os.path.join(workdir, "empty.conf")
    with open(opts.empty_rules, "w", encoding="utf-8") as fh:
        fh.write("# ccltune: no rules (NCCL's default)\n")
    return opts


def run_sweep(args: argparse.Namespace, colls: list[Any], sizes: list[int], cands: list[Candidate],
              engine_name: str = "nccl") -> int:
    from ccltune.engines.nccl import CommConfig
    from ccltune.tune import model

    t_start = time.perf_counter()
    ctx = _common.join(engine_name, args.timeout)
    _common.quiet_other_ranks(ctx)
    _common.apply_virtual_nodes(ctx, args.virtual_nodes)
    workdir = tempfile.mkdtemp(prefix="ccltune-sweep-")
    engine = _common.make_engine(engine_name, ctx, engine_opts(args, workdir) if engine_name == "nccl" else args)
    settings = S.SweepSettings(dtype=types.dtype(args.datatype), op=types.op(args.op), reps=args.reps,
                               graph=not args.no_graph, target_us=args.target_us, max_iters=args.max_iters,
                               warmup=args.warmup_iters, timeout_s=args.timeout)
    settings.clock.add("start-up", time.perf_counter() - t_start)  # rendezvous, CUDA, NCCL library
    configs = {c: CommConfig(c.algo, c.proto, c.channels, twin=c.twin) for c in cands}
    store = Store(args.db) if ctx.is_root else None
    run_id, done = _open_run(store, args, ctx, engine, engine_name)
    # every rank must skip the same points: rank 0 read them from the database
    blob = json.dumps(sorted(done)).encode() if ctx.is_root else None
    done = {tuple(x) for x in json.loads(ctx.broadcast_bytes(blob, "points already measured"))}
    engine.on_fatal = _common.fail_run_hook(args.db, run_id) if run_id else None
    progress = _Progress(ctx.is_root, total=len(colls) * len(sizes))
    status, n_rows, n_timed, untimed = "failed", 0, 0, Counter()
    kept = store.count_measurements(run_id) if store is not None and args.resume is not None else 0  # resumed
    try:
        with _common.terminate_as_interrupt():
            for coll in colls:
                rows_so_far = [m for m in (store.measurements(run_id, collective=coll.name) if store else [])]
                refused: S.Refused = {}  # NCCL refuses a forced candidate per collective, not per size
                keep = S.BufferCache() if args.mode == "model" else None  # sizes are visited again in later rounds
                # the model plans in the sizes the rows are stored under (the layout may round them)
                requested: dict[int, int] = {}
                for s in sizes:
                    requested.setdefault(coll.layout(s, settings.dtype.size, ctx.world_size, ctx.rank).size_bytes, s)
                todo = ({requested[s]: c for s, c in model.plan_initial(requested).items()} if args.mode == "model"
                        else {s: None for s in sizes})
                if any((coll.name, s, c.label) not in done for s in requested for c in cands):
                    progress.step(f"{coll.name} {min(sizes)} B (warm-up, not stored)", advance=0)
                    S.warm_collective(engine, coll, min(sizes), [configs[c] for c in cands], settings, refused)
                while todo:
                    for size, want in todo.items():
                        chosen = [c for c in cands if want is None or c in want]
                        stored = coll.layout(size, settings.dtype.size, ctx.world_size, ctx.rank).size_bytes
                        chosen = [c for c in chosen if (coll.name, stored, c.label) not in done and tunable(stored, c)]
                        progress.step(f"{coll.name} {size} B")
                        if not chosen:
                            continue
                        labels = [dict(algo=c.algo, proto=c.proto, channels=c.channels, config=c.label) for c in chosen]
                        rows = S.measure_size(engine, coll, size, [configs[c] for c in chosen], labels, settings,
                                              refused, keep)
                        if store is not None:
                            store.add_measurements(run_id, rows)
                            rows_so_far.extend(rows)
                        n_rows += len(rows)
                        n_timed += sum(1 for r in rows if r.status == "ok")
                        untimed.update(f"{r.status} ({r.note})" if r.note else r.status
                                       for r in rows if r.status != "ok")
                    if args.mode != "model":
                        break
                    # every rank must plan the same next step: rank 0 plans, the others follow
                    with settings.clock("planning"):
                        plan = model.plan_refine(rows_so_far, list(requested)) if ctx.is_root else None
                        blob = json.dumps({str(s): (None if c is None else [x.label for x in c])
                                           for s, c in plan.items()}).encode() if plan is not None else None
                        decoded = json.loads(ctx.broadcast_bytes(blob, "sweep plan"))
                    by_label = {c.label: c for c in cands}
                    todo = {requested[int(s)]: (None if v is None else [by_label[x] for x in v if x in by_label])
                            for s, v in decoded.items()}
                if keep is not None:
                    keep.clear()
            status = "complete"
    except KeyboardInterrupt as exc:
        code = _common.interrupted(ctx, exc, f"sweep interrupted; {kept + n_rows} rows kept in {args.db}; "
                                             f"resume with --resume {run_id}")
        status = "interrupted"
        return code
    finally:
        progress.close()
        clock = settings.clock
        S.close_timed(engine, clock)
        wall = time.perf_counter() - t_start
        if store is not None and run_id is not None:
            store.finish_run(run_id, status, {"rows": kept + n_rows, "mode": args.mode,
                                              "virtual_nodes": args.virtual_nodes,
                                              "wall_s": round(wall, 3), "time": clock.summary()})
            store.close()
        if status == "complete":
            ctx.close()
    if ctx.is_root:
        print(f"ccltune sweep: run {run_id} complete, {kept + n_rows} rows in {args.db}"
              + (f"; next: ccltune tune --db {args.db} --runs {run_id} --out rules.conf" if n_timed or not n_rows
                 else ", none of them timed"))
        print(f"ccltune sweep: time on rank 0, {clock.line(wall)}")
    if n_rows and not n_timed and ctx.is_root:  # every point skipped, waived or refused: nothing to tune from
        why = "; ".join(f"{n} {what}" for what, n in untimed.most_common(3))
        raise CheckFailed(f"no point of run {run_id} was timed, so it holds nothing to tune from: {why}")
    return 0


def _open_run(store: Store | None, args: argparse.Namespace, ctx: Any, engine: Any,
              engine_name: str) -> tuple[int | None, set]:
    """A new sweep run, or the one named by --resume with the points it already has."""
    done: set[tuple[str, int, str]] = set()
    if store is None:
        return None, done
    if args.resume is not None:
        check_resume(store.run(args.resume), args, ctx.world_size)
        for m in store.measurements(args.resume):
            done.add((m.collective, m.size_bytes, m.config))
        store.reopen_run(args.resume)
        return args.resume, done
    env = environment.collect(world_size=ctx.world_size, n_nodes=ctx.n_nodes, engine=engine_name,
                              nccl=engine.info(), hosts=ctx.hosts, argv=args._argv)
    _common.mark_virtual_nodes(env, args.virtual_nodes)
    run_id = store.begin_run("sweep", command=_common.command_line(args._argv), env=env,
                             args={k: v for k, v in vars(args).items() if k not in ("func", "_argv")},
                             engine=engine_name)
    return run_id, done


class _Progress:
    def __init__(self, enabled: bool, total: int):
        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("sweep", total=total)
        self.enabled = enabled

    def step(self, what: str, advance: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=what, advance=advance)
        elif self.enabled:
            print(f"sweep: {what}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
