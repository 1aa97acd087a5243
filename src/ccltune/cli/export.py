"""ccltune export RUN: one run's environment and rows as JSON or CSV (stdout or --out)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import fields
from typing import Any

from ccltune.cli._common import add_db
from ccltune.errors import UsageError
from ccltune.files import write_text
from ccltune.store import Measurement, Store


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export one run as JSON or CSV",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("run", help="run id (see ccltune runs), or 'latest'")
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("--out", default=None, metavar="PATH", help="file to write (default: stdout)")
    add_db(p)
    p.set_defaults(func=main)


def render(st: Store, run_id: int, fmt: str) -> str:
    run = st.run(run_id)
    rows = st.measurements(run_id)
    if fmt == "json":
        doc = {"run": {k: v for k, v in vars(run).items() if k != "env"}, "env": run.env,
               "records": [m.to_record() for m in rows], "links": st.links(run_id),
               "findings": st.findings(run_id)}
        return json.dumps(doc, indent=1, default=str) + "\n"
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = [f.name for f in fields(Measurement)]
    w.writerow(["run_id", *cols])
    for m in rows:
        w.writerow([run_id, *(getattr(m, c) for c in cols)])
    return buf.getvalue()


def main(args: argparse.Namespace) -> int:
    with Store(args.db, readonly=True) as st:
        if args.run.lower() == "latest":
            run = st.latest_run()
            if run is None:
                raise UsageError(f"{args.db} has no runs")
            run_id = run.id
        else:
            try:
                run_id = int(args.run)
            except ValueError:
                raise UsageError(f"RUN must be a run id or 'latest', got {args.run!r}") from None
        text = render(st, run_id, args.format)
    if args.out:
        write_text(args.out, text, flag="--out")
    else:
        sys.stdout.write(text)
    return 0
