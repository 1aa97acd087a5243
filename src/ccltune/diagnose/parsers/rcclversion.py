"""RCCL's version block, one line at a time: what the log reader (doctor) and the rccl-tests importer
both take from it.

RCCL prints it from ``showVersion`` (ROCm/rccl ``src/init.cc``) on rank 0: from RCCL 2.21 as
``"%-12s : %s"`` lines (``RCCL version : 2.21.5-HEAD:0cbce2a``, ``HIP version  : ...``, ``ROCm version``,
``Hostname``, ``Librccl path``) without NCCL's log prefix, before 2.21 as one line
``RCCL version 2.16.5+hip5.6 HEAD:3dcebc7``; with NCCL_DEBUG_FILE set, an ``NCCL INFO`` copy too. A
launcher may tag each line (mpirun --tag-output ``[1,0]<stdout>:``, torchrun ``[rank0]:``).
"""

from __future__ import annotations

import re

from ccltune.ncclline import PLAIN_LEAD as _PREFIX
_FACTS = (
    ("rccl_version", re.compile(_PREFIX + r"RCCL version\s*:\s*(\S+)")),   # 2.21 and later
    ("rccl_version", re.compile(_PREFIX + r"RCCL version\s+(\S+)")),       # before 2.21
    ("hip_version", re.compile(_PREFIX + r"HIP version\s*:\s*(\S+)")),
    ("rocm_version", re.compile(_PREFIX + r"ROCm version\s*:\s*(\S+)")),
    ("hostname", re.compile(_PREFIX + r"Hostname\s*:\s*(\S+)")),
    ("library_path", re.compile(_PREFIX + r"Librccl path\s*:\s*(.+?)\s*$")),
)
HIP_SUFFIX = re.compile(r"\+hip(?P<ver>\d+\.\d+)")  # before 2.21: the HIP version in the RCCL version


def fact(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a version-block line (keys: rccl_version, hip_version, rocm_version,
    hostname, library_path), or None."""
    for key, regex in _FACTS:
        if m := regex.match(line):
            return key, m.group(1)
    return None
