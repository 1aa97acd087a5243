"""``ccltune topo`` on amd-smi JSON (fixtures written from ROCm/amdsmi's topology/static JSON code, amd-staging commit 0ceca28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.checks import topo as topo_checks
from ccltune.diagnose.checks.topo import topo_findings
from ccltune.diagnose.probes import amdsmi, nvml, smitopo, topo
from ccltune.errors import UsageError

FIX = Path(__file__).parent.parent / "fixtures"
SMI = FIX / "amd-smi"


def texts(*names: str) -> list[tuple[str, str]]:
    return [((SMI / n).read_text(), n) for n in names]


def test_mi300x_mesh_and_partition():
    t = topo.from_amdsmi(amdsmi.parse(texts("mi300x_topology.json", "mi300x_static.json")))
    assert t.source == "amd-smi" and len(t.gpus) == 8 and t.physical_gpus() == 8
    assert t.gpus[0].name == "AMD Instinct MI300X" and t.gpus[0].bus_id == "0000:05:00.0"
    assert {c for i, row in enumerate(t.links) for j, c in enumerate(row) if i != j} == {"XGMI"}
    found = {f.name: f for f in topo_findings(t)}
    assert found["topo:links"].status == "PASS"
    assert found["topo:partition"].status == "PASS" and "SPX/NPS1 on 8 devices" in found["topo:partition"].evidence
    assert found["topo:numa"].data["numa"][7] == 1


def test_cpx_nps4_node_is_64_devices_on_8_gpus():
    """An 8 x MI300X node in CPX/NPS4: amd-smi lists 64 devices, 8 per physical GPU, partition_id 0..7."""
    t = topo.from_amdsmi(amdsmi.parse(texts("mi300x_cpx_nps4_static.json")))
    assert len(t.gpus) == 64 and t.physical_gpus() == 8
    assert [g.partition_id for g in t.gpus[8:16]] == list(range(8)) and {g.physical for g in t.gpus[8:16]} == {1}
    assert {(g.compute_partition, g.memory_partition) for g in t.gpus} == {("CPX", "NPS4")}
    found = {f.name: f for f in topo_findings(t)}
    assert found["topo:gpus"].data == {"devices": 64, "physical_gpus": 8}
    assert "8 physical GPUs, 8 devices each (CPX/NPS4)" in found["topo:gpus"].evidence
    assert found["topo:partition"].status == "WARN"
    assert found["topo:partition"].evidence == "compute/memory partition CPX/NPS4 on 64 of 64 devices"
    assert found["topo:links"].status == "WAIVED"  # static output alone: no links, not a matrix of '?'
    assert found["topo:numa"].data["numa"][63] == 1


CPX_STATIC = "mi300x_cpx_nps4_static.json"


def cpx(topology: Path, static: bool = True) -> list[tuple[str, str]]:
    """The CPX node's amd-smi texts: its generated topology (conftest ``amd_cpx_topology``), with the static output."""
    return [(topology.read_text(), topology.name), *(texts(CPX_STATIC) if static else [])]


def test_cpx_topology_fits_the_static_fixture(amd_cpx_topology):
    """The generated topology (tests/fixtures/amd-smi/cpx_topology.py) is of the static fixture's node."""
    smi = amdsmi.parse(cpx(amd_cpx_topology))
    assert [g.index for g in smi.gpus] == list(range(64)) and len(smi.links) == 64 * 63
    assert all(g.bdf.endswith(f".{g.partition_id}") for g in smi.gpus)  # the kernel puts the partition in bits [2:0]
    assert {(g.socket, g.asic_serial) for g in smi.gpus[8:16]} == {("0000:26:00", "0x0000005A3D0000E1")}
    assert smi.links[(9, 8)]["weight"] == 13 and smi.links[(9, 17)]["weight"] == 41


def test_cpx_topology_and_static_is_an_xgmi_mesh_of_8_gpus(amd_cpx_topology):
    """amd-smi gives every pair of partitions XGMI, 1 hop, inside a GPU and across GPUs: no PCIe link, no hop count,
    one kind of pair, so no WARN; the weights and bandwidths that tell the two apart are said in a note."""
    t = topo.from_amdsmi(amdsmi.parse(cpx(amd_cpx_topology)))
    assert len(t.gpus) == 64 and t.physical_gpus() == 8 and t.gpus[11].bus_id == "0000:26:00.3"
    assert set(t.pair_labels()) == {"XGMI"}
    found = {f.name: f for f in topo_findings(t)}
    assert (found["topo:links"].status, found["topo:links"].evidence) == ("PASS", "every pair XGMI")
    assert found["topo:gpus"].data == {"devices": 64, "physical_gpus": 8}
    assert t.notes == ["amd-smi, partitions of one GPU: weight 13, bandwidth 819200-819200; of different GPUs: "
                       "weight 41, bandwidth 0-0 (KFD's figures, MB/s; 0-0: none given)"]


