"""Where ccltune's own C libraries are, however ccltune was installed.

Each way of installing puts a built library somewhere else:

- a wheel (`pip install .`): ``<site-packages>/ccltune/lib/NAME``, next to the package;
- an editable install (`pip install -e .`): scikit-build-core installs the built files into
  site-packages while the Python package stays in the source tree; the distribution's
  RECORD lists the file;
- a source checkout run with ``PYTHONPATH=src``: ``make -C plugin`` builds into ``plugin/build``.

``find(name)`` looks in that order (next to the package, the checkout's build folders, the
installed distribution's files) and returns the first file that exists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from ccltune.errors import EngineUnavailable

PACKAGE_DIR = Path(__file__).resolve().parent
DISTRIBUTION = "ccltune"


def _is_ours(dist: metadata.Distribution, package_dir: Path) -> bool:
    """The distribution installed the package imported here (a wheel), or is an editable
    install of the source tree that holds it."""
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


def installed(name: str, package_dir: Path = PACKAGE_DIR, search_path: Sequence[str] | None = None) -> list[Path]:
    """Files called ``name`` that this package's distribution installed (``search_path``:
    where to look for distributions; sys.path when None)."""
    where = {"path": list(search_path)} if search_path is not None else {}
    found = []
    for dist in metadata.distributions(name=DISTRIBUTION, **where):
        if _is_ours(dist, package_dir):
            found += [Path(str(f.locate())).resolve() for f in dist.files or [] if f.name == name]
    return found


def candidates(name: str, source_builds: Sequence[str] = ("plugin/build",), package_dir: Path = PACKAGE_DIR,
               search_path: Sequence[str] | None = None) -> list[Path]:
    """Every place ``name`` may be, first choice first (``source_builds``: build folders
    relative to a source checkout's root)."""
    root = package_dir.parents[1]   # src/ccltune -> the checkout
    return [package_dir / "lib" / name, *(root / d / name for d in source_builds),
            *installed(name, package_dir, search_path)]


def find(name: str, source_builds: Sequence[str] = ("plugin/build",)) -> Path:
    """Absolute path of ccltune's C library ``name`` (a file name such as
    ``libnccl-tuner-ccltune.so``). Raises EngineUnavailable naming where it looked and how
    to build it."""
    tried = candidates(name, source_builds)
    for cand in tried:
        if cand.is_file():
            return cand
    make = f"make -C {Path(source_builds[0]).parent}" if source_builds else "pip install ."
    raise EngineUnavailable(
        f"{name} is not built (looked for {', '.join(str(c) for c in tried)}); "
        f"build it with `{make}` in the source tree, or `pip install .` to ship it in the package")
