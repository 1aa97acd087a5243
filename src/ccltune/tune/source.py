"""Where ``ccltune tune`` (and ``validate --best-from``) take their measurements from: the sweep
and import runs of a results database, each row tagged with its run's GPU model and, on AMD GPUs,
its partition modes (``partition``, ``nps``: the run's recorded compute and memory partition)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ccltune.errors import DataError
from ccltune.rules import MEMORY_PARTITIONS, PARTITIONS
from ccltune.status import RunStatus
from ccltune.store import Store
from ccltune.tune.derive import gpu_model

SOURCE_KINDS = ("sweep", "import")
# runs that never finished their work: a command killed or stopped by a full disk (abandoned: its process is
# gone, the run still stored as running), or one that ended in failure. Their rows are partial: tune and
# validate --best-from leave them out unless --runs names them
UNFINISHED = (RunStatus.ABANDONED, RunStatus.FAILED)


def finished_sources(store: Store) -> tuple[list[Any], list[Any]]:
    """(the sweep and import runs to tune from by default, those left out as unfinished)."""
    runs = [r for r in store.runs() if r.kind in SOURCE_KINDS]
    return [r for r in runs if r.status not in UNFINISHED], [r for r in runs if r.status in UNFINISHED]


def unfinished_note(left: list[Any], db: str) -> list[str]:
    """The line saying which unfinished runs were left out, and how to use them anyway."""
    if not left:
        return []
    ids = ", ".join(f"{r.id} ({r.status})" for r in left)
    return [f"# note: run(s) {ids} of {db} never finished (killed, a full disk, or failed): their rows are partial "
            f"and left out; `--runs {','.join(str(r.id) for r in left)}` uses them anyway"]


def source_rows(store: Store, run_ids: Iterable[int] | None = None, where: str = "") -> tuple[list[Any], list[dict]]:
    """(runs, rows with their GPU model) of the given runs, else of every sweep and import run."""
    runs, left = ([store.run(i) for i in run_ids], []) if run_ids is not None else finished_sources(store)
    if not runs:
        unfinished = (f" that finished (run(s) {', '.join(f'{r.id} ({r.status})' for r in left)} never did: "
                      f"--runs {','.join(str(r.id) for r in left)} uses them anyway)" if left else "")
        raise DataError(f"{where or str(store.path)!r} has no sweep or import runs{unfinished}; run `ccltune sweep` "
                        "or `ccltune import` first")
    rows: list[dict[str, Any]] = []
    for r in runs:
        try:
            gpu = gpu_model(r.env, r.platform)
        except DataError as exc:
            raise DataError(f"run {r.id} ({r.kind}): {exc}") from None
        modes = partition_modes(r.env, f"run {r.id} ({r.kind})")
        rows.extend({**m, "gpu": gpu, **modes} for m in store.measurement_rows([r.id]))
    if not rows:
        raise DataError(f"runs {', '.join(str(r.id) for r in runs)} hold no measurements")
    return runs, rows


def partition_modes(env: Any, where: str) -> dict[str, str | None]:
    """The run's AMD partition modes as a rule file's platform keys: ``partition`` from the recorded
    ``compute_partition``, ``nps`` from ``memory_partition`` (None where the run recorded none). A value
    the plugin's platform line cannot hold is a DataError naming the run: its rules would never apply."""
    out: dict[str, str | None] = {}
    for key, recorded, valid in (("partition", "compute_partition", PARTITIONS),
                                 ("nps", "memory_partition", MEMORY_PARTITIONS)):
        value = env.get(recorded) if isinstance(env, dict) else None
        if value is not None and str(value).strip().upper() not in valid:
            raise DataError(f"{where}: recorded {recorded} {value!r} is not one of {', '.join(valid)}; "
                            "a rule section cannot name it")
        out[key] = str(value).strip().upper() if value is not None else None
    return out
