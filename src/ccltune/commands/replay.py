"""``replay W.json``: the workload's collectives in their captured order, NCCL's default against the
rules (docs/workload.md; the run itself: ``ccltune.validate.replay_run``)."""

from __future__ import annotations

from dataclasses import dataclass

from ccltune import dist, launch
from ccltune.commands import launching
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.launching import LaunchOptions
from ccltune.commands.options import option, to_argv
from ccltune.commands.results import Outcome
from ccltune.errors import CheckFailed, UsageError
from ccltune.measure.load import check as check_load
from ccltune.measure.session import Session
from ccltune.status import Verdict
from ccltune.validate import replay as replay_plan
from ccltune.validate import replay_run
from ccltune.workload import model, plan


@dataclass(frozen=True, kw_only=True)
class ReplayOptions(LaunchOptions):
    """``ccltune replay``'s options (``ccltune replay --help``)."""

    workload: str = option(positional=True)
    rules: str | None = option(None, flag="--rules", help="rule file to compare with NCCL's default")
    iters: int = option(6, flag="--iters",   # 6 paired rounds reach a 95% interval (stats.min_pairs)
                        help="timed rounds per arm (the whole sequence each)")
    order: str = option("captured", flag="--order", choices=plan.ORDERS,
                        help="captured: as one rank issued them; grouped: each entry's calls together")
    under_load: int | None = option(None, flag="--under-load",
                                    help="while collectives are timed, run an M x M bf16 matrix multiply back to back on a "
                                         "second stream of each rank's GPU, so configurations compete for SMs as in training "
                                         "(recorded with the run; `ccltune tune --under-load M` derives from such runs). "
                                         "Not on gloo")

    def to_argv(self) -> list[str]:
        """The command line of these options (a job's workers parse it back with the CLI's parser)."""
        return to_argv(self, "replay")


def run_replay(o: ReplayOptions, console: Console = Console(), *, caller: launch.Caller | None = None,
               command_line: list[str] | None = None) -> Outcome:
    """Check ``o``, then replay the workload on NCCL's default and on the rules: in this process, or as a
    job whose workers run ``ccltune <o.to_argv()>``; the verdict's lines go to ``console``. The rules
    slower beyond noise raise CheckFailed (a job's: its exit code), with the run."""
    check_outputs(o)
    wl = model.load(o.workload)
    if o.iters < 2:
        raise UsageError(f"--iters must be >= 2 to know the noise, got {o.iters}")
    if o.rules is not None:
        launching.check_rule_file(o.rules, "--rules")
    engine_name, note = launching.resolve_engine(o)
    check_load(o.under_load, engine_name)
    _check_fit(o, wl, engine_name, console)
    launching.announce(note, caller, console if caller is not None else None)
    argv = o.to_argv()
    rc = launching.relaunch(o, argv, engine_name, caller, command_line, console)
    if rc is not None:
        return Outcome.of_job(o.db, rc, caller)
    rp = replay_run.ReplayPlan(wl, o.rules, o.order, o.iters, o.under_load, launching.args_record(o))
    session = Session("replay", engine_name, db=o.db, argv=command_line or argv, timeout_s=o.timeout)
    res = replay_run.run(rp, session, launching.engine_options(o))
    if session.interrupted:
        return Outcome(o.db, session.run_id, session.exit_code)
    if res.verdict is None:  # what the job found out (the node count, the engine's limits); no run stored
        if session.is_root:
            _print_unreplayed(res.skipped, res.notes, console)
            raise UsageError(f"{o.workload}: "
                             + plan.nothing_to_replay(wl, session.ctx.world_size if session.ctx else 0, engine_name))
        return Outcome(o.db, None)
    notes = res.notes + ([f"under load: {res.load}"] if res.load else [])
    console.say("\n".join(replay_plan.lines(res.verdict, wl, o.order, res.skipped, notes, o.under_load)))
    if res.verdict.status == Verdict.FAIL:
        failed = CheckFailed(f"replay: FAIL: {res.verdict.reason}")
        failed.run_id = session.run_id
        raise failed
    return Outcome(o.db, session.run_id)


def _check_fit(o: ReplayOptions, wl: model.Workload, engine_name: str, console: Console) -> None:
    """Before any process starts (as ``sweep --workload``): the entries this launch's rank count and
    engine can replay; none: their reasons, and the launches that would replay them."""
    ranks = launching.job_size(o, engine_name)
    keep, skipped = plan.fit(wl, ranks, None, engine=engine_name)
    if not keep:
        if dist.launch_info().rank == 0:
            _print_unreplayed(skipped, [], console)
        raise UsageError(f"{o.workload}: {plan.nothing_to_replay(wl, ranks, engine_name)}")


def _print_unreplayed(skipped: list[plan.Skipped], notes: list[str], console: Console) -> None:
    for s in skipped:
        console.say(f"# not replayed: {s.entry.key.collective} {s.entry.key.size_bytes} B x{s.entry.calls}: {s.reason}")
    for n in notes:
        console.say(f"# note: {n}")
