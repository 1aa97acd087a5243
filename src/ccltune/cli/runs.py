"""ccltune runs: list the runs in the results database."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune.cli._common import add_db
from ccltune.errors import unknown_name
from ccltune.store import RUN_KINDS, Store


def register(sub: Any) -> None:
    p = sub.add_parser("runs", help="list runs in the results database",
                       formatter_class=DefaultsFormatter)
    p.add_argument("--kind", default=None, help="only runs of this kind (bench, sweep, validate, links, ...)")
    add_db(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.kind is not None and args.kind not in RUN_KINDS:
        raise unknown_name("run kind", args.kind, RUN_KINDS, "--kind")
    with Store(args.db, readonly=True) as st:
        runs = st.runs(args.kind)
        counts = dict(st.conn.execute("SELECT run_id, COUNT(*) FROM measurements GROUP BY run_id").fetchall())
    print(f"# {'id':>4}  {'kind':<9} {'status':<11} {'started':<24} {'rows':>6}  {'platform':<28} command")
    for r in runs:
        print(f"  {r.id:>4}  {r.kind:<9} {r.status:<11} {r.started_at:<24} {counts.get(r.id, 0):>6}  "
              f"{(r.platform or '-'):<28} {r.command}")
    for r in runs:
        if r.note:
            print(f"# run {r.id} {r.status}: {r.note}")
    if not runs:
        print(f"# no runs in {args.db}")
    return 0
