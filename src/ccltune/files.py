"""Files ccltune reads and writes, checked in one place.

Outputs are replaced whole and atomically: a temp file in the same folder, flushed to disk, then
renamed over the target; never appended, never half written. The new file gets the mode an ordinary
``open()`` would give it (0666 less the umask), and a file that is replaced keeps its mode. A target
that is not a regular file (``/dev/null``, ``/dev/stdout``, a pipe) is written directly, never
replaced. Inputs (rule files, logs, JSON) are read through :func:`read_text`: regular files and pipes
handed to this process (``<(cat rules.conf)``, ``/dev/stdin``), never a device or a FIFO on disk,
at most :data:`MAX_INPUT_BYTES`.

Every error names the flag the path came from and the path itself, printable (:func:`shown`)."""

from __future__ import annotations

import atexit
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ccltune.errors import UsageError

NAME_MAX = 255  # bytes in one path component (Linux, every common file system)
PATH_MAX = 4096  # bytes in a whole path (Linux)
MAX_INPUT_BYTES = 64 << 20  # an input text file larger than this is not a rule file, log or JSON of ours


def escape(text: str) -> str:
    """``text`` with every character that is not printable (control bytes, escape sequences, bytes
    that were not UTF-8) written as a Python escape: safe to print to a terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(path: str | os.PathLike[str] | bytes, limit: int = 120) -> str:
    """``path`` quoted for a message: non-printable characters and bytes that are not UTF-8 escaped,
    a long path shortened in the middle."""
    text = os.fsdecode(path) if not isinstance(path, str) else path
    raw = os.fsencode(text).decode("utf-8", "backslashreplace")
    raw = escape(raw).replace("'", "\\'")
    if len(raw) > limit:
        return f"'{raw[:limit // 2]}...{raw[-limit // 4:]}' ({len(os.fsencode(text))} bytes)"
    return f"'{raw}'"


def printable(text: str, limit: int = 200) -> str:
    """One line of ``text`` for a message: control characters escaped, at most ``limit`` characters."""
    line = text.splitlines()[0] if text.strip() else text
    out = escape(line[:limit])
    return out + ("..." if len(line) > limit or len(text.splitlines()) > 1 else "")


def check_name(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` as a Path, or a UsageError when no file system could hold the name (a component over
    NAME_MAX bytes, the whole over PATH_MAX bytes, a NUL byte)."""
    text = os.fspath(path)
    raw = os.fsencode(text)
    if b"\0" in raw:
        raise UsageError(f"{flag} {shown(text)}: a file name cannot hold a NUL byte")
    if len(raw) >= PATH_MAX:
        raise UsageError(f"{flag} {shown(text)}: the path is {len(raw)} bytes long; the limit is {PATH_MAX - 1}")
    for part in raw.split(b"/"):
        if len(part) > NAME_MAX:
            raise UsageError(f"{flag} {shown(text)}: a name in it is {len(part)} bytes long; the limit is {NAME_MAX}")
    return Path(text)


def _parent_problem(target: Path, flag: str) -> str | None:
    """Why a file cannot be made at ``target`` (its folder missing, not a folder, not writable)."""
    folder = target.parent if str(target.parent) else Path(".")
    for up in (folder, *folder.parents):
        try:
            st = up.stat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            return f"{flag}: cannot write {shown(target)}: {shown(up)} is not a folder"
        break
    if not folder.is_dir():
        return f"{flag}: folder of {shown(target)} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{flag}: cannot write {shown(target)}: no permission to write in {shown(folder)}"
    return None


def check_output(path: str | os.PathLike[str], flag: str, inputs: Mapping[str, object] | None = None) -> Path:
    """An output file, before the command reads or measures anything: a name the file system can
    hold, not a folder, in a folder that exists and may be written, and none of ``inputs`` (what the
    file is, as 'the input --from-json' -> its path or paths): writing it would replace it."""
    target = check_name(path, flag)
    if target.is_dir():
        raise UsageError(f"{flag}: {shown(target)} is a folder; give a file name")
    if target.exists():
        if stat.S_ISREG(target.stat().st_mode) and not os.access(target, os.W_OK):
            raise UsageError(f"{flag} {shown(target)}: no permission to write it")
    else:
        problem = _parent_problem(target, flag)
        if problem:
            raise UsageError(problem)
    for in_flag, values in (inputs or {}).items():
        for value in values if isinstance(values, (list, tuple)) else [values]:
            if isinstance(value, (str, os.PathLike)) and value and (same_file(target, Path(value))
                                                                    or _read_from(target, Path(value))):
                lost = ("every run stored there" if "--db" in in_flag else "the other output"
                        if "output" in in_flag else "what this command reads")
                raise UsageError(f"{flag} {shown(target)} is {in_flag}: writing it would replace {lost}; "
                                 "choose another file")
    return target


