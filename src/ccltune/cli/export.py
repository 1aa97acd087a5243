"""ccltune export RUN: one run's environment and rows as JSON or CSV (stdout or --out)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import fields
from typing import Any

from ccltune.cli._common import DefaultsFormatter
from ccltune.cli._common import add_db
from ccltune.errors import UsageError
from ccltune.files import write_text
from ccltune.store import Measurement, Store


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export one run as JSON or CSV",
                       formatter_class=DefaultsFormatter)
    p.add_argument("run", help="run id (see ccltune runs), or 'latest' (the newest run with measurements or links)")
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
        w.writerow([run_id, *(_cell(getattr(m, c)) for c in cols)])
    return buf.getvalue()


def _cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: a string it would run as a formula (=, +, -, @, or a tab or
    carriage return first: OWASP's CSV injection list) gets a leading apostrophe."""
    return f"'{value}" if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def main(args: argparse.Namespace) -> int:
    with Store(args.db, readonly=True) as st:
        if args.run.lower() == "latest":
            # the newest run with rows to export: a check or doctor run stores findings only
            row = st.conn.execute("SELECT MAX(run_id) FROM (SELECT run_id FROM measurements UNION "
                                  "SELECT run_id FROM links)").fetchone()
            if row is None or row[0] is None:
                raise UsageError(f"{args.db} has no run with measurements or links to export")
            run_id = int(row[0])
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
