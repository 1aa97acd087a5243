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

from ccltune import ncclline
from ccltune.inputs import MAX_LINE_CHARS

# searched in a line's message (ncclline.split: after NCCL's prefix)
_MSCCL_ON = re.compile(r"MSCCL: Initialization finished")
_MSCCLPP_ON = re.compile(r"MSCCL\+\+: Enabled! Msg size threshold=(?P<t>\d+)")
_MSCCLPP_OFF = re.compile(r"MSCCL\+\+: (?P<why>Cannot enable .*|Feature not enabled.*)")
_INT = re.compile(r"-?\d{1,20}")
# the WARNs (and the INFO line of the function that prints them) as each message starts
_NUMA_WARN = "NUMA auto balancing enabled"
_FINE_GRAIN_WARN = 'Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment'
_INIT = "Bootstrap : Using"


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
    for raw in text.splitlines():
        line = ncclline.split(raw[:MAX_LINE_CHARS])  # a regex reads at most this much of a line
        if line is None:
            continue
        msg = line.msg
        if line.level == "WARN" and msg.startswith(_NUMA_WARN):
            facts.numa_warned = True
        elif line.level == "WARN" and msg.startswith(_FINE_GRAIN_WARN):
            facts.fine_grain_warned = True
        elif line.level == "INFO" and msg.startswith(_INIT):
            facts.init_seen = True
        elif (done := ncclline.init_complete(msg)) and done.core is not None:
            facts.cores[done.rank], facts.devices[done.rank], facts.bus_ids[done.rank] = done.core, done.dev, done.bus_id
        elif _MSCCL_ON.search(msg):
            facts.msccl = True
        elif m := _MSCCLPP_ON.search(msg):
            facts.mscclpp, facts.mscclpp_threshold = True, int(m.group("t"))
        elif m := _MSCCLPP_OFF.search(msg):
            facts.mscclpp, facts.mscclpp_off_reason = False, m.group("why")
        elif (setting := ncclline.env_setting(msg)) and setting[0].startswith("RCCL_") and _INT.fullmatch(setting[1]):
            facts.params[setting[0]] = int(setting[1])
        elif (comm := ncclline.comm_init(msg)) and comm.local_ranks is not None and facts.local_ranks is None:
            facts.local_ranks = comm.local_ranks
    return facts


def bus_to_int(bdf: str) -> int | None:
    """``0000:05:00.0`` -> 0x5000, RCCL's busId integer (hex digits of the address, ':' and '.' skipped)."""
    digits = bdf.replace(":", "").replace(".", "")
    try:
        return int(digits, 16)
    except ValueError:
        return None
