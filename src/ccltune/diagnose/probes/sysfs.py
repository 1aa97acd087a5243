"""The host's files and programs: ``/proc`` and ``/sys`` under a root, ``lspci``.

Every reader takes ``root``, the folder that stands for ``/`` (``--sysfs-root`` or
``CCLTUNE_SYSFS_ROOT``, so tests use fake trees). A file that cannot be read is reported as
(None, why), never raised; nothing here raises but ``sys_root``, for a root the user named that
is not a folder. The checks drawn from these reads are in ``diagnose.checks.host``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ccltune.environment import SYSFS_ROOT_ENV
from ccltune.errors import UsageError
from ccltune.inputs import read_system_text

ROOT_ENV = SYSFS_ROOT_ENV


def sys_root(cli_value: str | None = None) -> Path:
    """``--sysfs-root``, else $CCLTUNE_SYSFS_ROOT, else /.

    A root given by the flag or the variable must be an existing folder (UsageError naming which):
    under a mistyped one every file would be missing and every check WAIVED, which reads as a clean
    host. / is taken as it is: a real host may lack parts of /sys and /proc.
    """
    if cli_value is not None:
        return _given_root(cli_value, "--sysfs-root")
    env_value = os.environ.get(ROOT_ENV)
    if env_value:  # set but empty counts as unset, as for most variables
        return _given_root(env_value, f"${ROOT_ENV}")
    return Path("/")


def _given_root(value: str, where: str) -> Path:
    if not value:
        raise UsageError(f"{where}: empty path; give the folder that stands for /")
    path = Path(value)
    if not path.exists():
        raise UsageError(f"{where}: {value!r} does not exist")
    if not path.is_dir():
        raise UsageError(f"{where}: {value!r} is not a directory")
    return path


def read_text(root: Path, rel: str) -> tuple[str | None, str]:
    """(content, '') or (None, why it could not be read)."""
    path = root / rel
    if not path.exists():
        return None, f"/{rel} does not exist"
    if path.is_file() and not os.access(path, os.R_OK):
        return None, f"no permission to read /{rel}"
    try:  # bounded, never blocking: a device or a FIFO placed under the root is refused (inputs.read_system_text)
        return read_system_text(path), ""
    except UsageError as exc:
        return None, f"cannot read /{rel}: {exc}"


def run_lspci() -> str | None:
    """``lspci -D -vvv`` output, or None when lspci is missing or fails."""
    if shutil.which("lspci") is None:
        return None
    try:
        return subprocess.run(["lspci", "-D", "-vvv"], capture_output=True, text=True, errors="replace",
                              timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def has_infiniband(root: Path) -> bool | None:
    try:
        return any((root / "sys/class/infiniband").iterdir())
    except FileNotFoundError:
        return False
    except OSError:
        return None


def node_cpus(root: Path) -> dict[int, set[int]]:
    """NUMA node -> its CPUs, from ``sys/devices/system/node/nodeN/cpulist`` under ``root``."""
    out: dict[int, set[int]] = {}
    base = root / "sys/devices/system/node"
    try:
        nodes = [p for p in base.iterdir() if re.fullmatch(r"node\d+", p.name)]
    except OSError:
        return out
    for p in nodes:
        try:
            text = read_system_text(p / "cpulist").strip()
        except (OSError, UsageError):
            continue
        cpus: set[int] = set()
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            if lo.isdigit() and (not hi or hi.isdigit()):
                cpus.update(range(int(lo), int(hi or lo) + 1))
        out[int(p.name[4:])] = cpus
    return out
