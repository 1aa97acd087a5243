"""sweep --workload, the parts before any process starts: the points a launch sweeps and the
entries it cannot, with the reason; and --under-load refused on the CPU by sweep and validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune import datatypes
from ccltune.cli import main
from ccltune.workload import importer
from ccltune.workload.model import Entry, Key, Workload, to_json
from ccltune.workload.plan import sweep_points

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "workload" / "coll-ddp-1gpu.vm.4029.log"
DEFAULT_ONLY = ["--algos", "", "--protos", "", "--channels", ""]


def _wl() -> Workload:
    return Workload([Entry(Key("all_reduce", 33587200, 2, "float", 8396800), 14),
                     Entry(Key("all_gather", 4096, 2, "bfloat16", 1024), 3),
                     Entry(Key("all_reduce", 33587200, 2, "bfloat16", 16793600), 1),  # one point with the first
                     Entry(Key("reduce_scatter", 4, 2, "bfloat16", 1), 2),
                     Entry(Key("alltoall", 64, 2, "float", 8), 1),
                     Entry(Key("all_reduce", 1024, 4, "float", 256), 5),
                     Entry(Key("broadcast", 1024, 2, "float", 256, 2), 1)], [])


def test_points_are_the_workloads_exact_sizes_and_the_rest_says_why() -> None:
    points, skipped = sweep_points(_wl(), 2, 1, datatypes.dtype("float"))
    assert points == {"all_reduce": [33587200], "all_gather": [4096]}
    assert [(s.index, s.reason) for s in skipped] == [
        (3, "4 B does not divide into float elements on 2 ranks (the sweep would measure 0 B): sweep it with -d bfloat16"),
        (4, "NCCL passes alltoall to no tuner: nothing to sweep"),
        (5, "captured on 4 ranks, this launch has 2 (launch it with --nproc 4)"),
        (6, "captured on 2 node(s), this launch spans 1")]
    # before the job starts the node count is unknown and not held against an entry; collectives named restrict it
    points, skipped = sweep_points(_wl(), 2, None, datatypes.dtype("bfloat16"), ["all_gather", "reduce_scatter", "broadcast"])
    assert points == {"all_gather": [4096], "reduce_scatter": [4], "broadcast": [1024]}
    assert [s.reason for s in skipped if s.index in (0, 2)] == ["all_reduce is not among the collectives asked for"] * 2


def test_a_workload_this_launch_cannot_sweep_is_refused_before_anything_starts(tmp_path, capsys) -> None:
    db = tmp_path / "s.db"
    rc = main(["sweep", "--workload", str(_import(tmp_path)), "--engine", "gloo", "--nproc", "2", *DEFAULT_ONLY,
               "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and "nothing this launch can sweep: all_reduce " in err
    assert "B: captured on 1 rank, this launch has 2 (launch it with --nproc 1)" in err and "(and 8 more)" in err
    w = tmp_path / "w.json"
    w.write_text(to_json(_wl(), {}))
    assert main(["sweep", "--workload", str(w), "-e", "1M", "--engine", "gloo", "--nproc", "2", *DEFAULT_ONLY,
                 "--db", str(db)]) == 2
    assert "--workload sweeps the workload's own sizes; -e do not apply with it" in capsys.readouterr().err
    assert not db.exists()


def _import(tmp_path: Path) -> Path:
    out = tmp_path / "ddp.json"
    out.write_text(to_json(importer.import_files([LOG]), {}))
    return out


@pytest.mark.parametrize("cmd", [["sweep", "all_reduce", *DEFAULT_ONLY], ["validate", "RULES", "all_reduce"]])
def test_under_load_is_refused_on_the_cpu(cmd, tmp_path, capsys) -> None:
    rules = tmp_path / "r.conf"
    rules.write_text("")
    argv = [str(rules) if a == "RULES" else a for a in cmd]
    assert main([*argv, "--under-load", "1024", "--engine", "gloo", "--nproc", "2", "--db", str(tmp_path / "x.db")]) == 2
    assert "the gloo engine runs on the CPU, where there is no GPU to share" in capsys.readouterr().err
