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
for AlltoAll, of one direction for Send and Recv; a Send and a Recv make one sendrecv call,
see :class:`~ccltune.workload.model.Halves`). ``datatype`` is ``ncclDataType_t`` (fp8 e4m3 = 10
and e5m2 = 11 since 2.24); ``op`` is ``ncclRedOp_t`` (:data:`REDOPS`), kept for reducing collectives. With ``NCCL_DEBUG_SUBSYS=INIT,COLL`` the ``comm 0x.. rank R nRanks N nNodes K`` init
line gives the node count of each communicator; without it ``nnodes`` stays unknown.
"""

from __future__ import annotations

import re
from collections import Counter

from ccltune import collectives, ncclline
from ccltune.datatypes import DTYPES, OPS
from ccltune.inputs import MAX_COUNT, MAX_LINE_CHARS, MAX_RANKS
from ccltune.workload.model import Halves, Key, RankRecord

# NCCL's prefix and what may stand before it (a timestamp, a launcher's tag) are ncclline's. Only those
# may start a line: a prefix found inside a line is another process's line glued to a cut one (see parse)
_PREFIX = ncclline.INFO_PREFIX
_AT_START = ncclline.AT_START
_TRAILING_TAGS = ncclline.TRAILING_TAGS
COLL_HEAD = re.compile(_PREFIX + r"(?P<func>[A-Za-z]+): opCount ")
_COLL = re.compile(
    _PREFIX + r"(?P<func>[A-Za-z]+): opCount (?P<op_count>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ "
    r"count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<op>\d+) root (?P<root>-?\d+) "
    r"comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) \[nranks=(?P<nranks>\d+)\] stream \S+\s*$")
_NCCL_INFO = re.compile(_PREFIX)

# ncclDataType_t -> (ccltune's spelling, bytes)
DATATYPES = {d.nccl: (d.name, d.size) for d in DTYPES.values()}
# ncclRedOp_t (nccl.h: ncclSum 0 .. ncclAvg 4) -> ccltune's op name. A value from ncclNumOps (5) up is an op
# made at run time; NCCL's only maker of such ops is ncclRedOpCreatePreMulSum (PyTorch's PREMUL_SUM), ccltune's
# mulsum. NCCL prints the op for every function; only a reducing collective's means anything.
REDOPS = {v: k for k, v in OPS.items() if v is not None}
_NUM_OPS = len(REDOPS)


def redop(value: int) -> str:
    """ccltune's name of an ncclRedOp_t value as the COLL line prints it."""
    return REDOPS.get(value, "mulsum" if value >= _NUM_OPS else "sum")


def _any_line(pattern: re.Pattern[str], text: str) -> bool:
    """Whether a line holding ' NCCL INFO ' matches ``pattern`` within its first MAX_LINE_CHARS."""
    at = text.find(" NCCL INFO ")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if pattern.search(text, start, min(end, start + MAX_LINE_CHARS)):
            return True
        at = text.find(" NCCL INFO ", end)
    return False


def has_coll_lines(text: str) -> bool:
    return _any_line(COLL_HEAD, text)


def has_nccl_lines(text: str) -> bool:
    return _any_line(_NCCL_INFO, text)


def _known_hosts(text: str) -> dict[str, set[str]]:
    """pid -> the host names its lines begin with (lines whose NCCL prefix starts the line)."""
    out: dict[str, set[str]] = {}
    for m in _AT_START.finditer(text):
        out.setdefault(m["pid"], set()).add(m["host"])
    return out


def _segments(line: str, known: dict[str, set[str]]) -> tuple[list[str], int]:
    """The COLL lines one physical line holds, each from its host name on, and how many heads
    could not be told to a process. A head that starts the line (after a timestamp or a
    launcher's tag) is one process's line. A head inside the line is another process's line
    glued to the end of a cut one (a shared stdout): its host name is glued to the cut text
    ('recvvm:4029'), so it is the longest host that process (its pid) starts lines with
    elsewhere, and the text before it is the cut line (a launcher's tag between them dropped)."""
    heads = list(COLL_HEAD.finditer(line))
    first = _AT_START.match(line)
    starts: list[int | None] = []
    for h in heads:
        if first is not None and h.start() == first.start("host"):
            starts.append(h.start())
            continue
        token = h["host"]
        host = max((k for k in known.get(h["pid"], ()) if token.endswith(k)), key=len, default=None)
        starts.append(None if host is None else h.end("host") - len(host))
    bounds = [h.start() if st is None else st for h, st in zip(heads, starts)] + [len(line)]
    segs = [_TRAILING_TAGS.sub("", line[st:bounds[j + 1]]) for j, st in enumerate(starts) if st is not None]
    return segs, starts.count(None)


