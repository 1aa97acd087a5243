"""Read the tuner plugin's capture files (plugin/src/capture.c writes them; format in
docs/workload.md). Pure: text in, a :class:`RankRecord` out.

One file holds one communicator of one process; the reader names its rank by host:pid,
so the files of one process are added up into one rank by :func:`model.combine`. A
capture knows the tuner's view only: collective, nBytes (ccltune's size_bytes), nRanks,
nNodes, numPipeOps and regBuff; no datatype, no element count.
"""

from __future__ import annotations

import re
from collections import Counter

from ccltune import collectives
from ccltune.errors import UsageError
from ccltune.files import printable
from ccltune.inputs import INT64_MAX, MAX_CALL_BYTES, MAX_RANKS
from ccltune.workload.model import Key, RankRecord

MAGIC = "# ccltune-capture 1"
# The plugin's table holds CCLT_CAPTURE_SLOTS (plugin/src/capture.h: 4096) keys per communicator and writes one
# line per key it holds: a file never has more call lines. A line is at most ~60 characters
# ("reducescatter,<20 digits>,<4>,-1,<20 digits>"), the header a dozen short lines: 1 MiB is 4x the largest
# file the plugin writes. Longer input is not a capture file, and is refused before any line is parsed (a 512 MiB
# one took minutes to be read line by line).
MAX_CALL_LINES = 4096
MAX_BYTES = 1 << 20
_HEADER_INTS = ("pid", "nranks", "nnodes", "calls", "overflow_calls", "overflow_bytes")


def is_capture(head: str) -> bool:
    return head.startswith(MAGIC)


def parse(text: str, path: str) -> RankRecord:
    """Parse one capture file. A bad line, a missing header field, a missing '# end'
    (the file was cut) or counts that do not add up name the file and line."""
    if len(text) > MAX_BYTES:
        raise UsageError(f"{path}: {len(text)} characters, more than a capture file holds ({MAX_BYTES}: the tuner "
                         f"plugin writes at most {MAX_CALL_LINES} call lines per communicator)")
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != MAGIC:
        raise UsageError(f"{path}:1: not a ccltune capture file (first line is not {MAGIC!r})")
    call_lines = 0
    head: dict[str, str] = {}
    calls: Counter[Key] = Counter()
    variants: dict[Key, Counter[tuple[int, int]]] = {}
    ended = False
    for no, raw in enumerate(lines[1:], start=2):
        line = raw.rstrip("\r")
        if not line or (line.startswith("#") and line != "# end"):
            continue
        if ended:
            raise UsageError(f"{path}:{no}: text after '# end'")
        if line == "# end":
            ended = True
            continue
        if "=" in line and "," not in line:
            name, _, value = line.partition("=")
            head[name] = value
            continue
        if not all(h in head for h in _HEADER_INTS):
            raise UsageError(f"{path}:{no}: a call line before the header is complete")
        call_lines += 1
        if call_lines > MAX_CALL_LINES:
            raise UsageError(f"{path}:{no}: more than {MAX_CALL_LINES} call lines: the tuner plugin writes at most "
                             f"{MAX_CALL_LINES} per communicator (one per key of its table): not a capture file it wrote")
        key, variant, n = _call_line(line, path, no, head)
        calls[key] += n
        variants.setdefault(key, Counter())[variant] += n
    if not ended:
        raise UsageError(f"{path}:{len(lines)}: the file ends without '# end' (cut short?)")
    for h in _HEADER_INTS:
        if h not in head:
            raise UsageError(f"{path}: header field {h!r} missing")
    ints = {h: _int(head[h], path, f"header {h}") for h in _HEADER_INTS}
    if sum(calls.values()) + ints["overflow_calls"] != ints["calls"]:
        raise UsageError(f"{path}: the lines count {sum(calls.values())} calls and overflow_calls "
                         f"{ints['overflow_calls']}, but the header says calls={ints['calls']}")
    host = head.get("host", "?")
    return RankRecord(path, "capture", f"{host}:{ints['pid']}", calls, {}, variants,
                      overflow_calls=ints["overflow_calls"], overflow_bytes=ints["overflow_bytes"],
                      comm=f"{head.get('comm_id', '?')}.{head.get('comm_seq', '?')}")


def parse_noted(text: str, path: str) -> tuple[RankRecord, list[str]]:
    """:func:`parse`, and a note for a file of a one-rank communicator with no call: NCCL asks no tuner there."""
    rec = parse(text, path)
    one_rank = re.search(r"^nranks=1\r?$", text, re.M) is not None
    if rec.calls or not one_rank:
        return rec, []
    return rec, [f"{path}: a one-rank communicator (nranks=1): NCCL consults no tuner there, so the plugin counts no "
                 "call (a one-GPU job: capture its collectives with NCCL's COLL log or a trace instead)"]


def _int(text: str, path: str, what: str, no: int | None = None, low: int = 0, high: int = INT64_MAX) -> int:
    try:
        v = int(text)
    except ValueError:  # not digits, or more than 4,300 of them
        v = -1
    if not low <= v <= high and not (what == "reg_buff" and v == -1):
        place = f"{path}:{no}" if no else path
        raise UsageError(f"{place}: {what} {printable(text, 40)!r} is not an integer in {low}..{high}")
    return v


def _call_line(line: str, path: str, no: int, head: dict[str, str]) -> tuple[Key, tuple[int, int], int]:
    f = line.split(",")
    if len(f) != 5:
        raise UsageError(f"{path}:{no}: expected collective,nbytes,num_pipe_ops,reg_buff,calls; got {line!r}")
    if f[0] not in collectives.BY_PLUGIN_NAME:
        raise UsageError(f"{path}:{no}: unknown collective {f[0]!r} (a tuner sees only {', '.join(collectives.BY_PLUGIN_NAME)})")
    nbytes = _int(f[1], path, "nbytes", no, high=MAX_CALL_BYTES)
    pipe = _int(f[2], path, "num_pipe_ops", no)
    reg = _int(f[3], path, "reg_buff", no)
    if reg not in (-1, 0, 1):
        raise UsageError(f"{path}:{no}: reg_buff {reg} is not -1, 0 or 1")
    n = _int(f[4], path, "calls", no)
    nranks = _int(head["nranks"], path, "nranks", low=1, high=MAX_RANKS)  # 0 would be written, then refused
    key = Key(collectives.BY_PLUGIN_NAME[f[0]].name, nbytes, nranks,
              nnodes=_int(head["nnodes"], path, "nnodes"))
    return key, (pipe, reg), n
