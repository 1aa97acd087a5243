"""``ccltune tune``: derive tuner rules from sweep/import runs and write the rule file."""

from __future__ import annotations

import argparse
import shlex
import sys

from ccltune.cli._common import DefaultsFormatter
from ccltune import __version__
from ccltune.cli._common import comma_list, parse_run_ids
from ccltune.errors import UsageError
from ccltune.files import printable, read_text, shown
from ccltune.inputs import load_json
from ccltune.rules import write_atomic
from ccltune.status import RunStatus, Verdict
from ccltune.store import DEFAULT_DB, Store
from ccltune.tune.derive import (
    ISOLATED_MARGIN,
    MIN_GAIN_US,
    OBJECTIVES,
    PLACEMENTS,
    Derivation,
    account_gain,
    derive,
)
from ccltune.tune.emit import describe_platform, render
from ccltune.tune import loadcmp, weighted
from ccltune.tune.source import SOURCE_KINDS, source_rows
from ccltune.workload import model as wl_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="derive tuner rules from measured runs",
        description="Per (collective, nRanks, nNodes, platform) and size, keep the configuration that beats"
                    " NCCL's default by more than the measured noise; write the plugin's rule file.",
        formatter_class=DefaultsFormatter)
    p.add_argument("--db", default=DEFAULT_DB, help="results database")
    p.add_argument("--out", required=True, help="rule file to write (replaced whole, atomically)")
    comma_list(p.add_argument("--runs", default=None,
                              help="run ids to use, e.g. '3,5-7' (default: every sweep and import run)"))
    p.add_argument("--objective", choices=OBJECTIVES, default="time",
                   help="time: fastest configuration; sm: fewest channels within --sm-tolerance of the fastest")
    p.add_argument("--sm-tolerance", type=float, default=2.0, metavar="PCT",
                   help="with --objective sm: how much slower than the fastest a configuration may be (percent)")
    p.add_argument("--min-margin", type=float, default=2.0, metavar="PCT",
                   help="smallest win over the default that makes a rule, even when the noise is lower (percent)")
    p.add_argument("--isolated-margin", type=float, default=100 * ISOLATED_MARGIN, metavar="PCT",
                   help="smallest win that makes a rule at a size where the configuration does not also beat the"
                        " default at a neighbouring measured size (percent; see docs/tuning.md)")
    p.add_argument("--min-gain-us", type=float, default=MIN_GAIN_US, metavar="US",
                   help="least time a win must save per call, whatever the percentages (latency-bound sizes)")
    p.add_argument("--placement", choices=PLACEMENTS, default="out-of-place",
                   help="which buffers' measurements to use")
    p.add_argument("--exclude-failed", action="append", default=[], metavar="VALIDATE_JSON",
                   help="no rule at the sizes that failed in this `ccltune validate --json` verdict (NCCL "
                        "decides there); repeatable")
    p.add_argument("--workload", default=None, metavar="W.json",
                   help="judge the rules by this workload (`ccltune workload import`): rules only at its exact "
                        "sizes, weighted by its calls; prints the predicted communication time per step "
                        "(docs/workload.md)")
    p.add_argument("--min-share", type=float, default=0.1, metavar="PCT",
                   help="with --workload: drop a rule that saves less than this share of the predicted default "
                        "communication time per step (percent)")
    p.add_argument("--under-load", type=int, default=None, metavar="M",
                   help="derive from the runs swept with --under-load M (default: the idle runs only); when idle "
                        "runs are there too, print where the winners differ")
    p.set_defaults(func=run)


def failed_sizes(paths: list[str]) -> list[tuple[str, int, int, int]]:
    """(collective, n_ranks, n_nodes, size_bytes) of every size that FAILed in these verdicts."""
    out = []
    for path in paths:
        flag = f"--exclude-failed {shown(path)}"
        text = read_text(path, "--exclude-failed")
        try:
            sizes = load_json(text, flag)["sizes"]
            out.extend((s["collective"], int(s["n_ranks"]), int(s.get("n_nodes") or 1), int(s["size_bytes"]))
                       for s in sizes if s["status"] == Verdict.FAIL)
        except UsageError:
            raise  # load_json's own line: the file, and why it is not JSON
        except (ValueError, KeyError, TypeError) as exc:
            why = f"no {exc} key" if isinstance(exc, KeyError) else str(exc)
            raise UsageError(f"{flag}: not a `ccltune validate --json` verdict ({printable(why, 120)}; "
                             f"it starts {printable(text, 60)!r})") from None
    return out


def _percent(value: float, flag: str) -> float:
    if not 0 <= value < 100:
        raise UsageError(f"{flag} must be in [0, 100) percent, got {value:g}")
    return value / 100


