"""Host checks, environment rules, nvidia-smi/AMD topology parsing and topology findings on fake trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccltune.diagnose.checks import envrules, host
from ccltune.diagnose.checks.topo import topo_findings
from ccltune.diagnose.probes import amdsysfs, nvml, smitopo, sysfs, topo
from ccltune.errors import UsageError

FIX = Path(__file__).parent.parent / "fixtures" / "sysfs"
AMD, GOOD = FIX / "amd-mi300x", FIX / "host-good"



def _host_checks(root, lspci):
    """The four host checks, as doctor's registry runs them."""
    return [host.check_numa_balancing(root), host.check_numad(root), host.check_iommu(root), host.check_acs(lspci)]

def _by_name(findings):
    return {f.name: f for f in findings}


def test_bad_host_warns_on_balancing_numad_and_iommu():
    found = _by_name(_host_checks(AMD, None))
    assert found["numa_balancing"].status == "WARN" and "sysctl" in found["numa_balancing"].fix
    assert found["numad"].status == "WARN" and "4242" in found["numad"].evidence
    assert found["iommu"].status == "WARN" and "iommu=pt" in found["iommu"].fix
    assert found["pcie_acs"].status == "WAIVED" and "lspci" in found["pcie_acs"].evidence


def test_good_host_passes():
    found = _by_name(_host_checks(GOOD, ""))
    assert [found[n].status for n in ("numa_balancing", "numad", "iommu")] == ["PASS", "PASS", "PASS"]
    assert "passthrough" in found["iommu"].evidence
    assert sysfs.has_infiniband(GOOD) is True and sysfs.has_infiniband(AMD) is False


def test_unreadable_proc_and_sys_are_waived(tmp_path, monkeypatch):
    empty = tmp_path / "root"
    empty.mkdir()
    found = _by_name(_host_checks(empty, None))
    assert found["numa_balancing"].status == "WAIVED" and "does not exist" in found["numa_balancing"].evidence
    assert found["numad"].status == "WAIVED" and found["iommu"].status == "WAIVED"

    real_open = os.open

    def denied(path, *a, **k):
        if "numa_balancing" in str(path):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", denied)  # root ignores chmod, so fake the refusal (inputs.read_system_text)
    f = host.check_numa_balancing(GOOD)
    assert f.status == "WAIVED" and "no permission" in f.evidence


def test_sys_root_prefers_flag_then_env(monkeypatch):
    monkeypatch.setenv(sysfs.ROOT_ENV, str(AMD))
    assert sysfs.sys_root(None) == AMD and sysfs.sys_root(str(GOOD)) == GOOD
    monkeypatch.setenv(sysfs.ROOT_ENV, "")  # set but empty is unset
    assert sysfs.sys_root(None) == Path("/")
    monkeypatch.delenv(sysfs.ROOT_ENV)
    assert sysfs.sys_root(None) == Path("/")


def test_sys_root_named_but_not_a_folder_is_a_usage_error(tmp_path, monkeypatch):
    # under a missing root every check would be WAIVED and the host look clean
    monkeypatch.delenv(sysfs.ROOT_ENV, raising=False)
    missing, regular = tmp_path / "nonexistent", tmp_path / "file"
    regular.write_text("x")
    with pytest.raises(UsageError, match=r"--sysfs-root: '.*nonexistent' does not exist"):
        sysfs.sys_root(str(missing))
    with pytest.raises(UsageError, match=r"--sysfs-root: '.*file' is not a directory"):
        sysfs.sys_root(str(regular))
    with pytest.raises(UsageError, match="--sysfs-root: empty path"):
        sysfs.sys_root("")
    monkeypatch.setenv(sysfs.ROOT_ENV, str(missing))
    with pytest.raises(UsageError, match=r"\$CCLTUNE_SYSFS_ROOT: '.*nonexistent' does not exist"):
        sysfs.sys_root(None)
    assert sysfs.sys_root(str(GOOD)) == GOOD  # the flag wins over a bad variable


