"""Every reader's bounds, in one place (STYLE 18): a number read from a file never sizes an allocation
or a loop without one of these caps. docs/limits.md lists each reader with its bound and the time and
memory measured at that bound (``bench/reader_bounds.py``).

The readers of ccltune read other people's files: nccl-tests outputs, NCCL logs, profiler traces,
tool JSON, workload files, databases. Each goes through :func:`read_input` (a regular file or a pipe
handed to this process, never a device or a FIFO on disk, at most ``limit`` bytes, a gzip inflated as
a stream with a cap on its output), :func:`load_json` (the parser's own recursion guard turned into an
error naming the file, non-finite numbers refused); each regex-based reader cuts a line to
:data:`MAX_LINE_CHARS` before it is examined. Numbers then go through :func:`int_in`."""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from typing import Any

from ccltune.errors import UsageError
from ccltune.files import MAX_INPUT_BYTES, read_bytes

MAX_TEXT_BYTES = MAX_INPUT_BYTES  # a log, a tool's output or JSON: 64 MiB (rule files: 16 MiB, rules.py)
MAX_TRACE_BYTES = 512 << 20  # a profiler trace, COLL log or capture, after gunzip (reading needs ~6x in memory)
MAX_WORKLOAD_BYTES = 256 << 20  # a workload file ccltune wrote: entries, not events
MAX_LINE_CHARS = 16 << 10  # no line any tool we read prints is longer (nccl-tests' device list: 2 KiB)
MAX_RANKS = 1 << 16  # ranks of one run or communicator (the largest jobs run ~10^5 GPUs in several comms)
MAX_GPUS = 1024  # GPUs of one host in a link matrix
MAX_CALL_BYTES = 1 << 42  # 4 TiB: one collective's buffer beyond any GPU's memory
MAX_COUNT = MAX_CALL_BYTES  # elements of one call (1 byte each at most)
MAX_CALLS = 1 << 40  # calls of one entry in a workload
INT64_MAX = (1 << 63) - 1  # the database's integers
MAX_SYSTEM_BYTES = 4 << 20  # a /proc or /sys file under a system root (/proc/cpuinfo of 512 cores: ~1 MiB)


def read_input(path: str, flag: str, *, limit: int = MAX_TEXT_BYTES, gunzip: bool = False) -> bytes:
    """The bytes of an input file (:func:`ccltune.files.read_bytes`: no device, no FIFO on disk, at
    most ``limit`` bytes). With ``gunzip``, a gzip file is inflated as a stream and refused once its
    output passes ``limit``: a small bomb never becomes a large buffer."""
    raw = read_bytes(path, flag, limit=limit)
    if not (gunzip and raw[:2] == b"\x1f\x8b"):
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            out = fh.read(limit + 1)
    except (EOFError, OSError, zlib.error) as exc:
        raise UsageError(f"{path}: truncated or corrupt gzip ({exc})") from None
    if len(out) > limit:
        raise UsageError(f"{path}: inflates to more than {limit} bytes (the limit for this input; "
                         "docs/limits.md)")
    return out


def read_input_text(path: str, flag: str, *, limit: int = MAX_TEXT_BYTES, gunzip: bool = False) -> str:
    """:func:`read_input` decoded as UTF-8, undecodable bytes replaced (logs hold other programs' bytes)."""
    return read_input(path, flag, limit=limit, gunzip=gunzip).decode("utf-8", errors="replace")


def read_system_text(path: str | os.PathLike[str], limit: int = MAX_SYSTEM_BYTES) -> str:
    """A /proc or /sys file under a system root (``--sysfs-root``, ``$CCLTUNE_SYSFS_ROOT``, or /), through
    :func:`read_input`: a regular file or a pipe handed to this process, at most ``limit`` bytes; a device
    (``/dev/zero``), a FIFO on disk (never waited for), a folder or a larger file is a UsageError naming the
    path. Real sysfs and procfs attributes are regular files of at most a page or two (st_size 4096 or 0)."""
    return read_input(os.fspath(path), "system file", limit=limit).decode("utf-8", errors="replace")


def refuse_constant(name: str) -> Any:
    """json's ``parse_constant``: NaN, Infinity and -Infinity are refused."""
    raise ValueError(f"{name} is not a finite number")


def load_json(text: str | bytes, where: str, *, what: str = "not valid JSON", finite: bool = True) -> Any:
    """``json.loads`` that cannot fail with a traceback: invalid JSON names ``where`` and the line
    (``what`` says what the file is not, "not valid JSON");
    nesting deeper than the parser's recursion guard (about 1,000 levels), an integer of more than
    4,300 digits and, with ``finite``, NaN/Infinity are refused naming ``where``."""
    try:
        return json.loads(text, parse_constant=refuse_constant if finite else None)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}:{exc.lineno}: {what} ({exc.msg}, column {exc.colno})") from None
    except RecursionError:
        raise UsageError(f"{where}: {what}: nested deeper than the parser's limit (about 1000 levels)") from None
    except ValueError as exc:  # parse_constant's refusal; an integer beyond int's digit limit
        raise UsageError(f"{where}: {what}: {exc}") from None


def int_in(value: Any, what: str, low: int = 0, high: int = INT64_MAX) -> int:
    """``value`` as an int in low..high (an int, or a string of digits), else a UsageError naming
    ``what`` (the field and where it came from) and the value."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and len(value) <= 40:
        try:
            number = int(value)
        except ValueError:
            pass
    if number is None or not low <= number <= high:
        shown_value = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise UsageError(f"{what} must be an integer in {low}..{high}, got {shown_value}")
    return number
