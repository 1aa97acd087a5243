"""``ccltune tune``: derive tuner rules from sweep/import runs and write the rule file."""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from ccltune import __version__
from ccltune.cli._common import parse_run_ids
from ccltune.errors import UsageError
from ccltune.files import printable, read_text, shown
from ccltune.rules import write_atomic
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
from ccltune.tune.source import source_rows


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="derive tuner rules from measured runs",
        description="Per (collective, nRanks, nNodes, platform) and size, keep the configuration that beats"
                    " NCCL's default by more than the measured noise; write the plugin's rule file.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--db", default=DEFAULT_DB, help="results database")
    p.add_argument("--out", required=True, help="rule file to write (replaced whole, atomically)")
    p.add_argument("--runs", default=None,
                   help="run ids to use, e.g. '3,5-7'; None: every sweep and import run")
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
    p.set_defaults(func=run)


def failed_sizes(paths: list[str]) -> list[tuple[str, int, int, int]]:
    """(collective, n_ranks, n_nodes, size_bytes) of every size that FAILed in these verdicts."""
    out = []
    for path in paths:
        flag = f"--exclude-failed {shown(path)}"
        text = read_text(path, "--exclude-failed")
        try:
            sizes = json.loads(text)["sizes"]
            out.extend((s["collective"], int(s["n_ranks"]), int(s.get("n_nodes") or 1), int(s["size_bytes"]))
                       for s in sizes if s["status"] == "FAIL")
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{flag}: not a `ccltune validate --json` verdict ({printable(repr(exc))}; "
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
        runs, rows = source_rows(store, store.runs_in(parse_run_ids(args.runs)) if args.runs else None)
        result = derive(rows, objective=args.objective, sm_tolerance=sm_tol, min_margin=min_margin,
                        isolated_margin=isolated_margin, min_gain_us=args.min_gain_us, placement=args.placement,
                        exclude=exclude)
        settings = (f"objective={args.objective} min_margin={args.min_margin:g}%"
                    f" isolated_margin={args.isolated_margin:g}% min_gain={args.min_gain_us:g}us"
                    f" placement={args.placement}"
                    + (f" sm_tolerance={args.sm_tolerance:g}%" if args.objective == "sm" else ""))
        source = f"runs {', '.join(f'{r.id} ({r.kind} {r.started_at})' for r in runs)} of {args.db}"
        text = render(result.sections(), source=source, settings=settings, notes=result.notes)
        write_atomic(args.out, text)
        command = "ccltune " + shlex.join(["tune", "--db", str(args.db), "--out", str(args.out),
                                           "--objective", args.objective, "--placement", args.placement,
                                           *[a for p in args.exclude_failed for a in ("--exclude-failed", p)]])
        tune_run = store.begin_run("tune", command=command, args={k: v for k, v in vars(args).items() if k != "func"},
                                   env={"ccltune_version": __version__,
                                        "platform": "; ".join(map(describe_platform, result.sections()))})
        store.add_artifact(tune_run, "rules", text)
        summary = _report(result)
        store.finish_run(tune_run, "complete", {"source_runs": [r.id for r in runs], "groups": summary})
    n_rules = sum(len(g.rules) for g in result.groups)
    print(f"# wrote {n_rules} rules in {len(result.sections())} platform sections to {args.out}"
          f" (stored as artifact 'rules' of run {tune_run})")
    print(f"# {'group':<44} {'rules':>5} {'capture_%':>9} slower_sizes")
    for key, s in summary.items():
        cap = "-" if s["capture"] is None else f"{100 * s['capture']:.1f}"
        print(f"  {key:<44} {s['rules']:>5} {cap:>9} {','.join(map(str, s['slower_sizes'])) or 'none'}")
    for note in result.notes:
        print(f"# note: {note}", file=sys.stderr)
    return 0


def _report(result: Derivation) -> dict[str, dict]:
    out = {}
    for g in result.groups:
        rep = account_gain(g)
        out[str(g.key)] = {"rules": len(g.rules), "capture": rep.capture, "slower_sizes": rep.slower_sizes}
    return out
