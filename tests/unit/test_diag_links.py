"""ccltune links: slowest-link analysis (pure), plan validation, rendering, and the CLI without GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.commands.linkshow import render_matrix
from ccltune.diagnose.checks import gates, linkmath
from ccltune.diagnose.probes import links
from ccltune.errors import UsageError


def _rows(values: dict[tuple[int, int], float], method="ce", direction="uni"):
    return [{"src": s, "dst": d, "method": method, "direction": direction, "size_bytes": 1 << 28,
             "bandwidth_gbps": v, "latency_us": None} for (s, d), v in values.items()]


def _uniform(n: int, v: float):
    return {(s, d): v for s in range(n) for d in range(n) if s != d}


def test_uniform_matrix_has_no_slow_links_and_bound_is_slowest_times_peers():
    m = _uniform(4, 380.0)
    assert linkmath.slow_links(m, 0.8) == []
    bounds = linkmath.per_gpu_bounds(m)
    assert [b["bound_gbps"] for b in bounds] == [1140.0] * 4 and bounds[0]["peers"] == 3


def test_one_degraded_link_is_flagged_and_caps_its_gpu():
    m = _uniform(4, 380.0) | {(2, 3): 190.0}
    slow = linkmath.slow_links(m, 0.8)
    assert [(x["src"], x["dst"]) for x in slow] == [(2, 3)] and slow[0]["ratio"] == pytest.approx(0.5)
    bounds = {b["gpu"]: b for b in linkmath.per_gpu_bounds(m)}
    assert bounds[2]["slowest_peer"] == 3 and bounds[2]["bound_gbps"] == 570.0
    summary, findings = linkmath.analyze(_rows(m))
    assert summary["series"]["ce/uni"]["ring_ceiling_gbps"] == 570.0 and summary["ring_ceiling_gbps"] == 570.0
    (f,) = findings
    assert f.status == "WARN" and "2->3" in f.evidence


def test_all_to_all_aggregate_caps_the_bound_and_nvlink_ratio_is_reported():
    rows = _rows(_uniform(4, 380.0)) + _rows(_uniform(4, 200.0), direction="all2all")
    limit = {p: 478.125 for p in _uniform(4, 0)}
    summary, findings = linkmath.analyze(rows, nvlink_limit=limit)
    uni = summary["series"]["ce/uni"]
    assert uni["per_gpu"][0]["aggregate_gbps"] == pytest.approx(600.0) and not uni["per_gpu"][0]["shared_links"]
    assert uni["ring_ceiling_gbps"] == pytest.approx(600.0)
    assert uni["nvlink_ratio"] == pytest.approx(380.0 / 478.125)
    assert summary["all2all_per_gpu_gbps"]["ce"][3] == pytest.approx(600.0)
    assert {f.name: f.status for f in findings} == {"links:ce/uni": "PASS", "links:ce/all2all": "PASS"}
    assert "79% of the NVLink limit" in findings[0].evidence


def test_series_are_judged_separately_and_latency_summarised():
    rows = _rows(_uniform(2, 380.0)) + _rows(_uniform(2, 470.0), method="sm-write")
    rows += [{"src": 0, "dst": 1, "method": "ce", "direction": "latency", "size_bytes": 4, "bandwidth_gbps": None,
              "latency_us": 2.0}, {"src": 1, "dst": 0, "method": "ce", "direction": "latency", "size_bytes": 4,
                                   "bandwidth_gbps": None, "latency_us": 4.0}]
    summary, findings = linkmath.analyze(rows)
    assert summary["ring_ceiling_gbps"] == 470.0  # best method's ceiling, named
    assert summary["ring_ceiling_series"] == "sm-write/uni"
    assert summary["latency_us"] == {"median": 3.0, "max": 4.0, "min": 2.0}
    assert all(f.status == "PASS" for f in findings)


def test_link_plan_validation():
    with pytest.raises(UsageError, match="multiple of 16"):
        links.LinkPlan(size_bytes=100)
    with pytest.raises(UsageError, match="unknown method 'sm'"):
        links.LinkPlan(methods=("sm",))
    assert links.Transfer(0, 1, "sm-read").runner == 1 and links.Transfer(0, 1, "ce").runner == 0


def test_render_matrix_places_source_rows():
    text = render_matrix(_rows({(0, 1): 1.5, (1, 0): 2.25}), 2, "ce", "uni")
    lines = text.splitlines()
    assert lines[2].split() == ["0", "-", "1.50"] and lines[3].split() == ["1", "2.25", "-"]


def test_cli_links_without_gpu_is_waived(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(links, "available", lambda: "no CUDA GPU visible")
    out = tmp_path / "l.json"
    assert main(["links", "--db", str(tmp_path / "r.db"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "WAIVED  links  no CUDA GPU visible" in text
    assert ", nothing measured" in text and "CUDA start" not in text  # no GPU: no CUDA start to speak of
    assert json.loads(out.read_text())["status"] == "WAIVED"


def test_cli_links_records_rows_and_findings(tmp_path, capsys, monkeypatch):
    run = links.LinkRun(rows=_rows(_uniform(2, 380.0)), n_gpus=2, gpu_names=["G", "G"], bus_ids=[None, None],
                        elapsed_s=1.5, failed_checks=["sm-read"], waived={"sm": "cupy is not installed"})
    monkeypatch.setattr(links, "available", lambda: None)
    monkeypatch.setattr(links, "measure", lambda plan, log: run)
    monkeypatch.setattr("ccltune.diagnose.probes.nvml.read_nvml", lambda: None)
    db = tmp_path / "r.db"
    assert main(["links", "--db", str(db), "--method", "ce"]) == 1  # a wrong copy is an ERROR
    text = capsys.readouterr().out
    assert "ring collectives: 380.0" in text and "# elapsed: 1.5 s measuring" in text and "WAIVED  links:sm" in text
    from ccltune.store import Store

    with Store(db) as store:
        (r,) = store.runs("links")
        assert len(store.links(r.id)) == 2 and r.summary["ring_ceiling_gbps"] == 380.0


def test_cli_links_bad_flags(tmp_path, capsys):
    assert main(["links", "--db", str(tmp_path / "r.db"), "--threshold", "2"]) == 2
    assert main(["links", "--db", str(tmp_path / "r.db"), "--method", "dma"]) == 2
    assert "unknown method 'dma'" in capsys.readouterr().err


class _FakeTensor:
    def __init__(self, array, device):
        self.a, self.device = array, device

    def __getitem__(self, key):
        return _FakeTensor(self.a[key], self.device)

    def copy_(self, other):
        assert other.device != self.device
        self.a[:] = other.a

    def zero_(self):
        self.a[:] = 0

    def __eq__(self, value):
        return _FakeTensor(self.a == value, self.device)

    def all(self):
        return bool(self.a.all())

    def data_ptr(self):
        return self.a.ctypes.data


def _fake_torch(n: int):
    """Just enough of torch.cuda for links.measure to run its loops on the CPU."""
    import types
    from contextlib import nullcontext

    np = pytest.importorskip("numpy")
    t = types.SimpleNamespace(uint8="uint8", calls={"sleep": 0, "events": 0, "sync": 0})
    props = types.SimpleNamespace(name="Fake GPU", multi_processor_count=2, pci_domain_id=0, pci_bus_id=0x18,
                                  pci_device_id=0)

    class Stream:
        def __init__(self, device):
            self.device, self.cuda_stream = device, id(self)

        def wait_event(self, event):
            assert event.recorded

    class Event:
        def __init__(self, enable_timing=False):
            self.recorded = False
            t.calls["events"] += 1

        def record(self, stream):
            self.recorded = True

        def elapsed_time(self, other):
            assert self.recorded and other.recorded
            return 2.0

    def sleep(cycles):
        t.calls["sleep"] += 1

    def sync(d):
        t.calls["sync"] += 1

    t.full = lambda shape, v, dtype, device: _FakeTensor(np.full(shape, v, dtype=np.uint8), device)
    t.zeros = lambda size, dtype, device: _FakeTensor(np.zeros(size, dtype=np.uint8), device)
    t.cuda = types.SimpleNamespace(
        is_available=lambda: True, device_count=lambda: n, get_device_properties=lambda d: props,
        can_device_access_peer=lambda a, b: True, Stream=Stream, Event=Event, synchronize=sync,
        stream=lambda s: nullcontext(), device=lambda d: nullcontext(), _sleep=sleep)
    return t


def test_measure_drives_every_pair_and_direction_with_a_fake_torch(monkeypatch):
    import sys

    fake = _fake_torch(3)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "cupy", None)  # no cupy: SM methods are waived, not crashed
    run = links.measure(links.LinkPlan(size_bytes=1 << 10, iters=3, warmup=1, latency_iters=4))
    assert "cupy" in run.waived["sm"] and not run.failed_checks
    by = {}
    for r in run.rows:
        by.setdefault((r["method"], r["direction"]), []).append(r)
    assert {k: len(v) for k, v in by.items()} == {("ce", "latency"): 6, ("ce", "uni"): 6, ("ce", "bidir"): 6,
                                                   ("ce", "all2all"): 6}
    # 1 KiB per copy, links.BURST copies in the fake's 2 ms per pair of events
    assert by[("ce", "uni")][0]["bandwidth_gbps"] == pytest.approx(links.BURST * (1 << 10) / 2e6)
    assert by[("ce", "latency")][0]["latency_us"] == 2000.0
    assert fake.calls["sleep"] > 0  # concurrent transfers start behind a gate
    assert run.bus_ids == ["0000:18:00.0"] * 3


def test_measure_reports_copies_that_come_out_wrong(monkeypatch):
    import sys

    fake = _fake_torch(2)
    monkeypatch.setattr(_FakeTensor, "copy_", lambda self, other: None)  # a copy that moves nothing
    monkeypatch.setitem(sys.modules, "torch", fake)
    run = links.measure(links.LinkPlan(size_bytes=1 << 10, iters=1, warmup=0, latency_iters=1, methods=("ce",)))
    assert run.failed_checks == ["ce"]


def _repeat(values, method="ce", direction="all2all"):
    return _rows(values, method, direction + linkmath.REPEAT)


def _one(findings, name):
    (f,) = [f for f in findings if f.name == name]
    return f


def test_a_link_measured_once_warns_without_sending_hardware_for_service():
    f = _one(linkmath.analyze(_rows(_uniform(4, 380.0) | {(2, 3): 190.0}))[1], "links:ce/uni")
    assert f.status == "WARN" and "(measured once)" in f.evidence
    assert "reseat" not in f.fix and "before servicing" in f.fix
    assert "nvbandwidth -t device_to_device_memcpy_write_ce" in f.fix


def test_a_link_fast_when_measured_again_passes():
    rows = _rows(_uniform(4, 380.0) | {(2, 3): 190.0}) + _repeat({(2, 3): 379.0}, direction="uni")
    f = _one(linkmath.analyze(rows)[1], "links:ce/uni")
    assert f.status == "PASS" and "measured again, none of them below" in f.evidence


def test_a_link_slow_twice_warns_and_names_the_confirming_test():
    rows = _rows(_uniform(4, 380.0) | {(2, 3): 190.0}) + _repeat({(2, 3): 192.0}, direction="uni")
    f = _one(linkmath.analyze(rows)[1], "links:ce/uni")
    assert f.status == "WARN" and "in two measurements" in f.evidence and "2->3" in f.evidence
    assert "nvbandwidth -t device_to_device_memcpy_write_ce" in f.fix and "reseat" in f.fix


def test_all_to_all_pairs_slow_twice_but_fine_alone_are_the_copy_engines_split():
    a2a = _uniform(4, 330.0) | {(1, 0): 200.0, (3, 2): 210.0}
    rows = _rows(_uniform(4, 390.0)) + _rows(a2a, direction="all2all") + _repeat({(1, 0): 205.0, (3, 2): 215.0})
    f = _one(linkmath.analyze(rows)[1], "links:ce/all2all")
    assert f.status == "PASS" and "copy engines" in f.evidence and ">= 390.0 GB/s alone" in f.evidence
    # the same pair slow alone too: the link
    rows = _rows(_uniform(4, 390.0) | {(1, 0): 200.0}) + _rows(a2a, direction="all2all")
    rows += _repeat({(1, 0): 205.0, (3, 2): 215.0}) + _repeat({(1, 0): 201.0}, direction="uni")
    f = _one(linkmath.analyze(rows)[1], "links:ce/all2all")
    assert f.status == "WARN" and f.evidence.startswith("1 links below") and "two measurements and alone" in f.evidence


class _Rig:
    """links' rig as ``remeasure`` uses it: every transfer of a group takes ``ms[(src, dst, concurrent)]``."""

    def __init__(self, n, ms):
        self.pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
        self.ms, self.groups = ms, []

    def time(self, transfers, nbytes, iters, warmup, burst=1):
        self.groups.append(([(t.src, t.dst) for t in transfers], burst))
        return [self.ms.get((t.src, t.dst, len(transfers)), 1.0) for t in transfers]


