"""``runs``: the runs of a results database, one line each (what the Python API's ``Database.runs`` returns)."""

from __future__ import annotations

from dataclasses import dataclass

from ccltune.commands.common import Console
from ccltune.commands.options import option
from ccltune.errors import unknown_name
from ccltune.store import DEFAULT_DB, RUN_KINDS, Run, Store


@dataclass(frozen=True)
class RunsOptions:
    """``ccltune runs``'s options: the database, and one kind of run to list (None: every run)."""

    kind: str | None = option(None, flag="--kind", help="only runs of this kind (bench, sweep, validate, links, ...)")
    db: str = option(DEFAULT_DB, flag="--db", help="results database (default: %(default)s)")


@dataclass(frozen=True)
class RunsListing:
    """The runs listed, oldest first, and ``rows``: run id -> measurements stored (runs without any left out)."""

    runs: list[Run]
    rows: dict[int, int]


def run_runs(o: RunsOptions, console: Console = Console()) -> RunsListing:
    """Read the runs (of ``o.kind``) and say their table to ``console``."""
    if o.kind is not None and o.kind not in RUN_KINDS:
        raise unknown_name("run kind", o.kind, RUN_KINDS, "--kind")
    with Store(o.db, readonly=True) as st:
        runs = st.runs(o.kind)
        counts = st.row_counts()
    console.say(f"# {'id':>4}  {'kind':<9} {'status':<11} {'started':<24} {'rows':>6}  {'platform':<28} command")
    for r in runs:
        console.say(f"  {r.id:>4}  {r.kind:<9} {r.status:<11} {r.started_at:<24} {counts.get(r.id, 0):>6}  "
                    f"{(r.platform or '-'):<28} {r.command}")
    for r in runs:
        if r.note:
            console.say(f"# run {r.id} {r.status}: {r.note}")
    if not runs:
        console.say(f"# no runs in {o.db}")
    return RunsListing(runs, {r.id: counts[r.id] for r in runs if r.id in counts})
