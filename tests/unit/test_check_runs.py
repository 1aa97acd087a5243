"""ccltune check on machines without a built-in profile (gates from the links) and on stored runs (--run N)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.checks import gates, profiles
from ccltune.store import Measurement, Store

G = 1 << 30
M = 1 << 20
RCCLT = Path(__file__).resolve().parents[1] / "fixtures" / "rccl-tests"


def _gpus(monkeypatch, name: str, n: int) -> None:
    gpus = [{"name": name, "index": i} for i in range(n)]
    monkeypatch.setattr("ccltune.environment.gpu_facts", lambda: {"gpus": gpus, "cuda": "13.0", "hip": None})


def _rows(points: dict[int, float], ranks: int) -> list[Measurement]:
    return [Measurement(collective="all_reduce", size_bytes=s, count=s // 4, dtype="float", op="sum", root=None,
                        in_place=ip, n_ranks=ranks, n_nodes=1, status="ok", time_us=1.0, algbw_gbps=bw / 1.75,
                        busbw_gbps=bw if ip else bw - 5, wrong=0) for s, bw in points.items() for ip in (False, True)]


def _stored(db, gpu: str, ranks: int, points: dict[int, float], kind: str = "bench") -> int:
    env = {"world_size": ranks, "gpus": [{"name": gpu, "index": i} for i in range(ranks)], "launcher": "mpirun",
           "platform": f"{gpu} x{ranks}"}
    with Store(db) as st:
        rid = st.begin_run(kind, command=f"all_reduce_perf -b 256M -e 16G -f 2 -g 1 ({ranks} x {gpu})", env=env)
        st.add_measurements(rid, _rows(points, ranks))
        st.finish_run(rid, "complete")
    return rid


def _links_run(db, n: int, gbps: float, slow: float | None = None) -> int:
    rows = []
    for s in range(n):
        for d in range(n):
            if s != d:
                bw = slow if slow is not None and (s, d) == (0, 1) else gbps
                rows.append({"src": s, "dst": d, "method": "ce", "direction": "uni", "size_bytes": 256 * M,
                             "bandwidth_gbps": bw, "latency_us": None, "note": None})
    with Store(db) as st:
        rid = st.begin_run("links", command="ccltune links", env={"world_size": 1})
        st.add_links(rid, rows)
        st.finish_run(rid, "complete")
    return rid


# an 8 x MI300X rccl-tests run measured to 16 GB: 8 GB passes AMD's 304 GB/s, 16 GB falls (not judged)
MI300X = {256 * M: 280.0, 512 * M: 300.0, G: 310.0, 2 * G: 315.0, 4 * G: 318.0, 8 * G: 320.0, 16 * G: 250.0}


def test_amd_gates_are_all_reduce_in_place_busbw_at_8g_one_process_per_gpu():
    for name in ("mi300x-8", "mi350x-8", "mi355x-8"):
        prof = profiles.load_profile(name)
        (g,) = prof.gates
        assert (g.collective, g.in_place, g.metric, g.size_bytes, prof.world_size) == \
            ("all_reduce", True, "busbw_gbps", 8 * G, 8)
    threads = gates.evaluate(profiles.load_profile("mi300x-8"), [], {"world_size": 8, "process_per_gpu": False})
    assert threads[0].name == "process_per_gpu" and threads[0].status == "ERROR"


def test_stored_16g_run_is_judged_at_8g_with_the_profile_of_its_gpus(tmp_path, capsys):
    db = tmp_path / "r.db"
    rid = _stored(db, "AMD Instinct MI300X", 8, MI300X)
    out = tmp_path / "v.json"
    assert main(["check", "--run", str(rid), "--db", str(db), "--json", str(out)]) == 0
    verdict = json.loads(out.read_text())
    assert verdict["profile"] == "mi300x-8" and verdict["status"] == "PASS"
    checks = {c["name"]: c for c in verdict["checks"]}
    assert checks["all_reduce_busbw_8G"]["value"] == 320.0 and checks["monotonic"]["status"] == "PASS"


def test_stored_run_refuses_a_profile_of_other_gpus_naming_both(tmp_path, capsys):
    db = tmp_path / "r.db"
    rid = _stored(db, "AMD Instinct MI300X", 8, MI300X)
    assert main(["check", "--run", str(rid), "--profile", "mi350x-8", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "MI300X" in err and "MI350X" in err and "--force-profile" in err and "Traceback" not in err
    assert main(["check", "--run", str(rid), "--profile", "h200-4", "--db", str(db)]) == 2
    assert "8 GPUs, the profile's 4" in capsys.readouterr().err
    assert main(["check", "--run", str(rid), "--profile", "mi350x-8", "--force-profile", "--db", str(db)]) == 1
    text = capsys.readouterr().out
    assert "WARN    profile_fit" in text and "FAIL    all_reduce_busbw_8G" in text  # 320 < 350


def test_rccl_tests_mi300x_to_16g_imported_passes_its_profile_and_is_refused_the_mi350x_one(tmp_path, capsys):
    """Issue 21's done-means, all through the CLI: rccl-tests all_reduce on 8 x MI300X from 8 B to 16 GB
    (one process per GPU), imported; check picks mi300x-8 and judges 8 GB (323.68 in place) though 16 GB was
    measured; mi350x-8 is refused naming both models (exit 2), and forced it FAILs on its 350 GB/s gate."""
    db, out = tmp_path / "r.db", tmp_path / "v.json"
    fixture = RCCLT / "rccl-tests-2024-09_all_reduce_mi300x_np8_16g.txt"
    assert main(["import", "nccl-tests", str(fixture), "--db", str(db)]) == 0
    assert "platform AMD Instinct MI300X x8" in capsys.readouterr().out
    with Store(db, readonly=True) as st:
        (run,) = st.runs()
        sizes = {m.size_bytes for m in st.measurements(run.id)}
    assert (min(sizes), max(sizes), run.env["process_per_gpu"]) == (8, 16 * G, True)
    assert main(["check", "--run", str(run.id), "--db", str(db), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "--profile mi300x-8" in text and "PASS    all_reduce_busbw_8G" in text and "323.7 >= 304 GB/s" in text
    assert "engine rccl-tests" in text and "process per GPU True" in text
    verdict = json.loads(out.read_text())
    assert (verdict["profile"], verdict["status"]) == ("mi300x-8", "PASS")
    gate = {c["name"]: c for c in verdict["checks"]}["all_reduce_busbw_8G"]
    assert (gate["value"], gate["data"]["size_bytes"]) == (323.68, 8 * G)

    assert main(["check", "--run", str(run.id), "--profile", "mi350x-8", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "'Instinct MI300X', the profile's is 'MI350X'" in err and "--force-profile" in err
    assert main(["check", "--run", str(run.id), "--profile", "mi350x-8", "--force-profile", "--db", str(db)]) == 1
    text = capsys.readouterr().out
    assert "WARN    profile_fit" in text and "FAIL    all_reduce_busbw_8G" in text and "323.7 < 350 GB/s" in text


def test_imported_run_of_one_process_driving_8_gpus_is_an_error_for_the_profile(tmp_path, capsys):
    """rccl-tests -g 8 (one Pid for all 8 ranks): AMD's figures are for one process per GPU."""
    db = tmp_path / "r.db"
    assert main(["import", "nccl-tests", str(RCCLT / "rccl-tests-2024-03_all_gather_g8.txt"),
                 "--db", str(db)]) == 0
    with Store(db, readonly=True) as st:
        (run,) = st.runs()
    assert run.env["process_per_gpu"] is False
    how = gates.how_measured(run.env, [], source="import")
    findings = gates.evaluate(profiles.load_profile("mi300x-8"), [], how)
    assert (findings[0].name, findings[0].status) == ("process_per_gpu", "ERROR")


