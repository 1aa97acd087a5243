"""ccltune sweep: NCCL's default against forced algorithm x protocol x channel candidates."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import collectives, datatypes, dist, engines, rules
from ccltune.cli import _common
from ccltune.commands import launching
from ccltune.commconfig import TWIN, CommConfig
from ccltune.errors import CheckFailed, EngineUnavailable, UsageError
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import check as check_load
from ccltune.measure.session import Session
from ccltune.sizes import parse_size, size_series
from ccltune.store import Store
from ccltune.tune import sweep_run

MODES = ("exhaustive", "model")
GRIDS = ("axes", "full")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="measure NCCL's default against forced algorithm/protocol/channel candidates",
        usage="%(prog)s [options] [COLLECTIVE ...]",  # the options are listed below, once
        description="For each tunable collective and size, time NCCL's own choice and every candidate "
                    "side by side (interleaved, repeated, CUDA graphs), one process per GPU.",
        formatter_class=DefaultsFormatter)
    p.add_argument("collective", nargs="*", default=[c.name for c in collectives.TUNABLE],
                   help=f"tunable collectives ({', '.join(c.name for c in collectives.TUNABLE)})")
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="1G")
    p.add_argument("-f", "--stepfactor", type=float, default=2)
    p.add_argument("-d", "--datatype", default="float")
    p.add_argument("-o", "--op", default="sum")
    _common.comma_list(p.add_argument("--algos", default="tree,ring,pat",
                                      help=f"algorithms to force, comma-separated ({', '.join(rules.ALGORITHMS)}; "
                                           "NCCL_ALGO's spelling, CollNetDirect, is taken too)"))
    _common.comma_list(p.add_argument("--protos", default="ll,ll128,simple",
                                      help=f"protocols to force, comma-separated ({', '.join(rules.PROTOCOLS)})"))
    _common.comma_list(p.add_argument("--channels", default="4,8,16,32",
                                      help="channel counts to try with NCCL's algorithm/protocol, comma-separated "
                                           "('' for none)"))
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
    p.add_argument("--workload", default=None, metavar="W.json",
                   help="sweep exactly this workload's (collective, size) points (`ccltune workload import`) that "
                        "this launch can reproduce, instead of -b/-e/-f; the others are listed with the reason. "
                        "Collectives named restrict it (docs/workload.md)")
    _common.add_under_load(p)
    p.add_argument("--idle", action="store_true",
                   help="with --workload: sweep on an idle GPU even when the job's own times (profiler files, "
                        "trace kernels) show its calls at least 2x slower than NCCL's default idle in --db, where "
                        "the sweep otherwise runs under a load sized from the job's traces (--under-load "
                        f"{DEFAULT_LOAD_M} when nothing sizes it; docs/workload.md)")
    _common.add_virtual_nodes(p)
    p.add_argument("--resume", type=int, default=None, metavar="RUN", help="continue an interrupted sweep run")
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)


def _names(text: str, valid: tuple[str, ...], flag: str) -> list[str]:
    """--algos/--protos: names in either spelling (collnet_direct, CollNetDirect), refused in the rule files'
    (``valid``: rules.ALGORITHMS or PROTOCOLS); NCCL_ALGO's spelling comes back, what the sweep forces."""
    from ccltune.errors import unknown_name

    out = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        name = rules.rule_spelling(raw)
        if name not in valid:
            raise unknown_name("algorithm" if flag == "--algos" else "protocol", raw, valid, flag)
        out.append(rules.nccl_spelling(name))
    return out


def candidates(args: argparse.Namespace) -> list[CommConfig]:
    algos, protos = _names(args.algos, rules.ALGORITHMS, "--algos"), _names(args.protos, rules.PROTOCOLS, "--protos")
    if bool(algos) != bool(protos):  # a candidate forces a pair: one list alone would be dropped unsaid
        given, empty = ("--algos", "--protos") if algos else ("--protos", "--algos")
        raise UsageError(f"{given} {getattr(args, given[2:])} needs {empty} too (each candidate forces an algorithm "
                         f"and a protocol; {empty} is empty): give both, or --algos '' --protos '' for none")
    chans = []
    for c in filter(None, (x.strip() for x in args.channels.split(","))):
        if not c.isdigit() or not 1 <= int(c) <= 64:
            raise UsageError(f"--channels: {c!r} is not a channel count between 1 and 64")
        chans.append(int(c))
    out = [CommConfig()]
    out += [CommConfig(a, p, None) for a in algos for p in protos]
    out += [CommConfig(None, None, c) for c in chans]
    if getattr(args, "grid", "axes") == "full":  # each pair before its channel counts: a refused pair refuses them
        out += [CommConfig(a, p, c) for a in algos for p in protos for c in chans]
    return out


