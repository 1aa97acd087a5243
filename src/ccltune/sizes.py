"""Byte sizes as users type them (nccl-tests' spelling: 8, 64K, 1M, 2G; binary suffixes)."""

from __future__ import annotations

import math
import re

from ccltune.errors import UsageError

# Two grammars, one function. NCCL_TESTS: what users type on a command line or in a profile, as
# nccl-tests' parsesize reads it (common.cu: a number, fractional allowed, then K, M or G; binary),
# plus T and a trailing B/iB, spaces around. RULE_FILE: what the C tuner plugin's parser accepts in a
# rule file (plugin/src: ASCII digits, one K/M/G/T, an optional B, nothing else, up to 2^64-1).
# The rule-file grammar must stay stricter: the plugin reads the same file inside NCCL, in C, and a
# rule that Python accepted but C rejected would be dropped at run time, silently changing what a
# tuned job runs (tests/unit/test_sizes.py::test_rule_grammar_is_the_plugins shows the differences).
NCCL_TESTS, RULE_FILE = "nccl-tests", "rule-file"
_GRAMMARS = {NCCL_TESTS: re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([KMGTkmgt]?)(?:[iI]?[bB])?"),
             RULE_FILE: re.compile(r"([0-9]+)([KMGTkmgt]?)[bB]?")}
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_SIZE = 1 << 50  # 1 PiB: far beyond any GPU's memory, well inside every 64-bit count
MAX_SIZES = 10_000  # sizes one series may hold (docs/cli.md); -f 0 -i 1 -e 100M would make 10^8
U64_MAX = (1 << 64) - 1  # the plugin's size_t limit
_ECHO_MAX = 40  # bytes of an offending value quoted in a reason (as the plugin)


def echo(value: str) -> str:
    """A value as the C plugin echoes it in a message: printable ASCII kept, other bytes as \\xNN,
    cut after 40 bytes."""
    raw = value.encode("utf-8", "surrogateescape")
    out = "".join(chr(b) if 0x20 <= b <= 0x7E else f"\\x{b:02x}" for b in raw[:_ECHO_MAX])
    return out + ("..." if len(raw) > _ECHO_MAX else "")


def parse_size(text: str, where: str = "size", *, grammar: str = NCCL_TESTS) -> int:
    """'64K' -> 65536, '1.5M' -> 1572864 (nccl-tests truncates a fraction of a byte).

    NCCL_TESTS raises UsageError naming ``where`` (e.g. '-b/--minbytes'); RULE_FILE raises
    ValueError with the C plugin's own reason, which a rule file's 'file:line: reason' carries."""
    rule = grammar == RULE_FILE
    m = _GRAMMARS[grammar].fullmatch(str(text) if rule else str(text).strip())
    if not m:
        if rule:
            raise ValueError(f"{where}: invalid size '{echo(text)}' (expected digits with optional K, M, G or T suffix)")
        raise UsageError(f"{where}: {text!r} is not a size (a number of bytes, optionally with K, M, G or T)")
    unit = _SUFFIX[m.group(2).upper()]
    size = int(m.group(1)) * unit if m.group(1).isdigit() else int(float(m.group(1)) * unit)
    if rule and size > U64_MAX:
        raise ValueError(f"{where}: size '{echo(text)}' does not fit in 64 bits")
    if not rule and size > MAX_SIZE:
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
