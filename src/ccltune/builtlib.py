"""Where ccltune's own C libraries are found at run time (the tuner plugin, the profiler plugin,
the launch loop).

Each way of installing puts a built library somewhere else; ``candidates`` lists them in the
order they are tried:

1. the package's ``lib/`` folder: a wheel (``pip install .``; the top-level CMakeLists.txt
   installs the libraries there);
2. the files the installed ccltune distribution records, when that distribution is the
   package imported here or an editable install of this checkout: ``pip install -e .``
   (scikit-build-core builds into ``<site-packages>/ccltune/lib`` while the Python code stays
   in ``src/``). Another ccltune installed in the same environment is not used;
3. ``make -C <folder>`` in a source checkout (``<folder>/build``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from ccltune.errors import EngineUnavailable

_PACKAGE_DIR = Path(__file__).resolve().parent
DISTRIBUTION = "ccltune"


def _is_ours(dist: metadata.Distribution, package_dir: Path) -> bool:
    """The distribution installed the package imported here (a wheel), or is an editable
    install of the checkout that holds it (its direct_url.json names that folder)."""
    for f in dist.files or []:
        if f.as_posix() == "ccltune/__init__.py":
            return Path(str(f.locate())).resolve() == package_dir / "__init__.py"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except (ValueError, OSError):
        return False
    url = urlparse(str(direct.get("url", "")))
    if not direct.get("dir_info", {}).get("editable") or url.scheme != "file":
        return False
    return Path(unquote(url.path)).resolve() == package_dir.parents[1]   # src/ccltune -> the checkout


def installed(name: str, package_dir: Path = _PACKAGE_DIR, search_path: Sequence[str] | None = None) -> list[Path]:
    """Files called ``name`` that this package's distribution installed (``search_path``:
    where to look for distributions; sys.path when None)."""
    found: list[Path] = []
    dists = (metadata.distributions(name=DISTRIBUTION, path=list(search_path)) if search_path is not None
             else metadata.distributions(name=DISTRIBUTION))
    for dist in dists:
        if _is_ours(dist, package_dir):
            found += [Path(str(f.locate())).resolve() for f in dist.files or [] if f.name == name]
    return found


def candidates(name: str, folder: str, *, package_dir: Path = _PACKAGE_DIR,
               search_path: Sequence[str] | None = None) -> list[Path]:
    """Paths where ``name`` (e.g. libccltune-series.so) may be, in the order they are tried;
    ``folder`` is its source folder at the checkout's top (plugin, native)."""
    out = [package_dir / "lib" / name]
    for cand in installed(name, package_dir, search_path):
        if cand not in out:
            out.append(cand)
    out.append(package_dir.parents[1] / folder / "build" / name)
    return out


def first_existing(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.is_file()), None)


def require(name: str, folder: str, what: str) -> Path:
    """The first existing ``name`` built from ``folder`` (plugin, profiler); raises
    EngineUnavailable naming ``what`` (e.g. "the ccltune tuner plugin"), where it looked and
    how to build it."""
    paths = candidates(name, folder)
    found = first_existing(paths)
    if found is not None:
        return found
    tried = ", ".join(str(c) for c in paths)
    raise EngineUnavailable(
        f"{what} is not built (looked for {tried}); "
        f"build it with `make -C {folder}` in the source tree, or `pip install .` to ship it in the package "
        "(both need a C compiler, gcc or clang: without one pip installs ccltune without it)"
    )
