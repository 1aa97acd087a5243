"""Import of rccl-tests output (three versions, fixtures written from rccl-tests' and RCCL's print
statements: see each file's header) and of nccl-tests output in its other shapes: CRLF, elided
device lists, no GPU model (platform 'unknown', --gpu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.ncclt import parse_text
from ccltune.store import Store

FIX = Path(__file__).parent.parent / "fixtures"
RCCL = FIX / "rccl-tests"
NCCLT = FIX / "nccl-tests"

# file -> (collective, ranks, nodes, GPU model, RCCL version, rccl-tests version, rows)
RCCL_CASES = {
    "rccl-tests-2022-10_all_reduce_np8.txt": ("all_reduce", 8, 2, "AMD Instinct MI250X", "2.13.4+hip5.4", None, 8),
    "rccl-tests-2024-03_all_gather_g8.txt": ("all_gather", 8, 1, "AMD Instinct MI300X", "2.18.6+hip6.1",
                                             "develop:3f7f785", 8),
    "rccl-tests-2024-09_reduce_scatter_np16_inplace.txt": ("reduce_scatter", 16, 2, "AMD Instinct MI300X",
                                                           "2.22.3-HEAD:7d8d67c", "develop:ae3e635", 4),
}


@pytest.mark.parametrize("name", sorted(RCCL_CASES))
def test_rccl_tests_versions(name):
    coll, ranks, nodes, model, rccl, tests_version, nrows = RCCL_CASES[name]
    [p] = parse_text((RCCL / name).read_text(), name)
    assert (p.collective, p.n_ranks, p.n_nodes, set(p.gpus), len(p.rows)) == (coll, ranks, nodes, {model}, nrows)
    assert p.env["tool"] == "rccl-tests" and p.env["rccl_version"] == rccl
    assert p.env.get("rccl_tests_version") == tests_version
    assert all(m.status == "ok" and m.wrong == 0 for m in p.rows)


def test_rccl_in_place_only_table_and_version_lines():
    [p] = parse_text((RCCL / "rccl-tests-2024-09_reduce_scatter_np16_inplace.txt").read_text(), "x_reduce_scatter")
    assert all(m.in_place for m in p.rows)
    assert p.rows[0].time_us == 40.80 and p.rows[0].busbw_gbps == 24.09
    assert p.env["hip_version"] == "6.4.43484-123eb5128" and p.env["rocm_version"] == "6.4.2.0-120-e7d83f5"
    assert p.env["library_path"] == "/opt/rocm-6.4.2/lib/librccl.so.1"
    assert p.hosts == ["mi300x-01", "mi300x-02"]
    assert p.env["devices"][9] == {"rank": 9, "host": "mi300x-02", "pid": 2509543, "device": 1,
                                   "bus_id": "0000:22:00.0", "name": "AMD Instinct MI300X"}


def test_cli_stores_rccl_environment(tmp_path, capsys):
    db = tmp_path / "r.db"
    f = RCCL / "rccl-tests-2024-09_reduce_scatter_np16_inplace.txt"
    assert main(["import", "nccl-tests", str(f), "--db", str(db)]) == 0
    assert "AMD Instinct MI300X x16 2 nodes" in capsys.readouterr().out
    with Store(db) as store:
        env = store.run(1).env
    assert (env["source"], env["nccl_version"], env["rccl_version"], env["rocm_version"]) == (
        "rccl-tests", "2.22.3", "2.22.3-HEAD:7d8d67c", "6.4.2.0-120-e7d83f5")
    assert env["library_path"] == "/opt/rocm-6.4.2/lib/librccl.so.1" and env["tool_version"] == "develop:ae3e635"
    assert {g["name"] for g in env["gpus"]} == {"AMD Instinct MI300X"} and len(env["gpus"]) == 16


def test_real_nccl_tests_2_19_0_and_crlf():
    text = (NCCLT / "ncclt-2.19.0_all_reduce_h200x4.txt").read_text()
    for variant in (text, text.replace("\n", "\r\n")):
        [p] = parse_text(variant, "f")
        assert (p.collective, p.n_ranks, p.nccl_version, p.env["tool_version"]) == ("all_reduce", 4, "2.28.9", "2.19.0")
        assert set(p.gpus) == {"NVIDIA H200"} and p.env["devices"][3]["bus_id"] == "0000:00:09"
        assert p.rows[-1].time_us == 4540.15 and len(p.rows) == 10


def _single_process(text: str, gpus: int) -> str:
    """The real 4-process output as one process with ``gpus`` GPUs would print it (util.cu: one Pid,
    'nGpus N'), its device list cut as util.cu cuts one past 2048 bytes: the last line ends in '...'."""
    lines = text.splitlines()
    out = [ln.replace("nGpus 1 ", f"nGpus {gpus} ") for ln in lines if "Rank" not in ln]
    at = next(i for i, ln in enumerate(out) if ln == "# Using devices") + 1
    devs = [f"#  Rank {r:2d} Group  0 Pid {3943:6d} on {'vm':>10} device {r:2d} [0000:00:{r + 6:02x}] NVIDIA H200"
            for r in range(gpus)]
    block = "\n".join(devs) + "\n"
    block = block[:2043] + "...\n" if len(block) >= 2048 else block
    return "\n".join(out[:at] + block.rstrip("\n").split("\n") + out[at:]) + "\n"


def test_elided_device_list_counts_the_header_ranks():
    text = (NCCLT / "ncclt-2.19.0_all_reduce_h200x4.txt").read_text()
    [p] = parse_text(_single_process(text, 4), "f")
    assert p.n_ranks == 4 and len(p.env["devices"]) == 4
    cut = _single_process(text, 32)
    assert cut.count("Rank") < 32 and "...\n" in cut
    [p] = parse_text(cut, "f")
    assert p.n_ranks == 32 and set(p.gpus) <= {"NVIDIA H200", "NVIDIA H"}
    assert {m.n_ranks for m in p.rows} == {32}


def test_rank_lines_pasted_away_count_the_header_ranks_or_refuse_a_contradiction(tmp_path, capsys):
    """Issue 38, item 7: rccl-tests output pasted with a bare '...' in place of ranks 2-7 imported as the 2 rank
    lines shown, while its header says nGpus 8 (one process) and busbw/algbw 1.75 is all_reduce's 2(n-1)/n at 8."""
    name = "rccl-tests-2024-09_all_reduce_g8_pasted_cut.txt"
    text = (RCCL / name).read_text()
    [p] = parse_text(text, name)
    assert p.collective == "all_reduce" and p.n_ranks == 8 and {m.n_ranks for m in p.rows} == {8}
    assert any("the rank list is cut: 8 ranks from the header" in n for n in p.notes)
    # a header that says otherwise than the ratio: refused, naming both and where the header is
    bad = tmp_path / name
    bad.write_text(text.replace("nGpus 8", "nGpus 2"))
    assert main(["import", "nccl-tests", str(bad), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert "contradicts itself" in err and "says 2 ranks" in err and "busbw/algbw 1.750 says 8 for all_reduce" in err
    assert f"{name}:10" in err and "Traceback" not in err


def test_unknown_gpu_is_not_cpu_and_gpu_sets_it(tmp_path, capsys):
    text = (RCCL / "rccl-tests-2022-10_all_reduce_np8.txt").read_text().replace("AMD Instinct MI250X", "")
    f = tmp_path / "all_reduce.txt"
    f.write_text(text)
    db = tmp_path / "u.db"
    assert main(["import", "nccl-tests", str(f), "--db", str(db)]) == 0
    assert "platform unknown x8 2 nodes" in capsys.readouterr().out
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r.conf")]) == 1
    assert "import it again with --gpu NAME" in capsys.readouterr().err
    db2 = tmp_path / "g.db"
    assert main(["import", "nccl-tests", str(f), "--db", str(db2), "--gpu", "AMD Instinct MI250X"]) == 0
    assert "platform AMD Instinct MI250X x8 2 nodes" in capsys.readouterr().out
    assert main(["tune", "--db", str(db2), "--out", str(tmp_path / "r.conf")]) == 0
    assert main(["import", "nccl-tests", str(RCCL / "rccl-tests-2024-03_all_gather_g8.txt"), "--db", str(db2),
                 "--gpu", "NVIDIA H100"]) == 2
    assert "but the files name AMD Instinct MI300X" in capsys.readouterr().err


@pytest.mark.parametrize("version", ["2.13.13", "2.17.10", "2.19.6"])
def test_real_nccl_tests_versions(version):
    [p] = parse_text((NCCLT / f"ar-eager-v{version}.txt").read_text(), "all_reduce.txt")  # 2.13: no "starting" line
    said = version != "2.13.13"  # 2.13 prints no version line: neither its own nor NCCL's
    assert (p.collective, p.n_ranks, p.nccl_version, p.env.get("tool_version")) == (
        "all_reduce", 1, "2.28.9" if said else None, version if said else None)
    assert p.gpus == ["NVIDIA H100 80GB HBM3"] and all(m.status == "ok" for m in p.rows)


def test_real_mpi_run():
    [p] = parse_text((NCCLT / "ag-mpi-v2.19.6.txt").read_text(), "f")
    assert (p.collective, p.n_ranks, p.gpus) == ("all_gather", 1, ["NVIDIA H100 80GB HBM3"])


def test_a_run_that_nccl_failed_imports_its_rows_and_the_failed_combination():
    """nccl-tests 2.19.6 -o all -d all (real capture): NCCL refused f8e4m3 avg in its warm-up, so the run
    stopped after f8e4m3 min with "Test NCCL failure" and no footer: every printed row, then error rows
    for the combination -o all runs next, naming NCCL's message."""
    path = FIX / "nccl-tests" / "v2.19.6" / "ar-alltypes-v2.19.6.txt"
    (run,) = parse_text(path.read_text(), str(path))
    ok = [r for r in run.rows if r.status == "ok"]
    assert len(ok) == 2 * 64 and (ok[-1].dtype, ok[-1].op) == ("f8e4m3", "min")
    bad = run.rows[-2:]
    assert [(r.dtype, r.op, r.size_bytes, r.count, r.in_place, r.status) for r in bad] == [
        ("f8e4m3", "avg", 1024, 1024, False, "error"), ("f8e4m3", "avg", 1024, 1024, True, "error")]
    assert bad[0].note == ("NCCL failure at all_reduce.cu:507: invalid argument (run with NCCL_DEBUG=WARN for "
                           "details)") and bad[0].time_us is None


def test_a_failure_while_timing_names_its_row_and_later_rows_are_kept():
    """The failure printed after a row's preamble (it came while that size was timed): that row is the
    failed one; a run's rows after the failure line (concatenated output) are kept."""
    path = FIX / "nccl-tests" / "v2.19.6" / "ar-alltypes-v2.19.6.txt"
    lines = path.read_text().splitlines()
    head, rows = lines[:10], lines[10:12]
    text = "\n".join([*head, rows[0], "        2048           512     float     sum      -1"
                      "vm: Test CUDA failure common.cu:900 'out of memory'", rows[1],
                      "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 ", "#"]) + "\n"
    (run,) = parse_text(text, "x.txt")
    got = [(r.size_bytes, r.dtype, r.op, r.status) for r in run.rows if not r.in_place]
    assert got == [(1024, "int8", "sum", "ok"), (2048, "float", "sum", "error"), (1024, "int8", "prod", "ok")]
    assert run.rows[2].note == "CUDA failure at common.cu:900: out of memory"
