"""``bench``: every collective, measured and reported the way nccl-tests does (its options:
``commands.bench_options``; its table: ``commands.bench_table``; the measuring loop: ``measure.bench``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ccltune import collectives, datatypes, engines, groups, launch
from ccltune.commands import bench_options, launching
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.bench_table import Printer, write_json, wrong_total
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.results import Outcome
from ccltune.commconfig import CommConfig
from ccltune.errors import CcltuneError, CheckFailed, MinBandwidthFailed, UsageError
from ccltune.measure import bench
from ccltune.measure.session import Session
from ccltune.sizes import parse_size, size_series
from ccltune.store import Measurement


def plan_of(o: BenchOptions) -> bench.BenchPlan:
    """Every user value checked here, before any process or GPU is touched."""
    colls = collectives.select(list(o.collective))
    root = bench_options.root(o.root)
    lo, hi = parse_size(o.minbytes, "-b/--minbytes"), parse_size(o.maxbytes, "-e/--maxbytes")
    step = parse_size(o.stepbytes, "-i/--stepbytes")
    sizes = size_series(lo, hi, factor=o.stepfactor, increment=step)
    if o.iters < 1:
        raise UsageError(f"-n/--iters must be >= 1, got {o.iters}")
    if o.warmup_iters < 0:
        raise UsageError(f"-w/--warmup_iters must be >= 0, got {o.warmup_iters}")
    if o.cudagraph < 0:
        raise UsageError(f"-G/--cudagraph must be >= 0, got {o.cudagraph}")
    if o.channels is not None and not 1 <= o.channels <= 64:
        raise UsageError(f"--channels must be between 1 and 64, got {o.channels}")
    dtypes, ops = datatypes.dtypes(o.datatype), datatypes.ops(o.op)
    config = CommConfig(o.algo, o.proto, o.channels) if o.algo or o.proto or o.channels else None
    return bench.BenchPlan(
        collectives=colls, sizes=sizes, dtype=dtypes[0], op=ops[0], root=0 if root is None else root,
        iters=o.iters, warmup=o.warmup_iters, graph=o.cudagraph,
        check=o.check, average=bench_options.average(o.average), timeout_s=o.timeout,
        algo=o.algo, proto=o.proto, channels=o.channels, warmup_mode=o.warmup_mode,
        warm_first=o.warmup_mode != "nccl-tests",  # nccl-tests' one-time costs go to its series warm-up
        dtypes=dtypes if len(dtypes) > 1 else [], ops=ops if len(ops) > 1 else [], all_roots=root is None,
        cycles=o.run_cycles, max_bytes=hi, agg=o.agg_iters, blocking=o.blocking, unalign=o.unalign,
        per_iter=bool(o.per_iter_timing), per_iter_skip=o.per_iter_skip, cputime=bool(o.report_cputime),
        memory=bool(o.memory), config=config, config_label=config.label if config else "default")


def run_bench(given: BenchOptions, console: Console = Console(), *, caller: launch.Caller | None = None,
              command_line: list[str] | None = None) -> Outcome:
    """Check ``given``, then measure: in this process, or as a job of ``--nproc`` processes under torchrun
    whose workers run ``ccltune <given.to_argv()>``. The table goes to ``console`` (a job's through
    ``caller``'s streams, or this process's when ``caller`` is None). ``command_line``: what the user
    typed, recorded with the run (default: the options' own argv). Raises what the checks or the run
    raise (with ``run_id`` once a run was stored); a job's failure is its ``Outcome.exit_code``."""
    check_outputs(given)
    o, defaults = bench_options.ncclt_defaults(given)
    plan = plan_of(o)
    engine_name, note = launching.resolve_engine(o)
    o, notes = bench_options.check(o, engine_name)
    notes = ([defaults] if defaults else []) + notes
    bench_options.min_bw()  # a bad NCCL_TESTS_MIN_BW fails here, before any process starts
    if notes:
        note = "; ".join(([note] if note else []) + notes)
    if o.symmetric and o.buffers == "torch":
        raise UsageError("--symmetric registers ncclMemAlloc buffers; it cannot use --buffers torch")
    if not engines.kind(engine_name).own_comm and (o.symmetric or o.algo or o.proto or o.channels):
        raise UsageError("--symmetric, --algo, --proto and --channels need --engine nccl")
    plan = dataclasses.replace(plan, blocking=o.blocking, per_iter=bool(o.per_iter_timing),
                               per_iter_skip=o.per_iter_skip)  # as check() mapped them under -G
    n = launching.job_size(o, engine_name)
    split, per_proc, split_note = bench_options.split(o, n)
    if split_note:
        note = (f"{note}; " if note else "") + split_note
        n = groups.groups_of(split, n, per_proc).smallest
    if plan.root >= n:  # before any process joins
        raise UsageError(f"-r/--root must be < the number of ranks ({n}{' in the smallest group' if split_note else ''}),"
                         f" got {plan.root}")
    if not engines.kind(engine_name).gpu and plan.graph:  # CUDA graphs need a GPU: said, and stored as eager
        note = (f"{note}; " if note else "") + f"-G {plan.graph} ignored: the gloo engine runs eagerly"
        plan = dataclasses.replace(plan, graph=0)
    launching.announce(note, caller, console if caller is not None else None)
    argv = given.to_argv()  # the workers map the options again, as here (the same checks, the same notes)
    rc = launching.relaunch(o, argv, engine_name, caller, command_line, console)
    if rc is not None:
        return Outcome.of_job(o.db, rc, caller)
    return _run(o, plan, engine_name, note, command_line or argv, console, split, per_proc)


def engine_options(o: BenchOptions) -> Any:
    """bench lays its buffers out as nccl-tests does (one pair at the largest size) unless --buffers says."""
    return launching.engine_options(o, shared_buffers=True, symmetric=o.symmetric, stream_null=bool(o.stream_null),
                                    cta_policy=o.cta_policy, local_register=o.local_register == 1)


def _run(o: BenchOptions, plan: bench.BenchPlan, engine_name: str, note: str | None, argv: list[str],
         console: Console, split: groups.Split | None = None, per_proc: int = 1) -> Outcome:
    rows: list[Measurement] = []
    printer = None
    s = Session("bench", engine_name, db=o.db, argv=argv, timeout_s=plan.timeout_s, split=split,
                ranks_per_proc=per_proc)
    try:
        with s:
            s.summary = lambda: {"rows": len(rows), "wrong": wrong_total(rows)}
            if o.json:
                path = o.json
                s.on_finished.append(lambda store, run_id: write_json(path, store.run(run_id).env, rows))
            with s.running(lambda: f"interrupted; {len(rows)} rows kept in {o.db}"
                           + (f" (run {s.run_id})" if s.run_id else "")):
                engine = s.start_engine(engine_options(o))
                env = s.environment()
                s.begin(launching.args_record(o), env)
                printer = Printer(s.store, s.run_id, rows, plan, enabled=s.is_root, options=o, console=console, argv=argv)
                printer.preamble(s.ctx, env, engine_name, note)
                bench.run(engine, plan, printer.start, printer.row, printer.end, memory=printer.memory)
    except CcltuneError as exc:  # the run it stored goes with the error (the API's caller reads it)
        exc.run_id = exc.run_id if exc.run_id is not None else s.run_id
        raise
    if s.interrupted:
        return Outcome(o.db, s.run_id, s.exit_code)
    if s.is_root and s.run_id is not None:  # stderr: stdout stays nccl-tests' table, for its parsers
        console.note(f"ccltune bench: run {s.run_id} complete, {len(rows)} rows in {o.db}; "
                     f"see them with `ccltune runs --db {o.db}` or `ccltune report --db {o.db}`")
    wrong = sum(m.wrong or 0 for m in rows)
    failure: CcltuneError | None = None
    if wrong:
        failure = CheckFailed(f"{wrong} wrong elements (see #wrong): the collective library returned wrong results")
    elif printer is not None and printer.failed:
        failure = MinBandwidthFailed("; ".join(printer.failed))
    if failure is not None:
        failure.run_id = s.run_id
        raise failure
    return Outcome(o.db, s.run_id)