# what a resumed sweep must keep of the run it continues (besides its collectives, sizes and candidates)
_RESUME_SAME = {"datatype": "-d", "op": "-o", "reps": "--reps", "target_us": "--target-us", "max_iters": "--max-iters",
                "warmup_iters": "-w", "no_graph": "--no-graph", "mode": "--mode", "no_twin": "--no-twin",
                "virtual_nodes": "--virtual-nodes", "workload": "--workload", "under_load": "--under-load"}


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


def validate_args(args: argparse.Namespace) -> tuple[list[Any], list[int], list[CommConfig]]:
    colls = collectives.select(args.collective)
    for c in colls:
        if c.tuner_func is None:
            raise UsageError(f"{c.name} is not tuned by NCCL's tuner interface; sweep one of: "
                             + ", ".join(x.name for x in collectives.TUNABLE))
    sizes = size_series(parse_size(args.minbytes, "-b/--minbytes"), parse_size(args.maxbytes, "-e/--maxbytes"),
                        factor=args.stepfactor)
    if args.reps < 1:
        raise UsageError(f"--reps must be >= 1, got {args.reps}")
    launching.check_timing(args)
    datatypes.dtype(args.datatype)
    datatypes.op(args.op)
    return colls, sizes, candidates(args)


def main(args: argparse.Namespace) -> int:
    colls, sizes, cands = validate_args(args)
    engine_name, note = launching.resolve_engine(args)
    launching.check_virtual_nodes(args, engine_name)
    check_load(args.under_load, engine_name)
    if not engines.kind(engine_name).own_comm and len(cands) > 1:
        why = (f", not --engine {engine_name}: the {engine_name} engine" if args.engine
               else f" on a GPU; no GPU is visible here, and the CPU engine ({engine_name})")
        raise (UsageError if args.engine else EngineUnavailable)(  # no GPU here: 4, as --help says
            f"forced candidates (--algos/--protos/--channels) need the nccl engine{why} "
            f"can time only the library's default, so its sweep yields "
            f"no rules for `ccltune tune`, only timings for `ccltune report`; to time that anyway, "
            f"pass --algos '' --protos '' --channels ''")
    if (ranks := launching.job_size(args, engine_name)) < 2:  # before any process starts or file is written
        raise UsageError(f"a sweep needs at least 2 ranks, this job has {ranks} rank"
                         f"{'' if ranks == 1 else 's'} ({launching.gpu_count()} GPU(s) visible): on one rank NCCL "
                         "selects no algorithm, so there is nothing to sweep; time one GPU with `ccltune bench`, "
                         "or sweep with --nproc N >= 2 on a machine with 2 or more GPUs")
    workload = _workload(args, colls, ranks) if args.workload else None
    if workload is not None and not dist.under_launcher():  # decided once: the ranks get it in their argv
        for line in [*op_lines(args, workload), *load_from_job(args, workload)]:
            print(line)
    if args.resume is not None and not dist.under_launcher():  # before any process starts
        with Store(args.db, readonly=True) as store:
            check_resume(store.run(args.resume), args, launching.job_size(args, engine_name))
    launching.announce(note, getattr(args, "_caller", None))
    rc = launching.relaunch(args, args._argv, engine_name, getattr(args, "_caller", None))
    if rc is not None:
        return rc
    if engines.kind(engine_name).own_comm and not args.no_twin and len(cands) > 1:
        cands = [*cands, TWIN]
    return _run(args, colls, sizes, cands, engine_name, workload)


# -b/-e/-f as the parser gives them when not typed: --workload replaces them
_SIZE_DEFAULTS = {"minbytes": ("-b", "8"), "maxbytes": ("-e", "1G"), "stepfactor": ("-f", 2)}


def _workload(args: argparse.Namespace, colls: list[Any], ranks: int) -> Any:
    """The workload of --workload, checked before any process starts: no -b/-e/-f beside it, and at
    least one point this launch can sweep (the node count is checked once the job runs)."""
    from ccltune.workload import model
    from ccltune.workload import plan as workload_plan

    given = [flag for key, (flag, default) in _SIZE_DEFAULTS.items() if getattr(args, key) != default]
    if given:
        raise UsageError(f"--workload sweeps the workload's own sizes; {', '.join(given)} do not apply with it")
    wl = model.load(args.workload)
    points, skipped = workload_plan.sweep_points(wl, ranks, None, datatypes.dtype(args.datatype),
                                                 [c.name for c in colls], job_dtypes(args, wl))
    if not points:
        raise UsageError(f"--workload {args.workload}: nothing this launch can sweep: "
                         + "; ".join(f"{s.entry.key.collective} {s.entry.key.size_bytes} B: {s.reason}"
                                     for s in skipped[:5]) + (f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""))
    return wl


