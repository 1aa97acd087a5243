"""What ``links``, ``topo``, ``doctor`` and ``check`` share beneath both front ends: their ``--db`` and
``--json`` options (``DiagnoseOptions``), what each returns (``Diagnosis`` and its kinds: the findings,
their verdict, the record ``--json`` writes, the run the call stored) and how each keeps its result
(``keep``: the JSON file, then the run in the results database)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ccltune.commands.options import option
from ccltune.diagnose.findings import Finding, exit_code, overall
from ccltune.diagnose.probes.topo import Topology
from ccltune.diagnose.record import record_run, write_json
from ccltune.status import Verdict
from ccltune.store import DEFAULT_DB


@dataclass(frozen=True, kw_only=True)
class DiagnoseOptions:
    """The options every diagnose command takes (``cli._common.add_output_flags``): the results database
    the run is recorded in, and a JSON file for the same record (the API's keyword ``json``)."""

    db: str = option(DEFAULT_DB, flag="--db", help="results database to record the run in (default: %(default)s)")
    json_path: str | None = option(None, flag="--json", keyword="json", help="also write the results as JSON to PATH")


@dataclass
class Diagnosis:
    """What a diagnose command found: ``findings`` (one ``ccltune.diagnose.findings.Finding`` per check:
    ``name``, ``status``, ``evidence``, ``fix``, ``value``, ``data``), ``record`` (what ``--json`` writes,
    as a dict), ``run_id`` (the run this call stored in ``db``, from the store itself; None when it stored
    none), ``json_path`` (the JSON file written, None when none was asked for). A FAIL is returned, not
    raised: it is the answer; ``exit_code`` is what the command line exits with for it."""

    findings: list[Finding]
    record: dict[str, Any]
    db: str
    run_id: int | None = None
    json_path: str | None = None

    @property
    def status(self) -> Verdict:
        """The worst verdict of the findings (PASS, WARN, FAIL, ERROR; WAIVED when all were, or none ran)."""
        return overall(self.findings)

    @property
    def exit_code(self) -> int:
        """1 when a finding FAILed or ERRORed, else 0 (WARN and WAIVED do not fail CI)."""
        return exit_code(self.findings)

    def finding(self, name: str) -> Finding | None:
        """The finding of check ``name`` (``links:ce/uni``, ``transport``, ...), or None when none ran."""
        return next((f for f in self.findings if f.name == name), None)


@dataclass
class LinksResult(Diagnosis):
    """``links``: the measured (or, with ``run``, the stored) link matrix, its analysis and checks."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One dict per (src, dst, method, direction): ``bandwidth_gbps`` or ``latency_us``, ``size_bytes``."""
        return list(self.record.get("rows") or [])

    @property
    def summary(self) -> dict[str, Any]:
        """Per series the per-GPU bounds and ring ceiling, ``ring_ceiling_gbps`` for the node, timings."""
        return dict(self.record.get("summary") or {})


@dataclass
class TopoResult(Diagnosis):
    """``topo``: ``topology`` (``ccltune.diagnose.probes.topo.Topology``: ``gpus``, ``links``, ``source``)."""

    topology: Topology | None = None


@dataclass
class CheckResult(Diagnosis):
    """``check``: ``profile`` (the name of the profile judged by; None when nothing was judged), ``how``
    (how the figures were taken), ``junit_path`` (the JUnit file written), ``links_run_id`` (the links run
    the call measured and stored to derive its gate, None when it measured none), ``profiles`` (with
    ``list_profiles``: the built-in profiles' names, and nothing judged)."""

    profile: str | None = None
    how: dict[str, Any] = field(default_factory=dict)
    junit_path: str | None = None
    links_run_id: int | None = None
    profiles: list[str] = field(default_factory=list)


def keep(o: DiagnoseOptions, kind: str, record: dict[str, Any], findings: Iterable[Finding], *,
         env: Mapping[str, Any], artifacts: Mapping[str, str] | None = None, summary: Mapping[str, Any] | None = None,
         links: Iterable[Mapping[str, Any]] = ()) -> int:
    """Write ``record`` to ``--json`` (whole, atomically) when asked, then store the run of ``kind`` with the
    options as its arguments; returns the run's id."""
    if o.json_path:
        write_json(o.json_path, record)
    return record_run(o.db, kind, env=env, args=dataclasses.asdict(o), findings=findings, links=links,
                      artifacts=artifacts, summary=summary)
