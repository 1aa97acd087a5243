"""One tokenizer for the lines of NCCL's (and RCCL's) ``NCCL_DEBUG`` log (pure), shared by doctor's log
reader (``diagnose.parsers.ncclog``), RCCL's (``diagnose.parsers.rcclog``), the workload import of COLL lines
(``workload.nccl_log``) and the rccl-tests reader (``ncclt.table_reader``: RCCL's version block).

NCCL's prefix (``src/debug.cc``, unchanged from 2.18 to 2.30) is ``host:pid:tid [cudaDev] NCCL INFO `` (or
``WARN``); RCCL prints the same. What may stand before it at the start of a line: NCCL's own timestamp
(``NCCL_DEBUG_TIMESTAMP_FORMAT``, 2.26+, ``[%F %T] `` by default), a launcher's tag (torchrun's ``[rank0]:``,
mpirun --tag-output's ``[1,0]<stdout>:``, srun --label's ``0: ``) or a timestamp of digits without brackets.

The communicator's init line, the same in NCCL 2.18-2.30 and RCCL 2.16-2.21 (``src/init.cc``)::

    comm 0x5a1 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0

Every repeat below is bounded (a host name is at most 255 bytes, a pid 10 digits, a pointer 16 hex digits)
and callers cut lines to ``inputs.MAX_LINE_CHARS``: an unanchored search costs a fixed number of steps a
character, whatever a line holds (``tests/unit/test_bad_input_bounds.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HOST_PID_TID = r"(?P<host>[^\s:]{1,255}):(?P<pid>\d{1,10}):(?P<tid>\d{1,20})"
DEV = r"\[(?P<dev>\d{1,6})\]"
# The whole prefix of an INFO line, as the workload import requires it (the process names the rank)
INFO_PREFIX = rf"{HOST_PID_TID} {DEV} NCCL INFO "
# Any NCCL line: the prefix's process and device when present (RCCL's NCCL_DEBUG_FILE copy and hand-cut
# logs drop them), the level, the message; anything before it is ignored
_LINE = re.compile(rf"(?:{HOST_PID_TID} )?(?:{DEV} )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
# A launcher's tag or NCCL's bracketed timestamp; a lead is such tags, or a bare timestamp of digits,
# each ending in a blank. The two kinds start with '[' and a digit and end before one, so a line splits
# into leads one way only (srun's "0: " is a digit lead), and at most 8 are tried: no backtracking
# beyond that on "1: 1: 1: ..."
TAG = r"\[[^\]\n]{0,128}\](?:<std(?:out|err)>)?:?"
LEAD = rf"(?:{TAG}\s*|\d[\d\-:.,/T]*\s+){{0,8}}"
# An INFO prefix that starts its line (after leads): one process's own line, not one glued to a cut line
AT_START = re.compile(rf"^{LEAD}{INFO_PREFIX}", re.M)
TRAILING_TAGS = re.compile(rf"(?:{TAG}){{1,8}}$")
# Before a line of RCCL's printf'd version block: at most one launcher tag and NCCL's prefix (its INFO copy)
_PLAIN_LEAD = r"^(?:\[[^\]]{0,128}\](?:<\w{1,16}>)?:\s?)?(?:[^\s:]{1,255}:\d{1,10}:\d{1,20} (?:\[\d{1,6}\] )?NCCL INFO )?"
# RCCL's version block, from ``showVersion`` (ROCm/rccl ``src/init.cc``) on rank 0: from RCCL 2.21 as
# "%-12s : %s" lines without NCCL's prefix ("RCCL version : 2.21.5-HEAD:0cbce2a", "HIP version  : ...",
# "ROCm version", "Hostname", "Librccl path"), before 2.21 as one line "RCCL version 2.16.5+hip5.6 HEAD:3dcebc7";
# with NCCL_DEBUG_FILE set, an NCCL INFO copy too. A launcher may tag each line.
_VERSION_FACTS = (
    ("rccl_version", re.compile(_PLAIN_LEAD + r"RCCL version\s*:\s*(\S+)")),   # 2.21 and later
    ("rccl_version", re.compile(_PLAIN_LEAD + r"RCCL version\s+(\S+)")),       # before 2.21
    ("hip_version", re.compile(_PLAIN_LEAD + r"HIP version\s*:\s*(\S+)")),
    ("rocm_version", re.compile(_PLAIN_LEAD + r"ROCm version\s*:\s*(\S+)")),
    ("hostname", re.compile(_PLAIN_LEAD + r"Hostname\s*:\s*(\S+)")),
    ("library_path", re.compile(_PLAIN_LEAD + r"Librccl path\s*:\s*(.+?)\s*$")),
)
HIP_SUFFIX = re.compile(r"\+hip(?P<ver>\d+\.\d+)")  # before 2.21: the HIP version in the RCCL version

_COMM = re.compile(r"comm (?P<comm>0x[0-9a-fA-F]{1,16}) rank (?P<rank>\d{1,10}) nRanks (?P<nranks>\d{1,10}) "
                   r"nNodes (?P<nnodes>\d{1,10})(?: localRanks (?P<local>\d{1,10}))?")
# "... rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x.. - Init COMPLETE"; RCCL adds "on core N"
_COMPLETE = re.compile(r"rank (?P<rank>\d{1,10}) nranks (?P<nranks>\d{1,10}) cudaDev (?P<dev>\d{1,6}).*?"
                       r"busId (?P<bus>[0-9a-fA-F]{1,16})(?:.*? on core (?P<core>\d{1,6}))?.*?Init COMPLETE")
_ENV = re.compile(r"^(?P<var>[A-Z][A-Z0-9_]{0,127}) set by environment to (?P<val>.*)$")


@dataclass(frozen=True)
class Line:
    """One NCCL log line: its level (INFO, WARN), message, and the process and device of its prefix
    (None where the line has no prefix)."""

    level: str
    msg: str
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    dev: int | None = None

    @property
    def process(self) -> str | None:
        """``host:pid``, the process that wrote the line (how a shared file's ranks are told apart)."""
        return f"{self.host}:{self.pid}" if self.host is not None else None


def split(line: str) -> Line | None:
    """The NCCL line in ``line`` (its first ``NCCL INFO``/``NCCL WARN``), or None for a line of
    another program. ``line`` is cut to MAX_LINE_CHARS by the caller."""
    m = _LINE.search(line.rstrip()) if "NCCL " in line else None
    if m is None:
        return None
    host = m["host"]
    return Line(m["level"], m["msg"].strip(), host, int(m["pid"]) if host else None,
                int(m["tid"]) if host else None, int(m["dev"]) if m["dev"] is not None else None)


@dataclass(frozen=True)
class CommInit:
    """A communicator's init line: ``rank`` of ``nranks`` on ``nnodes`` nodes (``local_ranks`` on its node,
    where the line says)."""

    comm: str
    rank: int
    nranks: int
    nnodes: int
    local_ranks: int | None


def comm_init(msg: str) -> CommInit | None:
    """The init line's facts, or None when ``msg`` is no init line."""
    m = _COMM.search(msg) if " nNodes " in msg else None  # a cheap test first
    if m is None:
        return None
    return CommInit(m["comm"], int(m["rank"]), int(m["nranks"]), int(m["nnodes"]),
                    int(m["local"]) if m["local"] is not None else None)


@dataclass(frozen=True)
class InitComplete:
    """A rank's ``Init COMPLETE`` line: its device and bus id (hex, as printed, lower case) and, in RCCL's,
    the CPU core its thread ran on."""

    rank: int
    nranks: int
    dev: int
    bus_id: str
    core: int | None


def init_complete(msg: str) -> InitComplete | None:
    m = _COMPLETE.search(msg) if "Init COMPLETE" in msg else None  # the .*? scans only lines that can match
    if m is None:
        return None
    return InitComplete(int(m["rank"]), int(m["nranks"]), int(m["dev"]), m["bus"].lower(),
                        int(m["core"]) if m["core"] is not None else None)


def env_setting(msg: str) -> tuple[str, str] | None:
    """(variable, value) of an ``X set by environment to V`` line. NCCL's integer parameters (and some
    strings, NCCL_COLLNET_ENABLE) end the sentence with a full stop (``NCCL_NVLS_ENABLE set by environment
    to 0.`` in NCCL 2.28, RCCL's ``RCCL_X ... to 1.`` likewise): it is not part of the value. Others
    (NCCL_PROTO, NCCL_ALGO) have none."""
    m = _ENV.match(msg)
    if m is None:
        return None
    value = m["val"].strip()
    return m["var"], value[:-1] if value.endswith(".") else value


def version_fact(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a line of RCCL's version block (keys: rccl_version, hip_version, rocm_version,
    hostname, library_path), or None: what doctor's log reader and the rccl-tests reader take from it."""
    for key, regex in _VERSION_FACTS:
        if m := regex.match(line):
            return key, m.group(1)
    return None
