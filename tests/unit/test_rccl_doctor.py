"""doctor on RCCL logs and AMD hosts (log fixtures written from ROCm/rccl 0cbce2a7 print statements, amd-smi
fixtures from ROCm/amdsmi amd-staging 0ceca28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.checks import rccl
from ccltune.diagnose.parsers import rcclog
from ccltune.diagnose.parsers.ncclog import parse_log
from ccltune.diagnose.probes import amdsmi, nvml, smitopo, topo

FIX = Path(__file__).parent.parent / "fixtures"
LOGS = FIX / "logs"
SMI = FIX / "amd-smi"
NUMA = FIX / "sysfs" / "amd-numa"


def node(*names: str) -> topo.Topology:
    return topo.from_amdsmi(amdsmi.parse([((SMI / n).read_text(), n) for n in names]))


MI300X = ("mi300x_topology.json", "mi300x_static.json")


def by_name(findings):
    return {f.name: f for f in findings}


def test_rccl_facts_from_the_log():
    facts = rcclog.parse((LOGS / "rccl_mi300x_4of8_shm.log").read_text())
    assert facts.devices == {0: 0, 1: 1, 2: 4, 3: 5} and facts.cores[2] == 3 and facts.bus_ids[2] == "85000"
    assert (facts.msccl, facts.mscclpp, facts.mscclpp_threshold) == (True, True, 2097152)
    assert facts.params == {"RCCL_MSCCLPP_ENABLE": 1, "RCCL_MSCCLPP_THRESHOLD": 2097152,
                            "RCCL_LL128_FORCE_ENABLE": 1, "RCCL_MSCCL_ENABLE": 1}
    assert facts.local_ranks == 4 and rcclog.bus_to_int("0000:85:00.0") == 0x85000


def test_all_checks_on_a_job_using_4_of_8_gpus():
    text = (LOGS / "rccl_mi300x_4of8_shm.log").read_text()
    log = parse_log(text)
    found = by_name(rccl.rccl_findings(text, log, node(*MI300X), None, NUMA))
    assert found["rccl:min_nchannels"].status == "WARN"
    assert "NCCL_MIN_NCHANNELS=32" in found["rccl:min_nchannels"].fix
    assert found["rccl:affinity"].status == "WARN"
    assert found["rccl:affinity"].data["misplaced"] == [{"rank": 2, "gpu": 4, "core": 3, "core_node": 0, "gpu_node": 1}]
    # RCCL 2.21.5 on MI300X (gfx942): RCCL_LL128_FORCE_ENABLE=1 changes nothing (tuning.cc: gfx90a only)
    assert found["rccl:ll128"].status == "WARN" and "no effect on gfx942" in found["rccl:ll128"].evidence
    assert "2097152" in found["rccl:mscclpp"].evidence and "bypasses" in found["rccl:mscclpp"].evidence
    assert "never reach a tuner plugin" in found["rccl:msccl"].evidence
    assert found["rccl:fine_grain_pcie"].status == "WAIVED"


def test_shm_between_xgmi_gpus_is_diagnosed_through_rank_to_device():
    text = (LOGS / "rccl_mi300x_4of8_shm.log").read_text()
    capable = rccl.rank_p2p_capable(text, topo.p2p_capable_from(node(*MI300X)))
    from ccltune.diagnose.checks.logcheck import check_transports
    f = check_transports(parse_log(text), p2p_capable=capable)
    assert f.status == "FAIL" and f.data["shm_pairs_p2p_capable"] == [(1, 2), (2, 1)]


def test_full_node_job_passes():
    text = (LOGS / "rccl_mi300x_8gpu.log").read_text()
    found = by_name(rccl.rccl_findings(text, parse_log(text), node(*MI300X), None, NUMA))
    assert found["rccl:min_nchannels"].status == "PASS"
    assert found["rccl:affinity"].status == "PASS"  # cores 2..114 step 16: GPUs 0-3 on node 0, 4-7 on node 1
    assert found["rccl:ll128"].status == "PASS" and found["rccl:mscclpp"].evidence.startswith("MSCCL++ not reported")


def test_min_channels_recommends_when_not_set_and_accepts_when_set():
    assert rccl.min_channels_finding(4, 8, True, {}).status == "WARN"
    assert rccl.min_channels_finding(4, 8, True, {"NCCL_MIN_NCHANNELS": "32"}).status == "PASS"
    assert rccl.min_channels_finding(4, 4, False, {}).status == "WAIVED"


def test_fine_grain_pcie():
    pcie = node("mi210_pcie_topology.json", "mi210_pcie_static.json")
    labels = {c for row in pcie.links for c in row if c != "X"}
    assert labels == {"PCIE+2", "PCIE+3"}
    assert rccl.fine_grain_finding(True, {}).status == "WARN"
    assert rccl.fine_grain_finding(True, {"HSA_FORCE_FINE_GRAIN_PCIE": "1"}).status == "PASS"
    text = (LOGS / "rccl_mi300x_8gpu.log").read_text()
    found = by_name(rccl.rccl_findings(text, parse_log(text), pcie, {}, NUMA))
    assert found["rccl:fine_grain_pcie"].status == "WARN" and found["rccl:fine_grain_pcie"].fix.endswith("=1")


def test_cli_doctor_rccl_log_with_amd_smi(tmp_path, capsys):
    rc = main(["doctor", "--nccl-log", str(LOGS / "rccl_mi300x_4of8_shm.log"),
               "--from-amd-smi", str(SMI / MI300X[0]), "--from-amd-smi", str(SMI / MI300X[1]),
               "--sysfs-root", str(NUMA), "--db", str(tmp_path / "d.db")])
    out = capsys.readouterr().out
    assert rc == 1  # the SHM edges between xGMI GPUs FAIL
    for text in ("FAIL    log:transport", "WARN    rccl:min_nchannels", "WARN    rccl:affinity", "rccl:mscclpp"):
        assert text in out


CPX_TOPO = ["--from-amd-smi", "CPX_TOPOLOGY"]  # the generated topology (conftest amd_cpx_topology)


@pytest.mark.parametrize("source", [["--from-amd-smi", str(SMI / "mi300x_cpx_nps4_static.json"), "--sysfs-root", str(NUMA)],
                                    [*CPX_TOPO, "--from-amd-smi", str(SMI / "mi300x_cpx_nps4_static.json")],
                                    CPX_TOPO,  # topology alone: was 64 GPUs, a WARN on 4 of 64 xGMI GPUs used
                                    ["--sysfs-root", "CPX"]], ids=["amd-smi", "amd-smi-topology", "topology-only", "sysfs"])
def test_doctor_on_a_cpx_node(source, amd_cpx_root, amd_cpx_topology, monkeypatch, tmp_path, capsys):
    """CPX/NPS4 (64 devices on 8 GPUs, from amd-smi static output alone or from the KFD topology): no link is taken
    for PCIe, the SPX advice on NCCL_MIN_NCHANNELS is waived, and the node is said to be partitioned."""
    t = node("mi300x_cpx_nps4_static.json")
    assert not rccl.pcie_only_links(t.pair_labels())
    assert rccl.fine_grain_here(t, {}).status == "WAIVED"
    for probe, name in ((nvml, "read_nvml"), (smitopo, "run_topo_matrix"), (amdsmi, "run")):
        monkeypatch.setattr(probe, name, lambda: None)  # the sysfs case: no NVIDIA tool, no amd-smi here
    generated = {"CPX": str(amd_cpx_root), "CPX_TOPOLOGY": str(amd_cpx_topology)}  # the KFD tree, amd-smi's links
    source = [generated.get(arg, arg) for arg in source]
    rc = main(["doctor", "--nccl-log", str(LOGS / "rccl_mi300x_4of8_shm.log"), *source,
               "--db", str(tmp_path / "d.db"), "--json", str(tmp_path / "d.json")])
    capsys.readouterr()
    import json
    checks = {c["name"]: c for c in json.loads((tmp_path / "d.json").read_text())["checks"]}
    assert rc in (0, 1)
    assert checks["rccl:min_nchannels"]["status"] == "WAIVED"
    assert "64 devices on 8 partitioned GPUs" in checks["rccl:min_nchannels"]["evidence"]


# RCCL 2.21.5's version block (src/init.cc showVersion): two printf calls by rank 0, no prefix (the fixtures' shape);
# with NCCL_DEBUG_FILE also an INFO copy in the debug file: debug.cc's prefix, the message's own newlines, and the
# newline ncclDebugLog adds after it (a blank line after each of the two INFO calls).
PRINTF_BLOCK = ("RCCL version : 2.21.5-HEAD:0cbce2a\nHIP version  : 6.2.41134-65d174c3e\nROCm version : 6.2.4.0-139-fc3ff81\n"
                "Hostname     : mi300x-12\nLibrccl path : /opt/rocm-6.2.4/lib/librccl.so.1\n")
DEBUG_FILE_BLOCK = ("mi300x-12:4101:4121 [0] NCCL INFO RCCL version : 2.21.5-HEAD:0cbce2a\nHIP version  : 6.2.41134-65d174c3e\n"
                    "ROCm version : 6.2.4.0-139-fc3ff81\n\nmi300x-12:4101:4121 [0] NCCL INFO Hostname     : mi300x-12\n"
                    "Librccl path : /opt/rocm-6.2.4/lib/librccl.so.1\n\n")


def _doctor(text: str, tmp_path, capsys) -> list[tuple[str, str]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    main(["doctor", "--nccl-log", str(log), "--from-amd-smi", str(SMI / MI300X[0]), "--from-amd-smi",
          str(SMI / MI300X[1]), "--sysfs-root", str(NUMA), "--db", str(tmp_path / "d.db"), "--json",
          str(tmp_path / "d.json")])
    capsys.readouterr()
    import json
    return [(c["name"], c["status"]) for c in json.loads((tmp_path / "d.json").read_text())["checks"]]


def test_version_block_as_rccl_prints_it_and_as_its_debug_file_copy(tmp_path, capsys):
    for name in ("rccl_mi300x_4of8_shm.log", "rccl_mi300x_8gpu.log"):
        text = (LOGS / name).read_text()
        assert text.count(PRINTF_BLOCK) == 1 and "NCCL INFO RCCL version" not in text  # rank 0, printf only
        log = parse_log(text)
        assert (log.library, log.version, log.hip_version) == ("RCCL", "2.21.5-HEAD:0cbce2a", "6.2.41134-65d174c3e")
        real = _doctor(text, tmp_path, capsys)
        assert ("log:version", "PASS") in real and sum(n.startswith("rccl:") for n, _ in real) == 7
        shapes = {"NCCL_DEBUG_FILE": text.replace(PRINTF_BLOCK, DEBUG_FILE_BLOCK),
                  "mpirun --tag-output": text.replace(PRINTF_BLOCK, "".join(
                      f"[1,0]<stdout>:{line}\n" for line in PRINTF_BLOCK.splitlines()))}
        for shape, other in shapes.items():
            assert parse_log(other).version == "2.21.5-HEAD:0cbce2a", shape
            assert _doctor(other, tmp_path, capsys) == real, shape
    assert dict(_doctor((LOGS / "rccl_mi300x_4of8_shm.log").read_text(), tmp_path, capsys))["log:transport"] == "FAIL"


def test_a_comment_quoting_the_version_format_is_not_a_version():
    assert parse_log("# prints RCCL version : 2.21.5 here\n").version is None
    assert parse_log("RCCL version 2.16.5+hip5.6 HEAD:3dcebc7\n").hip_version == "5.6"


PCIE_LOG = LOGS / "rccl_mi210_pcie_2.16.5.log"  # RCCL 2.16.5 (rocm-5.6.0), 4 x MI210 on PCIe, WARNs at init
MI210 = ("mi210_pcie_topology.json", "mi210_pcie_static.json")
FINE_GRAIN_WARN = 'NCCL WARN Missing "HSA_FORCE_FINE_GRAIN_PCIE=1"'


def test_which_rccl_builds_warn_about_fine_grain_pcie():
    assert rccl.checks_fine_grain("2.16.5+hip5.6", "5.6") is True
    assert rccl.checks_fine_grain("2.15.5+hip5.5", "5.5") is False  # before the WARN existed
    assert rccl.checks_fine_grain("2.21.5-HEAD:0cbce2a", "6.2.41134-65d174c3e") is False  # HIP_UNCACHED_MEMORY
    assert rccl.checks_fine_grain("2.17.1+hip5.6", "5.6") is True  # built against an older HIP
    assert rccl.checks_fine_grain("2.21.5-HEAD:0cbce2a", None) is None and rccl.checks_fine_grain(None, None) is None


def test_rccls_host_warnings_become_findings_on_a_pcie_node(tmp_path, capsys):
    text = PCIE_LOG.read_text()
    log = parse_log(text)
    assert (log.library, log.version, log.hip_version) == ("RCCL", "2.16.5+hip5.6", "5.6")
    found = by_name(rccl.rccl_findings(text, log, node(*MI210), None, NUMA))
    assert found["rccl:fine_grain_pcie"].status == "WARN" and "warned at init" in found["rccl:fine_grain_pcie"].evidence
    assert found["rccl:fine_grain_pcie"].fix == "export HSA_FORCE_FINE_GRAIN_PCIE=1"
    assert found["rccl:numa_balancing"].status == "WARN" and "numa_balancing=0" in found["rccl:numa_balancing"].fix
    # the same job with the variable set and NUMA balancing off: RCCL 2.16 checked both at init and said nothing
    quiet = "\n".join(line for line in text.splitlines() if " NCCL WARN " not in line)
    found = by_name(rccl.rccl_findings(quiet, parse_log(quiet), node(*MI210), None, NUMA))
    assert (found["rccl:fine_grain_pcie"].status, found["rccl:numa_balancing"].status) == ("PASS", "PASS")
    # a log that starts after init proves nothing
    late = "\n".join(line for line in quiet.splitlines() if "Bootstrap : Using" not in line)
    found = by_name(rccl.rccl_findings(late, parse_log(late), node(*MI210), None, NUMA))
    assert (found["rccl:fine_grain_pcie"].status, found["rccl:numa_balancing"].status) == ("WAIVED", "WAIVED")
    rc = main(["doctor", "--nccl-log", str(PCIE_LOG), "--from-amd-smi", str(SMI / MI210[0]), "--from-amd-smi",
               str(SMI / MI210[1]), "--sysfs-root", str(NUMA), "--db", str(tmp_path / "d.db")])
    out = capsys.readouterr().out
    assert "WARN    rccl:fine_grain_pcie" in out and "WARN    rccl:numa_balancing" in out and rc in (0, 1)


def test_rccl_2_21_on_rocm_6_does_not_record_fine_grain_pcie():
    text = (LOGS / "rccl_mi300x_8gpu.log").read_text()
    assert FINE_GRAIN_WARN not in text
    found = by_name(rccl.rccl_findings(text, parse_log(text), node(*MI210), None, NUMA))
    assert found["rccl:fine_grain_pcie"].status == "WAIVED" and "does not check it" in found["rccl:fine_grain_pcie"].evidence
    assert found["rccl:numa_balancing"].status == "PASS"


def test_ll128_by_rccl_version_gfx_arch_and_nccl_proto():
    forced = rcclog.RcclFacts(params={"RCCL_LL128_FORCE_ENABLE": 1})
    v2215 = parse_log("RCCL version : 2.21.5-HEAD:0cbce2a\n")
    newer = parse_log("RCCL version : 2.27.7-HEAD:0d2c4fd\n")
    explicit = parse_log("RCCL version : 2.21.5-HEAD:0cbce2a\nh:1:1 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n")

    def ev(facts, log, arch):
        found = rccl.ll128_finding(facts, log, arch)
        return found.status, found.evidence

    assert "forced on (gfx90a" in ev(forced, v2215, "gfx90a")[1]
    assert "no effect on gfx942" in ev(forced, v2215, "gfx942")[1]
    assert "forced on (gfx942" in ev(forced, newer, "gfx942")[1]  # gfx942/gfx950 joined after 2.21
    status, text = ev(rcclog.RcclFacts(), explicit, "gfx942")
    assert status == "WARN" and "enables LL128 on any GPU" in text  # 2.21.5 skips the check for an explicit NCCL_PROTO
    newer.env["NCCL_PROTO"] = "LL128"
    assert "does not bypass" in ev(rcclog.RcclFacts(), newer, "gfx942")[1]
    assert ev(rcclog.RcclFacts(), v2215, None)[0] == "PASS"
    assert [rccl.proto_enables_ll128(p) for p in (None, "LL128", "LL,Simple", "^LL", "^LL128", "LL;allreduce:LL128")] == [
        None, True, False, True, False, True]
    assert rccl.gfx_arch("", node(*MI300X)) == "gfx942" and rccl.gfx_arch("", node(*MI210)) == "gfx90a"
