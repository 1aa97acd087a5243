"""``ccltune replay W.json``: the workload's collectives in their captured order, NCCL's default
against the rules (docs/workload.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune import dist
from ccltune.cli import _common
from ccltune.commands import launching
from ccltune.errors import CheckFailed, UsageError
from ccltune.measure.load import check as check_load
from ccltune.measure.session import Session
from ccltune.validate import replay as replay_plan
from ccltune.validate import replay_run
from ccltune.workload import model, plan


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay", help="replay a workload's collectives: NCCL's default vs RULES, time per step",
        description="Issue the workload's collectives (ccltune workload import) in their captured order, on "
                    "NCCL's default and on the plugin with --rules, interleaved rounds on separate communicators; "
                    "report communication time per step both ways and their ratio. Exit 1 when the rules are "
                    "slower beyond noise. gloo, or one rank: NCCL's default only (WAIVED).",
        formatter_class=DefaultsFormatter)
    p.add_argument("workload", metavar="W.json")
    p.add_argument("--rules", default=None, metavar="R", help="rule file to compare with NCCL's default")
    p.add_argument("--iters", type=int, default=5, metavar="N", help="timed rounds per arm (the whole sequence each)")
    p.add_argument("--order", choices=plan.ORDERS, default="captured",
                   help="captured: as one rank issued them; grouped: each entry's calls together")
    _common.add_under_load(p)
    _common.add_db(p)
    _common.add_launch(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    wl = model.load(args.workload)
    if args.iters < 2:
        raise UsageError(f"--iters must be >= 2 to know the noise, got {args.iters}")
    if args.rules is not None:
        launching.check_rule_file(args.rules, "--rules")
    engine_name, note = launching.resolve_engine(args)
    check_load(args.under_load, engine_name)
    _check_fit(args, wl, engine_name)
    launching.announce(note, getattr(args, "_caller", None))
    rc = launching.relaunch(args, args._argv, engine_name, getattr(args, "_caller", None))
    if rc is not None:
        return rc
    rp = replay_run.ReplayPlan(wl, args.rules, args.order, args.iters, args.under_load, launching.args_record(args))
    session = Session("replay", engine_name, db=args.db, argv=args._argv, timeout_s=args.timeout)
    res = replay_run.run(rp, session, launching.engine_options(args))
    if session.interrupted:
        return session.exit_code
    if res.verdict is None:  # what the job found out (the node count, the engine's limits); no run stored
        if session.is_root:
            _print_unreplayed(res.skipped, res.notes)
            raise UsageError(f"{args.workload}: "
                             + plan.nothing_to_replay(wl, session.ctx.world_size if session.ctx else 0, engine_name))
        return 0
    notes = res.notes + ([f"under load: {res.load}"] if res.load else [])
    print("\n".join(replay_plan.lines(res.verdict, wl, args.order, res.skipped, notes, args.under_load)))
    if res.verdict.status == "FAIL":
        raise CheckFailed(f"replay: FAIL: {res.verdict.reason}")
    return 0


def _check_fit(args: argparse.Namespace, wl: model.Workload, engine_name: str) -> None:
    """Before any process starts (as ``sweep --workload``): the entries this launch's rank count and
    engine can replay; none: their reasons, and the launches that would replay them."""
    ranks = launching.job_size(args, engine_name)
    keep, skipped = plan.fit(wl, ranks, None, engine=engine_name)
    if not keep:
        if dist.launch_info().rank == 0:
            _print_unreplayed(skipped, [])
        raise UsageError(f"{args.workload}: {plan.nothing_to_replay(wl, ranks, engine_name)}")


def _print_unreplayed(skipped: list[plan.Skipped], notes: list[str]) -> None:
    for s in skipped:
        print(f"# not replayed: {s.entry.key.collective} {s.entry.key.size_bytes} B x{s.entry.calls}: {s.reason}")
    for n in notes:
        print(f"# note: {n}")
