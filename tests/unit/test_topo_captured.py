"""`ccltune topo` on the inputs of a real 4 x H200 NVSwitch machine (tests/fixtures/topo, README there): the
renderer crashed there (NameError 'width' on the NVLink limit rows) because no CPU test reached an NVLink
machine's path; these do, through the nvidia-smi matrix and the NVML record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.commands.topo import render
from ccltune.diagnose.probes import nvml, smitopo, topo
from ccltune.errors import DataError

FIX = Path(__file__).parent.parent / "fixtures" / "topo"


def _nvml() -> nvml.NvmlTopo:
    return nvml.from_record(json.loads((FIX / "h200x4_nvml.json").read_text()), "h200x4_nvml.json")


def test_nvidia_smi_matrix_of_an_nvswitch_machine():
    smi = smitopo.parse_topo_matrix((FIX / "h200x4_smi_topo_m.txt").read_text())
    assert smi.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and smi.nics == []
    assert all(smi.links[i][j] == ("X" if i == j else "NV18") for i in range(4) for j in range(4))
    assert smi.cpu_affinity == ["0-63"] * 4 and smi.numa_affinity == ["0"] * 4
    text = render(topo.from_smi(smi))
    assert text.splitlines()[0] == "# 4 GPUs via nvidia-smi"
    assert [line.split() for line in text.splitlines() if line.startswith("GPU1")] == [["GPU1", "NV18", "X", "NV18", "NV18"]]


def test_nvml_record_renders_links_and_the_nvlink_limit(tmp_path):
    t = topo._from_nvml(_nvml(), tmp_path)  # no sysfs here: NUMA unknown
    assert t.nvlink_limit_gbps[0][1] == pytest.approx(18 * 26.562)
    text = render(t)  # NameError before the fix
    lines = text.splitlines()
    assert lines[0] == "# 4 GPUs via nvml, driver 580.159.04"
    assert [line.split() for line in lines if "0000:00:06.0" in line] == [
        ["0", "NVIDIA", "H200", "0000:00:06.0", "-", "-", "18", "26.562", "-", "-", "-"]]
    at = lines.index("# NVLink limit per pair, one direction (GB/s): links x per-link speed")
    assert lines[at + 1].split() == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert lines[at + 2].split() == ["GPU0", "-", "478", "478", "478"]
    # the columns line up under their headers
    assert lines[at + 2].index("478") == lines[at + 1].index("GPU1")


def test_cli_topo_on_the_nvml_record(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(nvml, "read_nvml", _nvml)
    out = tmp_path / "t.json"
    assert main(["topo", "--sysfs-root", str(tmp_path), "--db", str(tmp_path / "r.db"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NV18" in text and "NVLink limit per pair" in text and "Traceback" not in text
    assert json.loads(out.read_text())["topology"]["links"][2][3] == "NV18"


def test_nvml_record_round_trips_and_bad_records_are_data_errors():
    t = _nvml()
    t.pcie[(0, 1)] = "SYS"
    assert nvml.from_record(json.loads(json.dumps(nvml.to_record(t))), "x") == t
    for bad, what in (([], "no 'gpus' list"), ({"gpus": [{"index": 0}]}, "gpus[0] has fields"),
                      ({"gpus": [], "pcie": {"0:1": "SYS"}}, "pcie entry '0:1'"),
                      ({"gpus": [{"index": 0, "name": "G", "bus_id": "0:1", "rogue": 1}]}, "gpus[0] has fields")):
        with pytest.raises(DataError, match=re.escape(f"saved.json: {what}")):
            nvml.from_record(bad, "saved.json")
