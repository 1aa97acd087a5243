"""Where ``ccltune tune`` (and ``validate --best-from``) take their measurements from: the sweep
and import runs of a results database, each row tagged with its run's GPU model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ccltune.errors import DataError
from ccltune.store import Store
from ccltune.tune.derive import gpu_model

SOURCE_KINDS = ("sweep", "import")


def source_rows(store: Store, run_ids: Iterable[int] | None = None, where: str = "") -> tuple[list[Any], list[dict]]:
    """(runs, rows with their GPU model) of the given runs, else of every sweep and import run."""
    runs = ([store.run(i) for i in run_ids] if run_ids is not None
            else [r for r in store.runs() if r.kind in SOURCE_KINDS])
    if not runs:
        raise DataError(f"{where or str(store.path)!r} has no sweep or import runs; run `ccltune sweep` or "
                        "`ccltune import` first")
    rows = []
    for r in runs:
        try:
            gpu = gpu_model(r.env, r.platform)
        except DataError as exc:
            raise DataError(f"run {r.id} ({r.kind}): {exc}") from None
        rows.extend({**m, "gpu": gpu} for m in store.measurement_rows([r.id]))
    if not rows:
        raise DataError(f"runs {', '.join(str(r.id) for r in runs)} hold no measurements")
    return runs, rows
