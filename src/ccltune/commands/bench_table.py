"""bench's output: nccl-tests' table, printed by rank 0 as the rows arrive (each row committed to the
database as it is printed), its -J JSON, and the NCCL_TESTS_MIN_BW verdict."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any

from ccltune import engines, environment
from ccltune._version import __version__
from ccltune.commands import bench_options
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.common import Console
from ccltune.engines.base import device_index
from ccltune.files import write_text
from ccltune.measure import bench
from ccltune.ncclt import json_doc as ncclt_json  # nccl-tests' -J file and text table
from ccltune.ncclt import table as output
from ccltune.sizes import parse_size
from ccltune.store import Measurement, Store

_JSON_ENV = ("NCCL_", "CUDA_", "CCLTUNE_", "TORCH_NCCL_")  # -J's "env": these only, never secrets (bench_options.EPILOG)


def _version_code(version: str | None) -> int:
    """'2.28.9' -> 22809 (NCCL_VERSION_CODE); 0 without NCCL."""
    try:
        major, minor, patch = (int(x) for x in str(version).split(".")[:3])
    except ValueError:
        return 0
    return major * 10000 + minor * 100 + patch


def devices(ctx: Any, env: dict[str, Any], engine: str) -> list[output.Device]:
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


def wrong_total(rows: list[Measurement]) -> int | None:
    """Wrong elements over the checked rows; None when nothing was checked (-c 0), as nccl-tests prints N/A."""
    checked = [m.wrong for m in rows if m.wrong is not None]
    return sum(checked) if checked else None


def write_json(path: str, env: dict[str, Any], rows: list[Measurement]) -> None:
    write_text(path, json.dumps({"env": env, "records": [m.to_record() for m in rows]}, indent=1), flag="--json")


def _stats(m: Measurement) -> Any:
    """-I: a row's per-iteration statistics (None when the placement was not measured)."""
    return getattr(m, "iter_stats", None)


class Printer:
    """Rank 0: prints nccl-tests' table to ``console`` as rows arrive and commits each row. ``argv``: the
    command line -J's JSON records."""

    def __init__(self, store: Store | None, run_id: int | None, rows: list[Measurement], plan: bench.BenchPlan,
                 enabled: bool, options: BenchOptions, console: Console, argv: list[str]):
        self.store, self.run_id, self.rows, self.plan, self.enabled = store, run_id, rows, plan, enabled
        self.args, self.console, self.argv = options, console, argv
        self.devices: list[output.Device] = []
        self.extra: list[str] = []
        self.env: dict[str, Any] = {}
        self.engine = ""
        self.failed: list[str] = []  # NCCL_TESTS_MIN_BW verdicts
        self.memory = bench.MemoryReport() if plan.memory else None  # -M 1, filled by bench.run
        self.started = ""
        self.json_path = ""  # -J: where this collective's JSON goes (bench_options.free_path)
        self.progress: Any = None
        self.task: Any = None
        if enabled and console.err is not None and console.err.isatty():
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
            self.console.say(line)

    def preamble(self, ctx: Any, env: dict[str, Any], engine: str, note: str | None) -> None:
        """Every rank takes part (the Pid and device of each rank are gathered); rank 0 prints."""
        self.devices = devices(ctx, env, engine)
        self.engine, self.env = engine, env
        self.extra = [note] if note else []  # said on stderr before the job started (launching.announce)
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
        doc = ncclt_json.document(self.header(coll), pairs, argv=[output.program(coll.name), *self.argv[1:]],
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
