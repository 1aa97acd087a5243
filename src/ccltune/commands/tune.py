"""``tune``: derive tuner rules from the sweep and import runs of a results database and write the
plugin's rule file (atomically); the derivation itself is ``ccltune.tune.derive``."""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass

from ccltune._version import __version__
from ccltune.commands.common import Console, check_outputs, parse_run_ids
from ccltune.commands.options import option
from ccltune.commands.results import TuneResult
from ccltune.errors import UsageError
from ccltune.files import printable, read_text, shown
from ccltune.inputs import load_json
from ccltune.rules import write_atomic
from ccltune.status import RunStatus, Verdict
from ccltune.store import DEFAULT_DB, Run, Store
from ccltune.tune import loadcmp, weighted
from ccltune.tune.derive import ISOLATED_MARGIN, MIN_GAIN_US, OBJECTIVES, PLACEMENTS, Derivation, account_gain, derive
from ccltune.tune.emit import describe_platform, render
from ccltune.tune.source import finished_sources, source_rows, unfinished_note
from ccltune.workload import model as wl_model


@dataclass(frozen=True)
class TuneOptions:
    """``ccltune tune``'s options (``ccltune tune --help`` says what each means). Percentages in percent."""

    out: str = option(flag="--out", help="rule file to write (replaced whole, atomically)")
    db: str = option(DEFAULT_DB, flag="--db", help="results database")
    runs: str | None = option(None, flag="--runs", comma=True,
                              help="run ids to use, e.g. '3,5-7' (default: every sweep and import run)")
    objective: str = option("time", flag="--objective", choices=OBJECTIVES,
                            help="time: fastest configuration; sm: fewest channels within --sm-tolerance of the fastest")
    sm_tolerance: float = option(2.0, flag="--sm-tolerance",
                                 help="with --objective sm: how much slower than the fastest a configuration may be (percent)")
    min_margin: float = option(2.0, flag="--min-margin",
                               help="smallest win over the default that makes a rule, even when the noise is lower (percent)")
    isolated_margin: float = option(100 * ISOLATED_MARGIN, flag="--isolated-margin",
                                    help="smallest win that makes a rule at a size where the configuration does not also beat the"
                                         " default at a neighbouring measured size (percent; see docs/tuning.md)")
    min_gain_us: float = option(MIN_GAIN_US, flag="--min-gain-us",
                                help="least time a win must save per call, whatever the percentages (latency-bound sizes)")
    placement: str = option("out-of-place", flag="--placement", choices=PLACEMENTS,
                            help="which buffers' measurements to use")
    exclude_failed: tuple[str, ...] = option((), flag="--exclude-failed", repeat=True,
                                             help="no rule at the sizes that failed in this `ccltune validate --json` verdict (NCCL "
                                                  "decides there); repeatable")
    workload: str | None = option(None, flag="--workload",
                                  help="judge the rules by this workload (`ccltune workload import`): rules only at its exact "
                                       "sizes, weighted by its calls; prints the predicted communication time per step "
                                       "(docs/workload.md)")
    min_share: float = option(0.1, flag="--min-share",
                              help="with --workload: drop a rule that saves less than this share of the predicted default "
                                   "communication time per step (percent)")
    under_load: int | None = option(None, flag="--under-load",
                                    help="derive from the runs swept with --under-load M (default: the idle runs only); when idle "
                                         "runs are there too, print where the winners differ")


def failed_sizes(paths: tuple[str, ...] | list[str]) -> list[tuple[str, int, int, int]]:
    """(collective, n_ranks, n_nodes, size_bytes) of every size that FAILed in these verdicts."""
    out: list[tuple[str, int, int, int]] = []
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


@dataclass
class Derived:
    """What ``tune`` derives from a results database before it writes anything (:func:`derivation`): the runs
    used, the derivation, the workload's plans (``--workload``), the rules by platform section, the notes, and
    the notes about the runs (left out, under load)."""

    runs: list[Run]
    result: Derivation
    plans: list[weighted.WorkloadPlan] | None
    sections: dict
    notes: list[str]
    load_notes: list[str]

    @property
    def rules(self) -> list:
        return [r for rs in self.sections.values() for r in rs]