def parse(text: str, path: str) -> tuple[list[RankRecord], list[str]]:
    """Records per host:pid, and one warning (``path:line: reason``) per COLL line that
    could not be read (a rank that died mid-line leaves its last line cut; processes
    sharing stdout may leave a cut line with another's line glued to it, of which the
    complete one is counted); the lines around it are kept."""
    nnodes: dict[tuple[str, str], int] = {}
    ranks: dict[str, Counter[Key]] = {}
    order: dict[str, list[tuple[Key, str]]] = {}
    warnings: list[str] = []
    known = _known_hosts(text)
    halves = Halves[tuple[int, int]]()
    lines = text.split("\n")
    for no, line in enumerate(lines, start=1):
        line = line[:MAX_LINE_CHARS].rstrip("\r")  # a longer line is no NCCL line: only its start is read
        if " NCCL INFO " not in line or COLL_HEAD.search(line) is None:
            head = ncclline.split(line) if " nNodes " in line else None  # a cheap test first
            init = ncclline.comm_init(head.msg) if head is not None and head.level == "INFO" else None
            if init is not None and head is not None and head.process is not None:
                nnodes[(head.process, init.comm)] = init.nnodes
            continue
        segs, untold = _segments(line, known)
        matches = [_COLL.match(seg) for seg in segs]
        if len(segs) + untold > 1 or untold:
            warnings.append(f"{path}:{no}: {len(segs) + untold} NCCL COLL lines glued on one line (processes "
                            f"sharing one stream, one cut short): counted the {sum(m is not None for m in matches)} "
                            f"complete one(s), skipped {sum(m is None for m in matches) + untold}"
                            f"{' whose process cannot be told' if untold else ''}: {line.strip()[:160]!r}")
        elif matches[0] is None:
            last = no == len(lines) or (no == len(lines) - 1 and lines[-1] == "")
            cut = " (the file ends here: the process stopped mid-line)" if last and not text.endswith("\n") else ""
            warnings.append(f"{path}:{no}: skipped an incomplete NCCL COLL line{cut}: {line.strip()[:120]!r}")
        for j, m in enumerate(matches):
            key = _key(m, nnodes, path, no, warnings) if m is not None else None
            rank = f"{m['host']}:{m['pid']}" if m is not None else ""
            if m is not None and key is not None and halves.call_of((rank, m["comm"]), key, m["func"],
                                                  collectives.BY_NCCL_NAME[m["func"]].nccl_names, (no, j)) == (no, j):
                ranks.setdefault(rank, Counter())[key] += 1
                order.setdefault(rank, []).append((key, m["comm"]))
    return [RankRecord(path, "nccl-log", rank, calls, order=order[rank]) for rank, calls in ranks.items()], warnings


def _key(m: re.Match[str], nnodes: dict[tuple[str, str], int], path: str, no: int, warnings: list[str]) -> Key | None:
    func = m["func"]
    if func not in collectives.BY_NCCL_NAME:
        warnings.append(f"{path}:{no}: skipped: unknown NCCL function {func!r}")
        return None
    dt = int(m["dtype"])
    if dt not in DATATYPES:
        warnings.append(f"{path}:{no}: skipped: unknown ncclDataType_t {dt}")
        return None
    coll = collectives.BY_NCCL_NAME[func]
    name, size = DATATYPES[dt]
    if len(m["nranks"]) > 6 or len(m["count"]) > 15 or not 1 <= int(m["nranks"]) <= MAX_RANKS \
            or int(m["count"]) > MAX_COUNT:  # beyond any real call: nothing sized by it
        warnings.append(f"{path}:{no}: skipped: count {m['count'][:20]} or nranks {m['nranks'][:20]} beyond any real "
                        f"call (at most {MAX_COUNT} elements, {MAX_RANKS} ranks)")
        return None
    n, count = int(m["nranks"]), int(m["count"])
    op = redop(int(m["op"][:12])) if coll.reduces else None
    return Key(coll.name, count * size * (n if coll.per_rank_count else 1), n, name, count,
               nnodes.get((f"{m['host']}:{m['pid']}", m["comm"])), op)
