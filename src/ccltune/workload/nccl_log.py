"""Read NCCL's own COLL log (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL``). Pure: text in,
one :class:`RankRecord` per process out.

The line, unchanged from NCCL 2.18 to 2.30 (``ncclEnqueueCheck`` in ``src/enqueue.cc``;
``count`` printed with ``%zi`` before 2.23, ``%zu`` since)::

    vm:4029:4042 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f91.. recvbuff 0x7f91..
        count 8396800 datatype 7 op 0 root 0 comm 0x1b65c030 [nranks=1] stream 0x22d29970

``host:pid:tid [cudaDev] NCCL INFO`` is NCCL's prefix (``src/debug.cc``); 2.26+ may put a
timestamp before it (``NCCL_DEBUG_TIMESTAMP_FORMAT``), and a file shared by several
processes (stdout, or one ``NCCL_DEBUG_FILE`` without ``%p``) holds each process's lines
under its own host:pid, which is how ranks are told apart. ``count`` is the API's per-rank
element count (the send count of AllGather, the receive count of ReduceScatter, per peer
for AlltoAll). ``datatype`` is ``ncclDataType_t`` (fp8 e4m3 = 10 and e5m2 = 11 since
2.24). With ``NCCL_DEBUG_SUBSYS=INIT,COLL`` the ``comm 0x.. rank R nRanks N nNodes K`` init
line gives the node count of each communicator; without it ``nnodes`` stays unknown.
"""

from __future__ import annotations

import re
from collections import Counter

from ccltune import collectives
from ccltune.datatypes import DTYPES
from ccltune.workload.model import Key, RankRecord

_PREFIX = r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL INFO "
COLL_HEAD = re.compile(_PREFIX + r"(?P<func>[A-Za-z]+): opCount ")
_COLL = re.compile(
    _PREFIX + r"(?P<func>[A-Za-z]+): opCount (?P<op_count>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ "
    r"count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<op>\d+) root (?P<root>-?\d+) "
    r"comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) \[nranks=(?P<nranks>\d+)\] stream \S+\s*$")
_INIT = re.compile(_PREFIX + r".*?comm (?P<comm>0x[0-9a-fA-F]+) rank \d+ nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+)")
_NCCL_INFO = re.compile(_PREFIX)

# ncclDataType_t -> (ccltune's spelling, bytes)
DATATYPES = {d.nccl: (d.name, d.size) for d in DTYPES.values()}


def has_coll_lines(text: str) -> bool:
    return COLL_HEAD.search(text) is not None


def has_nccl_lines(text: str) -> bool:
    return _NCCL_INFO.search(text) is not None


def parse(text: str, path: str) -> tuple[list[RankRecord], list[str]]:
    """Records per host:pid, and one warning (``path:line: reason``) per COLL line that
    could not be read (a rank that died mid-line leaves its last line cut); the lines
    around it are kept."""
    nnodes: dict[tuple[str, str], int] = {}
    ranks: dict[str, Counter[Key]] = {}
    order: dict[str, list[tuple[Key, str]]] = {}
    warnings: list[str] = []
    lines = text.split("\n")
    for no, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        head = COLL_HEAD.search(line)
        if head is None:
            init = _INIT.search(line)
            if init:
                nnodes[(f"{init['host']}:{init['pid']}", init["comm"])] = int(init["nnodes"])
            continue
        m = _COLL.search(line)
        last = no == len(lines) or (no == len(lines) - 1 and lines[-1] == "")
        if m is None:
            cut = " (the file ends here: the process stopped mid-line)" if last and not text.endswith("\n") else ""
            warnings.append(f"{path}:{no}: skipped an incomplete NCCL COLL line{cut}: {line.strip()[:120]!r}")
            continue
        func = m["func"]
        if func not in collectives.BY_NCCL_NAME:
            warnings.append(f"{path}:{no}: skipped: unknown NCCL function {func!r}")
            continue
        dt = int(m["dtype"])
        if dt not in DATATYPES:
            warnings.append(f"{path}:{no}: skipped: unknown ncclDataType_t {dt}")
            continue
        coll = collectives.BY_NCCL_NAME[func]
        name, size = DATATYPES[dt]
        n, count = int(m["nranks"]), int(m["count"])
        rank = f"{m['host']}:{m['pid']}"
        key = Key(coll.name, count * size * (n if coll.per_rank_count else 1), n, name, count,
                  nnodes.get((rank, m["comm"])))
        ranks.setdefault(rank, Counter())[key] += 1
        order.setdefault(rank, []).append((key, m["comm"]))
    return [RankRecord(path, "nccl-log", rank, calls, order=order[rank]) for rank, calls in ranks.items()], warnings
