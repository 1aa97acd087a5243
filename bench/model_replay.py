"""Replay `ccltune sweep --mode model` against exhaustive sweep data used as an oracle.

    python bench/model_replay.py DB [DB ...]

The H200 sweeps this was written against left the tree after commit da923a0; they stay in git
history (``git archive da923a0 bench/data | tar x``: bench/data/h200x4-sweep-allreduce.sqlite,
h200x2-sweep.sqlite, h200x4-sweep-ag-rs.sqlite and the later flows, docs/performance.md).

For every (database, collective, nRanks, nNodes) group of a sweep run whose sizes are complete,
the model-guided loop of ``ccltune sweep --mode model`` (:mod:`ccltune.tune.planner`) runs as the
sweep runs it, except that "measuring" a (size, configuration) point takes that point's rows
(every repetition, and the 'unavailable' row of a configuration NCCL refused) from the
exhaustive data::

    todo = plan_initial(sizes)
    while todo:
        gathered += oracle rows of todo's points
        todo = plan_refine(gathered, sizes)

Then ``derive`` (``ccltune tune``'s defaults: objective time, min_margin 2%, isolated_margin
10%, out-of-place) runs on (a) the exhaustive rows and (b) the gathered rows, and both rule sets
are matched (the plugin's first-match semantics, :func:`ccltune.rules.match`) at every measured
size: the decisions are equal when both select the same configuration or neither has a rule.

A point is one (size, configuration): what the sweep measures with ``--reps`` interleaved
repetitions; ``rows`` counts the stored rows (a refused configuration stores one row).
``model_points`` counts what the sweep would measure: a point asked for again (the default,
measured again beside candidates asked for at its size in a later round) counts again, though
the oracle has only one set of rows for it. The ratio is exhaustive points / model points.
``timed_ratio`` counts the timed points alone (:func:`exhaustive_timed` / ``Replay.timed``): a
configuration NCCL refuses times nothing, and both sweeps try it once, at the warm-up size.
``oracle_points`` (:func:`oracle_cost`) is a lower bound: what a search knowing in advance where
the exhaustive rules go would still measure; ``oracle_ratio`` is the best ratio any search could
reach on that data. ``capture`` (as ``ccltune tune`` reports it, :func:`ccltune.tune.derive.account_gain`): the
share of the saving available at the measured sizes that the exhaustive rules and the model's
rules capture, both judged on the exhaustive data. ``loss`` of a differing size is how much
slower (exhaustive medians) the model's selection is there than the exhaustive one's.

A group counts as complete when its run finished, when the run went on to a later collective
of its ``--collective`` list (a sweep measures one collective at a time), or when it holds
every size of the run's -b/-e/-f series; its configurations must also be the same at every
size. Other groups are listed as skipped.

Each database ends with an ``(all)`` row: the points of its whole sweep (every collective
together), which is what a sweep measures and what the issue's ">= 3x fewer measurements" counts;
the per-collective rows show where the savings are.

Exit status: 0 when every group's decisions are equal and every database's ``(all)`` ratio is
>= ``--min-ratio`` (3); 1 otherwise; 2 when no group could be replayed.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccltune.commconfig import CommConfig
from ccltune.errors import UsageError
from ccltune.rules import PlatformFacts, Query, RuleSet, match
from ccltune.sizes import format_size, parse_size, size_series
from ccltune.stats import median
from ccltune.store import Store
from ccltune.tune import planner
from ccltune.tune.derive import (
    ISOLATED_MARGIN,
    GroupResult,
    account_gain,
    candidate_of,
    derive,
    gpu_model,
    tunable,
)

Point = tuple[int, CommConfig]  # (size_bytes, configuration)


@dataclass
class Group:
    """One (collective, nRanks, nNodes) of one sweep run: its exhaustive rows (with 'gpu')."""

    db: str
    run_id: int
    collective: str
    n_ranks: int
    n_nodes: int
    rows: list[dict[str, Any]]

    @property
    def sizes(self) -> list[int]:
        return sorted({int(r["size_bytes"]) for r in self.rows})

    @property
    def oracle(self) -> dict[Point, list[dict[str, Any]]]:
        out: dict[Point, list[dict[str, Any]]] = defaultdict(list)
        for r in self.rows:
            out[(int(r["size_bytes"]), candidate_of(r))].append(r)
        return dict(out)


@dataclass
class Replay:
    points: set[Point]  # distinct (size, configuration) points measured
    rows: list[dict[str, Any]]
    rounds: int  # measuring rounds: plan_initial's, then one per non-empty plan_refine
    again: int = 0  # points asked for again (the default beside later candidates): measured twice in a sweep
    free: int = 0  # points of a configuration refused earlier in the collective: recorded, not tried

    refused_points: int = 0  # points whose configuration NCCL refused (no timing), first tries included

    @property
    def measured(self) -> int:
        """What a sweep measures: every point asked for, a point asked for again counting again, a
        refused configuration once."""
        return len(self.points) + self.again - self.free

    @property
    def timed(self) -> int:
        """The timed points alone: ``measured`` without the refused configurations' tries, which
        time nothing and are the same for an exhaustive sweep (each is tried once, at the
        collective's warm-up size)."""
        return len(self.points) + self.again - self.refused_points


@dataclass
class Comparison:
    sizes: list[int]
    exhaustive: dict[int, str]  # size -> selected configuration's label ('no rule')
    replayed: dict[int, str]
    loss: dict[int, float | None] = field(default_factory=dict)  # differing sizes only
    capture: tuple[float | None, float | None] = (None, None)  # exhaustive's and model's rules

    @property
    def differing(self) -> list[int]:
        return [s for s in self.sizes if self.exhaustive[s] != self.replayed[s]]


def load_groups(db: str | Path) -> tuple[list[Group], list[str]]:
    """The complete groups of every sweep run in ``db``, and why the others were skipped."""
    groups: list[Group] = []
    skipped: list[str] = []
    with Store(db, readonly=True) as store:
        for run in store.runs("sweep"):
            gpu = gpu_model(run.env, run.platform)
            by_key: dict[tuple[str, int, int], list[dict[str, Any]]] = defaultdict(list)
            for r in store.measurement_rows([run.id]):
                by_key[(r["collective"], int(r["n_ranks"]), int(r["n_nodes"] or 1))].append({**r, "gpu": gpu})
            order = list(run.args.get("collective") or [])
            series = _series(run.args)
            present = {k[0] for k in by_key}
            for key in sorted(by_key, key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k)):
                coll = key[0]
                later = coll in order and any(c in present for c in order[order.index(coll) + 1:])
                whole = series is not None and set(series) <= {int(r["size_bytes"]) for r in by_key[key]}
                g = Group(str(db), run.id, *key, rows=by_key[key])
                configs = defaultdict(set)
                for size, cand in g.oracle:
                    configs[size].add(cand)
                where = f"{Path(db).name} run {run.id} {coll} nranks={key[1]}"
                if run.status != "complete" and not later and not whole:
                    skipped.append(f"{where}: the run ({run.status}) stopped inside it ({len(g.sizes)} sizes measured)")
                elif len({frozenset(c) for c in configs.values()}) != 1:
                    skipped.append(f"{where}: configurations differ between sizes")
                else:
                    groups.append(g)
    return groups, skipped