def run(args: argparse.Namespace) -> int:
    min_margin = _percent(args.min_margin, "--min-margin")
    isolated_margin = _percent(args.isolated_margin, "--isolated-margin")
    if not 0 <= args.min_gain_us < 1e6:
        raise UsageError(f"--min-gain-us must be at least 0 and under 1000000 microseconds, got {args.min_gain_us:g}")
    sm_tol = _percent(args.sm_tolerance, "--sm-tolerance")
    exclude = failed_sizes(args.exclude_failed)
    with Store(args.db, create=False) as store:
        opts = dict(objective=args.objective, sm_tolerance=sm_tol, min_margin=min_margin,
                    isolated_margin=isolated_margin, min_gain_us=args.min_gain_us, placement=args.placement,
                    exclude=exclude)
        runs, rows, idle_rows = _load_split(store, args)
        result = derive(rows, **opts)
        load_notes = (loadcmp.lines(*loadcmp.winner_changes(derive(idle_rows, **opts), result), args.under_load)
                      if idle_rows else [])
        settings = (f"objective={args.objective} min_margin={args.min_margin:g}%"
                    f" isolated_margin={args.isolated_margin:g}% min_gain={args.min_gain_us:g}us"
                    f" placement={args.placement}"
                    + (f" sm_tolerance={args.sm_tolerance:g}%" if args.objective == "sm" else ""))
        source = f"runs {', '.join(f'{r.id} ({r.kind} {r.started_at})' for r in runs)} of {args.db}"
        plans = None
        if args.workload:
            plans, sections, notes = _for_workload(args, result, rows)
            source += f", judged by workload {args.workload}"
            settings += f" min_share={args.min_share:g}%"
        else:
            sections, notes = result.sections(), result.notes
        text = render(sections, source=source, settings=settings, notes=notes)
        write_atomic(args.out, text)
        command = "ccltune " + shlex.join(["tune", "--db", str(args.db), "--out", str(args.out),
                                           "--objective", args.objective, "--placement", args.placement,
                                           *[a for p in args.exclude_failed for a in ("--exclude-failed", p)],
                                           *(["--workload", args.workload, "--min-share", f"{args.min_share:g}"]
                                             if args.workload else [])])
        tune_run = store.begin_run("tune", command=command, args={k: v for k, v in vars(args).items() if k != "func"},
                                   env={"ccltune_version": __version__,
                                        "platform": "; ".join(map(describe_platform, result.sections()))})
        store.add_artifact(tune_run, "rules", text)
        summary = _report(result)
        store.finish_run(tune_run, RunStatus.COMPLETE, {"source_runs": [r.id for r in runs], "groups": summary,
                                                **({"workload": args.workload, "predictions": [
                                                    weighted.summary(p) for p in plans]} if plans else {})})
    n_rules = sum(len(r) for r in sections.values())
    print(f"# wrote {n_rules} rules in {len(sections)} platform sections to {args.out}"
          f" (stored as artifact 'rules' of run {tune_run})")
    print("\n".join(load_notes)) if load_notes else None
    if plans is not None:
        for p in plans:
            print("\n".join(weighted.lines(p)))
        return 0
    print(f"# {'group':<44} {'rules':>5} {'capture_%':>9} slower_sizes")
    for key, s in summary.items():
        cap = "-" if s["capture"] is None else f"{100 * s['capture']:.1f}"
        print(f"  {key:<44} {s['rules']:>5} {cap:>9} {','.join(map(str, s['slower_sizes'])) or 'none'}")
    for note in result.notes:
        print(f"# note: {note}", file=sys.stderr)
    return 0


def _load_split(store: Store, args: argparse.Namespace) -> tuple[list, list[dict], list[dict]]:
    """(runs, rows) measured under ``--under-load`` (idle when not given), and the idle rows to compare
    with when a load was asked for. Runs of the other kind are left out, never mixed in."""
    if args.runs:
        candidates = [store.run(i) for i in store.runs_in(parse_run_ids(args.runs))]
    else:
        candidates = [r for r in store.runs() if r.kind in SOURCE_KINDS]
    loads = {r.id: (r.args or {}).get("under_load") for r in candidates}
    if not loads:
        return (*source_rows(store, None), [])  # says there is nothing to tune from
    mine = [i for i, m in loads.items() if m == args.under_load]
    if not mine:
        have = sorted({str(m) for m in loads.values() if m is not None})
        raise UsageError(f"--under-load {args.under_load}: no sweep or import run measured under that load"
                         + (f" (runs under load: matrix {', '.join(have)})" if have else " (no run under load)")
                         if args.under_load is not None else
                         "every run given was swept under load: pass --under-load M to tune from them")
    runs, rows = source_rows(store, mine)
    idle = [i for i, m in loads.items() if m is None]
    idle_rows = source_rows(store, idle)[1] if args.under_load is not None and idle else []
    return runs, rows, idle_rows


def _for_workload(args: argparse.Namespace, result: Derivation, rows: list[dict]
                  ) -> tuple[list[weighted.WorkloadPlan], dict, list[str]]:
    """The rules and predictions judged by ``--workload`` (docs/workload.md)."""
    wl = wl_model.load(args.workload)
    dtypes: dict[tuple[str, str, int, int], set[str]] = {}
    for r in rows:
        dtypes.setdefault((r["gpu"], r["collective"], int(r["n_ranks"]), int(r.get("n_nodes") or 1)),
                          set()).add(r.get("dtype") or "")
    plans = weighted.plan(wl, result, min_share=_percent(args.min_share, "--min-share"), dtypes=dtypes,
                          under_load=args.under_load is not None)
    graphs = {bool(r.get("graph")) for r in rows}
    mode = "CUDA graph" if graphs == {True} else "eager" if graphs == {False} else "CUDA graph and eager rows"
    sections: dict = {}
    for p in plans:
        p.mode = mode  # the prediction's line says it: replay's rows are eager, a sweep's graph by default
        for rule in p.rules:
            sections.setdefault(rule.platform, []).append(rule)
    for p in plans:  # printed with each plan and written into the rule file
        p.notes += weighted.op_notes(wl, rows)
    notes = [*result.notes, *dict.fromkeys(n for p in plans for n in p.notes)]
    return plans, sections, notes


def _report(result: Derivation) -> dict[str, dict]:
    out = {}
    for g in result.groups:
        rep = account_gain(g)
        out[str(g.key)] = {"rules": len(g.rules), "capture": rep.capture, "slower_sizes": rep.slower_sizes}
    return out
