"""ccltune bench: every collective, measured and reported the way nccl-tests does."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import __version__, collectives, engines, environment, groups, datatypes
from ccltune.ncclt import json_doc as ncclt_json, table as output  # nccl-tests' -J file and text table
from ccltune.cli import _common, bench_options
from ccltune.commconfig import CommConfig
from ccltune.engines.base import device_index
from ccltune.errors import CheckFailed, MinBandwidthFailed, UsageError
from ccltune.files import write_text
from ccltune.measure import bench
from ccltune.measure.session import Session
from ccltune.sizes import parse_size, size_series
from ccltune.store import Measurement, Store


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="measure collectives (nccl-tests' options and table)",
        usage="%(prog)s [options] COLLECTIVE [COLLECTIVE ...]",  # the options are listed below, once
        description="Measure collectives with nccl-tests' options and output table. "
                    "COLLECTIVE: " + ", ".join(collectives.REGISTRY) + ", or all.",
        formatter_class=DefaultsFormatter)
    p.add_argument("collective", nargs="+", metavar="COLLECTIVE", help="collective(s), comma or space separated, or 'all'")
    bench_options.register(p)
    p.add_argument("--ncclt-defaults", action="store_true",
                   help="nccl-tests' defaults for the nccl-tests options the command line omits (-b 32M -e 32M "
                        f"-f 1 -w 1; also {bench_options.NCCLT_DEFAULTS_ENV}=1)")
    p.add_argument("--warmup-mode", choices=bench.WARMUP_MODES, default="point",
                   help="point: -w calls right before each size is timed; series: also -w calls at every size "
                        "first, as nccl-tests 2.19; nccl-tests: nccl-tests' own procedure (docs/bench.md, 'Warm-up')")
    p.add_argument("--symmetric", action="store_true",
                   help="nccl engine: buffers from ncclMemAlloc registered as symmetric windows (NCCL >= 2.27)")
    p.add_argument("--algo", default=None, help="nccl engine: force NCCL_ALGO for this run's communicator")
    p.add_argument("--proto", default=None, help="nccl engine: force NCCL_PROTO for this run's communicator")
    p.add_argument("--channels", type=int, default=None, help="nccl engine: channel count (min/maxCTAs)")
    p.add_argument("--json", default=None, metavar="PATH", help="write {env, records} as JSON")
    _common.add_db(p)
    _common.add_launch(p, buffers_default="ncclmem-max")
    p.set_defaults(func=main)


def _plan(args: argparse.Namespace) -> bench.BenchPlan:
    """Every user value checked here, before any process or GPU is touched."""
    colls = collectives.select(args.collective)
    root = bench_options.root(args.root)
    lo, hi = parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes")
    step = parse_size(args.stepbytes, "-i/--stepbytes")
    sizes = size_series(lo, hi, factor=args.stepfactor, increment=step)
    if args.iters < 1:
        raise UsageError(f"-n/--iters must be >= 1, got {args.iters}")
    if args.warmup_iters < 0:
        raise UsageError(f"-w/--warmup_iters must be >= 0, got {args.warmup_iters}")
    if args.cudagraph < 0:
        raise UsageError(f"-G/--cudagraph must be >= 0, got {args.cudagraph}")
    if args.channels is not None and not 1 <= args.channels <= 64:
        raise UsageError(f"--channels must be between 1 and 64, got {args.channels}")
    dtypes, ops = datatypes.dtypes(args.datatype), datatypes.ops(args.op)
    return bench.BenchPlan(
        collectives=colls, sizes=sizes, dtype=dtypes[0], op=ops[0], root=0 if root is None else root,
        iters=args.iters, warmup=args.warmup_iters, graph=args.cudagraph,
        check=args.check, average=bench_options.average(args.average), timeout_s=args.timeout,
        algo=args.algo, proto=args.proto, channels=args.channels, warmup_mode=args.warmup_mode,
        warm_first=args.warmup_mode != "nccl-tests",  # nccl-tests' one-time costs go to its series warm-up
        dtypes=dtypes if len(dtypes) > 1 else [], ops=ops if len(ops) > 1 else [], all_roots=root is None,
        cycles=args.run_cycles, max_bytes=hi)


def main(args: argparse.Namespace) -> int:
    argv = args._argv
    defaults = bench_options.ncclt_defaults(args)
    plan = _plan(args)
    engine_name, note = _common.resolve_engine(args)
    rows_notes = ([defaults] if defaults else []) + bench_options.check(args, engine_name)
    plan.agg, plan.blocking, plan.unalign = args.agg_iters, args.blocking, args.unalign
    plan.per_iter, plan.per_iter_skip = bool(args.per_iter_timing), args.per_iter_skip
    plan.cputime, plan.memory = bool(args.report_cputime), bool(args.memory)
    bench_options.min_bw()  # a bad NCCL_TESTS_MIN_BW fails here, before any process starts
    if rows_notes:
        note = "; ".join(([note] if note else []) + rows_notes)
    if args.symmetric and args.buffers == "torch":
        raise UsageError("--symmetric registers ncclMemAlloc buffers; it cannot use --buffers torch")
    if not engines.kind(engine_name).own_comm and (args.symmetric or args.algo or args.proto or args.channels):
        raise UsageError("--symmetric, --algo, --proto and --channels need --engine nccl")
    n = _common.job_size(args, engine_name)
    split, per_proc, split_note = bench_options.split(args, n)
    if split_note:
        note = (f"{note}; " if note else "") + split_note
        n = groups.groups_of(split, n, per_proc).smallest
    if plan.root >= n:  # before any process joins
        raise UsageError(f"-r/--root must be < the number of ranks ({n}{' in the smallest group' if split_note else ''}),"
                         f" got {plan.root}")
    if not engines.kind(engine_name).gpu and plan.graph:  # CUDA graphs need a GPU: said, and stored as eager
        note = (f"{note}; " if note else "") + f"-G {plan.graph} ignored: the gloo engine runs eagerly"
        plan.graph = 0
    _common.announce(args, note)
    rc = _common.relaunch(args, argv, engine_name)
    if rc is not None:
        return rc
    return _run(args, plan, engine_name, note, argv, split, per_proc)


def engine_options(args: argparse.Namespace) -> Any:
    """bench lays its buffers out as nccl-tests does (one pair at the largest size) unless --buffers says."""
    return _common.engine_options(args, shared_buffers=True, symmetric=args.symmetric, stream_null=bool(args.stream_null),
                                  cta_policy=args.cta_policy, local_register=args.local_register == 1)


def _run(args: argparse.Namespace, plan: bench.BenchPlan, engine_name: str, note: str | None, argv: list[str],
         split: groups.Split | None = None, per_proc: int = 1) -> int:
    rows: list[Measurement] = []
    with Session("bench", engine_name, db=args.db, argv=argv, timeout_s=plan.timeout_s, split=split,
                 ranks_per_proc=per_proc) as s:
        s.summary = lambda: {"rows": len(rows), "wrong": _wrong_total(rows)}
        if args.json:
            s.on_finished.append(lambda store, run_id: _write_json(args.json, store.run(run_id).env, rows))
        with s.running(lambda: f"interrupted; {len(rows)} rows kept in {args.db}"
                       + (f" (run {s.run_id})" if s.run_id else "")):
            engine = s.start_engine(engine_options(args))
            if plan.algo or plan.proto or plan.channels:
                plan.config = CommConfig(plan.algo, plan.proto, plan.channels)
                plan.config_label = plan.config.label
            env = s.environment()
            s.begin(_common.args_record(args), env)
            printer = _Printer(s.store, s.run_id, rows, plan, enabled=s.is_root, args=args)
            printer.preamble(s.ctx, env, engine_name, note)
            bench.run(engine, plan, printer.start, printer.row, printer.end, memory=printer.memory)
    if s.interrupted:
        return s.exit_code
    if s.is_root and s.run_id is not None:  # stderr: stdout stays nccl-tests' table, for its parsers
        print(f"ccltune bench: run {s.run_id} complete, {len(rows)} rows in {args.db}; "
              f"see them with `ccltune runs --db {args.db}` or `ccltune report --db {args.db}`",
              file=sys.stderr, flush=True)
    wrong = sum(m.wrong or 0 for m in rows)
    if wrong:
        raise CheckFailed(f"{wrong} wrong elements (see #wrong): the collective library returned wrong results")
    if printer is not None and printer.failed:
        raise MinBandwidthFailed("; ".join(printer.failed))
    return 0


_JSON_ENV = ("NCCL_", "CUDA_", "CCLTUNE_", "TORCH_NCCL_")  # -J's "env": these only, never secrets (docs/bench.md)


def _version_code(version: str | None) -> int:
    """'2.28.9' -> 22809 (NCCL_VERSION_CODE); 0 without NCCL."""
    try:
        major, minor, patch = (int(x) for x in str(version).split(".")[:3])
    except ValueError:
        return 0
    return major * 10000 + minor * 100 + patch


def _devices(ctx: Any, env: dict[str, Any], engine: str) -> list[output.Device]:
    """One '#  Rank' line per rank: every rank adds its Pid and the device its engine uses (one collective):
    the GPU ``device_index`` picks (NCCL_TESTS_DEVICE + local rank), on the CPU engine the local rank."""
    n = ctx.world_size
    gpus = env.get("gpus") or []
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if gpus and engines.kind(engine).gpu:
        local = device_index(local, len(gpus))
    mine = [0.0] * (2 * n)
    mine[ctx.rank], mine[n + ctx.rank] = float(os.getpid()), float(local)
    both = ctx.allreduce_floats(mine, "sum", "the device list") if n > 1 else mine
    colors = (env.get("groups") or {}).get("colors") or [0] * n  # nccl-tests prints each rank's color
    out = []
    for r in range(n):
        dev = int(both[n + r])
        gpu = gpus[dev % len(gpus)] if gpus and engines.kind(engine).gpu else None
        out.append(output.Device(rank=r, pid=int(both[r]), host=ctx.host_of(r), device=dev,
                                 bus_id=(gpu or {}).get("pci_bus_id") or "0000:00:00",
                                 name=gpu["name"] if gpu else "cpu", group=colors[r]))
    return out


def _wrong_total(rows: list[Measurement]) -> int | None:
    """Wrong elements over the checked rows; None when nothing was checked (-c 0), as nccl-tests prints N/A."""
    checked = [m.wrong for m in rows if m.wrong is not None]
    return sum(checked) if checked else None


def _write_json(path: str, env: dict[str, Any], rows: list[Measurement]) -> None:
    write_text(path, json.dumps({"env": env, "records": [m.to_record() for m in rows]}, indent=1), flag="--json")


def _stats(m: Measurement) -> Any:
    """-I: a row's per-iteration statistics (None when the placement was not measured)."""
    return getattr(m, "iter_stats", None)


