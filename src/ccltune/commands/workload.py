"""``workload import`` and ``workload show``: a job's collectives read from capture files, COLL logs and
traces into one workload file, and its table (the readers: ``ccltune.workload``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ccltune._version import __version__
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option
from ccltune.files import printable, write_text
from ccltune.workload import estimate, importer, model, show


@dataclass(frozen=True)
class WorkloadImportOptions:
    """``ccltune workload import``'s options: the files read, the workload file written."""

    files: tuple[str, ...] = option(positional=True)
    out: str = option(flag="--out", help="workload file to write (replaced whole)")
    steps: int | None = option(None, flag="--steps",
                               help="training steps the files cover (default: the traces' ProfilerStep count, else unknown; "
                                    "needed when files that know their steps (traces) are mixed with files that do not "
                                    "(COLL logs, captures) or disagree)")


@dataclass(frozen=True)
class WorkloadShowOptions:
    """``ccltune workload show``'s options: the workload file, and a results database to estimate from."""

    workload: str = option(positional=True)
    db: str | None = option(None, flag="--db",
                            help="a results database: each entry's time per call under NCCL's default there, and per step "
                                 "(default: none, shares of bytes only)")


def run_workload_import(o: WorkloadImportOptions, console: Console = Console()) -> model.Workload:
    """Read ``o.files``, write the workload to ``o.out`` (whole, atomically), say its table; return it."""
    check_outputs(o)
    wl = importer.import_files(list(o.files), steps=o.steps)
    for w in wl.warnings:
        console.warn(f"ccltune: warning: {w}")
    header = {"tool": f"ccltune {__version__}", "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    where = f"workload import of {printable(', '.join(o.files), 120)}"
    write_text(o.out, model.to_json(wl, header, where), flag="--out")
    console.say(f"# wrote {o.out}: {len(wl.entries)} entries, {sum(e.calls for e in wl.entries)} calls per rank "
                f"from {len(wl.sources)} source rank(s)")
    for line in show.table(wl):
        console.say(line)
    return wl


def run_workload_show(o: WorkloadShowOptions, console: Console = Console()) -> model.Workload:
    """Say the workload's table (with ``o.db``: the estimated time per step); return the workload."""
    wl = model.load(o.workload)
    est = estimate.idle_estimates(o.db, wl) if o.db is not None else None
    for line in show.table(wl, est, o.db):
        console.say(line)
    return wl
