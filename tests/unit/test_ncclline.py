"""ccltune.ncclline, the one tokenizer of NCCL's log lines, on lines of the real logs under tests/fixtures
(logs/README.md and workload/README.md name the jobs that wrote them)."""

from __future__ import annotations

from pathlib import Path

from ccltune import ncclline
from ccltune.diagnose.parsers import ncclog, rcclog
from ccltune.workload import nccl_log

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def test_a_real_line_splits_into_process_device_level_and_message():
    line = next(x for x in _lines(FIX / "logs" / "nccl_4gpu_p2p.log") if "set by environment" in x)
    assert ncclline.split(line) == ncclline.Line("INFO", "NCCL_NVLS_ENABLE set by environment to 0.", "vm", 7842, 7842, 0)
    assert ncclline.split(line).process == "vm:7842"
    assert ncclline.env_setting(ncclline.split(line).msg) == ("NCCL_NVLS_ENABLE", "0")  # NCCL's full stop dropped
    assert ncclline.split("NCCL version mismatch (a program's own text)") is None  # no level word after "NCCL "
    assert ncclline.split("plain text") is None


def test_a_launchers_tag_is_skipped_and_the_process_kept():
    tagged = next(x for x in _lines(FIX / "workload" / "coll-2proc-glued.log") if x.startswith("[rank1]:"))
    head = ncclline.split(tagged)
    assert head is not None and head.process == "vm:4086" and head.level == "INFO"
    assert ncclline.AT_START.match(tagged)["pid"] == "4086"
    assert ncclline.AT_START.match("0: " + tagged[len("[rank1]:"):])["host"] == "vm"  # srun --label


def test_every_init_line_of_the_nccl_and_rccl_logs_reads_alike():
    for name, ranks, local in (("nccl_4gpu_p2p.log", 4, 4), ("rccl_mi300x_8gpu.log", 8, 8)):
        inits = [ncclline.comm_init(h.msg) for h in map(ncclline.split, _lines(FIX / "logs" / name))
                 if h is not None and ncclline.comm_init(h.msg) is not None]
        assert {i.rank for i in inits} == set(range(ranks)), name
        assert {(i.nranks, i.nnodes, i.local_ranks) for i in inits} == {(ranks, 1, local)}, name
        # the three readers take their init facts from these lines
        assert (ncclog.parse_log((FIX / "logs" / name).read_text()).nranks, ncclog.parse_log(
            (FIX / "logs" / name).read_text()).ranks_seen) == (ranks, set(range(ranks)))
    assert rcclog.parse((FIX / "logs" / "rccl_mi300x_8gpu.log").read_text()).local_ranks == 8


def test_init_complete_reads_nccls_line_and_rccls_core():
    nccl = [ncclline.init_complete(h.msg) for h in map(ncclline.split, _lines(FIX / "logs" / "nccl_4gpu_p2p.log")) if h]
    done = [d for d in nccl if d is not None]
    assert sorted(d.rank for d in done) == [0, 1, 2, 3] and {d.core for d in done} == {None}
    rccl = [ncclline.init_complete(h.msg) for h in map(ncclline.split, _lines(FIX / "logs" / "rccl_mi300x_8gpu.log")) if h]
    first = next(d for d in rccl if d is not None and d.rank == 0)
    assert (first.nranks, first.dev, first.bus_id, first.core) == (8, 0, "5000", 2)
    assert ncclline.init_complete("comm 0x1 rank 0 nranks 4 cudaDev 0 busId 60 - Init START") is None


def test_the_workload_import_reads_nnodes_from_the_init_line():
    line = ("vm:7842:7842 [0] NCCL INFO comm 0x1f2dd570 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n"
            "vm:7842:7842 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 "
            "comm 0x1f2dd570 [nranks=2] stream 0x3\n")
    records, warnings = nccl_log.parse(line, "x.log")
    assert not warnings and [k.nnodes for k in records[0].calls] == [2]


def test_the_prefix_and_the_init_line_are_spelled_in_ncclline_only():
    """The old tree spelled the init line in ncclog, rcclog and workload.nccl_log, the prefix in those and in
    rcclversion (now ncclline.version_fact): each drifted on its own (bounds, optional parts)."""
    root = Path(ncclline.__file__).parent
    spellings = (r"nRanks (?P<", r"nRanks \d", r"nNodes (?P<", r"nNodes \d", r":\d{1,10}:\d", r"\S+:\d+:\d+",
                 r"NCCL (?P<level>", r"NCCL (?:INFO|WARN)")
    found = [f"{p.relative_to(root)}: {s}" for p in sorted(root.rglob("*.py")) if p.name != "ncclline.py"
             for s in spellings if s in p.read_text(encoding="utf-8")]
    assert not found, found
