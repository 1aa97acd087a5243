"""Where ccltune's own C libraries are found at run time (the tuner plugin, the launch loop).

In order: the package's ``lib/`` folder (a wheel: the top-level CMakeLists.txt installs them
there), ``ccltune/lib`` under any ``sys.path`` entry (an editable install keeps the built files
in site-packages while the code stays in ``src/``), then ``make -C <folder>`` in a source
checkout (``<folder>/build``).
"""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def candidates(name: str, folder: str) -> list[Path]:
    """Paths where ``name`` (e.g. libccltune-series.so) may be, in the order they are tried;
    ``folder`` is its source folder at the checkout's top (plugin, native)."""
    out = [_PACKAGE_DIR / "lib" / name]
    for entry in sys.path:
        cand = Path(entry or ".").resolve() / "ccltune" / "lib" / name
        if cand not in out:
            out.append(cand)
    out.append(_PACKAGE_DIR.parents[1] / folder / "build" / name)
    return out


def first_existing(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.is_file()), None)