@pytest.mark.parametrize("argv, env, message", [
    (["doctor", "--no-run", "--sysfs-root", "/nonexistent"], None, "--sysfs-root: '/nonexistent' does not exist"),
    (["topo", "--sysfs-root", "/nonexistent"], None, "--sysfs-root: '/nonexistent' does not exist"),
    (["doctor", "--no-run"], "/nonexistent", "$CCLTUNE_SYSFS_ROOT: '/nonexistent' does not exist"),
    (["topo"], "/nonexistent", "$CCLTUNE_SYSFS_ROOT: '/nonexistent' does not exist"),
    (["doctor", "--no-run", "--sysfs-root", str(FIX / "lspci_vvv_acs.txt")], None, "is not a directory"),
])
def test_cli_missing_sysfs_root_is_exit_2_not_a_pass(tmp_path, capsys, monkeypatch, argv, env, message):
    from ccltune.cli import main

    if env is None:
        monkeypatch.delenv(sysfs.ROOT_ENV, raising=False)
    else:
        monkeypatch.setenv(sysfs.ROOT_ENV, env)
    assert main([*argv, "--db", str(tmp_path / "r.db")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert "overall" not in captured.out and not (tmp_path / "r.db").exists()


def test_acs_parse_redirect_clean_and_denied():
    devices, denied = host.parse_acs((FIX / "lspci_vvv_acs.txt").read_text())
    assert [d["bdf"] for d in devices] == ["0000:00:01.1", "0000:15:00.0"] and not denied
    f = host.check_acs((FIX / "lspci_vvv_acs.txt").read_text())
    assert f.status == "WARN" and f.data["devices"] == ["0000:00:01.1"]
    assert host.check_acs((FIX / "lspci_vvv_denied.txt").read_text()).status == "WAIVED"
    clean = (FIX / "lspci_vvv_acs.txt").read_text().replace("ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- Dir",
                                                             "ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- Dir")
    assert host.check_acs(clean).status == "PASS"


@pytest.mark.parametrize("env, name, status", [
    ({"NCCL_P2P_DISABLE": "1"}, "env:NCCL_P2P_DISABLE", "FAIL"),
    ({"NCCL_SHM_DISABLE": "1"}, "env:NCCL_SHM_DISABLE", "WARN"),
    ({"NCCL_ALGO": "Tree"}, "env:NCCL_ALGO", "WARN"),
    ({"NCCL_PROTO": "^LL128"}, "env:NCCL_PROTO", "WARN"),
    ({"NCCL_MAX_NCHANNELS": "4"}, "env:NCCL_MAX_NCHANNELS", "WARN"),
    ({"NCCL_DEBUG": "info"}, "env:NCCL_DEBUG", "WARN"),
    ({"NCCL_NVLS_ENABLE": "0"}, "env:NCCL_NVLS_ENABLE", "PASS"),
    ({"CUDA_LAUNCH_BLOCKING": "1"}, "env:CUDA_LAUNCH_BLOCKING", "FAIL"),
])
def test_env_rules(env, name, status):
    (f,) = envrules.check_env(env, source="test")
    assert (f.name, f.status) == (name, status) and f.fix


def test_env_rules_leave_harmless_values_alone():
    harmless = {"NCCL_P2P_DISABLE": "0", "NCCL_MAX_NCHANNELS": "32", "NCCL_DEBUG": "WARN", "NCCL_NVLS_ENABLE": "1",
                "NCCL_MAX_NCHANNELS_X": "1", "PATH": "/bin"}
    (f,) = envrules.check_env(harmless, source="test")
    assert (f.name, f.status) == ("env", "PASS")


def test_ib_disable_depends_on_adapters():
    env = {"NCCL_IB_DISABLE": "1"}
    assert envrules.check_env(env, source="t", has_infiniband=True)[0].status == "WARN"
    assert envrules.check_env(env, source="t", has_infiniband=False)[0].status == "PASS"


# C strtoll(text, &end, 0) as glibc answers it: (value, text left unread); None: ERANGE (NCCL's default)
STRTOLL_CASES = [("16", 16, ""), ("0x100", 256, ""), ("0X1f", 31, ""), ("010", 8, ""), ("08", 0, "8"),
                 ("0x", 0, "x"), ("4M", 4, "M"), (" 16 ", 16, " "), ("-0x10", -16, ""), ("+7", 7, ""),
                 ("abc", 0, "abc"), ("1e3", 1, "e3"), ("- 5", 0, "- 5"), ("", 0, ""),
                 ("99999999999999999999", None, ""), ("-9223372036854775808", -(1 << 63), "")]


@pytest.mark.parametrize("text, value, rest", STRTOLL_CASES)
def test_strtoll_reads_integers_as_nccl_does(text, value, rest):
    assert envrules.strtoll(text) == (value, rest)


def test_strtoll_agrees_with_the_c_library():
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        pytest.skip("no C library to compare with")
    libc = ctypes.CDLL(name, use_errno=True)
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
    for text, _, _ in STRTOLL_CASES + [("0x7fffffffffffffff", 0, ""), ("0777", 0, ""), ("\t-12ab", 0, "")]:
        buf, end = ctypes.create_string_buffer(text.encode()), ctypes.c_char_p()  # buf outlives end
        ctypes.set_errno(0)
        n = libc.strtoll(buf, ctypes.byref(end), 0)
        expected = (None, "") if ctypes.get_errno() else (n, end.value.decode())
        assert envrules.strtoll(text) == expected, text


@pytest.mark.parametrize("env, status, words", [
    # integers as NCCL reads them (strtoll, base 0): 0x100 is a 256-byte buffer
    ({"NCCL_BUFFSIZE": "0x100"}, "WARN", ["NCCL_BUFFSIZE=0x100", "NCCL reads 256", "4 MiB"]),
    ({"NCCL_BUFFSIZE": "4M"}, "WARN", ["NCCL_BUFFSIZE='4M'", "not an integer", "uses 4;", "4 MiB"]),
    ({"NCCL_MAX_NCHANNELS": "010"}, "WARN", ["NCCL reads 8", "fewer than 16 channels"]),
    ({"NCCL_P2P_DISABLE": "0x1"}, "FAIL", ["NCCL_P2P_DISABLE=0x1", "NCCL reads 1", "peer-to-peer"]),
    ({"NCCL_P2P_DISABLE": "1 and more"}, "FAIL", ["not an integer", "only '1'", "peer-to-peer"]),
    ({"NCCL_IB_DISABLE": "2"}, "WARN", ["InfiniBand is off"]),
    ({"NCCL_NVLS_ENABLE": "00"}, "PASS", ["NVLink SHARP"]),
    # values NCCL cannot read: a finding naming the variable and the value
    ({"NCCL_MAX_NCHANNELS": "abc"}, "WARN", ["NCCL_MAX_NCHANNELS='abc'", "not an integer", "uses 0"]),
    ({"NCCL_SHM_DISABLE": "yes"}, "WARN", ["NCCL_SHM_DISABLE='yes'", "not an integer", "uses 0"]),
    ({"NCCL_MAX_CTAS": "99999999999999999999"}, "WARN", ["out of the 64-bit integer range", "default"]),
    ({"NCCL_P2P_LEVEL": "junk"}, "WARN", ["NCCL_P2P_LEVEL='junk'", "not a level", "LOC, NVL, PIX, PXB, PHB, SYS"]),
    ({"NCCL_P2P_LEVEL": "loc"}, "WARN", ["names are upper case: LOC", "ignores it"]),  # NCCL's strcmp
    ({"NCCL_P2P_LEVEL": "LOC"}, "FAIL", ["P2P level LOC"]),
    ({"NCCL_P2P_LEVEL": "0"}, "FAIL", ["NCCL reads LOC", "P2P level LOC"]),  # the old numbering
    ({"NCCL_P2P_LEVEL": "0x"}, "FAIL", ["not a level name or integer", "reads it as LOC"]),
    ({"NCCL_NET_GDR_LEVEL": "phb!"}, "WARN", ["NCCL_NET_GDR_LEVEL='phb!'", "not a level"]),
])
def test_env_rules_read_values_as_nccl_does(env, status, words):
    (f,) = envrules.check_env(env, source="test")
    (var, value), = env.items()
    assert (f.name, f.status) == (f"env:{var}", status) and f.fix
    assert all(w in f.evidence for w in words), f.evidence
    assert f.data["variable"] == var and f.data["value"] == value


@pytest.mark.parametrize("var, value", [
    ("NCCL_MAX_CTAS", "020"), ("NCCL_MAX_NCHANNELS", "0x20"), ("NCCL_BUFFSIZE", "0x800000"),
    ("NCCL_BUFFSIZE", ""), ("NCCL_P2P_LEVEL", "SYS"), ("NCCL_P2P_LEVEL", "NVB"), ("NCCL_P2P_LEVEL", "XGMI"),
    ("NCCL_P2P_LEVEL", "5"), ("NCCL_P2P_LEVEL", ""), ("NCCL_P2P_DISABLE", "0"), ("NCCL_IB_DISABLE", "0x0"),
])
def test_env_rules_leave_values_nccl_reads_as_harmless_alone(var, value):
    (f,) = envrules.check_env({var: value}, source="test")
    assert (f.name, f.status) == ("env", "PASS"), f.evidence


def test_nvidia_smi_topo_matrix():
    smi = smitopo.parse_topo_matrix((FIX / "nvidia_smi_topo_m.txt").read_text())
    assert smi.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and smi.nics == ["NIC0", "NIC1"]
    assert smi.links[0] == ["X", "NV18", "NV18", "NV18"] and smi.links[3][2] == "NV18"
    assert smi.cpu_affinity[2] == "32-63,96-127" and smi.numa_affinity == ["0", "0", "1", "1"]
    t = topo.from_smi(smi)
    found = _by_name(topo_findings(t))
    assert found["topo:links"].status == "PASS" and found["topo:numa"].data["numa"] == {0: 0, 1: 0, 2: 1, 3: 1}
    assert smitopo.parse_topo_matrix("No devices were found\n").gpus == []


def test_mixed_links_warn_and_name_the_slow_pairs():
    t = topo.Topology("nvidia-smi", [topo.GpuRow(i, "G") for i in range(3)],
                      [["X", "NV4", "SYS"], ["NV4", "X", "NV2"], ["SYS", "NV2", "X"]])
    f = _by_name(topo_findings(t))["topo:links"]
    assert f.status == "WARN" and f.data["slow_pairs"] == [(0, 2), (1, 2)]


def test_amd_sysfs_partitions_and_xgmi():
    amd = amdsysfs.read_amd(AMD)
    assert [g.card for g in amd.gpus] == [f"card{i}" for i in range(8)]  # no connector, no ASPEED
    assert amd.gpus[5].compute_partition == "CPX" and amd.gpus[0].memory_partition == "NPS1"
    assert len(amd.xgmi) == 8 * 7 and (0, 7) in amd.xgmi
    found = _by_name(topo_findings(topo.from_amd(amd)))
    assert found["topo:gpus"].value == 8 and found["topo:links"].evidence == "every pair XGMI"
    assert found["topo:partition"].status == "WARN" and "GPU5 CPX/NPS1" in found["topo:partition"].evidence
    assert found["topo:fabric"].status == "WAIVED"


def test_fabric_and_mig_states():
    rows = [topo.GpuRow(0, "H200", fabric="completed", mig="off"), topo.GpuRow(1, "H200", fabric="in progress", mig="on")]
    found = _by_name(topo_findings(topo.Topology("nvml", rows, [["X", "NV18"], ["NV18", "X"]])))
    assert found["topo:fabric"].status == "FAIL" and "fabricmanager" in found["topo:fabric"].fix
    assert found["topo:mig"].status == "WARN"


def test_no_gpu_is_waived_with_the_reasons():
    (f,) = topo_findings(topo.Topology("none", notes=["NVML: absent", "nvidia-smi: absent"]))
    assert f.status == "WAIVED" and "NVML: absent" in f.evidence


def test_nvml_helpers():
    assert nvml.normalize_bus_id(b"00000000:18:00.0") == "0000:18:00.0"
    assert nvml.normalize_bus_id("0000:2A:00") == "0000:2a:00.0"
    assert nvml.link_gbps_from_name("NVIDIA H200") == 26.5625
    a = nvml.NvmlGpu(0, "NVIDIA H200", "0000:18:00.0", nvlinks=18, nvlink_gbps=26.5625, nvlink_to_switch=True)
    b = nvml.NvmlGpu(1, "NVIDIA H200", "0000:2a:00.0", nvlinks=18, nvlink_gbps=26.5625, nvlink_to_switch=True)
    assert nvml.pair_nvlink_gbps(a, b) == pytest.approx(478.125)
    c = nvml.NvmlGpu(0, "A", "0000:01:00.0", nvlinks=4, nvlink_gbps=25.0, nvlink_peers={"0000:02:00.0": 2})
    d = nvml.NvmlGpu(1, "A", "0000:02:00.0", nvlinks=4, nvlink_gbps=25.0, nvlink_peers={"0000:01:00.0": 2})
    e = nvml.NvmlGpu(2, "A", "0000:03:00.0")
    assert nvml.pair_nvlink_gbps(c, d) == 50.0 and nvml.pair_nvlink_gbps(c, e) is None


def test_links_to_unknown_pci_devices_are_switch_links():
    a = nvml.NvmlGpu(0, "H200", "0000:18:00.0", nvlinks=18, nvlink_gbps=26.5625, nvlink_peers={"0000:c5:00.0": 18})
    b = nvml.NvmlGpu(1, "H200", "0000:2a:00.0", nvlinks=18, nvlink_gbps=26.5625, nvlink_peers={"0000:c6:00.0": 18})
    c = nvml.NvmlGpu(2, "A100", "0000:3a:00.0", nvlinks=2, nvlink_peers={"0000:18:00.0": 2})
    nvml.classify_switch_links([a, b, c])
    assert a.nvlink_to_switch and b.nvlink_to_switch and a.nvlink_peers == {}
    assert not c.nvlink_to_switch and c.nvlink_peers == {"0000:18:00.0": 2}
    assert nvml.pair_nvlink_gbps(a, b) == pytest.approx(478.125)


def _fake_pynvml(n: int = 4):
    """An H200 x4 NVSwitch host as NVML answers it (nvidia-ml-py's names)."""
    import types

    buses = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0"][:n]

    class NotSupported(Exception):
        pass

    def mig(h):
        raise NotSupported()

    field = types.SimpleNamespace(nvmlReturn=0, valueType=1, value=types.SimpleNamespace(uiVal=26562))
    return types.SimpleNamespace(
        NVML_NVLINK_MAX_LINKS=18, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: n, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: "NVIDIA H200", nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=buses[h].encode()),
        nvmlDeviceGetNvLinkState=lambda h, link: 1, nvmlDeviceGetNvLinkRemoteDeviceType=lambda h, link: 2,
        nvmlDeviceGetFieldValues=lambda h, ids: [field],
        nvmlDeviceGetGpuFabricInfo=lambda h: types.SimpleNamespace(state=3, status=0),
        nvmlDeviceGetMigMode=mig, nvmlDeviceGetTopologyCommonAncestor=lambda a, b: 50)


def test_nvml_topology_of_an_nvswitch_host(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    t = topo.discover(GOOD)
    assert t.source == "nvml" and t.driver == "580.159.04" and len(t.gpus) == 4
    assert t.links[0] == ["X", "NV18", "NV18", "NV18"]
    assert t.nvlink_limit_gbps[0][1] == pytest.approx(18 * 26.562)
    g = t.gpus[1]
    assert (g.bus_id, g.numa_node, g.cpu_affinity, g.fabric, g.mig) == ("0000:2a:00.0", 0, "0-63", "completed", None)
    found = _by_name(topo_findings(t))
    assert found["topo:fabric"].status == "PASS" and found["topo:mig"].status == "WAIVED"
    assert found["topo:links"].evidence == "every pair NV18"


def test_cli_topo_without_gpu_exits_0(tmp_path, capsys, monkeypatch):
    import json
    import sys

    from ccltune.cli import main

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(smitopo, "run_topo_matrix", lambda: None)
    out = tmp_path / "t.json"
    assert main(["topo", "--sysfs-root", str(GOOD), "--db", str(tmp_path / "r.db"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# no GPU found\n") and "0 GPUs" not in text and "via none" not in text
    assert "WAIVED  topo:gpus  no GPU found" in text
    assert json.loads(out.read_text())["topology"]["source"] == "none"


def test_cli_topo_amd_tree(tmp_path, capsys, monkeypatch):
    import sys

    from ccltune.cli import main

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(smitopo, "run_topo_matrix", lambda: None)
    monkeypatch.setenv(sysfs.ROOT_ENV, str(AMD))
    assert main(["topo", "--db", str(tmp_path / "r.db")]) == 0
    text = capsys.readouterr().out
    assert "CPX/NPS1" in text and "XGMI" in text and "WARN    topo:partition" in text
