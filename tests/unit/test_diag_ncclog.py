"""NCCL/RCCL log parsing and the findings drawn from it, on fixture logs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccltune.diagnose.checks.logcheck import check_log, check_transports
from ccltune.diagnose.findings import overall
from ccltune.diagnose.parsers.ncclog import parse_log, read_log
from ccltune.errors import UsageError

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"


def _log(name: str):
    return parse_log(read_log(LOGS / name))


def _by_name(findings):
    return {f.name: f for f in findings}


def test_nvidia_4gpu_log_parses_every_field():
    log = _log("nccl_4gpu_p2p.log")  # a real NCCL 2.28.9 log of 4 H200s
    assert (log.library, log.version) == ("NCCL", "2.28.9+cuda13.0")
    assert (log.nranks, log.nnodes, log.coll_channels, log.p2p_channels, log.nvls_channels) == (4, 1, 24, 32, 0)
    assert len(log.edges) == 24 * 4
    assert {e.transport for e in log.edges} == {"P2P/CUMEM"}
    assert {(e.src_rank, e.dst_rank) for e in log.edges} == {(0, 1), (1, 2), (2, 3), (3, 0)}
    assert log.rings[0] == [0, 1, 2, 3] and len(log.rings) == 24
    assert log.trees[0].startswith("[0] 3/-1/-1->2->1")
    assert log.init_complete == {0, 1, 2, 3}
    assert log.tuner_plugin is None
    assert len({p.pid for p in log.rank_process.values()}) == 4
    assert [(c.func, c.nbytes, c.algo, c.proto, c.channels) for c in log.choices][:1] == \
        [("AllReduce", 1048576, "RING", "LL", 24)]


def test_env_value_drops_nccls_full_stop():
    # NCCL 2.28 writes "NCCL_NVLS_ENABLE set by environment to 0." (integer parameters end with a full stop)
    log = _log("nccl_4gpu_p2p.log")
    assert log.env == {"NCCL_NVLS_ENABLE": "0"}
    assert parse_log("h:1:1 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n").env == {"NCCL_PROTO": "LL128"}


def test_nvidia_4gpu_log_passes_with_nvls_note():
    found = _by_name(check_log(_log("nccl_4gpu_p2p.log")))
    assert overall(found.values()) == "PASS"
    assert found["log:transport"].data["transports"] == {"P2P/CUMEM": 96}
    assert found["log:channels"].value == 24
    nvls = found["env:NCCL_NVLS_ENABLE"]
    assert nvls.status == "PASS" and "not an integer" not in nvls.evidence and "NVLink SHARP" in nvls.evidence


def test_shm_edges_warn_from_a_log_alone_and_name_the_pairs():
    # real: NCCL_P2P_DISABLE=1 on 4 x H200, the four processes' logs one after the other (logs/README.md)
    found = _by_name(check_log(_log("nccl_4gpu_shm.log")))
    t = found["log:transport"]
    assert t.status == "WARN"
    assert t.data["shm_pairs"] == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert t.data["transports"] == {"SHM/direct/direct": 20}
    # the log says why: NCCL_P2P_DISABLE=1, not a P2P level (the fix named NCCL_P2P_LEVEL=SYS before)
    assert t.fix.startswith("unset NCCL_P2P_DISABLE") and "NCCL_P2P_LEVEL" not in t.fix
    assert found["env:NCCL_P2P_DISABLE"].status == "FAIL"
    assert found["log:init"].status == "PASS" and found["log:processes"].status == "PASS"
    # the same edges without that variable in the log: the P2P level is the advice
    text = "".join(line for line in (LOGS / "nccl_4gpu_shm.log").read_text().splitlines(keepends=True)
                   if "NCCL_P2P_DISABLE" not in line)
    assert "NCCL_P2P_LEVEL=SYS" in check_transports(parse_log(text)).fix


def test_shm_edges_fail_where_the_topology_allows_p2p():
    log = _log("nccl_4gpu_shm.log")
    assert check_transports(log, p2p_capable=lambda a, b: True).status == "FAIL"
    assert check_transports(log, p2p_capable=lambda a, b: False).status == "PASS"
    only_30 = check_transports(log, p2p_capable=lambda a, b: {a, b} == {0, 3})
    assert only_30.status == "FAIL" and only_30.data["shm_pairs_p2p_capable"] == [(3, 0)]


def test_network_between_gpus_of_one_node_fails():
    text = "\n".join([
        "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
    ])
    f = check_transports(parse_log(text))
    assert f.status == "FAIL" and f.data["net_pairs"] == [(0, 1)]


def test_rccl_mi300x_log():
    log = _log("rccl_mi300x_8gpu.log")
    assert (log.library, log.version) == ("RCCL", "2.21.5-HEAD:0cbce2a")
    assert log.coll_channels == 16 and log.nranks == 8
    assert {e.transport for e in log.edges} == {"P2P/IPC"}  # "comm 0x.. nRanks 08" stripped
    assert log.edges[0].src_dev == "5000"  # RCCL prints the bus id there
    assert log.trees and "comm" not in log.trees[0]
    assert log.rings[0] == list(range(8))  # trailing "comm 0x.. nRanks 08" stripped
    assert overall(check_log(log)) == "PASS"


def test_tuner_plugin_loaded():
    log = _log("nccl_tuner_plugin.log")  # real: NCCL 2.28.9 on one H100 with ccltune's plugin
    assert log.tuner_plugin.endswith("libnccl-tuner-ccltune.so")
    assert [p.rules for p in log.plugin_loads] == [8, 8] and log.plugin_loads[0].gpu == "NVIDIA H100 80GB HBM3"
    found = _by_name(check_log(log))
    assert found["log:tuner"].status == "PASS" and "libnccl-tuner-ccltune" in found["log:tuner"].evidence
    assert found["log:processes"].data["layout"] == "process-per-gpu"
    assert found["log:warnings"].status == "PASS"


def test_tuner_requested_but_not_loaded_warns():
    text = ("h:1:1 [0] NCCL INFO NCCL_TUNER_PLUGIN set by environment to libmissing.so\n"
            "h:1:1 [0] NCCL INFO TUNER/Plugin: Could not find: libmissing.so. Using internal tuner plugin.\n")
    found = _by_name(check_log(parse_log(text)))
    assert found["log:tuner"].status == "WARN"


def test_truncated_log_reports_missing_init_and_keeps_what_it_read():
    log = _log("nccl_truncated.log")  # a real log cut during init: ranks 0 and 2 completed, 1 and 3 did not
    found = _by_name(check_log(log))
    assert found["log:init"].status == "WARN" and "truncated" in found["log:init"].evidence
    assert "ranks 1, 3" in found["log:init"].evidence or "ranks 1,3" in found["log:init"].evidence
    assert log.init_complete == {0, 2} and log.coll_channels == 24
    assert found["log:transport"].status == "WAIVED"  # no edge was logged yet


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