def _read_from(target: Path, folder: Path) -> bool:
    """Whether ``target`` is a file the command reads from the input folder ``folder`` (a profiler folder's
    file, a folder of logs): an existing file under it."""
    try:
        return folder.is_dir() and target.is_file() and target.resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError):
        return False


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (the same inode, or the same path when either is missing)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


def _new_mode() -> int:
    """The mode ``open()`` gives a new file: 0666 less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_text(path: str | os.PathLike[str], text: str, *, flag: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path``. ``flag`` names where the path came from (e.g. '--json') in the error
    a bad path gives. A regular file (or a missing one) is replaced atomically, keeping an existing
    file's mode; a new one gets ``mode`` (default: 0666 less the umask). A symbolic link is followed
    (the file it names is replaced, the link kept). Anything else (a device, a pipe, a terminal) is
    written directly."""
    target = check_name(path, flag)
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write {shown(target)}: {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{flag}: {shown(target)} is a folder; give a file name")
        _write_in_place(target, text, flag)
        return
    if st is not None:
        target = Path(os.path.realpath(target))
        mode = stat.S_IMODE(st.st_mode)
    elif mode is None:
        mode = _new_mode()
    folder = target.parent if str(target.parent) else Path(".")
    problem = _parent_problem(target, flag)
    if problem and st is None:
        raise UsageError(problem)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name[:200]}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write {shown(target)}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{flag}: cannot write {shown(target)}: {exc.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_in_place(target: Path, text: str, flag: str) -> None:
    """A device, pipe or terminal: written as it is (a FIFO nobody reads is refused, not waited on)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        why = "nobody reads that pipe" if exc.errno == 6 else exc.strerror  # ENXIO
        raise UsageError(f"{flag}: cannot write {shown(target)}: {why}") from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "w", encoding="utf-8", newline="", closefd=False) as fh:
            fh.write(text)
            fh.flush()
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write {shown(target)}: {exc.strerror}") from None
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike[str], flag: str, *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of an input file: a regular file, or a pipe handed to this process (``<(cat
    rules.conf)``, ``/dev/stdin``). A folder, a device, a FIFO on disk or a file over ``limit`` bytes
    is refused naming ``flag`` and the path. Opened non-blocking: nothing here waits for a writer."""
    target = check_name(path, flag)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise UsageError(f"{flag}: {shown(target)} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"{flag}: {shown(target)} is a folder, not a file") from None
    except PermissionError:
        raise UsageError(f"{flag}: no permission to read {shown(target)}") from None
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {shown(target)}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{flag}: {shown(target)} is a folder, not a file")
        if stat.S_ISFIFO(st.st_mode) and not _is_inherited_pipe(target):
            raise UsageError(f"{flag}: {shown(target)} is a FIFO, not a regular file (a pipe is read as "
                             "/dev/fd/N or /dev/stdin, e.g. <(cat FILE))")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise UsageError(f"{flag}: {shown(target)} is not a regular file (a device or socket)")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise UsageError(f"{flag}: {shown(target)} is {st.st_size} bytes; the limit is {limit}")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UsageError(f"{flag}: {shown(target)} holds more than {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {shown(target)}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _is_inherited_pipe(path: Path) -> bool:
    """A pipe this process was handed (``<(cat FILE)`` is /dev/fd/63; ``/dev/stdin``), not a FIFO on
    disk, which would block until some other process opened it."""
    text = os.fspath(path)
    return text.startswith(("/dev/fd/", "/proc/self/fd/")) or text == "/dev/stdin"


def read_text(path: str | os.PathLike[str], flag: str, *, limit: int = MAX_INPUT_BYTES) -> str:
    """:func:`read_bytes` as UTF-8 text; a binary file is refused, quoting where it stops being text."""
    data = read_bytes(path, flag, limit=limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag}: {shown(path)} is not a text file (byte {exc.start} is not UTF-8: "
                         f"{data[exc.start:exc.start + 8]!r})") from None
    if "\0" in text:
        raise UsageError(f"{flag}: {shown(path)} is not a text file (a NUL byte at offset {text.index(chr(0))})")
    return text


def regular_copy(path: str, flag: str, argv: list[str]) -> tuple[str, list[str]]:
    """(path, argv) for an input that other processes read again (torchrun's workers, NCCL's plugin):
    a regular file as it is; a pipe (``<(cat rules.conf)``, which only this process can read, once)
    read now into a private temp file, removed when this process exits, and ``argv`` naming it."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            return path, argv
    except (OSError, ValueError):
        return path, argv  # the reader says what is wrong with it
    data = read_bytes(path, flag)
    fd, copy = tempfile.mkstemp(prefix="ccltune-input-", suffix=".conf")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    atexit.register(Path(copy).unlink, missing_ok=True)
    return copy, [copy if a == path else a for a in argv]
