"""Where ``ccltune tune`` (and ``validate --best-from``) take their measurements from: the sweep
and import runs of a results database, each row tagged with its run's GPU model and, on AMD GPUs,
its partition modes (``partition``, ``nps``: the run's recorded compute and memory partition)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ccltune.errors import DataError
from ccltune.rules import MEMORY_PARTITIONS, PARTITIONS
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
