"""Tick positions and human labels for the axes, shared by ``svg.py`` and ``png.py`` (and run lists,
'1-3, 7', for the text around them).

Sizes are binary (8B, 1K, 1M, 1G, as nccl-tests and rule files spell them); bandwidths
and times use decades with k/M suffixes.
"""

from __future__ import annotations

import math

_BIN = ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))
_MAX_TICKS = 10


def size_label(n: float) -> str:
    """8 -> '8B', 1024 -> '1K', 1536 -> '1.5K', 2**30 -> '1G'."""
    for unit, suffix in _BIN:
        if n >= unit:
            return f"{_short(n / unit)}{suffix}"
    return f"{_short(n)}B"


def ids_text(ids: list[int]) -> str:
    """Run ids as ranges: [1, 2, 3, 7] -> '1-3, 7'."""
    parts, start = [], None
    for i, cur in enumerate(ids):
        if start is None:
            start = cur
        if i + 1 == len(ids) or ids[i + 1] != cur + 1:
            parts.append(str(start) if start == cur else f"{start}-{cur}")
            start = None
    return ", ".join(parts)


def value_label(v: float) -> str:
    """0.5 -> '0.5', 2000 -> '2k', 3e6 -> '3M'."""
    if v == 0:
        return "0"
    for unit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= unit:
            return f"{_short(v / unit)}{suffix}"
    return _short(v)


def _short(v: float) -> str:
    return f"{v:.3g}" if v != int(v) else str(int(v))


def size_ticks(lo: float, hi: float) -> list[int]:
    """Powers of two in [lo, hi], every 1st, 2nd, 5th or 10th exponent so that at most
    10 remain; steps divide 10, so 1K, 1M and 1G are always among them when in range."""
    lo, hi = max(lo, 1), max(hi, 1)
    e_lo, e_hi = math.ceil(math.log2(lo) - 1e-9), math.floor(math.log2(hi) + 1e-9)
    for step in (1, 2, 5, 10):
        exps = [e for e in range(e_lo, e_hi + 1) if e % step == 0]
        if len(exps) <= _MAX_TICKS:
            break
    if not exps:  # a range inside one power of two
        return sorted({int(lo), int(hi)})
    return [1 << e for e in exps]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decades in [lo, hi]; with fewer than three, 2x and 5x steps are added."""
    if lo <= 0 or hi <= 0:
        raise ValueError(f"log axis needs positive bounds, got {lo}..{hi}")
    d_lo, d_hi = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mults in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = [m * 10.0**d for d in range(d_lo, d_hi + 1) for m in mults]
        ticks = [_round(t) for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(ticks) >= 3:
            return ticks
    return ticks or [_round(lo), _round(hi)]


def linear_ticks(lo: float, hi: float) -> list[float]:
    """1, 2 or 5 times a power of ten, giving 3 to 8 ticks in [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / 5
    mag = 10.0 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=10 * mag)
    first = math.ceil(lo / step - 1e-9)
    return [_round(i * step) for i in range(first, int(math.floor(hi / step + 1e-9)) + 1)]


def log_bounds(values: list[float], pad: float = 1.15) -> tuple[float, float]:
    """Bounds for a log axis holding ``values`` (positive ones only), padded a little."""
    pos = [v for v in values if v and v > 0]
    if not pos:
        return 1.0, 10.0
    lo, hi = min(pos), max(pos)
    if hi / lo < 2:
        lo, hi = lo / 2, hi * 2
    return lo / pad, hi * pad


def linear_bounds(values: list[float], pad: float = 0.08) -> tuple[float, float]:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    return lo - pad * span, hi + pad * span


def _round(v: float) -> float:
    return float(f"{v:.12g}")