def _series(args: Mapping[str, Any]) -> list[int] | None:
    """The sizes a sweep run asked for (-b/-e/-f), or None when its arguments do not say."""
    try:
        return size_series(parse_size(args["minbytes"]), parse_size(args["maxbytes"]),
                           factor=float(args.get("stepfactor") or 0), increment=int(args.get("stepbytes") or 0))
    except (KeyError, TypeError, ValueError, UsageError):
        return None


def replay(group: Group, *, initial: Callable[[Sequence[int]], Mapping[int, Any]] = planner.plan_initial,
           refine: Callable[..., Mapping[int, Any]] = planner.plan_refine, max_rounds: int = 100,
           **refine_opts: Any) -> Replay:
    """The model-guided sweep loop with the group's exhaustive rows as the measurements."""
    oracle = group.oracle
    sizes = group.sizes
    at_size: dict[int, list[CommConfig]] = defaultdict(list)
    for size, cand in sorted(oracle, key=lambda p: (p[0], not p[1].is_default, p[1].sort_key())):
        at_size[size].append(cand)
    points: set[Point] = set()
    rows: list[dict[str, Any]] = []
    todo: Mapping[int, Any] = initial(sizes)
    rounds = again = free = refused_points = 0
    refused: set[CommConfig] = set()
    while todo:
        rounds += 1
        if rounds > max_rounds:
            raise RuntimeError(f"{group.collective}: plan_refine still asks for sizes after {max_rounds} rounds")
        for size, want in todo.items():
            for cand in (at_size.get(size, []) if want is None else want):
                if (size, cand) not in oracle:
                    continue
                if (size, cand) in points:
                    again += 1  # the oracle has no second measurement: its rows are not added twice
                    continue
                points.add((size, cand))
                rows.extend(oracle[(size, cand)])
                if _refused(oracle[(size, cand)]):
                    refused_points += 1
                    if cand in refused:
                        free += 1  # the sweep records it 'unavailable' without trying it again
                    refused.add(cand)
        todo = refine(rows, sizes, **refine_opts)
    return Replay(points, rows, rounds, again, free, refused_points)


