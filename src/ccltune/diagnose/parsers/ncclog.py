"""Parse an NCCL or RCCL ``NCCL_DEBUG=INFO`` log into plain records (pure, no I/O but ``read_log``).

The lines this reads, as NCCL 2.28 and RCCL 2.2x print them (after NCCL's prefix ``host:pid:tid [dev]``,
split off by :mod:`ccltune.ncclline`; anything before it, such as a launcher's own prefix, is ignored)::

    NCCL INFO NCCL version 2.28.9+cuda13.0
    NCCL INFO comm 0x5a1 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0
    NCCL INFO Channel 00/24 :    0   1   2   3                       (a ring, printed by rank 0)
    NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
    NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read         (an edge; RCCL adds "comm 0x.. nRanks 08",
    NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0         brackets hold the cudaDev or a busId)
    NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
    NCCL INFO TUNER/Plugin: Using ccltune (v4)       /  Successfully loaded external tuner plugin /x/libtuner.so
    NCCL INFO NCCL_P2P_LEVEL set by environment to SYS
    NCCL INFO ncclCommInitRankConfig comm 0x5a1 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 ... - Init COMPLETE
    NCCL INFO AllGather: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..23}   (NCCL_DEBUG_SUBSYS=TUNING,
    NCCL INFO ccltune tuner: loaded 3 rules from /r.conf (1 apply to this communicator:     rank 0, each call;
              nRanks=4 nNodes=1 platform=gpu=NVIDIA H200 nvldomains=1 nvlranks=4..4 partition=? nps=?)
    NCCL WARN ...

RCCL prints its version block without that prefix: rank 0 only, two plain ``printf`` calls
(ROCm/rccl 0cbce2a7, 2.21.5, ``src/init.cc`` showVersion), so a job's log holds, once::

    RCCL version : 2.21.5-HEAD:0cbce2a                (2.16.5: "RCCL version 2.16.5+hip5.6 HEAD:3dcebc7")
    HIP version  : 6.2.41134-65d174c3e
    ROCm version : 6.2.4.0-139-fc3ff81
    Hostname     : mi300x-12
    Librccl path : /opt/rocm-6.2.4/lib/librccl.so.1

With NCCL_DEBUG_FILE set RCCL also writes an INFO copy to that file (``NCCL INFO RCCL version : ...``,
the following lines unprefixed). Both are read; a launcher's tag (``[1,0]<stdout>:``, ``[default0]:``)
before the block is skipped.

A TUNING line's byte count is ``count x type size`` of the call: per rank for AllGather and
ReduceScatter, whose tuner query (and ccltune's sizes) are the whole buffer, ``nRanks`` times
that (:attr:`Choice.tuner_bytes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ccltune import collectives, ncclline
from ccltune.errors import UsageError
from ccltune.files import read_bytes
from ccltune.inputs import MAX_LINE_CHARS

_VERSION = re.compile(r"^(?P<lib>NCCL|RCCL) version\s*:?\s*(?P<ver>\S+)")
_EDGE = re.compile(
    r"^Channel (?P<ch>\d+)(?:/\d+)? : (?P<sr>\d+)\[(?P<sd>[0-9a-fA-F]+)\] -> (?P<dr>\d+)\[(?P<dd>[0-9a-fA-F]+)\]"
    r"(?: \[(?P<kind>send|receive)\])? via (?P<tr>.+?)(?: comm 0x[0-9a-fA-F]+.*)?$"
)
_RING = re.compile(r"^(?:Channel (?P<ch>\d+)/\d+|Ring (?P<ring>\d+)) :\s+(?P<ranks>\d+(?:\s+\d+)*)\s*(?:comm 0x.*)?$")
_TREES = re.compile(r"^Trees (?P<trees>.+?)(?: comm 0x[0-9a-fA-F]+.*)?$")
_CHANNELS = re.compile(r"(?P<coll>\d{1,6}) coll channels,(?: (?P<collnet>\d+) collnet channels,)?"
                       r"(?: (?P<nvls>\d+) nvls channels,)? (?P<p2p>\d+) p2p channels")
_TUNER = re.compile(r"(?:TUNER/Plugin: Using (?P<name>.+)|Successfully loaded external tuner plugin (?P<path>\S+))")
# NCCL's opNames from the registry, longest first (ReduceScatter before Reduce)
_FUNCS = "|".join(sorted(collectives.BY_NCCL_NAME, key=len, reverse=True))
_CHOICE = re.compile(rf"^(?P<func>{_FUNCS}): (?P<bytes>\d+) Bytes "
                     r"-> Algo (?P<algo>\w+) proto (?P<proto>\w+)(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?"
                     r"(?: comm (?P<comm>0x[0-9a-fA-F]+))?")
_PLUGIN_RULES = re.compile(r"ccltune tuner: loaded (?P<n>\d+) rules from (?P<path>.+?) \((?P<apply>\d+) apply to this "
                           r"communicator: nRanks=(?P<nranks>\d+) nNodes=(?P<nnodes>\d+) platform=gpu=(?P<gpu>.*?) "
                           r"nvldomains=(?P<dom>-?\d+) nvlranks=(?P<rmin>-?\d+)\.\.(?P<rmax>-?\d+) "
                           r"partition=(?P<part>\S+) nps=(?P<nps>\S+)\)")
# NCCL's spelling of a function in TUNING lines -> the tuner plugin's collective name
TUNER_FUNC = {n: c.plugin_name for n, c in collectives.BY_NCCL_NAME.items() if c.plugin_name}


@dataclass(frozen=True)
class Edge:
    """One connection of one channel: ``src_rank`` sends to ``dst_rank`` through ``transport``."""

    channel: int
    src_rank: int
    src_dev: str
    dst_rank: int
    dst_dev: str
    transport: str  # "P2P/CUMEM/read", "SHM/direct/direct", "NET/IB/0/GDRDMA", ...
    kind: str | None  # "send"/"receive" for network edges, else None
    line: int

    @property
    def family(self) -> str:
        """P2P, SHM, NET, COLLNET, NVLS..."""
        return self.transport.split("/", 1)[0].strip()


@dataclass(frozen=True)
class Choice:
    """What NCCL chose for one collective call (a TUNING line, printed by rank 0)."""

    func: str  # NCCL's name: AllReduce, AllGather, ...
    nbytes: int  # as logged: count x type size
    algo: str  # RING, TREE, PAT, NVLS, ...
    proto: str  # LL, LL128, SIMPLE
    channels: int | None  # channelHi - channelLo + 1; None when the line has no channel range
    comm: str | None
    line: int

    def tuner_bytes(self, n_ranks: int) -> int:
        """The size NCCL passes to a tuner for this call (whole buffer for AllGather/ReduceScatter)."""
        coll = collectives.BY_NCCL_NAME.get(self.func)
        return self.nbytes * n_ranks if coll is not None and coll.per_rank_count else self.nbytes


@dataclass(frozen=True)
class PluginLoad:
    """The ccltune plugin's own INFO line for one communicator: its rule file and platform."""

    rules: int
    path: str
    applying: int
    n_ranks: int
    n_nodes: int
    gpu: str | None
    nvl_domains: int
    nvl_ranks: tuple[int, int]
    partition: str | None
    nps: str | None


