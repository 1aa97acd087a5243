"""ccltune bench: every collective, measured and reported the way nccl-tests does."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ccltune import collectives, environment, output, types
from ccltune.cli import _common
from ccltune.errors import CheckFailed, DistError, UsageError
from ccltune.files import write_text
from ccltune.measure import bench
from ccltune.measure.point import AVERAGES
from ccltune.sizes import parse_size, size_series
from ccltune.store import Measurement, Store


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="measure collectives (nccl-tests' options and table)",
        description="Measure collectives with nccl-tests' options and output table. "
                    "COLLECTIVE: " + ", ".join(collectives.REGISTRY) + ", or all.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("collective", nargs="+", metavar="COLLECTIVE", help="collective(s), comma or space separated, or 'all'")
    p.add_argument("-b", "--minbytes", default="8", help="smallest size (K/M/G suffixes)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size")
    p.add_argument("-f", "--stepfactor", type=float, default=2, help="multiply the size by this (>= 2); 0 to use -i")
    p.add_argument("-i", "--stepbytes", default="0", help="add this many bytes when -f is 0 (a series holds at most 10000 sizes)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed calls per size")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="untimed calls right before each size is timed (and with the series warm-up modes, also at "
                        "every size before the first is timed)")
    p.add_argument("--warmup-mode", choices=bench.WARMUP_MODES, default="point",
                   help="point: the -w calls at each size right before it is timed, timing after the graph's "
                        "first launch; series: also, as nccl-tests 2.19 does, -w calls at every size from -b to -e "
                        "(step x2) before the first size is timed; nccl-tests: series, and with -G the graph's "
                        "first launch timed too, as nccl-tests times it (on 4 H200s with -G 10 this made some sizes "
                        "under 64 KB up to 0.6 us slower than nccl-tests' own figures; point matches them closer)")
    p.add_argument("-d", "--datatype", default="float", help="float, half, bfloat16, double, int8, uint8, int32, uint32, int64, uint64")
    p.add_argument("-o", "--op", default="sum", help="sum, prod, min, max, avg")
    p.add_argument("-r", "--root", type=int, default=0, help="root rank of broadcast, reduce, gather, scatter")
    p.add_argument("-c", "--check", type=int, default=1, choices=(0, 1), help="check every result exactly")
    p.add_argument("-G", "--cudagraph", type=int, default=0, metavar="N",
                   help="capture the timed calls in a CUDA graph and launch it N times (0: eager)")
    p.add_argument("-a", "--average", choices=AVERAGES, default="avg",
                   help="how per-rank times are combined")
    p.add_argument("--symmetric", action="store_true",
                   help="nccl engine: buffers from ncclMemAlloc registered as symmetric windows (NCCL >= 2.27)")
    p.add_argument("--algo", default=None, help="nccl engine: force NCCL_ALGO for this run's communicator")
    p.add_argument("--proto", default=None, help="nccl engine: force NCCL_PROTO for this run's communicator")
    p.add_argument("--channels", type=int, default=None, help="nccl engine: channel count (min/maxCTAs)")
    p.add_argument("--json", default=None, metavar="PATH", help="write {env, records} as JSON")
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main, buffers_default="ncclmem-max")  # nccl-tests' layout unless --buffers says


def _plan(args: argparse.Namespace) -> bench.BenchPlan:
    """Every user value checked here, before any process or GPU is touched."""
    colls = collectives.select(args.collective)
    lo, hi = parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes")
    step = parse_size(args.stepbytes, "-i/--stepbytes")
    sizes = size_series(lo, hi, factor=args.stepfactor, increment=step)
    if args.iters < 1:
        raise UsageError(f"-n/--iters must be >= 1, got {args.iters}")
    if args.warmup_iters < 0:
        raise UsageError(f"-w/--warmup_iters must be >= 0, got {args.warmup_iters}")
    if args.cudagraph < 0:
        raise UsageError(f"-G/--cudagraph must be >= 0, got {args.cudagraph}")
    if args.root < 0:
        raise UsageError(f"-r/--root must be >= 0, got {args.root}")
    if args.channels is not None and not 1 <= args.channels <= 64:
        raise UsageError(f"--channels must be between 1 and 64, got {args.channels}")
    return bench.BenchPlan(
        collectives=colls, sizes=sizes, dtype=types.dtype(args.datatype), op=types.op(args.op),
        root=args.root, iters=args.iters, warmup=args.warmup_iters, graph=args.cudagraph,
        check=bool(args.check), average=args.average, timeout_s=args.timeout,
        algo=args.algo, proto=args.proto, channels=args.channels, warmup_mode=args.warmup_mode)


def main(args: argparse.Namespace) -> int:
    argv = args._argv
    plan = _plan(args)
    engine_name, note = _common.resolve_engine(args)
    if args.symmetric and args.buffers == "torch":
        raise UsageError("--symmetric registers ncclMemAlloc buffers; it cannot use --buffers torch")
    if engine_name != "nccl" and (args.symmetric or args.algo or args.proto or args.channels):
        raise UsageError("--symmetric, --algo, --proto and --channels need --engine nccl")
    if plan.root >= (n := _common.job_size(args, engine_name)):  # before any process joins
        raise UsageError(f"-r/--root must be < the number of ranks ({n}), got {plan.root}")
    if engine_name == "gloo" and plan.graph:  # CUDA graphs need a GPU: said, and stored as eager
        note = (f"{note}; " if note else "") + f"-G {plan.graph} ignored: the gloo engine runs eagerly"
        plan.graph = 0
    rc = _common.relaunch(args, argv, engine_name)
    if rc is not None:
        return rc
    return _run(args, plan, engine_name, note, argv)


def _run(args: argparse.Namespace, plan: bench.BenchPlan, engine_name: str, note: str | None, argv: list[str]) -> int:
    ctx = _common.join(engine_name, plan.timeout_s)
    _common.quiet_other_ranks(ctx)
    engine = None
    store = Store(args.db) if ctx.is_root else None
    run_id, rows, status = None, [], "failed"
    try:
        with _common.terminate_as_interrupt():
            engine = _common.make_engine(engine_name, ctx, args)
            if plan.algo or plan.proto or plan.channels:
                from ccltune.engines.nccl import CommConfig

                plan.config = CommConfig(plan.algo, plan.proto, plan.channels)
                plan.config_label = plan.config.label
            info = engine.info()
            env = environment.collect(world_size=ctx.world_size, n_nodes=ctx.n_nodes, engine=engine_name,
                                      nccl=info, hosts=ctx.hosts, argv=argv)
            if store is not None:
                run_id = store.begin_run("bench", command=_common.command_line(argv), env=env,
                                         args=_args_record(args), engine=engine_name)
                engine.on_fatal = _common.fail_run_hook(args.db, run_id)
            printer = _Printer(store, run_id, rows, plan, enabled=ctx.is_root)
            printer.preamble(ctx, env, engine_name, note)
            bench.run(engine, plan, printer.start, printer.row, printer.end)
            status = "complete"
    except KeyboardInterrupt as exc:
        code = _common.interrupted(ctx, exc, f"interrupted; {len(rows)} rows kept in {args.db}"
                                   + (f" (run {run_id})" if run_id else ""))
        status = "interrupted"
        return code
    except DistError:
        status = "failed"
        raise
    finally:
        if engine is not None:
            try:  # after a failure, abort: destroying a communicator on a faulted GPU can hang
                engine.abort() if status == "failed" and engine.name == "nccl" else engine.close()
            except Exception:  # noqa: BLE001 - teardown after a failure
                pass
        if store is not None and run_id is not None:
            wrong = sum(m.wrong or 0 for m in rows)
            store.finish_run(run_id, status, {"rows": len(rows), "wrong": wrong})
            if args.json:
                _write_json(args.json, store.run(run_id).env, rows)
            store.close()
        if status != "failed":
            ctx.close()
    wrong = sum(m.wrong or 0 for m in rows)
    if wrong:
        raise CheckFailed(f"{wrong} wrong elements (see #wrong): the collective library returned wrong results")
    return 0


def _args_record(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if k not in ("func", "_argv")}


def _write_json(path: str, env: dict[str, Any], rows: list[Measurement]) -> None:
    write_text(path, json.dumps({"env": env, "records": [m.to_record() for m in rows]}, indent=1), flag="--json")


class _Printer:
    """Rank 0: prints nccl-tests' table as rows arrive and commits each row."""

    def __init__(self, store: Store | None, run_id: int | None, rows: list[Measurement], plan: bench.BenchPlan,
                 enabled: bool):
        self.store, self.run_id, self.rows, self.plan, self.enabled = store, run_id, rows, plan, enabled
        self.progress = None
        self.task = None
        if enabled and sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                                     transient=True)
            self.progress.start()
            self.task = self.progress.add_task("bench", total=len(plan.collectives) * len(plan.sizes))

    def _print(self, line: str) -> None:
        if self.enabled:
            print(line, flush=True)

    def preamble(self, ctx: Any, env: dict[str, Any], engine: str, note: str | None) -> None:
        gpus = env.get("gpus") or []
        devices = [f"Rank {r:2d} Group  0 on {ctx.host_of(r)} "
                   f"{('device ' + str(gpus[r % len(gpus)]['index']) + ' ' + gpus[r % len(gpus)]['name']) if gpus else 'cpu'}"
                   for r in range(ctx.world_size)]
        extra = [f"NCCL {env['nccl_version']} ({env['nccl_library']})"] if env.get("nccl_version") else []
        extra.append(f"warm-up mode {self.plan.warmup_mode}"
                     + (f", buffers {env['buffers']}" if env.get("buffers") else ""))
        if note:
            extra.insert(0, note)
            if self.enabled:
                print(f"ccltune: {note}", file=sys.stderr)
        p = self.plan
        step = f"{p.sizes[1] // p.sizes[0] if len(p.sizes) > 1 and p.sizes[0] else 2}(factor)"
        for line in output.preamble(nranks=ctx.world_size, min_bytes=p.sizes[0], max_bytes=p.sizes[-1], step=step,
                                    warmup=p.warmup, iters=p.iters, check=p.check, graph=p.graph, engine=engine,
                                    devices=devices, extra=extra):
            self._print(line)

    def start(self, coll: Any) -> None:
        self.seen: set[str] = set()
        for line in output.header(coll.name):
            self._print(line)
        if self.progress is not None:
            self.progress.update(self.task, description=coll.name)

    def row(self, oop: Measurement, ip: Measurement) -> None:
        if not self.enabled:
            return
        self.rows.extend((oop, ip))
        if self.store is not None and self.run_id is not None:
            self.store.add_measurements(self.run_id, (oop, ip))
        self._print(output.row(oop, ip))
        for line in output.notes(oop, ip):
            key = line.split(": ", 1)[1]   # one note per reason and collective
            if key not in self.seen:
                self.seen.add(key)
                self._print(line)
        if self.progress is not None:
            self.progress.advance(self.task)

    def end(self, coll: Any, rows: list[Measurement]) -> None:
        for line in output.footer([m for m in self.rows if m.collective == coll.name]):
            self._print(line)
        if self.progress is not None and coll is self.plan.collectives[-1]:
            self.progress.stop()