class _Printer:
    """Rank 0: prints nccl-tests' table as rows arrive and commits each row."""

    def __init__(self, store: Store | None, run_id: int | None, rows: list[Measurement], plan: bench.BenchPlan,
                 enabled: bool, args: argparse.Namespace):
        self.store, self.run_id, self.rows, self.plan, self.enabled = store, run_id, rows, plan, enabled
        self.args = args
        self.devices: list[output.Device] = []
        self.extra: list[str] = []
        self.env: dict[str, Any] = {}
        self.engine = ""
        self.failed: list[str] = []  # NCCL_TESTS_MIN_BW verdicts
        self.memory = bench.MemoryReport() if plan.memory else None  # -M 1, filled by bench.run
        self.started = ""
        self.json_path = ""  # -J: where this collective's JSON goes (bench_options.free_path)
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
        """Every rank takes part (the Pid and device of each rank are gathered); rank 0 prints."""
        self.devices = _devices(ctx, env, engine)
        self.engine, self.env = engine, env
        self.extra = [note] if note else []  # said on stderr before the job started (_common.announce)
        if env.get("nccl_version"):
            self.extra.append(f"NCCL {env['nccl_version']} ({env.get('nccl_library')})")
        if self.plan.warmup_mode != "point" or env.get("buffers"):
            self.extra.append(f"warm-up mode {self.plan.warmup_mode}"
                              + (f", buffers {env['buffers']}" if env.get("buffers") else ""))

    def header(self, coll: Any) -> output.Header:
        p, a = self.plan, self.args
        factor = int(a.stepfactor) if a.stepfactor > 1 else 1
        return output.Header(
            program=output.program(coll.name), min_bytes=p.sizes[0], max_bytes=p.max_bytes, step_factor=factor,
            step_bytes=parse_size(a.stepbytes, "-i/--stepbytes"), warmup=p.warmup, iters=p.iters,
            agg_iters=a.agg_iters, check=a.check, graph=p.graph, unalign=a.unalign,
            threads=1, gpus=1, parallel_init=bool(a.parallel_init),  # one GPU a process: -t/-g are in the note
            blocking=p.blocking, per_iter=p.per_iter, per_iter_skip=p.per_iter_skip,
            nccl_code=_version_code(self.env.get("nccl_version")),
            tool=f"ccltune={__version__} engine={self.engine}", devices=self.devices, notes=self.extra,
            gpu_timing=engines.kind(self.engine).gpu)

    def write_json(self, coll: Any, rows: list[Measurement], min_bw: float | None) -> None:
        """-J FILE: nccl-tests' JSON of this collective (FILE.<collective> when the run has several)."""
        path = self.json_path
        pairs = [(self.shown(a), self.shown(b)) for a, b in zip(rows[0::2], rows[1::2])]  # (out-of-place, in-place)
        stats = [(_stats(a), _stats(b)) for a, b in zip(rows[0::2], rows[1::2])] if self.plan.per_iter else None
        doc = ncclt_json.document(self.header(coll), pairs, argv=[output.program(coll.name), *self.args._argv[1:]],
                                  environ=[f"{k}={v}" for k, v in os.environ.items()  # ccltune's own plumbing left out
                                           if k.startswith(_JSON_ENV) and k not in environment.INTERNAL_VARIABLES],
                                  start_time=self.started,
                                  end_time=time.strftime(output.TIME_FORMAT), iters=self.plan.iters, min_bw=min_bw,
                                  cputime=self.plan.cputime, per_iter=stats)
        write_text(path, ncclt_json.dumps(doc), flag="-J/--output_file")

    def shown(self, m: Measurement) -> Measurement:
        """The row as nccl-tests prints it: with -C 1 the time column holds the CPU time (the
        bandwidths stay the GPU time's, as nccl-tests computes them); the database keeps the time."""
        cpu = getattr(m, "cpu_time_us", None)
        return dataclasses.replace(m, time_us=cpu) if self.plan.cputime and cpu is not None else m

    def start(self, coll: Any) -> None:
        self.started = time.strftime(output.TIME_FORMAT)
        self.seen: set[str] = set()
        if self.args.output_file and self.enabled:  # jsonOutputInit: the file chosen and said before the header
            path = self.args.output_file + (f".{coll.name}" if len(self.plan.collectives) > 1 else "")
            self.json_path = bench_options.free_path(path)
            self._print(f"# Writing JSON output to {self.json_path}")
        for line in output.preamble(self.header(coll)) + output.header(
                cputime=self.plan.cputime, timestamps=bool(self.args.report_timestamps), per_iter=self.plan.per_iter):
            self._print(line)
        if self.progress is not None:
            self.progress.update(self.task, description=coll.name)

    def row(self, oop: Measurement, ip: Measurement) -> None:
        if not self.enabled:
            return
        self.rows.extend((oop, ip))
        if self.store is not None and self.run_id is not None:
            self.store.add_measurements(self.run_id, (oop, ip))
        stamp = time.strftime(output.TIME_FORMAT) if self.args.report_timestamps else None
        self._print(output.row(self.shown(oop), self.shown(ip), timestamp=stamp,
                               per_iter=(_stats(oop), _stats(ip)) if self.plan.per_iter else None))
        for line in output.notes(oop, ip):
            key = line.split(": ", 1)[1]   # one note per reason and collective
            if key not in self.seen:
                self.seen.add(key)
                self._print(line)
        if self.progress is not None:
            self.progress.advance(self.task)

    def end(self, coll: Any, rows: list[Measurement]) -> None:
        mine = [m for m in self.rows if m.collective == coll.name]
        memory = self.memory.line(coll.name) if self.memory is not None else None
        for line in output.footer(mine, output.program(coll.name), min_bw=bench_options.min_bw(), memory=memory):
            self._print(line)
        self._print("")  # writeErrors: an empty line when NCCL reports no error
        min_bw = bench_options.min_bw()
        if self.enabled and output.min_bw_ok(output.avg_busbw(mine), min_bw) is False:
            self.failed.append(f"{coll.name}: average bus bandwidth {output.avg_busbw(mine):g} GB/s is below"
                               f" 0.9 x NCCL_TESTS_MIN_BW ({min_bw:g})")
        if self.enabled and self.args.output_file:
            self.write_json(coll, mine, min_bw)
        if self.progress is not None and coll is self.plan.collectives[-1]:
            self.progress.stop()