def test_remeasure_times_only_the_flagged_links_as_they_were_timed():
    plan = links.LinkPlan(size_bytes=1 << 20, iters=2, warmup=1)
    run = links.LinkRun(rows=_rows(_uniform(3, 300.0) | {(1, 0): 100.0})
                        + _rows(_uniform(3, 300.0) | {(0, 2): 90.0, (2, 0): 95.0}, direction="bidir")
                        + _rows(_uniform(3, 200.0) | {(2, 1): 50.0}, direction="all2all"))
    rig = _Rig(3, {(2, 1, 6): 0.5})
    links.remeasure(rig, run, plan, "ce", lambda _: None)
    assert rig.groups == [([(1, 0)], links.BURST), ([(0, 2), (2, 0)], 1), (rig.pairs, 1)]
    again = {(r["direction"], r["src"], r["dst"]): r["bandwidth_gbps"] for r in run.rows if "repeat" in r["direction"]}
    assert set(again) == {("uni-repeat", 1, 0), ("bidir-repeat", 0, 2), ("bidir-repeat", 2, 0),
                          ("all2all-repeat", 2, 1)}
    assert again[("all2all-repeat", 2, 1)] == pytest.approx((1 << 20) / 0.5e6)


def _real(n: int):

    path = Path(__file__).parent.parent / "fixtures" / "links" / f"h200x4_links{n}.json"
    return json.loads(path.read_text())["rows"]


