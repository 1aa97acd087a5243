"""Sweep rows for the tune tests (TEST DATA): one row per sample, as ``ccltune sweep`` stores them."""

from __future__ import annotations

from typing import Any


def rows_for(times: dict[str, dict[int, list[float]]], *, coll: str = "all_gather", n_ranks: int = 4,
             gpu: str = "H200", **extra: Any) -> list[dict[str, Any]]:
    """times: config label -> size -> samples. Labels 'default', 'default-twin' or 'algo/proto/channels'
    ('default' for NCCL's choice of one, '-' for its channels)."""
    out = []
    for label, by_size in times.items():
        algo = proto = chan = None
        if label not in ("default", "default-twin"):
            a, p, c = label.split("/")
            algo, proto, chan = (None if a == "default" else a), (None if p == "default" else p), (
                None if c == "-" else int(c))
        for size, samples in by_size.items():
            for rep, t in enumerate(samples):
                out.append(dict(collective=coll, size_bytes=size, n_ranks=n_ranks, n_nodes=1, algo=algo,
                                proto=proto, channels=chan, config=label, rep=rep, time_us=t, status="ok",
                                in_place=False, dtype="float", op=None, graph=1, gpu=gpu, **extra))
    return out