def derivation(o: TuneOptions, store: Store) -> Derived:
    """The rules ``ccltune tune`` derives with ``o`` from ``store`` (judged by ``o.workload`` when given), written
    nowhere: ``run_tune`` writes them, ``ccltune search --sweep-db`` takes them as the idle sweep's best."""
    min_margin = _percent(o.min_margin, "--min-margin")
    isolated_margin = _percent(o.isolated_margin, "--isolated-margin")
    if not 0 <= o.min_gain_us < 1e6:
        raise UsageError(f"--min-gain-us must be at least 0 and under 1000000 microseconds, got {o.min_gain_us:g}")
    sm_tol = _percent(o.sm_tolerance, "--sm-tolerance")
    exclude = failed_sizes(o.exclude_failed)

    def derived(rows: list[dict]) -> Derivation:
        return derive(rows, objective=o.objective, sm_tolerance=sm_tol, min_margin=min_margin,
                      isolated_margin=isolated_margin, min_gain_us=o.min_gain_us, placement=o.placement,
                      exclude=exclude)

    runs, rows, idle_rows, left_out, unfinished = _load_split(store, o)
    result = derived(rows)
    load_notes = (loadcmp.lines(*loadcmp.winner_changes(derived(idle_rows), result), o.under_load)
                  if idle_rows and o.under_load is not None else [])
    load_notes += _left_out_lines(o, left_out) + unfinished_note(unfinished, o.db)
    if o.workload:
        plans, sections, notes = _for_workload(o, result, rows)
        return Derived(runs, result, plans, sections, notes, load_notes)
    return Derived(runs, result, None, result.sections(), result.notes, load_notes)


def sweep_load(store: Store) -> int | None:
    """The load to tune from when none is asked: idle (None) when the database holds an idle sweep or import run,
    else the one matrix every run was swept under (``sweep --workload`` sweeps under load when the job is far
    slower than idle); with several matrices and no idle run, None (``_load_split`` then names them)."""
    loads = {(r.args or {}).get("under_load") for r in finished_sources(store)[0]}
    return next(iter(loads)) if len(loads) == 1 else None


def run_tune(o: TuneOptions, console: Console = Console()) -> TuneResult:
    """Derive, write ``o.out``, store a tune run with the rules as its artifact; its summary table and
    predictions go to ``console``."""
    check_outputs(o)
    with Store(o.db, create=False) as store:
        d = derivation(o, store)
        runs, result, plans, sections, notes, load_notes = d.runs, d.result, d.plans, d.sections, d.notes, d.load_notes
        settings = _settings(o)
        source = f"runs {', '.join(f'{r.id} ({r.kind} {r.started_at})' for r in runs)} of {o.db}"
        if o.workload:
            source += f", judged by workload {o.workload}"
            settings += f" min_share={o.min_share:g}%"
        text = render(sections, source=source, settings=settings, notes=notes)
        write_atomic(o.out, text)
        tune_run = store.begin_run("tune", command=_command_line(o), args=dataclasses.asdict(o),
                                   env={"ccltune_version": __version__,
                                        "platform": "; ".join(map(describe_platform, result.sections()))})
        store.add_artifact(tune_run, "rules", text)
        summary = _report(result)
        store.finish_run(tune_run, RunStatus.COMPLETE, {"source_runs": [r.id for r in runs], "groups": summary,
                                                **({"workload": o.workload, "predictions": [
                                                    weighted.summary(p) for p in plans]} if plans else {})})
    n_rules = sum(len(r) for r in sections.values())
    console.say(f"# wrote {n_rules} rules in {len(sections)} platform sections to {o.out}"
                f" (stored as artifact 'rules' of run {tune_run})")
    if load_notes:
        console.say("\n".join(load_notes))
    if plans is not None:
        for p in plans:
            console.say("\n".join(weighted.lines(p)))
    else:
        console.say(f"# {'group':<44} {'rules':>5} {'capture_%':>9} slower_sizes")
        for key, s in summary.items():
            cap = "-" if s["capture"] is None else f"{100 * s['capture']:.1f}"
            console.say(f"  {key:<44} {s['rules']:>5} {cap:>9} {','.join(map(str, s['slower_sizes'])) or 'none'}")
        for note in result.notes:
            console.warn(f"# note: {note}")
    return TuneResult.read(o.db, tune_run, rules_path=o.out, rules=text)


