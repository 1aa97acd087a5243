"""``export RUN``: one run's environment and rows as JSON or CSV, written to a file or said whole."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, fields

from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option
from ccltune.errors import UsageError
from ccltune.files import write_text
from ccltune.store import DEFAULT_DB, Measurement, Store

FORMATS = ("json", "csv")


@dataclass(frozen=True)
class ExportOptions:
    """``ccltune export``'s options: ``run`` a run id or 'latest' (the newest run with measurements or links),
    the format, the file to write (None: the text goes to the console) and the database."""

    run: str = option(positional=True,
                      help="run id (see ccltune runs), or 'latest' (the newest run with measurements or links)")
    format: str = option("json", flag="--format", choices=FORMATS, help="what to write the run as")
    out: str | None = option(None, flag="--out", help="file to write (default: stdout)")
    db: str = option(DEFAULT_DB, flag="--db", help="results database (default: %(default)s)")


@dataclass(frozen=True)
class Exported:
    """What one export made: the run's id (``latest`` resolved), the format, the document's ``text``, and
    ``path``, the file written (None when the text went to the console)."""

    run_id: int
    format: str
    text: str
    path: str | None


def render(st: Store, run_id: int, fmt: str) -> str:
    """Run ``run_id`` of ``st`` as a JSON document (the run, its env, records, links and findings) or a CSV
    table of its measurements, one column per Measurement field after ``run_id``."""
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


def _run_id(st: Store, o: ExportOptions) -> int:
    if o.run.lower() == "latest":
        # the newest run with rows to export: a check or doctor run stores findings only
        latest = st.latest_with_rows()
        if latest is None:
            raise UsageError(f"{o.db} has no run with measurements or links to export")
        return latest
    try:
        return int(o.run)
    except ValueError:
        raise UsageError(f"RUN must be a run id or 'latest', got {o.run!r}") from None


def run_export(o: ExportOptions, console: Console = Console()) -> Exported:
    """Render the run; write it to ``o.out`` (whole, atomically), else give the text to ``console`` as it is
    (the command line's stdout; the Python API returns it in the result and prints nothing)."""
    check_outputs(o)
    if o.format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {o.format!r}")
    with Store(o.db, readonly=True) as st:
        run_id = _run_id(st, o)
        text = render(st, run_id, o.format)
    if o.out:
        write_text(o.out, text, flag="--out")
    elif console.out is not None:  # the document byte for byte: CSV's lines end in \r\n, JSON's in \n
        console.out.write(text)
        console.out.flush()
    return Exported(run_id, o.format, text, o.out or None)
