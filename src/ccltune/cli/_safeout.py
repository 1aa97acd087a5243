"""What ccltune prints cannot drive the terminal: text from imported files (a GPU name, a host name,
a type cell, a warning quoting a log line) may hold escape sequences (``ESC ]8;;`` hyperlinks, colour,
cursor moves), a carriage return that overwrites the line before it (a host name ``node\\rFAKE``) or
bidirectional controls that reorder what is shown (U+202E, U+2066). ccltune prints none of its own, so
every control character but newline and tab, a carriage return not ending a line (``\\r\\n``, as CSV
ends its lines, is kept) and every bidirectional control is written as a Python escape (``\\x1b``,
``\\r``, ``\\u202e``) on stdout and stderr while a command runs: one mechanism instead of one call per
print."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# C0 controls but \t \n, a \r not before \n, DEL, the C1 controls (U+0080..U+009F: ESC's 8-bit forms, e.g. CSI
# U+009B), and Unicode's bidirectional controls (marks, embeddings, overrides, isolates: U+061C, U+200E-F,
# U+202A-E, U+2066-9), which reorder the text around them on the screen
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def _escaped(text: str) -> str:
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class _Escaping:
    """A text stream that writes through ``stream`` with control characters escaped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_escaped(text) if _CONTROL.search(text) else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, buffer, encoding...
        return getattr(self._stream, name)


@contextmanager
def escaped_output() -> Iterator[None]:
    """stdout and stderr escaped for the duration (restored after, also on an error)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(sys.stdout), _Escaping(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