def _settings(o: TuneOptions) -> str:
    """The rule file's settings line: what the derivation was asked for."""
    return (f"objective={o.objective} min_margin={o.min_margin:g}%"
            f" isolated_margin={o.isolated_margin:g}% min_gain={o.min_gain_us:g}us"
            f" placement={o.placement}"
            + (f" sm_tolerance={o.sm_tolerance:g}%" if o.objective == "sm" else ""))


def _command_line(o: TuneOptions) -> str:
    """The stored run's command: the ``ccltune tune`` line that derives these rules again."""
    return "ccltune " + shlex.join(["tune", "--db", str(o.db), "--out", str(o.out),
                                    "--objective", o.objective, "--placement", o.placement,
                                    *[a for p in o.exclude_failed for a in ("--exclude-failed", p)],
                                    *(["--workload", o.workload, "--min-share", f"{o.min_share:g}"]
                                      if o.workload else [])])


def _load_split(store: Store, o: TuneOptions
                ) -> tuple[list[Run], list[dict], list[dict], dict[int, list[int]], list[Run]]:
    """(runs, rows) measured under ``--under-load`` (idle when not given), the idle rows to compare
    with when a load was asked for, and (an idle tune of every run) the ids of the runs under load it left
    out, by matrix. Runs of the other kind are left out, never mixed in."""
    unfinished: list[Run] = []
    if o.runs:
        candidates = [store.run(i) for i in store.runs_in(parse_run_ids(o.runs))]
    else:
        candidates, unfinished = finished_sources(store)
    loads = {r.id: (r.args or {}).get("under_load") for r in candidates}
    if not loads:
        return (*source_rows(store, None), [], {}, unfinished)  # says there is nothing to tune from
    mine = [i for i, m in loads.items() if m == o.under_load]
    if not mine:
        have = sorted({str(m) for m in loads.values() if m is not None})
        raise UsageError(f"--under-load {o.under_load}: no sweep or import run measured under that load"
                         + (f" (runs under load: matrix {', '.join(have)})" if have else " (no run under load)")
                         if o.under_load is not None else
                         "every run given was swept under load: pass --under-load M to tune from them")
    runs, rows = source_rows(store, mine)
    idle = [i for i, m in loads.items() if m is None]
    idle_rows = source_rows(store, idle)[1] if o.under_load is not None and idle else []
    left_out: dict[int, list[int]] = {}
    if o.under_load is None and not o.runs:
        for i, m in loads.items():
            if m is not None:
                left_out.setdefault(m, []).append(i)
    return runs, rows, idle_rows, left_out, unfinished


def _left_out_lines(o: TuneOptions, left_out: dict[int, list[int]]) -> list[str]:
    """The runs under load an idle tune left out (``_load_split``), named with the line that tunes from them:
    `sweep --workload` sweeps under load by default when the job is far slower than idle (found on 4 x H200:
    a user's tune read the idle run and never the sweep made for the job)."""
    return [f"# note: run(s) {', '.join(map(str, ids))} of {o.db} were swept under load (matrix {m}) and are left "
            f"out: this tune is from idle runs; `ccltune tune --db {o.db} --under-load {m}"
            + (f" --workload {o.workload}" if o.workload else "") + "` tunes from them"
            for m, ids in sorted(left_out.items())]


def _for_workload(o: TuneOptions, result: Derivation, rows: list[dict]
                  ) -> tuple[list[weighted.WorkloadPlan], dict, list[str]]:
    """The rules and predictions judged by ``--workload`` (docs/workload.md)."""
    assert o.workload is not None
    wl = wl_model.load(o.workload)
    dtypes: dict[tuple[str, str, int, int, int], set[str]] = {}
    for r in rows:
        dtypes.setdefault((r["gpu"], r["collective"], int(r["n_ranks"]), int(r.get("n_nodes") or 1),
                           int(r["size_bytes"])), set()).add(r.get("dtype") or "")
    plans = weighted.plan(wl, result, min_share=_percent(o.min_share, "--min-share"), dtypes=dtypes,
                          under_load=o.under_load is not None)
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
