"""``sweep``: NCCL's default against forced algorithm x protocol x channel candidates, side by side, at
every size (the run itself, exhaustive, model-guided or resumed: ``ccltune.tune.sweep_run``;
its options: ``commands.sweep_options``; ``--workload``'s points and conditions: ``commands.sweep_workload``)."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from typing import Any

from ccltune import collectives, datatypes, dist, engines, launch, rules
from ccltune.commands import launching, sweep_workload
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import from_fields
from ccltune.commands.results import Outcome
from ccltune.commands.sweep_options import SweepOptions
from ccltune.commconfig import TWIN, CommConfig
from ccltune.errors import CheckFailed, EngineUnavailable, UsageError, unknown_name
from ccltune.measure import sweep as measure_sweep
from ccltune.measure.load import check as check_load
from ccltune.measure.session import Session
from ccltune.sizes import parse_size, size_series
from ccltune.store import Store
from ccltune.tune import sweep_run


def _names(text: str, valid: tuple[str, ...], flag: str) -> list[str]:
    """--algos/--protos: names in either spelling (collnet_direct, CollNetDirect), refused in the rule files'
    (``valid``: rules.ALGORITHMS or PROTOCOLS); NCCL_ALGO's spelling comes back, what the sweep forces."""
    out = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        name = rules.rule_spelling(raw)
        if name not in valid:
            raise unknown_name("algorithm" if flag == "--algos" else "protocol", raw, valid, flag)
        out.append(rules.nccl_spelling(name))
    return out


def candidates(o: Any) -> list[CommConfig]:
    """The candidates of ``o``'s --algos, --protos, --channels and --grid, NCCL's default first."""
    algos, protos = _names(o.algos, rules.ALGORITHMS, "--algos"), _names(o.protos, rules.PROTOCOLS, "--protos")
    if bool(algos) != bool(protos):  # a candidate forces a pair: one list alone would be dropped unsaid
        given, empty = ("--algos", "--protos") if algos else ("--protos", "--algos")
        raise UsageError(f"{given} {getattr(o, given[2:])} needs {empty} too (each candidate forces an algorithm "
                         f"and a protocol; {empty} is empty): give both, or --algos '' --protos '' for none")
    chans = []
    for c in filter(None, (x.strip() for x in o.channels.split(","))):
        if not c.isdigit() or not 1 <= int(c) <= 64:
            raise UsageError(f"--channels: {c!r} is not a channel count between 1 and 64")
        chans.append(int(c))
    out = [CommConfig()]
    out += [CommConfig(a, p, None) for a in algos for p in protos]
    out += [CommConfig(None, None, c) for c in chans]
    if o.grid == "full":  # each pair before its channel counts: a refused pair refuses them
        out += [CommConfig(a, p, c) for a in algos for p in protos for c in chans]
    return out


# what a resumed sweep must keep of the run it continues (besides its collectives, sizes and candidates)
_RESUME_SAME = {"datatype": "-d", "op": "-o", "reps": "--reps", "target_us": "--target-us", "max_iters": "--max-iters",
                "warmup_iters": "-w", "no_graph": "--no-graph", "mode": "--mode", "no_twin": "--no-twin",
                "virtual_nodes": "--virtual-nodes", "workload": "--workload", "under_load": "--under-load"}


def _measures(o: SweepOptions) -> dict[str, Any]:
    """What a sweep's rows are of: its collectives, sizes and candidates."""
    colls, sizes, cands = check(o)
    return {"collectives": [c.name for c in colls], "sizes": sizes, "candidates": cands}


