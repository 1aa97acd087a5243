"""Files ccltune writes are replaced whole and atomically: a temp file in the same folder,
flushed to disk, then renamed over the target. Never appended, never half written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ccltune.errors import UsageError


def write_text(path: str | os.PathLike[str], text: str, *, flag: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` atomically. ``flag`` names where the path came from (e.g.
    '--json') in the error a bad path gives; ``mode`` sets the permissions (mkstemp's 0600
    otherwise)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{flag}: folder of {str(target)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write {str(target)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{flag}: cannot write {str(target)!r}: {exc.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
