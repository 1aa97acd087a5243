"""Byte sizes as users type them (nccl-tests' spelling: 8, 64K, 1M, 2G; binary suffixes)."""

from __future__ import annotations

import math
import re

from ccltune.errors import UsageError

# nccl-tests' grammar (common.cu parsesize: a number, fractional allowed, then K, M or G; binary),
# plus T and a trailing B/iB
_SIZE_RE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*([KMGTkmgt]?)(?:[iI]?[bB])?$")
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_SIZE = 1 << 50  # 1 PiB: far beyond any GPU's memory, well inside every 64-bit count


def parse_size(text: str, where: str = "size") -> int:
    """'64K' -> 65536, '1.5M' -> 1572864 (nccl-tests truncates a fraction of a byte). Raises
    UsageError naming ``where`` (e.g. '-b/--minbytes')."""
    m = _SIZE_RE.match(str(text).strip())
    if not m:
        raise UsageError(f"{where}: {text!r} is not a size (a number of bytes, optionally with K, M, G or T)")
    unit = _SUFFIX[m.group(2).upper()]
    size = int(m.group(1)) * unit if m.group(1).isdigit() else int(float(m.group(1)) * unit)
    if size > MAX_SIZE:
        raise UsageError(f"{where}: {text!r} is more than {format_size(MAX_SIZE)} bytes")
    return size


def format_size(n: int) -> str:
    """65536 -> '64K'; sizes that are not whole multiples keep the smaller unit."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SUFFIX[suffix]
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def size_series(min_bytes: int, max_bytes: int, *, factor: float = 0, increment: int = 0) -> list[int]:
    """The sizes nccl-tests visits: multiply by ``factor`` when > 1, else (0 or 1, as nccl-tests'
    ``-f 1``) add ``increment``."""
    if min_bytes > max_bytes:
        raise UsageError(f"-b/--minbytes must be <= -e/--maxbytes, got {min_bytes} > {max_bytes}")
    if factor == 1:
        factor = 0
    if factor:
        if not math.isfinite(factor) or factor < 2:
            raise UsageError(f"-f/--stepfactor must be >= 2 (or 0 or 1: step by -i), got {factor:g}")
    elif increment <= 0:
        raise UsageError(f"-i/--stepbytes must be > 0, got {increment}")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        nxt = int(size * factor) if factor else size + increment
        size = nxt if nxt > size else size + 1
    return out
