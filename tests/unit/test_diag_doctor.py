"""ccltune doctor: the decisions (pure), the run flow with bench faked, and the CLI on the CPU."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.checks import transport
from ccltune.diagnose.checks.context import Context
from ccltune.diagnose.checks.registry import run_checks
from ccltune.diagnose.probes import benchrun, topo

FIX = Path(__file__).parent.parent / "fixtures"
LOGS = FIX / "logs"
M = 1 << 20


def _by_name(findings):
    return {f.name: f for f in findings}


def _doctor(nproc):
    """The doctor's checks from the registry on the good host's files; (findings, context)."""
    ctx = Context(root=FIX / "sysfs" / "host-good", lspci=None, environ={}, nproc=nproc, run=True, timeout_s=5)
    return run_checks("doctor", ctx), ctx


def test_p2p_level_finding_reports_the_measured_gain():
    f = transport.p2p_level_finding(10.0, 20.0, 0)
    assert f.status == "WARN" and f.value == pytest.approx(1.0) and "+100%" in f.evidence
    assert "no SHM edges left" in f.evidence and f.fix == "export NCCL_P2P_LEVEL=SYS"
    assert transport.p2p_level_finding(10.0, 10.1, 0).status == "PASS"
    assert transport.p2p_level_finding(10.0, None, None).status == "ERROR"


def test_channels_finding_picks_the_best_count_beyond_noise():
    f = transport.channels_finding(2, 4, {None: 100.0, 8: 90.0, 16: 115.0, 24: 101.0, 32: None})
    assert f.status == "WARN" and f.data["best"] == 16 and "NCCL_MAX_NCHANNELS=16" in f.fix
    assert transport.channels_finding(2, 4, {None: 100.0, 8: 102.0}).status == "PASS"
    assert transport.channels_finding(2, 4, {None: None, 8: 102.0}).status == "ERROR"
    assert transport.channels_finding(2, 4, {None: 100.0, 8: None}).status == "ERROR"


def _edge_log(transport: str, n: int = 4) -> str:
    lines = [f"h:{10 + r}:{10 + r} [{r}] NCCL INFO comm 0x{r} rank {r} nRanks {n} nNodes 1 localRanks {n} "
             f"localRank {r} MNNVL 0" for r in range(n)]
    lines += [f"h:{10 + r}:{10 + r} [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> {(r + 1) % n}[{(r + 1) % n}] via "
              f"{transport if r == 1 else 'P2P/CUMEM/read'}" for r in range(n)]
    return "\n".join(lines) + "\n"


class _FakeBench:
    """Stands in for benchrun.run_bench: SHM unless NCCL_P2P_LEVEL=SYS; busbw by channel count."""

    def __init__(self):
        self.calls = []

    def __call__(self, nproc, *, env_overrides=None, timeout_s=0, **sizes):
        env = dict(env_overrides or {})
        self.calls.append((nproc, env, sizes))
        p2p = env.get("NCCL_P2P_LEVEL") == "SYS"
        busbw = {None: 100.0, "16": 117.0}.get(env.get("NCCL_MAX_NCHANNELS"), 95.0) if "min_bytes" in sizes else \
            (20.0 if p2p else 10.0)
        size = sizes.get("min_bytes", M)
        rec = {"collective": "all_reduce", "size_bytes": size, "in_place": True, "busbw_gbps": busbw}
        return benchrun.BenchRun(["fake"], env, 0, _edge_log("P2P/CUMEM/read" if p2p else "SHM/direct/direct"),
                                 0.1, records=[rec])


def _four_gpus(label: str) -> topo.Topology:
    links = [["X" if i == j else label for j in range(4)] for i in range(4)]
    return topo.Topology("nvml", [topo.GpuRow(i, "NVIDIA H200") for i in range(4)], links)


def test_doctor_reruns_with_p2p_level_and_measures_channels(monkeypatch, tmp_path):
    fake = _FakeBench()
    monkeypatch.setattr(benchrun, "run_bench", fake)
    monkeypatch.setattr(topo, "discover", lambda root: _four_gpus("NV18"))
    monkeypatch.setattr(transport, "p2p_capable_from", lambda t: (lambda a, b: True))
    findings, ctx = _doctor(2)
    found = _by_name(findings)
    assert found["log:transport"].status == "FAIL" and found["log:transport"].data["shm_pairs_p2p_capable"] == [(1, 2)]
    assert found["transport:p2p_level"].status == "WARN" and found["transport:p2p_level"].value == pytest.approx(1.0)
    assert found["channels"].status == "WARN" and found["channels"].data["best"] == 16
    assert fake.calls[0][1]["NCCL_DEBUG"] == "INFO" and "ENV" in fake.calls[0][1]["NCCL_DEBUG_SUBSYS"]
    assert fake.calls[1][1]["NCCL_P2P_LEVEL"] == "SYS"
    assert [c[1].get("NCCL_MIN_NCHANNELS") for c in fake.calls[2:]] == [None, "8", "16", "24", "32"]
    assert all(c[0] == 2 for c in fake.calls)
    assert "nccl-debug.log" in ctx.artifacts and "nccl-debug-p2p-level-sys.log" in ctx.artifacts


def test_doctor_all_gpus_p2p_runs_once(monkeypatch):
    fake = _FakeBench()
    monkeypatch.setattr(benchrun, "run_bench", lambda n, **k: fake(n, env_overrides={"NCCL_P2P_LEVEL": "SYS"}))
    monkeypatch.setattr(topo, "discover", lambda root: _four_gpus("NV18"))
    found = _by_name(_doctor(None)[0])
    assert found["log:transport"].status == "PASS" and found["channels"].status == "PASS"
    assert len(fake.calls) == 1


def test_doctor_bench_failure_is_an_error_with_the_reason(monkeypatch):
    monkeypatch.setattr(benchrun, "run_bench", lambda n, **k: benchrun.BenchRun(
        ["x"], {}, 1, "ccltune: error: boom\n", 0.1, error="bench exited with 1: ccltune: error: boom"))
    monkeypatch.setattr(topo, "discover", lambda root: _four_gpus("NV18"))
    found = _by_name(_doctor(None)[0])
    assert found["transport"].status == "ERROR" and "boom" in found["transport"].evidence


@pytest.mark.parametrize("var", ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"])
def test_doctor_runs_on_the_visible_gpus_not_every_gpu_present(monkeypatch, var):
    """Found on 4 H100 with CUDA_VISIBLE_DEVICES=2,3 (2026-11-27): doctor launched 4 ranks onto the 2 GPUs
    the processes could see (NCCL: "Duplicate GPU detected"); it runs on the visible ones, and measures the
    channel counts since 2 of 4 are used."""
    fake = _FakeBench()
    monkeypatch.setattr(benchrun, "run_bench", fake)
    monkeypatch.setattr(topo, "discover", lambda root: _four_gpus("NV18"))
    ctx = Context(root=FIX / "sysfs" / "host-good", lspci=None, environ={var: "2,3"}, nproc=None, run=True,
                  timeout_s=5)
    found = _by_name(run_checks("doctor", ctx))
    assert fake.calls and all(c[0] == 2 for c in fake.calls)
    assert found["channels"].data["used"] == 2 and found["channels"].data["present"] == 4
    ctx = Context(root=FIX / "sysfs" / "host-good", lspci=None, environ={var: "2,3"}, nproc=3, run=True, timeout_s=5)
    found = _by_name(run_checks("doctor", ctx))
    assert found["transport"].status == "WAIVED"
    assert found["transport"].evidence == f"--nproc 3 is not between 1 and the 2 GPUs visible ({var}=2,3)"


def test_doctor_bad_nproc_is_waived(monkeypatch):
    monkeypatch.setattr(topo, "discover", lambda root: _four_gpus("NV18"))
    found = _by_name(_doctor(9)[0])
    assert found["transport"].status == "WAIVED" and "--nproc 9" in found["transport"].evidence


def test_error_lines_pick_the_cause():
    assert benchrun._error_lines("a\nTraceback\nRuntimeError: NCCL failed\n===\nerror_file: <N/A>") == \
        "RuntimeError: NCCL failed"


def test_cli_doctor_without_gpus_waives_runs_and_records(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(topo, "discover", lambda root: topo.Topology("none", notes=["no GPU"]))
    monkeypatch.setattr("ccltune.diagnose.probes.sysfs.run_lspci", lambda: None)
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    db, out = tmp_path / "r.db", tmp_path / "d.json"
    rc = main(["doctor", "--sysfs-root", str(FIX / "sysfs" / "amd-mi300x"), "--db", str(db), "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 1  # NCCL_P2P_DISABLE=1 is a FAIL
    assert "FAIL    env:NCCL_P2P_DISABLE" in text and "WARN    numa_balancing" in text
    assert text.startswith(f"# ccltune doctor (host files read under {FIX / 'sysfs' / 'amd-mi300x'})\n"), text
    found = _by_name_json(out)
    assert found["transport"]["status"] == "WAIVED" and found["channels"]["status"] == "WAIVED"
    names = [r[0] for r in sqlite3.connect(db).execute("SELECT name FROM findings")]
    assert "numad" in names and "transport" in names


def _by_name_json(path):
    return {c["name"]: c for c in json.loads(path.read_text())["checks"]}


@pytest.mark.parametrize("log, rc, expect", [
    ("nccl_4gpu_p2p.log", 0, "PASS    log:transport"),
    ("nccl_4gpu_shm.log", 1, "WARN    log:transport"),  # real, NCCL_P2P_DISABLE=1: that variable FAILs
    ("rccl_mi300x_8gpu.log", 0, "RCCL 2.21.5-HEAD:0cbce2a"),
    ("nccl_tuner_plugin.log", 0, "external tuner plugin loaded"),
    ("nccl_truncated.log", 0, "truncated"),
    ("empty.log", 0, "WAIVED  log"),
    # real 4-rank job logs, one file per process: init judged on the rank the file holds
    ("nccl_fsdp2_rank0_of4.log", 0, "PASS    log:init       1/1 ranks in this log completed init (it holds rank 0 of 4"),
    # NCCL_DEBUG_SUBSYS=TUNING alone: no INIT lines, yet collectives ran; not a truncated log
    ("nccl_tuning_rules.log", 0, "WAIVED  log:init       no INIT lines, though collectives ran"),
])
def test_cli_doctor_nccl_log(tmp_path, capsys, log, rc, expect):
    out = tmp_path / "d.json"
    assert main(["doctor", "--nccl-log", str(LOGS / log), "--db", str(tmp_path / "r.db"), "--json", str(out)]) == rc
    text = capsys.readouterr().out
    assert expect in text
    if log.startswith(("nccl_fsdp2", "nccl_tuning")):  # real logs of a healthy job: no WARN
        assert "overall: PASS" in text, text
    assert json.loads(out.read_text())["checks"]


@pytest.mark.parametrize("path, message", [("binary.log", "binary"), ("missing.log", "does not exist")])
def test_cli_doctor_bad_logs_are_usage_errors(tmp_path, capsys, path, message):
    assert main(["doctor", "--nccl-log", str(LOGS / path), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("flags, message", [
    (["--nproc", "-1"], "--nproc must be >= 1, got -1"), (["--nproc", "0"], "--nproc must be >= 1, got 0"),
    (["--timeout", "-5"], "--timeout must be > 0 and at most 31536000 seconds (a year), got -5"),
    (["--timeout", "0"], "--timeout must be > 0 and at most 31536000 seconds (a year), got 0"),
    (["--timeout", "nan"], "--timeout must be > 0 and at most 31536000 seconds (a year), got nan"),
    (["--nproc", "0", "--nccl-log", str(LOGS / "nccl_4gpu_p2p.log")], "--nproc must be >= 1, got 0"),
])
def test_cli_doctor_bad_nproc_and_timeout_are_usage_errors_before_any_work(tmp_path, capsys, monkeypatch,
                                                                          flags, message):
    def no_work(*args, **kwargs):
        raise AssertionError("doctor did work before checking its flags")

    monkeypatch.setattr("ccltune.commands.doctor.run_checks", no_work)
    monkeypatch.setattr("ccltune.commands.doctor.read_log", no_work)
    monkeypatch.setattr("ccltune.diagnose.probes.sysfs.run_lspci", no_work)
    assert main(["doctor", *flags, "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r.db").exists()


def test_the_registry_lists_each_check_once_with_its_description():
    from ccltune.diagnose.checks import registry

    keys = [c.key for c in registry.CHECKS]
    assert len(keys) == len(set(keys)) and all(c.description for c in registry.CHECKS)
    assert {c.command for c in registry.CHECKS} == set(registry.COMMANDS)
    with pytest.raises(ValueError, match="command must be one of"):
        registry.checks_of("dcotor")


def test_a_check_that_cannot_run_here_is_waived_with_its_reason_and_another_platforms_is_left_out(monkeypatch):
    monkeypatch.setattr(topo, "discover", lambda root: _four_gpus("NV18"))
    ctx = Context(root=FIX / "sysfs" / "host-good", run=False)
    found = _by_name(run_checks("doctor", ctx))
    assert found["transport"].status == "WAIVED" and found["transport"].evidence == "not run (--no-run)"
    assert "rccl:fine_grain_pcie" not in found  # an AMD check on NVIDIA GPUs
    assert list(found)[:4] == ["numa_balancing", "numad", "iommu", "pcie_acs"]


def test_doctor_nccl_log_runs_the_registrys_log_checks(tmp_path, capsys, monkeypatch):
    # doctor --nccl-log names no check: one added to the registry shows in its report, reading the log from the context
    from ccltune.diagnose.checks import registry
    from ccltune.diagnose.findings import Finding

    extra = registry.Check("log:extra", "a test's check", "doctor --nccl-log",
                           lambda ctx: [Finding("log:extra", "PASS", f"{ctx.nccl_log.nranks} ranks in the context")])
    monkeypatch.setattr(registry, "CHECKS", (*registry.CHECKS, extra))
    monkeypatch.setattr(topo, "discover", lambda root: pytest.fail("an NCCL log is judged without the host"))
    assert main(["doctor", "--nccl-log", str(LOGS / "nccl_4gpu_p2p.log"), "--db", str(tmp_path / "r.db")]) == 0
    out = capsys.readouterr().out
    assert "PASS    log:transport" in out and "log:extra" in out and "4 ranks in the context" in out
    assert "numa_balancing" not in out  # the host's checks are doctor's other mode


def test_the_log_checks_of_an_rccl_log_read_the_node_from_saved_amd_smi(monkeypatch):
    monkeypatch.setattr(topo, "discover", lambda root: pytest.fail("--from-amd-smi given: the host is not read"))
    smi = FIX / "amd-smi"
    ctx = Context(root=FIX / "sysfs" / "amd-numa", nccl_log_text=(LOGS / "rccl_mi300x_4of8_shm.log").read_text(),
                  amd_smi=[str(smi / "mi300x_topology.json"), str(smi / "mi300x_static.json")])
    found = _by_name(run_checks("doctor --nccl-log", ctx))
    assert found["log:transport"].status == "FAIL"  # SHM between GPUs amd-smi says are joined by xGMI
    assert found["rccl:min_nchannels"].status == "WARN" and "rccl:affinity" in found
    nccl = Context(nccl_log_text=(LOGS / "nccl_4gpu_p2p.log").read_text())
    assert not any(f.name.startswith("rccl:") for f in run_checks("doctor --nccl-log", nccl))
