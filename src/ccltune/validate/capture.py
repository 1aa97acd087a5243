"""How much of the available gain the rules capture, measured inside one validate run.

``ccltune validate RULES --best-from SWEEP_DB`` adds a third arm beside NCCL's default and the
rules: at every size where the sweep in SWEEP_DB found a candidate faster than NCCL's own choice
(the faster of the default and its A/A twin, by more than both points' noise), that candidate,
forced on its own communicator. The three are timed in the same interleaved rounds, so

    available(size) = 1 - t_best / t_default     captured(size) = 1 - t_rules / t_default

come from one measurement each, not from a sweep's medians set against a later validate's. A
size counts where the best candidate beats the default *in validate* beyond both points' noise;
capture = sum(captured) / sum(available) over those sizes (savings as fractions, so every size
weighs alike). Choosing the candidate from the sweep and judging it in validate also keeps the
figure free of the winner's curse: the fastest of a dozen noisy sweep medians is, on average,
luckier in the sweep than it is again.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ccltune.commconfig import CommConfig
from ccltune.errors import UsageError
from ccltune.rules import gpu_names
from ccltune.stats import PointStats, beats, point_stats
from ccltune.store import Store, as_record
from ccltune.tune.derive import (
    Derivation,
    candidate_of,
    derive,
    nccl_best,
    usable,
)
from ccltune.tune.source import source_rows

ARM = "best"  # the ``config`` label of the third arm's rows

Key = tuple[str, int, int, int]  # (collective, n_ranks, n_nodes, size_bytes)


def best_arms(result: Derivation, n_ranks: int, n_nodes: int, gpu: str | None = None) -> dict[Key, CommConfig]:
    """(collective, n_ranks, n_nodes, size) -> the sweep's fastest candidate there, where it beat
    NCCL's own choice (the faster of default and twin) by more than both points' noise.

    Only groups of this communicator's shape, and of this GPU when ``gpu`` (a model name as the
    devices report it) is given: the plugin matches ``gpu=`` as whole words of that name."""
    out: dict[Key, CommConfig] = {}
    for g in result.groups:
        k = g.key
        if (k.n_ranks, k.n_nodes) != (n_ranks, n_nodes):
            continue
        if gpu is not None and not gpu_names(k.gpu.lower(), gpu):
            continue
        for d in g.decisions:
            best = d.best
            if best is not None and beats(nccl_best(d.default, d.candidates), best[1]):
                out[(k.collective, k.n_ranks, k.n_nodes, d.size_bytes)] = best[0]
    return out


def arms_from_db(path: str, n_ranks: int, n_nodes: int, gpu: str | None, placement: str = "out-of-place"
                 ) -> dict[Key, CommConfig]:
    """:func:`best_arms` of the sweep/import runs in the database at ``path`` (``--best-from``)."""
    if not os.path.isfile(path):
        raise UsageError(f"--best-from {path!r}: no such database (a `ccltune sweep` database)")
    with Store(path, readonly=True, flag="--best-from") as store:
        _runs, rows = source_rows(store, where=f"--best-from {path}")
    return best_arms(derive(rows, placement=placement), n_ranks, n_nodes, gpu)


@dataclass(frozen=True)
class SizeCapture:
    collective: str
    n_ranks: int
    n_nodes: int
    size_bytes: int
    candidate: str            # the best arm's configuration label
    default: PointStats
    rules: PointStats
    best: PointStats

    @property
    def available(self) -> float:
        return 1.0 - self.best.median_us / self.default.median_us

    @property
    def captured(self) -> float:
        return 1.0 - self.rules.median_us / self.default.median_us

    @property
    def counts(self) -> bool:
        """The best candidate beats the default beyond both points' noise, in this run."""
        return beats(self.default, self.best)

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "n_ranks": self.n_ranks, "n_nodes": self.n_nodes,
                "size_bytes": self.size_bytes, "candidate": self.candidate, "counts": self.counts,
                "default_time_us": self.default.median_us, "rules_time_us": self.rules.median_us,
                "best_time_us": self.best.median_us, "available": self.available, "captured": self.captured}


@dataclass(frozen=True)
class Capture:
    sizes: list[SizeCapture]  # every size with all three arms measured

    @property
    def counted(self) -> list[SizeCapture]:
        return [s for s in self.sizes if s.counts]

    @property
    def ratio(self) -> float | None:
        """Captured over available saving at the counted sizes; None when no size counts."""
        c = self.counted
        avail = sum(s.available for s in c)
        return sum(s.captured for s in c) / avail if c and avail > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "sizes_measured": len(self.sizes), "sizes_counted": len(self.counted),
                "sizes": [s.to_dict() for s in self.sizes]}


def capture(rows: Iterable[Any], placement: str = "out-of-place") -> Capture:
    """The capture over validate rows of configs 'default', 'rules' and 'best' (module doc).
    Sizes without all three arms are left out."""
    samples: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    label: dict[Key, str] = {}
    for row in map(as_record, rows):
        cfg = row.get("config")
        if cfg not in ("default", "rules", ARM):
            continue
        key = (row["collective"], int(row["n_ranks"]), int(row.get("n_nodes") or 1), int(row["size_bytes"]))
        if cfg == ARM:
            label[key] = candidate_of(row).label
        if usable(row, placement):
            samples[key][cfg].append(float(row["time_us"]))
    out = []
    for key in sorted(samples):
        arms: Mapping[str, list[float]] = samples[key]
        if all(arms.get(a) for a in ("default", "rules", ARM)):
            out.append(SizeCapture(*key, label.get(key, "?"), point_stats(arms["default"]),
                                   point_stats(arms["rules"]), point_stats(arms[ARM])))
    return Capture(out)


def arm_label(cand: CommConfig) -> dict[str, Any]:
    """The row labels of the third arm measuring ``cand``."""
    return {"config": ARM, "algo": cand.algo, "proto": cand.proto, "channels": cand.channels}
