"""A new user's second look (issue 32): what the CPU engine says about its timing and the types it
lacks, what -J leaves out, exit codes without a GPU, empty rule files, --nproc beyond the cores, and
where a check of an imported run belongs. These run commands (bench on two gloo processes, check), so
they live apart from the fast bad-input module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RCCL = FIXTURES / "rccl-tests"


def test_cpu_bench_says_host_clock_and_its_json_leaves_ccltune_plumbing_out(tmp_path, monkeypatch, capsys):
    from ccltune.cli import main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CCLTUNE_PARENT_PID", "1")  # one of ccltune's own variables, as a relaunch sets them
    assert main(["bench", "all_reduce", "-e", "16", "-n", "1", "-w", "0", "-I", "1", "-J", "j.json", "--nproc", "1", "--db", "b.db"]) == 0
    out = capsys.readouterr().out
    assert "Per-Iteration Report: host clock timing (no GPU)" in out and "CUDA event" not in out
    env = json.loads((tmp_path / "j.json").read_text())["env"]
    assert not [e for e in env if e.startswith("CCLTUNE_PARENT_PID")]


def test_an_empty_rule_file_is_said_to_be_empty(tmp_path, capsys):
    from ccltune.cli import main
    empty = tmp_path / "empty.conf"
    empty.write_text("# no rules yet\n")
    for argv in (["plugin", "check", str(empty)], ["rules", "explain", str(empty)]):
        assert main(argv) == 0
        assert "holds no rules (empty, or comments only)" in capsys.readouterr().err


def test_more_cpu_processes_than_cores_is_warned():
    from ccltune.commands import launching
    assert "--nproc 64 CPU processes on 2 CPU cores" in launching.oversubscribed(64, "gloo", 2)
    assert launching.oversubscribed(2, "gloo", 2) is None and launching.oversubscribed(64, "nccl", 2) is None


@pytest.mark.parametrize("argv", [
    ["validate", "{rules}"],
    ["plugin", "verify", "{rules}"],
    ["sweep", "all_reduce", "-e", "64"],
])
def test_commands_that_need_a_gpu_exit_4_without_one_as_help_says(tmp_path, monkeypatch, capsys, argv):
    from ccltune import gpus
    from ccltune.cli import main
    if gpus.gpu_count() if hasattr(gpus, "gpu_count") else False:
        pytest.skip("a GPU is visible")
    monkeypatch.chdir(tmp_path)
    rules_file = tmp_path / "r.conf"
    rules_file.write_text((FIXTURES / "rules" / "basic.conf").read_text())
    assert main([a.format(rules=rules_file) for a in argv] + ([] if argv[0] == "plugin" else ["--db", "x.db"])) == 4
    assert "GPU" in capsys.readouterr().err


def test_a_check_of_an_imported_run_belongs_to_that_runs_machine(tmp_path, capsys):
    from ccltune.cli import main
    from ccltune.store import Store
    ar = tmp_path / "ar.txt"
    ar.write_text((RCCL / "rccl-tests-2024-09_all_reduce_mi300x_np8_16g.txt").read_text())
    db = str(tmp_path / "c.db")
    assert main(["import", "nccl-tests", str(ar), "--db", db]) == 0
    assert main(["check", "--run", "1", "--db", db]) == 0
    capsys.readouterr()
    with Store(db) as st:
        imported, check = st.run(1), st.run(2)
    assert (check.platform, check.host) == (imported.platform, imported.host)  # was 'cpu x1' on this host
    assert check.platform.startswith("AMD Instinct MI300X") and check.env["judged_run"] == 1


def test_cpu_bench_waives_the_types_gloo_lacks_with_the_reason(tmp_path, monkeypatch, capsys):
    from ccltune.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "all_reduce", "-d", "uint32", "-e", "8", "-n", "1", "-w", "0", "--nproc", "1",
                 "--db", "b.db"]) == 0
    out = capsys.readouterr().out
    assert "WAIVED: torch's gloo backend has no uint32" in out and "UNAVAILABLE" not in out
