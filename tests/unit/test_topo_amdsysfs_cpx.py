"""The AMD sysfs fallback on an MI300X node in CPX/NPS4: 64 KFD GPU nodes on 8 cards (fixture amd_cpx_root: the KFD
tree written by tests/fixtures/sysfs/kfd_cpx.py from the kernel sources its docstring names), read as the amd-smi
path reads the same node (tests/unit/test_topo_amdsmi.py; doctor on both: tests/unit/test_rccl_doctor.py
test_doctor_on_a_cpx_node)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.checks.topo import topo_findings
from ccltune.diagnose.probes import amdsmi, amdsysfs, nvml, smitopo, topo

FIX = Path(__file__).parent.parent / "fixtures"
SPX = FIX / "sysfs" / "amd-mi300x"
CPX_SMI = FIX / "amd-smi" / "mi300x_cpx_nps4_static.json"


@pytest.fixture
def no_tools(monkeypatch):
    """No NVML, nvidia-smi or amd-smi: topo and doctor fall back to sysfs."""
    monkeypatch.setattr(nvml, "read_nvml", lambda: None)
    monkeypatch.setattr(smitopo, "run_topo_matrix", lambda: None)
    monkeypatch.setattr(amdsmi, "run", lambda: None)


def test_kfd_nodes_are_partitions_of_8_gpus(amd_cpx_root):
    amd = amdsysfs.read_amd(amd_cpx_root)
    assert len(amd.gpus) == 8 and len(amd.devices) == 64 and amd.partitioned()
    assert [d.node for d in amd.devices] == list(range(2, 66))  # CPU nodes 0 and 1 come first
    assert [d.partition_id for d in amd.devices[8:16]] == list(range(8))
    assert {d.asic_serial for d in amd.devices[8:16]} == {"0x0000005A3D0000E1"}  # amd-smi's asic_serial of GPU 1
    assert amd.devices[9].pci_address() == "0000:26:00.0"
    assert len(amd.xgmi) == 64 * 63  # every partition to every other, within a GPU and across GPUs


def test_sysfs_view_matches_the_amd_smi_view_of_the_same_node(amd_cpx_root, amd_cpx_topology):
    sysfs = topo.from_amd(amdsysfs.read_amd(amd_cpx_root))
    smi = topo.from_amdsmi(amdsmi.parse([(CPX_SMI.read_text(), CPX_SMI.name)]))
    assert len(sysfs.gpus) == 64 and sysfs.physical_gpus() == 8
    for field in ("name", "numa_node", "compute_partition", "memory_partition", "partition_id", "physical"):
        assert [getattr(g, field) for g in sysfs.gpus] == [getattr(g, field) for g in smi.gpus], field
    found = {f.name: f for f in topo_findings(sysfs)}
    want = {f.name: f for f in topo_findings(smi)}
    assert found["topo:gpus"].data == want["topo:gpus"].data == {"devices": 64, "physical_gpus": 8}
    assert found["topo:gpus"].evidence == want["topo:gpus"].evidence.replace("(amd-smi)", "(amd-sysfs)")
    for name in ("topo:partition", "topo:numa"):
        assert (found[name].status, found[name].evidence) == (want[name].status, want[name].evidence)
    assert found["topo:links"].evidence == "every pair XGMI"  # sysfs has the links amd-smi's static output lacks
    topology = amd_cpx_topology  # amd-smi's links, from the same KFD io_links
    full = topo.from_amdsmi(amdsmi.parse([(topology.read_text(), topology.name), (CPX_SMI.read_text(), CPX_SMI.name)]))
    assert full.links == sysfs.links and [g.physical for g in full.gpus] == [g.physical for g in sysfs.gpus]


def test_spx_tree_is_not_partitioned():
    amd = amdsysfs.read_amd(SPX)
    assert len(amd.devices) == len(amd.gpus) == 8 and not amd.partitioned()
    t = topo.from_amd(amd)
    assert t.physical_gpus() == 8 and t.gpus[3].bus_id == "card3" and t.gpus[3].physical is None


def test_partition_bits_and_grouping_without_unique_id():
    high = amdsysfs._device(5, {"location_id": (3 << 28) | 0x0500, "simd_count": 152})  # partition in [31:28]
    assert (high.partition_id, high.pci_address(), high.asic_serial) == (3, "0000:05:00.0", None)
    devices = [amdsysfs._device(2 + i, {"location_id": (0x05 + i // 4) << 8 | i % 4}) for i in range(8)]
    assert amdsmi.physical_groups(devices) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_cli_topo_on_the_cpx_tree(amd_cpx_root, no_tools, tmp_path, capsys):
    rc = main(["topo", "--sysfs-root", str(amd_cpx_root), "--db", str(tmp_path / "t.db"),
               "--json", str(tmp_path / "t.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "64 GPUs via amd-sysfs (8 physical GPUs, partitioned)" in out
    assert "8 physical GPUs, 8 devices each (CPX/NPS4)" in out and "CPX/NPS4 (GPU7 part 7)" in out
    assert "# links between the 8 physical GPUs" in out and "GPU7  XGMI" in out and "GPU63 " not in out
    assert json.loads((tmp_path / "t.json").read_text())["topology"]["gpus"][63]["physical"] == 7

