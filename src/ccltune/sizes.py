"""Byte sizes as users type them (nccl-tests' spelling: 8, 64K, 1M, 2G; binary suffixes)."""

from __future__ import annotations

import math
import re

from ccltune.errors import UsageError

_SIZE_RE = re.compile(r"^(\d+)\s*([KMGTkmgt]?)(?:[iI]?[bB])?$")
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_SIZE = 1 << 50  # 1 PiB: far beyond any GPU's memory, well inside every 64-bit count
MAX_SIZES = 10_000  # sizes one series may hold (docs/cli.md); -f 0 -i 1 -e 100M would make 10^8


def parse_size(text: str, where: str = "size") -> int:
    """'64K' -> 65536. Raises UsageError naming ``where`` (e.g. '-b/--minbytes')."""
    m = _SIZE_RE.match(str(text).strip())
    if not m:
        raise UsageError(f"{where}: {text!r} is not a size (a whole number of bytes, optionally with K, M, G or T)")
    size = int(m.group(1)) * _SUFFIX[m.group(2).upper()]
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
    """The sizes nccl-tests visits: multiply by ``factor`` when > 1, else add ``increment``."""
    if min_bytes > max_bytes:
        raise UsageError(f"-b/--minbytes must be <= -e/--maxbytes, got {min_bytes} > {max_bytes}")
    if factor:
        if not (math.isfinite(factor) and factor >= 2):
            raise UsageError(f"-f/--stepfactor must be >= 2, got {factor:g}")
        if factor > MAX_SIZE:
            raise UsageError(f"-f/--stepfactor must be <= {MAX_SIZE} (the largest size), got {factor:g}")
    elif increment <= 0:
        raise UsageError(f"-i/--stepbytes must be > 0, got {increment}")
    n = series_length(min_bytes, max_bytes, factor=factor, increment=increment)
    if n > MAX_SIZES:
        step = f"-f {factor:g}" if factor else f"-i {increment}"
        raise UsageError(f"-b {min_bytes} -e {max_bytes} {step} makes {n} sizes; at most {MAX_SIZES} are "
                         "allowed (raise -f or -i, or narrow -b..-e)")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        nxt = int(min(size * factor, max_bytes + 1)) if factor else size + increment
        size = nxt if nxt > size else size + 1
    return out


def series_length(min_bytes: int, max_bytes: int, *, factor: float = 0, increment: int = 0) -> int:
    """How many sizes :func:`size_series` visits, counted without building them."""
    if not factor:
        return (max_bytes - min_bytes) // increment + 1
    n, size = 0, min_bytes
    while size <= max_bytes and n <= MAX_SIZES:  # at most log_2(MAX_SIZE) steps once size >= 1
        n += 1
        nxt = int(min(size * factor, max_bytes + 1))
        size = nxt if nxt > size else size + 1
    return n