DEFAULT_LOAD_M = 8192  # the matrix of --under-load when the job's times call for a load and nothing sizes it (issue 28)


def _typed(args: argparse.Namespace, short: str, long: str) -> bool:
    """Whether the command line gave the option (-d/--datatype, -o/--op), not only its default."""
    return any(a in (short, long) or a.startswith(long + "=") or (a.startswith(short) and a[2:3] != "-")
               for a in getattr(args, "_argv", None) or [])


def job_dtypes(args: argparse.Namespace, wl: Any) -> dict[str, Any] | None:
    """Without -d: each collective in the job's own datatype (``workload.plan.job_dtypes``); with -d, None."""
    from ccltune.workload import plan as workload_plan

    return None if _typed(args, "-d", "--datatype") else workload_plan.job_dtypes(wl)


def job_ops(args: argparse.Namespace, wl: Any) -> dict[tuple[str, int], str] | None:
    """Without -o: each reduction point in the job's own op (``workload.plan.job_ops``); with -o, None."""
    from ccltune.workload import plan as workload_plan

    return None if _typed(args, "-o", "--op") else workload_plan.job_ops(wl)


def op_lines(args: argparse.Namespace, wl: Any) -> list[str]:
    """What ``sweep --workload`` says about the ops it measures the job's reductions in."""
    ops = job_ops(args, wl)
    if ops is None:
        return []
    unknown = sorted({(e.key.collective, e.key.size_bytes) for e in wl.entries
                      if collectives.REGISTRY.get(e.key.collective) is not None
                      and collectives.REGISTRY[e.key.collective].reduces and (e.key.collective, e.key.size_bytes) not in ops})
    out = []
    other = {k: v for k, v in ops.items() if v != args.op}
    if other:
        out.append("# in the job's reduction op (-o to override): "
                   + ", ".join(f"{c} {n} B {op}" for (c, n), op in sorted(other.items())))
    if unknown:
        out.append(f"# the workload does not say the op of {len(unknown)} reduction point(s) ("
                   + ", ".join(f"{c} {n} B" for c, n in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
                   + f"): measured with -o {args.op}; a COLL log of the job (NCCL_DEBUG_SUBSYS=COLL) gives it")
    return out


def load_from_job(args: argparse.Namespace, wl: Any) -> list[str]:
    """The sweep of a workload whose calls the job runs far slower than idle is made under load (issue 28;
    docs/workload.md, "In-job times"): sets ``--under-load`` in ``args`` and its argv, and says why."""
    from ccltune.workload import compute, show
    from ccltune.workload.estimate import idle_estimates

    if args.under_load is not None or not any(show.job_us(e) is not None for e in wl.entries):
        return []
    if not os.path.exists(args.db):
        return [f"# the workload has the job's own times, but {args.db} holds no idle measurement to compare them "
                "with: sweeping idle (then `ccltune workload show W.json --db` compares them)"]
    slow = show.slow_entries(wl, idle_estimates(args.db, wl))
    if not slow:
        return []
    worst = ", ".join(f"{wl.entries[i].key.collective} {wl.entries[i].key.size_bytes} B x{r:.1f}" for i, r in slow[:3])
    if args.idle:
        return [f"# the job runs its calls far slower than idle ({worst}): sweeping idle as --idle asks; "
                "tune --workload will give those sizes no rule"]
    m, why = compute.load_for(wl.compute)
    said = (f"# the job runs its calls far slower than NCCL's default idle in {args.db} ({worst}; at least "
            f"x{show.SLOW_RATIO:g} at the median)")
    if m is None and wl.compute is not None:  # the job's own kernels say a load would not be its conditions
        return [f"{said}; {why}: sweeping idle, and tune --workload gives those sizes no rule (--under-load M "
                "sweeps under a load anyway)"]
    m = m or DEFAULT_LOAD_M
    args.under_load = m
    args._argv = [*args._argv, "--under-load", str(m)]
    sized = f" ({why})" if wl.compute is not None else f" (the default: {why})"
    return [f"{said}: sweeping under load, --under-load {m}{sized} (--idle to sweep idle); then tune with "
            f"--under-load {m}"]


def _run(args: argparse.Namespace, colls: list[Any], sizes: list[int], cands: list[CommConfig],
         engine_name: str, workload: Any = None) -> int:
    settings = measure_sweep.SweepSettings(dtype=datatypes.dtype(args.datatype), op=datatypes.op(args.op),
                                           reps=args.reps, graph=not args.no_graph, target_us=args.target_us,
                                           max_iters=args.max_iters, warmup=args.warmup_iters, timeout_s=args.timeout)
    plan = sweep_run.SweepPlan(colls, sizes, cands, settings, mode=args.mode, resume=args.resume,
                               args=launching.args_record(args), workload=workload, under_load=args.under_load,
                               dtypes=job_dtypes(args, workload) if workload is not None else None,
                               ops=job_ops(args, workload) if workload is not None else None,
                               check_resume=lambda run, world_size: check_resume(run, args, world_size),
                               on_deferred=lambda d: print("\n".join(deferred_lines(d, args._argv)), flush=True))
    session = Session("sweep", engine_name, db=args.db, argv=args._argv, timeout_s=args.timeout,
                      virtual_nodes=args.virtual_nodes)
    res = sweep_run.run(plan, session, launching.engine_options(args), progress=_Progress)
    if session.interrupted:
        return session.exit_code
    if session.is_root:
        for k in res.skipped:
            print(f"# not swept: {k.entry.key.collective} {k.entry.key.size_bytes} B x{k.entry.calls}: {k.reason}")
        for (c, n), why in sorted(res.op_notes.items()):
            print(f"# {c} {n} B: {why}")
        if res.load:
            print(f"# under load: {res.load}")
        if workload is not None and not res.rows:  # the node count, known once the job ran, left nothing
            raise UsageError(f"--workload {args.workload}: nothing this launch can sweep (the reasons above); "
                             f"run {res.run_id} holds no rows")
        if not engines.kind(engine_name).own_comm:
            after = (f"; the {engine_name} engine timed only its default, so there are no rules to derive: "
                     f"see the timings with `ccltune report --db {args.db}`")
        elif res.timed or not res.rows:
            # tune reads runs under load only with --under-load M (it never mixes them with idle runs)
            load = f" --under-load {args.under_load}" if args.under_load is not None else ""
            judged = f" --workload {args.workload}" if workload is not None else ""
            after = f"; next: ccltune tune --db {args.db} --runs {res.run_id}{load}{judged} --out rules.conf"
        else:
            after = ", none of them timed"
        print(f"ccltune sweep: run {res.run_id} complete, {res.kept + res.rows} rows in {args.db}{after}")
        if res.deferred is not None and engines.kind(engine_name).own_comm:
            print(f"ccltune sweep: then, for the candidates this run could not measure: "
                  f"{follow_up_command(res.deferred, args._argv)}")
        print(f"ccltune sweep: time on rank 0, {settings.clock.line(res.wall_s)}")
    if res.rows and not res.timed and session.is_root:  # every point skipped, waived or refused: nothing to tune from
        why = "; ".join(f"{n} {what}" for what, n in res.untimed.most_common(3))
        raise CheckFailed(f"no point of run {res.run_id} was timed, so it holds nothing to tune from: {why}")
    return 0


def follow_up_command(deferred: Any, argv: list[str]) -> str:
    """The sweep that measures ``deferred``'s candidates: this command's arguments without --protos and
    --resume, with only their protocols, started with the variables they need."""
    keep, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--protos", "--resume"):
            skip = True
        elif not a.startswith(("--protos=", "--resume=")):
            keep.append(a)
    protos = ",".join(dict.fromkeys(c.proto for c in deferred.candidates if c.proto))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(deferred.env.items()))
    return f"{env} ccltune {shlex.join([*keep, '--protos', protos])}"


def deferred_lines(deferred: Any, argv: list[str]) -> list[str]:
    """What the sweep says up front when its process cannot measure some candidates (RCCL's LL128)."""
    names = ", ".join(sorted(deferred.env))
    had = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in sorted(deferred.first.items()))
    labels = [c.label for c in deferred.candidates]
    shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
    return [f"# {deferred.library} reads {names} once per process, at its first communicator (NCCL's default, "
            f"made with {had}), so {len(labels)} candidates ({shown}) are recorded unavailable in this run.",
            "# Measure them in a run of their own (NCCL's default there runs with the same setting, as a job "
            "that sets it would), then tune that run with --runs N:",
            f"#   {follow_up_command(deferred, argv)}"]


class _Progress(sweep_run.Progress):
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
