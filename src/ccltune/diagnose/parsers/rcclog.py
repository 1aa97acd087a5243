"""RCCL-only facts of an INFO log (pure).

The lines NCCL and RCCL share (version, transports, rings, trees, channels) are read by
``ncclog``; this module reads what only RCCL prints (formats from ROCm/rccl 0cbce2a7, 2.21.5):

- ``... - Init COMPLETE`` ends with ``on core N`` in RCCL: the CPU core the rank's thread ran on;
  with ``cudaDev`` and ``busId`` it places each rank against its GPU's NUMA node;
- ``MSCCL: Initialization finished, localSize N`` (MSCCL on), ``MSCCL++: Enabled! Msg size
  threshold=N`` (MSCCL++ on), ``MSCCL++: Cannot enable ...`` WARN lines (off, and why);
- ``RCCL_X set by environment to V.`` for RCCL's own parameters (``src/misc/param.cc``);
- the host WARNs RCCL's ``ncclInit`` prints once per process (``src/init.cc``): ``NUMA auto balancing enabled
  ...`` (kernel.numa_balancing is 1) and ``Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment ...`` (RCCL
  2.16, and later builds against HIP before 5.7.31920: see ``checks.rccl.checks_fine_grain``), and the
  ``Bootstrap : Using ...`` INFO line of the same function, which shows the log covers it.

The AMD checks built on these facts are in ``diagnose.checks.rccl``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ccltune.inputs import MAX_LINE_CHARS

_COMPLETE = re.compile(r"rank (?P<rank>\d+) nranks (?P<n>\d+) cudaDev (?P<dev>\d+).*?busId (?P<bus>[0-9a-fA-F]+)"
                       r".*?on core (?P<core>\d+) - Init COMPLETE")
_MSCCL_ON = re.compile(r"MSCCL: Initialization finished")
_MSCCLPP_ON = re.compile(r"MSCCL\+\+: Enabled! Msg size threshold=(?P<t>\d+)")
_MSCCLPP_OFF = re.compile(r"MSCCL\+\+: (?P<why>Cannot enable .*|Feature not enabled.*)")
_PARAM = re.compile(r"NCCL INFO (?P<var>RCCL_[A-Z0-9_]+) set by environment to (?P<val>-?\d+)\.?\s*$")
_NUMA_WARN = re.compile(r"NCCL WARN NUMA auto balancing enabled")
_FINE_GRAIN_WARN = re.compile(r'NCCL WARN Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment')
_INIT = re.compile(r"NCCL INFO Bootstrap : Using")
_LOCAL = re.compile(r"comm 0x[0-9a-fA-F]+ rank \d+ nRanks \d+ nNodes \d+ localRanks (?P<local>\d+)")


@dataclass
class RcclFacts:
    cores: dict[int, int] = field(default_factory=dict)  # rank -> CPU core at init
    devices: dict[int, int] = field(default_factory=dict)  # rank -> cudaDev (HIP device)
    bus_ids: dict[int, str] = field(default_factory=dict)  # rank -> busId as RCCL prints it (hex)
    msccl: bool | None = None
    mscclpp: bool | None = None
    mscclpp_threshold: int | None = None
    mscclpp_off_reason: str | None = None
    params: dict[str, int] = field(default_factory=dict)  # RCCL_* set by environment
    local_ranks: int | None = None
    numa_warned: bool = False  # RCCL's "NUMA auto balancing enabled" WARN
    fine_grain_warned: bool = False  # RCCL's 'Missing "HSA_FORCE_FINE_GRAIN_PCIE=1"' WARN
    init_seen: bool = False  # ncclInit's "Bootstrap : Using" line: the log covers where those WARNs come


def parse(text: str) -> RcclFacts:
    facts = RcclFacts()
    for line in (raw[:MAX_LINE_CHARS] for raw in text.splitlines()):  # a regex reads at most this much of a line
        if "NCCL" not in line:
            continue
        if _NUMA_WARN.search(line):
            facts.numa_warned = True
        elif _FINE_GRAIN_WARN.search(line):
            facts.fine_grain_warned = True
        elif _INIT.search(line):
            facts.init_seen = True
        elif m := _COMPLETE.search(line):
            rank = int(m.group("rank"))
            facts.cores[rank], facts.devices[rank], facts.bus_ids[rank] = (
                int(m.group("core")), int(m.group("dev")), m.group("bus").lower())
        elif _MSCCL_ON.search(line):
            facts.msccl = True
        elif m := _MSCCLPP_ON.search(line):
            facts.mscclpp, facts.mscclpp_threshold = True, int(m.group("t"))
        elif m := _MSCCLPP_OFF.search(line):
            facts.mscclpp, facts.mscclpp_off_reason = False, m.group("why")
        elif m := _PARAM.search(line):
            facts.params[m.group("var")] = int(m.group("val"))
        elif (m := _LOCAL.search(line)) and facts.local_ranks is None:
            facts.local_ranks = int(m.group("local"))
    return facts


def bus_to_int(bdf: str) -> int | None:
    """``0000:05:00.0`` -> 0x5000, RCCL's busId integer (hex digits of the address, ':' and '.' skipped)."""
    digits = bdf.replace(":", "").replace(".", "")
    try:
        return int(digits, 16)
    except ValueError:
        return None