def test_cpx_topology_alone_groups_partitions_by_pci_socket(amd_cpx_topology):
    """Without the static output (no asic_serial, no partition_id) the partitions of a GPU share its PCI
    domain:bus:device, as amd-smi's sockets do; before, each of the 64 was taken for a physical GPU."""
    t = topo.from_amdsmi(amdsmi.parse(cpx(amd_cpx_topology, static=False)))
    assert len(t.gpus) == 64 and t.physical_gpus() == 8
    assert [g.physical for g in t.gpus[::8]] == list(range(8)) and {g.physical for g in t.gpus[56:]} == {7}


def test_pci_socket():
    assert amdsmi.pci_socket("0000:A6:00.7") == "0000:a6:00"
    assert [amdsmi.pci_socket(b) for b in (None, "", "N/A", "05:00.0")] == [None] * 4
    legacy = [amdsmi.AmdSmiGpu(i, bdf="0000:05:00.0" if i < 2 else "0000:26:00.0") for i in range(4)]
    assert amdsmi.physical_groups(legacy) == [[0, 1], [2, 3]]  # a kernel that leaves the function 0


def test_cli_topo_on_a_cpx_node_with_its_topology(amd_cpx_topology, tmp_path, capsys):
    rc = main(["topo", "--from-amd-smi", str(amd_cpx_topology), "--from-amd-smi", str(SMI / CPX_STATIC),
               "--db", str(tmp_path / "t.db")])
    out = capsys.readouterr().out
    assert rc == 0 and "64 GPUs via amd-smi (8 physical GPUs, partitioned)" in out
    assert "# links between the 8 physical GPUs (a partition has its GPU's links; partitions of one GPU: XGMI)" in out
    matrix = [line for line in out.splitlines() if line.startswith("GPU")]
    assert len(matrix) == 8 and matrix[7].split() == ["GPU7"] + ["XGMI"] * 7 + ["X"]
    assert "PCIE" not in out.replace("(PCIE from amd-smi)", "") and "WARN    topo:links" not in out


def test_physical_groups_without_asic_serial_follow_partition_ids():
    gpus = [amdsmi.AmdSmiGpu(i, partition_id=i % 4) for i in range(8)] + [amdsmi.AmdSmiGpu(8)]
    assert amdsmi.physical_groups(gpus) == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]


def test_cli_topo_on_a_cpx_node(tmp_path, capsys):
    rc = main(["topo", "--from-amd-smi", str(SMI / "mi300x_cpx_nps4_static.json"), "--db", str(tmp_path / "t.db"),
               "--json", str(tmp_path / "t.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "64 GPUs via amd-smi (8 physical GPUs, partitioned)" in out
    assert "CPX/NPS4 (GPU7 part 7)" in out and "links not reported" in out and "GPU63 " not in out


def test_pcie_hops_in_the_matrix():
    t = topo.from_amdsmi(amdsmi.parse(texts("mi210_pcie_topology.json", "mi210_pcie_static.json")))
    assert t.links[0][1] == "PCIE+2" and t.links[0][2] == "PCIE+3"
    assert t.gpus[2].numa_node == 1 and t.gpus[0].compute_partition is None


def test_disabled_p2p_and_hops_labels():
    assert amdsmi.label({"link_type": "XGMI", "num_hops": 2, "link_status": "ENABLED"}) == "XGMI+2"
    assert amdsmi.label({"link_type": "XGMI", "num_hops": 1, "link_status": "DISABLED"}) == "NOP2P"
    assert topo_checks._link_rank("XGMI") > topo_checks._link_rank("XGMI+2")


def test_discover_prefers_amdsmi_over_sysfs(monkeypatch, tmp_path):
    monkeypatch.setattr(nvml, "read_nvml", lambda: None)
    monkeypatch.setattr(smitopo, "run_topo_matrix", lambda: None)
    monkeypatch.setattr(amdsmi, "run", lambda: texts("mi300x_topology.json", "mi300x_static.json"))
    t = topo.discover(FIX / "sysfs" / "amd-mi300x")
    assert t.source == "amd-smi" and t.gpus[0].compute_partition == "SPX"


def test_discover_falls_back_to_sysfs(monkeypatch):
    monkeypatch.setattr(nvml, "read_nvml", lambda: None)
    monkeypatch.setattr(smitopo, "run_topo_matrix", lambda: None)
    monkeypatch.setattr(amdsmi, "run", lambda: None)
    t = topo.discover(FIX / "sysfs" / "amd-mi300x")
    assert t.source == "amd-sysfs" and "amd-smi: not found or no GPU" not in t.notes


def test_cli_from_amd_smi(tmp_path, capsys):
    rc = main(["topo", "--from-amd-smi", str(SMI / "mi300x_topology.json"), "--from-amd-smi",
               str(SMI / "mi300x_static.json"), "--db", str(tmp_path / "t.db")])
    out = capsys.readouterr().out
    assert rc == 0 and "8 GPUs via amd-smi" in out and "SPX/NPS1" in out


@pytest.mark.parametrize("text, message", [
    ("{oops", "not amd-smi JSON"),
    ('[{"gpu": "0"}]', "integer 'gpu'"),
    ('[{"gpu": 0, "power": {}}]', "neither 'amd-smi topology --json'"),
])
def test_bad_amdsmi_json(text, message):
    with pytest.raises(UsageError, match=message):
        amdsmi.parse([(text, "f.json")])
