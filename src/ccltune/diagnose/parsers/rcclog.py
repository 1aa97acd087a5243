"""RCCL-only facts of an INFO log (pure).

The lines NCCL and RCCL share (version, transports, rings, trees, channels) are read by
``ncclog``; this module reads what only RCCL prints (formats from ROCm/rccl 0cbce2a7, 2.21.5):

- ``... - Init COMPLETE`` ends with ``on core N`` in RCCL: the CPU core the rank's thread ran on;
  with ``cudaDev`` and ``busId`` it places each rank against its GPU's NUMA node;
- ``MSCCL: Initialization finished, localSize N`` (MSCCL on), ``MSCCL++: Enabled! Msg size
  threshold=N`` (MSCCL++ on), ``MSCCL++: Cannot enable ...`` WARN lines (off, and why);
- ``RCCL_X set by environment to V.`` for RCCL's own parameters (``src/misc/param.cc``).

The AMD checks built on these facts are in ``diagnose.checks.rccl``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_COMPLETE = re.compile(r"rank (?P<rank>\d+) nranks (?P<n>\d+) cudaDev (?P<dev>\d+).*?busId (?P<bus>[0-9a-fA-F]+)"
                       r".*?on core (?P<core>\d+) - Init COMPLETE")
_MSCCL_ON = re.compile(r"MSCCL: Initialization finished")
_MSCCLPP_ON = re.compile(r"MSCCL\+\+: Enabled! Msg size threshold=(?P<t>\d+)")
_MSCCLPP_OFF = re.compile(r"MSCCL\+\+: (?P<why>Cannot enable .*|Feature not enabled.*)")
_PARAM = re.compile(r"NCCL INFO (?P<var>RCCL_[A-Z0-9_]+) set by environment to (?P<val>-?\d+)\.?\s*$")
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


def parse(text: str) -> RcclFacts:
    facts = RcclFacts()
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        if m := _COMPLETE.search(line):
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
