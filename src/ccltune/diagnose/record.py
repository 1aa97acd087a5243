"""Where diagnose results go besides the terminal: the results database and a JSON file.

Shared by ``links``, ``topo``, ``doctor`` and ``check`` so each records its run the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ccltune.diagnose.findings import Finding
from ccltune.files import write_text
from ccltune.status import RunStatus
from ccltune.store import Store


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON, whole and atomically (temp file + rename)."""
    write_text(path, json.dumps(obj, indent=2, default=str) + "\n", flag="--json")


def record_run(db: str, kind: str, *, env: Mapping[str, Any], args: Mapping[str, Any],
               findings: Iterable[Finding] = (), links: Iterable[Mapping[str, Any]] = (),
               artifacts: Mapping[str, str] | None = None, summary: Mapping[str, Any] | None = None) -> int:
    """Open a run of ``kind`` in ``db`` with ``args`` (the command's options) as its arguments, write its rows,
    close it as complete. Returns its id."""
    params = dict(args)
    with Store(db) as store:
        run_id = store.begin_run(kind, command=env.get("command") or f"ccltune {kind}", env=env, args=params,
                                 engine=env.get("engine"))
        store.add_findings(run_id, [f.to_record() for f in findings])
        store.add_links(run_id, list(links))
        for name, content in (artifacts or {}).items():
            store.add_artifact(run_id, name, content)
        store.finish_run(run_id, RunStatus.COMPLETE, summary)
    return run_id