def _refused(rows: Sequence[Mapping[str, Any]]) -> bool:
    return not any(r["status"] == "ok" for r in rows)


def _swept(point: Point) -> bool:
    """Whether the exhaustive sweep measures this point today: not a candidate at a 0-byte size (data
    from before 2026-11-22 has them; the sweep now measures only NCCL's default and its twin there)."""
    return tunable(*point)


def exhaustive_cost(group: Group) -> int:
    """What the exhaustive sweep measures: every point with a timing, plus one attempt per
    configuration NCCL refused (the sweep does not try it again for that collective)."""
    return exhaustive_timed(group) + len({c for (_, c), rows in group.oracle.items() if _refused(rows)})


def exhaustive_timed(group: Group) -> int:
    """The exhaustive sweep's timed points: ``exhaustive_cost`` without the refused configurations' tries."""
    return sum(1 for p, rows in group.oracle.items() if _swept(p) and not _refused(rows))


def oracle_cost(group: Group, **derive_opts: Any) -> int:
    """A lower bound for any search that reaches the exhaustive decisions: the points it must measure
    even knowing in advance where the rules go. NCCL's default at every size; each configuration NCCL
    refused, once; and at each size where the exhaustive rules place one, every candidate that
    qualifies there (the fastest of them is the rule, so none may be left out) and the twin (it can
    bar them). What a real search spends beyond this is the cost of finding where the rules go."""
    (result,) = derive(group.rows, **derive_opts).groups
    refused = {c for (_, c), rows in group.oracle.items() if _refused(rows)}
    twins = {s for s, c in group.oracle if c.twin}
    at_rules = sum(len(d.qualifying) + (d.size_bytes in twins) for d in result.decisions if d.winner is not None)
    return len(group.sizes) + len(refused) + at_rules


def _selections(result: GroupResult, sizes: Iterable[int]) -> dict[int, str]:
    """size -> the configuration the group's rules select there ('no rule': NCCL decides)."""
    ruleset = RuleSet(list(result.rules))
    key = result.key
    out = {}
    for s in sizes:
        m = match(ruleset, Query(key.collective, s, key.n_ranks, key.n_nodes, platform=PlatformFacts(gpu=key.gpu)))
        out[s] = "no rule" if m.rule is None else CommConfig(m.algo, m.proto, m.channels or None).label
    return out