def check_resume(run: Any, o: SweepOptions, world_size: int) -> None:
    """--resume continues ``run`` only with what it measured: a sweep, on as many ranks, of the same
    collectives, sizes, candidates and settings; else its rows would mix two different sweeps."""
    if run.kind != "sweep":
        raise UsageError(f"--resume {run.id}: run {run.id} is a {run.kind} run, not a sweep")
    diffs = []
    if run.world_size and run.world_size != world_size:
        diffs.append(f"{run.world_size} ranks, now {world_size}")
    now = _measures(o)
    try:  # the run's recorded options over these (runs from before --grid measured the axes)
        before = _measures(from_fields(SweepOptions, {**dataclasses.asdict(o), "grid": "axes", **run.args}))
    except UsageError:  # recorded by another ccltune version, with values this one refuses
        before = None
    diffs += [f"other {what}" for what in now if before is None or before[what] != now[what]]
    for key, flag in _RESUME_SAME.items():
        if key in run.args and run.args[key] != getattr(o, key):
            diffs.append(f"{flag} {run.args[key]!r}, now {getattr(o, key)!r}")
    if diffs:
        raise UsageError(f"--resume {run.id}: this command is not the sweep run {run.id} was ({'; '.join(diffs)}); "
                         f"resume with the run's own command (`ccltune runs` shows it) and --resume {run.id}, "
                         "or start a new sweep")


def check(o: SweepOptions) -> tuple[list[Any], list[int], list[CommConfig]]:
    """The collectives, sizes and candidates of ``o``, every value checked."""
    colls = collectives.select(list(o.collective))
    for c in colls:
        if c.tuner_func is None:
            raise UsageError(f"{c.name} is not tuned by NCCL's tuner interface; sweep one of: "
                             + ", ".join(x.name for x in collectives.TUNABLE))
    sizes = size_series(parse_size(o.minbytes, "-b/--minbytes"), parse_size(o.maxbytes, "-e/--maxbytes"),
                        factor=o.stepfactor)
    if o.reps < 1:
        raise UsageError(f"--reps must be >= 1, got {o.reps}")
    launching.check_timing(o)
    datatypes.dtype(o.datatype)
    datatypes.op(o.op)
    return colls, sizes, candidates(o)


def run_sweep(o: SweepOptions, console: Console = Console(), *, caller: launch.Caller | None = None,
              command_line: list[str] | None = None) -> Outcome:
    """Check ``o``, then sweep: as a job whose workers run ``ccltune <o.to_argv()>`` (a sweep has at least
    2 ranks), or in this process when a launcher started it. Its lines go to ``console``; ``command_line``:
    what the user typed, recorded with the run (default: the options' own argv). A sweep that timed no point
    raises CheckFailed (a job's: its exit code), with the run."""
    check_outputs(o)
    colls, sizes, cands = check(o)
    engine_name, note = launching.resolve_engine(o)
    launching.check_virtual_nodes(o, engine_name)
    check_load(o.under_load, engine_name)
    if not engines.kind(engine_name).own_comm and len(cands) > 1:
        why = (f", not --engine {engine_name}: the {engine_name} engine" if o.engine
               else f" on a GPU; no GPU is visible here, and the CPU engine ({engine_name})")
        raise (UsageError if o.engine else EngineUnavailable)(  # no GPU here: 4, as --help says
            f"forced candidates (--algos/--protos/--channels) need the nccl engine{why} "
            f"can time only the library's default, so its sweep yields "
            f"no rules for `ccltune tune`, only timings for `ccltune report`; to time that anyway, "
            f"pass --algos '' --protos '' --channels ''")
    if (ranks := launching.job_size(o, engine_name)) < 2:  # before any process starts or file is written
        raise UsageError(f"a sweep needs at least 2 ranks, this job has {ranks} rank"
                         f"{'' if ranks == 1 else 's'} ({launching.gpu_count()} GPU(s) visible): on one rank NCCL "
                         "selects no algorithm, so there is nothing to sweep; time one GPU with `ccltune bench`, "
                         "or sweep with --nproc N >= 2 on a machine with 2 or more GPUs")
    workload = sweep_workload.load(o.workload, o, colls, ranks) if o.workload else None
    if workload is not None and not dist.under_launcher():  # decided once: the ranks get it in their argv
        loaded, under_load = sweep_workload.load_from_job(o, workload)
        for line in [*sweep_workload.op_lines(o, workload), *loaded]:
            console.say(line)
        if under_load != o.under_load:
            o = dataclasses.replace(o, under_load=under_load)
            if command_line:  # the run records a command that sweeps under that load again
                command_line = [*command_line, "--under-load", str(under_load)]
    if o.resume is not None and not dist.under_launcher():  # before any process starts
        with Store(o.db, readonly=True) as store:
            check_resume(store.run(o.resume), o, ranks)
    launching.announce(note, caller, console if caller is not None else None)
    argv = o.to_argv()
    rc = launching.relaunch(o, argv, engine_name, caller, command_line, console)
    if rc is not None:
        return Outcome.of_job(o.db, rc, caller)
    if engines.kind(engine_name).own_comm and not o.no_twin and len(cands) > 1:
        cands = [*cands, TWIN]
    return _run(o, colls, sizes, cands, engine_name, workload, console, command_line or argv)