@dataclass(frozen=True)
class Process:
    host: str
    pid: int


@dataclass
class NcclLog:
    """What a log says. Fields are None / empty when the log does not say."""

    library: str | None = None  # "NCCL" or "RCCL"
    version: str | None = None
    versions: dict[str, str] = field(default_factory=dict)  # each version the log names -> where first (process, line)
    hip_version: str | None = None  # RCCL: the HIP it was built with ("6.2.41134-65d174c3e", or "5.6" from "+hip5.6")
    nranks: int | None = None
    nnodes: int | None = None
    edges: list[Edge] = field(default_factory=list)
    rings: dict[int, list[int]] = field(default_factory=dict)
    trees: list[str] = field(default_factory=list)
    coll_channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int | None = None
    tuner_plugin: str | None = None  # an external tuner that loaded
    env: dict[str, str] = field(default_factory=dict)  # "X set by environment to Y"
    warnings: list[str] = field(default_factory=list)
    rank_process: dict[int, Process] = field(default_factory=dict)
    rank_threads: dict[int, int] = field(default_factory=dict)
    init_complete: set[int] = field(default_factory=set)
    ranks_seen: set[int] = field(default_factory=set)  # ranks with a 'comm ... rank r nRanks' line here
    choices: list[Choice] = field(default_factory=list)
    plugin_loads: list[PluginLoad] = field(default_factory=list)
    lines: int = 0
    nccl_lines: int = 0