def compare(group: Group, replayed_rows: list[dict[str, Any]], **derive_opts: Any) -> Comparison:
    """Decisions of the rules derived from all rows vs from the replayed rows, at every size."""
    full = derive(group.rows, **derive_opts).groups
    part = derive(replayed_rows, **derive_opts).groups
    if len(full) != 1 or len(part) != 1:
        raise RuntimeError(f"{group.collective}: expected one derive group, got {len(full)} and {len(part)}")
    sizes = group.sizes
    cmp = Comparison(sizes, _selections(full[0], sizes), _selections(part[0], sizes))
    cmp.capture = (account_gain(full[0]).capture, account_gain(full[0], part[0].rules).capture)
    medians = {(s, c.label): median([float(r["time_us"]) for r in rs if r["status"] == "ok" and r["time_us"]])
               for (s, c), rs in group.oracle.items() if any(r["status"] == "ok" and r["time_us"] for r in rs)}
    for s in cmp.differing:
        ex, mo = (("default" if x == "no rule" else x) for x in (cmp.exhaustive[s], cmp.replayed[s]))
        a, b = medians.get((s, ex)), medians.get((s, mo))
        cmp.loss[s] = b / a - 1.0 if a and b else None
    return cmp


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dbs", nargs="+", help="ccltune results databases (exhaustive sweeps)")
    p.add_argument("--min-margin", type=float, default=2.0, metavar="PCT", help="as `ccltune tune --min-margin`")
    p.add_argument("--isolated-margin", type=float, default=100 * ISOLATED_MARGIN, metavar="PCT",
                   help="as `ccltune tune --isolated-margin`")
    p.add_argument("--min-ratio", type=float, default=3.0, help="fewest exhaustive/model points that passes")
    p.add_argument("--stride", type=int, default=None, help="plan_initial stride (default: the model's own)")
    args = p.parse_args(argv)
    opts = {"objective": "time", "min_margin": args.min_margin / 100, "isolated_margin": args.isolated_margin / 100}
    initial = planner.plan_initial if args.stride is None else (lambda s: planner.plan_initial(s, stride=args.stride))

    print(f"# model-guided sweep replayed against exhaustive data; derive: objective=time "
          f"min_margin={args.min_margin:g}% isolated_margin={args.isolated_margin:g}% placement=out-of-place")
    head = (f"{'db':<32} {'collective':<15} {'nranks':>6} {'sizes':>5} {'exh_points':>10} {'exh_rows':>8} "
            f"{'model_points':>12} {'model_rows':>10} {'rounds':>6} {'ratio':>6} {'decisions_equal':>15} "
            f"{'capture_exh_%':>13} {'capture_model_%':>15} {'oracle_points':>13} {'oracle_ratio':>12} "
            f"{'timed_ratio':>11}")
    print(head)
    bad, notes, n = False, [], 0
    for db in args.dbs:
        groups, skipped = load_groups(db)
        notes.extend(f"skipped {s}" for s in skipped)
        total = {"exh": 0, "model": 0, "exh_timed": 0, "model_timed": 0, "equal": 0, "sizes": 0}
        for g in groups:
            n += 1
            r = replay(g, initial=initial, min_margin=opts["min_margin"], isolated_margin=opts["isolated_margin"])
            c = compare(g, r.rows, **opts)
            exh = exhaustive_cost(g)
            oracle = oracle_cost(g, **opts)
            ratio = exh / r.measured
            equal = len(c.sizes) - len(c.differing)
            print(f"{Path(db).name:<32} {g.collective:<15} {g.n_ranks:>6} {len(g.sizes):>5} {exh:>10} "
                  f"{len(g.rows):>8} {r.measured:>12} {len(r.rows):>10} {r.rounds:>6} {ratio:>5.2f}x "
                  f"{f'{equal}/{len(c.sizes)}':>15} {_pct(c.capture[0]):>13} {_pct(c.capture[1]):>15} {oracle:>13} {exh / oracle:>11.2f}x"
                  f" {exhaustive_timed(g) / max(r.timed, 1):>10.2f}x")
            for s in c.differing:
                loss = c.loss[s]
                notes.append(f"differs {Path(db).name} {g.collective} nranks={g.n_ranks} at {format_size(s)}B: "
                             f"exhaustive {c.exhaustive[s]}, model {c.replayed[s]}"
                             + ("" if loss is None else f" (model's choice {100 * loss:+.1f}% time)"))
            bad |= bool(c.differing)
            for key, value in (("exh", exh), ("model", r.measured), ("exh_timed", exhaustive_timed(g)),
                               ("model_timed", r.timed), ("equal", equal), ("sizes", len(c.sizes))):
                total[key] += value
        if groups:  # the sweep's measurements: every collective of the database's sweep together
            ratio = total["exh"] / total["model"]
            timed = total["exh_timed"] / max(total["model_timed"], 1)
            decisions = f"{total['equal']}/{total['sizes']}"
            print(f"{Path(db).name:<32} {'(all)':<15} {'':>6} {'':>5} {total['exh']:>10} {'':>8} {total['model']:>12} "
                  f"{'':>10} {'':>6} {ratio:>5.2f}x {decisions:>15} {'':>13} {'':>15} {'':>13} {'':>12} {timed:>10.2f}x")
            bad |= ratio < args.min_ratio
    for note in notes:
        print(f"# {note}")
    if not n:
        print("# no complete group to replay", file=sys.stderr)
        return 2
    print(f"# {'FAIL' if bad else 'PASS'}: {n} groups; pass needs equal decisions at every size and, over each "
          f"database's whole sweep (the '(all)' rows), ratio >= {args.min_ratio:g}x")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
