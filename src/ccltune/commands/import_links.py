"""``import transferbench FILE`` and ``import nvbandwidth FILE``: another tool's link matrix stored as a
``links`` run, read back by ``ccltune links --run N`` and ``ccltune report`` as a measured one (the readers:
``ccltune.diagnose.parsers``)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ccltune._version import __version__
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option
from ccltune.diagnose.checks import linkmath
from ccltune.diagnose.findings import format_findings
from ccltune.diagnose.parsers import nvbandwidth, transferbench
from ccltune.diagnose.parsers.linkimport import ImportedLinks
from ccltune.environment import platform_name
from ccltune.errors import UsageError
from ccltune.inputs import read_input_text
from ccltune.status import RunStatus
from ccltune.store import DEFAULT_DB, Run, Store

# the tools whose link matrices are read: name -> its reader
READERS: dict[str, Callable[[str, str], ImportedLinks]] = {
    "transferbench": transferbench.parse,
    "nvbandwidth": nvbandwidth.parse,
}


@dataclass(frozen=True)
class ImportLinksOptions:
    """``ccltune import transferbench|nvbandwidth``'s options: ``source`` the tool (the CLI's sub-action),
    ``file`` its output, what the output may not say, and the slowest-link check's threshold (a fraction)."""

    source: str = option(positional=True, choices=tuple(READERS))
    file: str = option(positional=True, help="the tool's output file")
    db: str = option(DEFAULT_DB, flag="--db", help="results database")
    gpu: str | None = option(None, flag="--gpu",
                             help="GPU model, when the output does not name it (e.g. 'AMD Instinct MI300X')")
    host: str | None = option(None, flag="--host",
                              help="the host the output was measured on, when the output does not name it (default: none, "
                                   "and the run's host is recorded as unknown: the report then says 'host unknown')")
    threshold: float = option(0.8, flag="--threshold", help="flag links below this fraction of their median")


@dataclass
class LinksImportResult:
    """The links run one import stored, read back from ``db``: ``run`` (its record; ``summary`` holds the
    link statistics), ``links`` (one dict per link: src, dst, method, direction, size_bytes, bandwidth_gbps,
    latency_us, note) and ``findings`` (the slowest-link checks: name, status, evidence, fix, value, data)."""

    run: Run
    links: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    db: str

    @property
    def run_id(self) -> int:
        return self.run.id

    @classmethod
    def read(cls, db: str, run_id: int) -> LinksImportResult:
        with Store(db, readonly=True) as st:
            return cls(st.run(run_id), st.links(run_id), st.findings(run_id), db)


def run_import_links(o: ImportLinksOptions, console: Console = Console()) -> LinksImportResult:
    """Parse ``o.file`` (bad input stores nothing), store it as a links run with its slowest-link findings and
    the output itself (artifact ``<source>.txt``), say what was stored to ``console``; return the run."""
    check_outputs(o)
    if not 0 < o.threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {o.threshold}")
    text = read_input_text(o.file, "FILE")
    found = READERS[o.source](text, o.file)  # parsed before the database is opened: bad input stores nothing
    if o.host is not None and not o.host.strip():
        raise UsageError("--host must name a host, got an empty string")
    if o.host and found.host and o.host != found.host:
        raise UsageError(f"--host {o.host!r} disagrees with the host {o.file!r} names ({found.host!r})")
    host = found.host or o.host
    names = found.gpu_names or ([o.gpu] * found.n_gpus if o.gpu else [])
    gpus = [{"index": i, "name": n} for i, n in enumerate(names)]
    env: dict[str, Any] = {"ccltune_version": __version__, "world_size": found.n_gpus, "n_nodes": 1, "gpus": gpus,
                           "host": host, "platform": platform_name(gpus, found.n_gpus, 1) if gpus else None,
                           "source": found.tool, "tool_version": found.version,
                           "driver_version": found.driver_version, "cuda_version": found.cuda_version,
                           "files": [str(Path(o.file).resolve())]}
    env["command"] = "ccltune " + shlex.join(["import", o.source, o.file, "--db", str(o.db)]
                                             + (["--gpu", o.gpu] if o.gpu else [])
                                             + (["--host", o.host] if o.host else []))
    summary, findings = linkmath.analyze_stored(found.rows, found.summary(), threshold=o.threshold)
    with Store(o.db) as store:
        run_id = store.begin_run("links", command=env["command"], env=env, engine=found.tool,
                                 args=dataclasses.asdict(o))
        store.add_links(run_id, found.rows)
        store.add_findings(run_id, [f.to_record() for f in findings])
        store.add_artifact(run_id, f"{o.source}.txt", text)
        store.finish_run(run_id, RunStatus.COMPLETE, summary)
    console.say(f"# run {run_id} (links, imported from {found.tool} {found.version or ''}".rstrip() + f") in {o.db}: "
                f"{found.n_gpus} GPUs on {host or 'host unknown (give --host)'}, {len(found.rows)} links, "
                f"tests {', '.join(found.tests)}")
    for method, info in found.method_info.items():
        console.say(f"#   {method}: {json.dumps(info, sort_keys=True)}")
    for note in found.notes:
        console.say(f"# note: {note}")
    console.say(format_findings(findings, title="slowest-link checks"))
    console.say(f"# show it: ccltune links --run {run_id} --db {o.db}")
    return LinksImportResult.read(o.db, run_id)