def read_log(path: str | Path, flag: str = "--nccl-log") -> str:
    """The text of a log file. Raises UsageError for a missing, unreadable or binary file."""
    p = Path(path)
    data = read_bytes(p, flag)
    nul = data.find(b"\x00")
    if nul >= 0:
        raise UsageError(f"{flag}: {str(p)!r} is binary, not a text log (NUL byte at offset {nul})")
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(16, len(text) // 100):
        raise UsageError(f"{flag}: {str(p)!r} is not UTF-8 text (more than 1% undecodable bytes)")
    return text


def parse_log(text: str) -> NcclLog:
    """Parse the text of an NCCL/RCCL INFO log. Lines that are not NCCL's are counted and skipped."""
    log = NcclLog()
    for number, raw in enumerate(text.splitlines(), start=1):
        log.lines += 1
        raw = raw[:MAX_LINE_CHARS]  # no NCCL line is longer: a regex reads at most that much of one line
        line = ncclline.split(raw)
        if line is None:
            _parse_plain(log, raw.rstrip())
            continue
        log.nccl_lines += 1
        if line.level == "WARN":  # NCCL's level, not a verdict
            log.warnings.append(line.msg)
            continue
        _parse_info(log, line, number)
    return log


def _unknown(text: str) -> str | None:
    return None if text in ("?", "") else text


def _set_version(log: NcclLog, lib: str, ver: str) -> None:
    if log.version is None:
        log.version = ver
        log.library = "RCCL" if lib == "RCCL" or "hip" in ver else "NCCL"
        if h := ncclline.HIP_SUFFIX.search(ver):
            log.hip_version = log.hip_version or h["ver"]


def _parse_plain(log: NcclLog, line: str) -> None:
    """A line without NCCL's prefix: RCCL's printf'd version block (or the continuation of its INFO copy)."""
    found = ncclline.version_fact(line)
    if found is not None and found[0] == "rccl_version":
        _set_version(log, "RCCL", found[1])
    elif found is not None and found[0] == "hip_version" and log.hip_version is None:
        log.hip_version = found[1]


def _parse_info(log: NcclLog, line: ncclline.Line, number: int) -> None:
    msg = line.msg
    if c := _CHOICE.match(msg):
        channels = int(c["hi"]) - int(c["lo"]) + 1 if c["lo"] is not None else None
        log.choices.append(Choice(c["func"], int(c["bytes"]), c["algo"].upper(), c["proto"].upper(), channels,
                                  c["comm"], number))
    elif p := _PLUGIN_RULES.search(msg):
        log.plugin_loads.append(PluginLoad(int(p["n"]), p["path"], int(p["apply"]), int(p["nranks"]),
                                           int(p["nnodes"]), _unknown(p["gpu"]), int(p["dom"]),
                                           (int(p["rmin"]), int(p["rmax"])), _unknown(p["part"]), _unknown(p["nps"])))
    elif v := _VERSION.match(msg):
        _set_version(log, v["lib"], v["ver"])
        log.versions.setdefault(v["ver"], f"{line.process or 'a process'}, line {number}")
    elif e := _EDGE.match(msg):
        log.edges.append(Edge(int(e["ch"]), int(e["sr"]), e["sd"], int(e["dr"]), e["dd"], e["tr"].strip(),
                              e["kind"], number))
    elif r := _RING.match(msg):
        log.rings.setdefault(int(r["ch"] or r["ring"]), [int(x) for x in r["ranks"].split()])
    elif t := _TREES.match(msg):
        log.trees.append(t["trees"])
    elif c := _CHANNELS.search(msg):
        log.coll_channels = int(c["coll"])
        log.nvls_channels = int(c["nvls"]) if c["nvls"] else None
        log.p2p_channels = int(c["p2p"])
    elif (u := _TUNER.search(msg)) and "internal" not in msg:
        log.tuner_plugin = (u["name"] or u["path"]).strip()
    elif setting := ncclline.env_setting(msg):
        log.env[setting[0]] = setting[1]
    elif k := ncclline.comm_init(msg):
        log.nranks, log.nnodes = k.nranks, k.nnodes
        log.ranks_seen.add(k.rank)
        if line.host is not None and line.pid is not None and line.tid is not None:
            log.rank_process[k.rank] = Process(line.host, line.pid)
            log.rank_threads[k.rank] = line.tid
    elif d := ncclline.init_complete(msg):
        log.init_complete.add(d.rank)
        log.nranks = log.nranks or d.nranks