def test_real_h200_all_to_all_measured_once_warns_without_the_service_advice():
    # 4 x H200, NVSwitch: copy-engine pairs 393 GB/s alone, 200-388 GB/s all at once
    findings = {f.name: f for f in linkmath.analyze(_real(1))[1]}
    assert findings["links:ce/uni"].status == "PASS" and findings["links:ce/bidir"].status == "PASS"
    f = findings["links:ce/all2all"]
    assert f.status == "WARN" and f.evidence.startswith("5 links below 0.8 x median 337.6 GB/s") and "measured once" in f.evidence
    assert "reseat" not in f.fix and "nvbandwidth -t device_to_device_memcpy_write_ce" in f.fix


def test_real_h200_all_to_all_measured_again_passes():
    # the second run of the same session as the repeat: its all-to-all rows are what links measures again
    again = [dict(r, direction=r["direction"] + linkmath.REPEAT) for r in _real(2) if r["direction"] == "all2all"]
    findings = {f.name: f for f in linkmath.analyze(_real(1) + again)[1]}
    ce = findings["links:ce/all2all"]
    # 0->3 was slow both times (205.5, then 221.3 GB/s) but carries 392.9 alone: the copy engines' split
    assert ce.status == "PASS" and "1 of them again" in ce.evidence and "copy engines" in ce.evidence
    assert [(x["src"], x["dst"]) for x in ce.data["slow_twice"]] == [(0, 3)]
    sm = findings["links:sm-write/all2all"]  # 2->3 69.2, 1->3 71.4 GB/s; 77.6 and 82.5 again
    assert sm.status == "PASS" and "none of them below" in sm.evidence
    assert all(f.status == "PASS" for f in findings.values())