def test_stored_run_without_a_matching_profile_names_the_run(tmp_path, capsys):
    db = tmp_path / "r.db"
    rid = _stored(db, "NVIDIA L40S", 4, {G: 20.0})
    assert main(["check", "--run", str(rid), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"run {rid} (4 x L40S)" in err and "--links-run" in err
    assert main(["check", "--run", "99", "--db", str(db)]) == 2
    assert "no run 99" in capsys.readouterr().err


def test_gate_from_a_stored_links_run_says_where_it_came_from(tmp_path, capsys):
    db = tmp_path / "r.db"
    links = _links_run(db, 4, 100.0, slow=80.0)  # GPU 0: slowest 80 x 3 peers = 240 GB/s ceiling
    rid = _stored(db, "NVIDIA L40S", 4, {64 * M: 200.0, 256 * M: 205.0, G: 210.0})
    out = tmp_path / "v.json"
    assert main(["check", "--run", str(rid), "--links-run", str(links), "--db", str(db), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"gate from the link measurement (links run {links})" in text and "80% of the ring ceiling 240.0" in text
    assert "210.0 >= 192 GB/s" in text
    assert main(["check", "--run", str(rid), "--links-run", str(links), "--ring-fraction", "0.9",
                 "--db", str(db)]) == 1  # 210 < 216


def test_unmatched_machine_is_gated_by_its_links(tmp_path, capsys, monkeypatch):
    from ccltune.diagnose.probes import benchrun

    _gpus(monkeypatch, "NVIDIA L40S", 2)
    db = tmp_path / "r.db"
    links = _links_run(db, 2, 50.0)
    recs = [{"collective": "all_reduce", "size_bytes": s, "in_place": True, "busbw_gbps": 45.0, "status": "ok"}
            for s in (64 * M, 128 * M, 256 * M, 512 * M, G)]
    monkeypatch.setattr(benchrun, "run_bench", lambda n, **k: benchrun.BenchRun(
        ["fake"], {}, 0, "", 0.1, bench_env={"world_size": 2, "engine": "nccl"}, records=recs))
    assert main(["check", "--links-run", str(links), "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "gate from the link measurement" in text and "45.0 >= 40 GB/s" in text


def test_one_gpu_without_a_profile_is_waived_with_the_reason(tmp_path, capsys, monkeypatch):
    _gpus(monkeypatch, "NVIDIA H100 80GB HBM3", 1)
    out = tmp_path / "v.json"
    assert main(["check", "--db", str(tmp_path / "r.db"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "WAIVED" in text and "1 x NVIDIA H100 80GB HBM3: one GPU has no links" in text
    assert json.loads(out.read_text())["status"] == "WAIVED"


def test_h100_and_a100_profiles_name_their_source_and_match_sxm_parts():
    for name, url in (("h100-8", "nccl-tests/issues/212"), ("a100-8", "nccl-tests/issues/149")):
        text = (profiles._builtin_dir() / f"{name}.toml").read_text()
        assert url in text
    assert profiles.detect(["NVIDIA H100 80GB HBM3"] * 8).name == "h100-8"
    assert profiles.detect(["NVIDIA A100-SXM4-80GB"] * 8).name == "a100-8"
    assert profiles.detect(["NVIDIA H100 PCIe"] * 8) is None


@pytest.mark.parametrize("value", ["0", "1.5", "nan"])
def test_bad_ring_fraction_is_a_usage_error(tmp_path, capsys, value):
    assert main(["check", "--ring-fraction", value, "--db", str(tmp_path / "r.db")]) == 2
    assert "--ring-fraction must be in (0, 1]" in capsys.readouterr().err


def _real_links() -> list[dict]:
    # `ccltune links` on 4 x H200 through NVSwitch (tests/fixtures/links/README.md)
    path = Path(__file__).parent.parent / "fixtures" / "links" / "h200x4_links1.json"
    return json.loads(path.read_text())["rows"]


H200_EGRESS = {g: 18 * 26.562 for g in range(4)}  # NVML: 18 links x 26.562 GB/s a GPU (fixtures/topo)


def test_gate_from_real_nvswitch_links_is_one_pair_alone_not_pairs_added():
    """Through an NVSwitch one pair alone drives all of a GPU's links: 3 x 393 GB/s of pairs, or the 790 GB/s
    its copy-engine copies summed to all at once, are more than its 478 GB/s of links. The gate was 671 GB/s,
    twice the 346 GB/s all_reduce busbw this healthy node measured at 512 MB (its h200-4 check); with NVML's
    limit the bound is the fastest pair alone, 393 GB/s, and the gate 334."""
    measured = gates.link_profile(_real_links(), world_size=4, where="links run 1")
    new = gates.link_profile(_real_links(), world_size=4, where="links run 1", egress=H200_EGRESS)
    assert new.gates[0].min_value == pytest.approx(0.80 * 393.2, abs=0.5) and new.gates[0].min_value < 346.4
    # without NVML the same run shows it: all at once (SM all-to-all) a pair carries 0.22 of what it carries alone
    assert measured.gates[0].min_value == new.gates[0].min_value
    # pairs alone only, no all-to-all and no NVML: nothing says they share, slowest x peers (80% of 3 x 393)
    alone = [r for r in _real_links() if r["direction"] != "all2all"]
    added = gates.link_profile(alone, world_size=4, where="x").gates[0].min_value
    assert added == pytest.approx(0.80 * 3 * 392.9, abs=1.0)
    # a mesh whose pairs add up within the GPU's links keeps slowest x peers
    mesh = gates.link_profile(alone, world_size=4, where="x", egress={g: 3 * 400.0 for g in range(4)})
    assert mesh.gates[0].min_value == added


def test_stored_links_run_carries_the_nvlink_limits_to_the_gate(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as st:
        links = st.begin_run("links", command="ccltune links", env={"world_size": 1})
        st.add_links(links, _real_links())
        st.finish_run(links, "complete", summary={"nvlink_egress_gbps": {str(g): v for g, v in H200_EGRESS.items()}})
    rid = _stored(db, "NVIDIA H300", 4, {64 * M: 340.0, 256 * M: 344.0, G: 346.4})
    assert main(["check", "--run", str(rid), "--links-run", str(links), "--db", str(db)]) == 0
    assert "80% of the ring ceiling 393.1 GB/s" in capsys.readouterr().out  # GPU 1: 393.06 to GPU 3
