"""NCCL/RCCL log parsing and the findings drawn from it, on fixture logs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccltune.diagnose.findings import overall
from ccltune.diagnose.logcheck import check_log, check_transports
from ccltune.diagnose.ncclog import parse_log, read_log
from ccltune.errors import UsageError

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"


def _log(name: str):
    return parse_log(read_log(LOGS / name))


def _by_name(findings):
    return {f.name: f for f in findings}


def test_nvidia_4gpu_log_parses_every_field():
    log = _log("nccl_4gpu_p2p.log")
    assert (log.library, log.version) == ("NCCL", "2.28.9+cuda13.0")
    assert (log.nranks, log.nnodes, log.coll_channels, log.p2p_channels, log.nvls_channels) == (4, 1, 24, 32, 0)
    assert len(log.edges) == 24 * 4
    assert {e.transport for e in log.edges} == {"P2P/CUMEM/read"}
    assert log.edges[0].src_rank == 0 and log.edges[0].dst_rank == 1 and log.edges[0].src_dev == "0"
    assert log.rings[0] == [0, 1, 2, 3] and log.rings[1] == [0, 3, 2, 1] and len(log.rings) == 24
    assert log.trees[0].startswith("[0] 1/-1/-1->0->-1")
    assert log.init_complete == {0, 1, 2, 3}
    assert log.env["NCCL_NVLS_ENABLE"] == "0"
    assert log.tuner_plugin is None
    assert len({p.pid for p in log.rank_process.values()}) == 4


def test_nvidia_4gpu_log_passes_with_nvls_note():
    found = _by_name(check_log(_log("nccl_4gpu_p2p.log")))
    assert overall(found.values()) == "PASS"
    assert found["log:transport"].data["transports"] == {"P2P/CUMEM/read": 96}
    assert found["log:channels"].value == 24
    nvls = found["env:NCCL_NVLS_ENABLE"]
    assert nvls.status == "PASS" and "mandatory" in nvls.evidence


def test_shm_edges_warn_from_a_log_alone_and_name_the_pairs():
    found = _by_name(check_log(_log("nccl_8gpu_shm.log")))
    t = found["log:transport"]
    assert t.status == "WARN"
    assert t.data["shm_pairs"] == [(0, 7), (3, 4), (4, 3), (7, 0)]
    assert "NCCL_P2P_LEVEL=SYS" in t.fix


def test_shm_edges_fail_where_the_topology_allows_p2p():
    log = _log("nccl_8gpu_shm.log")
    # busIds in brackets (pre-2.19 format) fall back to ranks as device numbers
    assert check_transports(log, p2p_capable=lambda a, b: True).status == "FAIL"
    assert check_transports(log, p2p_capable=lambda a, b: False).status == "PASS"
    only_07 = check_transports(log, p2p_capable=lambda a, b: {a, b} == {0, 7})
    assert only_07.status == "FAIL" and only_07.data["shm_pairs_p2p_capable"] == [(0, 7), (7, 0)]


def test_network_between_gpus_of_one_node_fails():
    text = "\n".join([
        "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
    ])
    f = check_transports(parse_log(text))
    assert f.status == "FAIL" and f.data["net_pairs"] == [(0, 1)]


def test_rccl_mi300x_log():
    log = _log("rccl_mi300x_8gpu.log")
    assert (log.library, log.version) == ("RCCL", "2.22.3-HEAD:cb8f3f6")
    assert log.coll_channels == 56 and log.nranks == 8
    assert {e.transport for e in log.edges} == {"P2P/IPC"}  # "comm 0x.. nRanks 08" stripped
    assert log.edges[0].src_dev == "c000"
    assert log.trees and "comm" not in log.trees[0]
    assert log.rings[0] == list(range(8))  # trailing "comm 0x.. nRanks 08" stripped
    assert overall(check_log(log)) == "PASS"


def test_tuner_plugin_threads_and_warnings():
    log = _log("nccl_tuner_plugin.log")
    assert log.tuner_plugin == "/opt/ccltune/lib/libnccl-tuner-ccltune.so"
    found = _by_name(check_log(log))
    assert found["log:tuner"].status == "PASS" and "libnccl-tuner-ccltune" in found["log:tuner"].evidence
    assert found["log:processes"].data["layout"] == "threads"
    assert found["log:warnings"].status == "WARN" and found["log:warnings"].value == 1
    assert found["env:NCCL_ALGO"].status == "WARN"


def test_tuner_requested_but_not_loaded_warns():
    text = ("h:1:1 [0] NCCL INFO NCCL_TUNER_PLUGIN set by environment to libmissing.so\n"
            "h:1:1 [0] NCCL INFO TUNER/Plugin: Could not find: libmissing.so. Using internal tuner plugin.\n")
    found = _by_name(check_log(parse_log(text)))
    assert found["log:tuner"].status == "WARN"


def test_truncated_log_reports_missing_init_and_keeps_partial_edges():
    log = _log("nccl_truncated.log")
    found = _by_name(check_log(log))
    assert found["log:init"].status == "WARN" and "truncated" in found["log:init"].evidence
    assert 0 < len(log.edges) < 96
    assert found["log:channels"].data["coll_channels"] is None


def test_empty_and_foreign_logs_are_waived():
    assert [f.status for f in check_log(_log("empty.log"))] == ["WAIVED"]
    assert [f.status for f in check_log(parse_log("hello\nworld\n"))] == ["WAIVED"]
    no_edges = _by_name(check_log(parse_log("h:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n")))
    assert no_edges["log:transport"].status == "WAIVED"


def test_binary_missing_and_folder_logs_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="binary"):
        read_log(LOGS / "binary.log")
    with pytest.raises(UsageError, match="does not exist"):
        read_log(tmp_path / "nope.log")
    with pytest.raises(UsageError, match="folder"):
        read_log(tmp_path)
    latin = tmp_path / "latin.log"
    latin.write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(UsageError, match="UTF-8"):
        read_log(latin)


def test_unreadable_log_is_a_usage_error(tmp_path, monkeypatch):
    p = tmp_path / "secret.log"
    p.write_text("x")

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m, pytest.raises(UsageError, match="no permission"):
        m.setattr(os, "open", denied)  # root ignores chmod, so fake the refusal
        read_log(p)
