"""On the GPU machine: links, topo, doctor and check for real (pytest -m gpu tests/gpu/test_diag_gpu.py).

NVLink multicast stays off in every test (tests/gpu/conftest.py).
"""

from __future__ import annotations

import json

import pytest

from ccltune.cli import main

pytestmark = pytest.mark.gpu


def _checks(path):
    return {c["name"]: c for c in json.loads(path.read_text())["checks"]}


def test_links_matrix_is_complete_and_sane(tmp_path, n_gpus, capsys):
    out = tmp_path / "links.json"
    rc = main(["links", "--db", str(tmp_path / "r.db"), "--json", str(out)])
    result = json.loads(out.read_text())
    print(capsys.readouterr().out)
    assert rc == 0, result["checks"]
    rows = result["rows"]
    for method in ("ce", "sm-read", "sm-write"):
        uni = {(r["src"], r["dst"]): r["bandwidth_gbps"] for r in rows if r["method"] == method and r["direction"] == "uni"}
        assert len(uni) == n_gpus * (n_gpus - 1), method
        assert all(v > 0 for v in uni.values()), method
    lat = [r["latency_us"] for r in rows if r["direction"] == "latency"]
    assert len(lat) == n_gpus * (n_gpus - 1) and all(0 < v < 1000 for v in lat)
    summary = result["summary"]
    assert summary["ring_ceiling_gbps"] > 0
    assert summary["elapsed_s"] < 120
    ce = summary["series"]["ce/uni"]
    if ce.get("nvlink_ratio"):  # NVML gave the NVLink limit: copies must use NVLink, not host memory
        assert ce["nvlink_ratio"] > 0.3


def test_topo_sees_every_gpu_and_links(tmp_path, n_gpus):
    out = tmp_path / "topo.json"
    rc = main(["topo", "--db", str(tmp_path / "r.db"), "--json", str(out)])
    result = json.loads(out.read_text())
    assert rc == 0, result["checks"]
    t = result["topology"]
    assert len(t["gpus"]) >= n_gpus and len(t["links"]) == len(t["gpus"])
    assert all(len(row) == len(t["gpus"]) and row[i] == "X" for i, row in enumerate(t["links"]))
    assert _checks(out)["topo:gpus"]["status"] == "PASS"


def test_doctor_transport_has_no_fail(tmp_path, n_gpus):
    out = tmp_path / "doctor.json"
    main(["doctor", "--db", str(tmp_path / "r.db"), "--json", str(out), "--timeout", "300"])
    checks = _checks(out)
    assert "transport" not in checks, checks.get("transport")  # present only when the bench run failed
    assert checks["log:transport"]["status"] == "PASS", checks["log:transport"]
    assert checks["log:version"]["status"] == "PASS"
    assert checks["log:init"]["status"] == "PASS"
    assert checks["log:channels"]["value"] > 0
    assert checks["log:processes"]["data"]["layout"] == "process-per-gpu"


def test_check_h200_measures_the_gate(tmp_path, n_gpus):
    if n_gpus != 4:
        pytest.skip("the h200-4 profile needs 4 GPUs")
    out = tmp_path / "verdict.json"
    main(["check", "--profile", "h200-4", "--db", str(tmp_path / "r.db"), "--json", str(out),
          "--junit", str(tmp_path / "j.xml")])
    checks = _checks(out)
    gate = checks["all_reduce_busbw_512M"]
    assert gate["status"] in ("PASS", "FAIL") and gate["value"] > 0
    assert checks["monotonic"]["status"] in ("PASS", "FAIL")


def test_the_api_measures_the_links_returns_them_and_prints_nothing(tmp_path, n_gpus, capsys):
    """ccltune.links(...) on typed options (commands/links.py): the matrix comes back as rows, the run by the id
    the store gave, and nothing is printed (the progress lines go to the 'ccltune' logger)."""
    import ccltune
    from ccltune.store import Store

    db = str(tmp_path / "r.db")
    r = ccltune.links(size="64M", method="ce", db=db)
    said = capsys.readouterr()
    assert said.out == "" and said.err == ""
    assert r.exit_code == 0, r.record["checks"]
    uni = [x for x in r.rows if x["method"] == "ce" and x["direction"] == "uni"]
    assert len(uni) == n_gpus * (n_gpus - 1) and all(x["bandwidth_gbps"] > 0 for x in uni)
    assert r.summary["ring_ceiling_gbps"] > 0 and r.finding("links:ce/uni").status in ("PASS", "WARN")
    with Store(db, readonly=True) as st:
        assert [x.id for x in st.runs("links")] == [r.run_id] and len(st.links(r.run_id)) == len(r.rows)