def _run(o: SweepOptions, colls: list[Any], sizes: list[int], cands: list[CommConfig], engine_name: str,
         workload: Any, console: Console, argv: list[str]) -> Outcome:
    settings = measure_sweep.SweepSettings(dtype=datatypes.dtype(o.datatype), op=datatypes.op(o.op),
                                           reps=o.reps, graph=not o.no_graph, target_us=o.target_us,
                                           max_iters=o.max_iters, warmup=o.warmup_iters, timeout_s=o.timeout)
    plan = sweep_run.SweepPlan(colls, sizes, cands, settings, mode=o.mode, resume=o.resume,
                               args=launching.args_record(o), workload=workload, under_load=o.under_load,
                               dtypes=sweep_workload.job_dtypes(o, workload) if workload is not None else None,
                               ops=sweep_workload.job_ops(o, workload) if workload is not None else None,
                               check_resume=lambda run, world_size: check_resume(run, o, world_size),
                               on_deferred=lambda d: console.say("\n".join(deferred_lines(d, argv))))
    session = Session("sweep", engine_name, db=o.db, argv=argv, timeout_s=o.timeout, virtual_nodes=o.virtual_nodes)
    res = sweep_run.run(plan, session, launching.engine_options(o), progress=_Progress)
    if session.interrupted:
        return Outcome(o.db, session.run_id, session.exit_code)
    if session.is_root:
        for k in res.skipped:
            console.say(f"# not swept: {k.entry.key.collective} {k.entry.key.size_bytes} B x{k.entry.calls}: {k.reason}")
        for (c, n), why in sorted(res.op_notes.items()):
            console.say(f"# {c} {n} B: {why}")
        if res.load:
            console.say(f"# under load: {res.load}")
        if workload is not None and not res.rows:  # the node count, known once the job ran, left nothing
            raise UsageError(f"--workload {o.workload}: nothing this launch can sweep (the reasons above); "
                             f"run {res.run_id} holds no rows")
        console.say(f"ccltune sweep: run {res.run_id} complete, {res.kept + res.rows} rows in {o.db}"
                    f"{_next(o, res, engine_name, workload)}")
        if res.deferred is not None and engines.kind(engine_name).own_comm:
            console.say(f"ccltune sweep: then, for the candidates this run could not measure: "
                        f"{follow_up_command(res.deferred, argv)}")
        console.say(f"ccltune sweep: time on rank 0, {settings.clock.line(res.wall_s)}")
    if res.rows and not res.timed and session.is_root:  # every point skipped, waived or refused: nothing to tune from
        why = "; ".join(f"{n} {what}" for what, n in res.untimed.most_common(3))
        failed = CheckFailed(f"no point of run {res.run_id} was timed, so it holds nothing to tune from: {why}")
        failed.run_id = res.run_id
        raise failed
    return Outcome(o.db, session.run_id)


def _next(o: SweepOptions, res: Any, engine_name: str, workload: Any) -> str:
    """What the user does with the run: the tune command that reads it, or why there is none."""
    if not engines.kind(engine_name).own_comm:
        return (f"; the {engine_name} engine timed only its default, so there are no rules to derive: "
                f"see the timings with `ccltune report --db {o.db}`")
    if res.timed or not res.rows:
        # tune reads runs under load only with --under-load M (it never mixes them with idle runs)
        load = f" --under-load {o.under_load}" if o.under_load is not None else ""
        judged = f" --workload {o.workload}" if workload is not None else ""
        return f"; next: ccltune tune --db {o.db} --runs {res.run_id}{load}{judged} --out rules.conf"
    return ", none of them timed"


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
    """rank 0's progress on stderr: a bar on a terminal, a line per step otherwise."""

    def __init__(self, enabled: bool, total: int):
        self.bar: Any = None
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
