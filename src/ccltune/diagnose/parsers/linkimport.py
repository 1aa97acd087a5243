"""Link matrices measured by other tools (TransferBench, nvbandwidth), as ``links`` table rows.

A parser returns an :class:`ImportedLinks`: rows shaped exactly as ``ccltune links`` writes
them (``src``, ``dst``, ``method``, ``direction``, ``size_bytes``, ``bandwidth_gbps``), plus
what the tool said about how it measured (``method_info``), the precision its figures were
printed with, per series (``decimals``: the analysis rounds products of them to that precision, so
45.210 GB/s x 7 peers is 316.470, as the tool would print it) and the tool's own per-GPU
figures where it prints any (TransferBench a2a: ``STotal`` and ``Actual``).

Method names follow ``ccltune links``: ``ce`` (copy engine / DMA), ``sm-read`` (a kernel on
the receiving GPU loads), ``sm-write`` (a kernel on the sending GPU stores); a tool's
variant that has no ccltune equivalent keeps a suffix (``ce-read``, ``ce-write``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ccltune.errors import UsageError
from ccltune.inputs import MAX_CALL_BYTES, MAX_GPUS


@dataclass
class ImportedLinks:
    tool: str  # "TransferBench", "nvbandwidth"
    version: str | None
    tests: list[str]  # presets / test keys found, in file order
    rows: list[dict[str, Any]] = field(default_factory=list)
    n_gpus: int = 0
    gpu_names: list[str] = field(default_factory=list)
    host: str | None = None
    driver_version: str | None = None  # the GPU driver the tool ran on ('570.124.06'), where it prints it
    cuda_version: str | None = None  # the CUDA runtime it was built with ('12.8')
    method_info: dict[str, Any] = field(default_factory=dict)
    decimals: dict[str, int] = field(default_factory=dict)  # "method/direction" -> decimals printed
    tool_figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """What the run's summary keeps besides the rows (``links --run`` reads it back)."""
        return {"source": self.tool, "tool_version": self.version, "tests": self.tests,
                "method_info": self.method_info, "printed_decimals": self.decimals,
                "tool_figures": self.tool_figures, "notes": self.notes}


def row(src: int, dst: int, method: str, direction: str, size: int | None, gbps: float, note: str | None = None
        ) -> dict[str, Any]:
    return {"src": src, "dst": dst, "method": method, "direction": direction, "size_bytes": size,
            "bandwidth_gbps": gbps, "latency_us": None, "note": note}


def number(text: str, where: str) -> float:
    """A printed figure as a float, refusing what is not a finite non-negative number."""
    try:
        value = Decimal(text)
    except ArithmeticError:
        raise UsageError(f"{where}: {text!r} is not a number") from None
    if not value.is_finite() or value < 0 or not math.isfinite(float(value)):  # 1e999999: finite, not a float
        raise UsageError(f"{where}: {text[:40]!r} is not a bandwidth (finite, >= 0)")
    return float(value)


def times(value: float, n: int, decimals: int | None) -> float:
    """``value x n`` exactly as the printed decimals give it (no binary-float residue)."""
    if decimals is None:
        return value * n
    q = Decimal(1).scaleb(-decimals)
    return float((Decimal(repr(value)).quantize(q) * n).quantize(q))


def check_square(rows: list[dict[str, Any]], where: str) -> int:
    """The GPU count of a set of rows; refuses indices that are negative or beyond MAX_GPUS (a GPU
    count sizes the link table and its loops) and sizes beyond any real copy."""
    if not rows:
        return 0
    if min(min(r["src"], r["dst"]) for r in rows) < 0:
        raise UsageError(f"{where}: negative GPU index")
    n = max(max(r["src"], r["dst"]) for r in rows) + 1
    if n > MAX_GPUS:
        raise UsageError(f"{where}: GPU index {n - 1}: more than the {MAX_GPUS} GPUs of one host ccltune reads")
    for r in rows:
        if r["size_bytes"] is not None and not 0 <= r["size_bytes"] <= MAX_CALL_BYTES:
            raise UsageError(f"{where}: {r['size_bytes']} bytes per transfer: must be in 0..{MAX_CALL_BYTES}")
    return n