def test_cli_links_renders_a_real_4_gpu_run_with_nvml_limits(tmp_path, capsys, monkeypatch):

    from ccltune.diagnose.probes import nvml

    saved = Path(__file__).parent.parent / "fixtures" / "topo" / "h200x4_nvml.json"
    run = links.LinkRun(rows=_real(1), n_gpus=4, gpu_names=["NVIDIA H200"] * 4,
                        bus_ids=[f"0000:00:0{d}.0" for d in (6, 7, 8, 9)], elapsed_s=3.0)
    monkeypatch.setattr(links, "available", lambda: None)
    monkeypatch.setattr(links, "measure", lambda plan, log: run)
    monkeypatch.setattr(nvml, "read_nvml", lambda: nvml.from_record(json.loads(saved.read_text()), saved.name))
    out = tmp_path / "l.json"
    assert main(["links", "--db", str(tmp_path / "r.db"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "# ce all2all (GB/s), row = source, column = destination" in text
    assert "PASS    links:ce/uni            median 393.2 GB/s, min 392.9, 82% of the NVLink limit" in text
    summary = json.loads(out.read_text())["summary"]
    assert summary["nvlink_limit_gbps"]["0-1"] == pytest.approx(18 * 26.562)


def test_pairs_that_share_a_gpus_links_bound_it_by_its_fastest_pair():
    """Through a switch a pair copy already uses all of a GPU's links: alone 380, all at once 140 a pair."""
    rows = _rows(_uniform(4, 380.0) | {(0, 1): 390.0}) + _rows(_uniform(4, 140.0), direction="all2all")
    summary, _ = linkmath.analyze(rows)
    per_gpu = {b["gpu"]: b for b in summary["series"]["ce/uni"]["per_gpu"]}
    assert linkmath.shared_port_gpus(rows) == {0, 1, 2, 3} and per_gpu[0]["shared_links"]
    assert per_gpu[0]["bound_gbps"] == 390.0 and summary["ring_ceiling_gbps"] == 380.0


@pytest.mark.parametrize("name", ["h200x4_links1.json", "h200x4_links2.json"])
def test_the_gate_derived_from_real_nvswitch_links_passes_that_machines_all_reduce(name):
    """4 x H200 (NVSwitch): the gate was 85% of 790-824 GB/s (slowest pair x 3 peers), which no all_reduce can
    reach (the same machine's in-place busbw at 512M was 346.4 GB/s, `ccltune check`, 2026-11-26); a GPU's
    pairs share its ports there (SM all-to-all 82 GB/s a pair against 369 alone), so its fastest pair bounds it."""
    data = json.loads((Path(__file__).parent.parent / "fixtures" / "links" / name).read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    profile = gates.link_profile(rows, world_size=4, where=name)
    assert 300.0 < profile.gates[0].min_value < 346.4
