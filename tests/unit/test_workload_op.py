"""The job's reduction op carried from NCCL's COLL log into the workload and the sweep (issue 30, "Measured in
another datatype ... (and op)"), on the real FSDP2 logs: FSDP2 reduce-scatters its gradients with avg (op 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.commands.sweep_options import SweepOptions
from ccltune.commands.sweep_workload import job_ops, op_lines
from ccltune.errors import UsageError
from ccltune.workload import importer, model
from ccltune.workload.nccl_log import redop
from ccltune.workload.plan import job_ops as plan_job_ops
from cli_options import parsed

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
FSDP2 = sorted((FIX / "fsdp2-4").glob("nccl.*.log.gz"))
DDP = FIX / "ddp-2"


def test_the_real_fsdp2_logs_give_each_reduction_its_op() -> None:
    wl = importer.import_files(FSDP2)
    ops = {(e.key.collective, e.key.size_bytes): e.key.op for e in wl.entries}
    assert ops == {("reduce_scatter", 262152192): "avg", ("reduce_scatter", 50384896): "avg",
                   ("all_gather", 131076096): None, ("all_gather", 25192448): None}  # an all_gather reduces nothing
    text = model.to_json(wl, {})
    assert [e["op"] for e in json.loads(text)["entries"] if e["collective"] == "reduce_scatter"] == ["avg", "avg"]
    back = model.from_json(text, "w.json")
    assert [e.key for e in back.entries] == [e.key for e in wl.entries] and not back.op_unrecorded
    # the sweep measures each reduce_scatter point in avg unless -o is typed
    assert plan_job_ops(wl) == {("reduce_scatter", 262152192): "avg", ("reduce_scatter", 50384896): "avg"}
    args = parsed(SweepOptions, ["sweep", "--workload", "w.json"])
    assert job_ops(args, wl) == plan_job_ops(wl)
    assert op_lines(args, wl) == ["# in the job's reduction op (-o to override): reduce_scatter 50384896 B avg, "
                                  "reduce_scatter 262152192 B avg"]
    for typed in (["-o", "sum"], ["--op=max"], ["-omin"]):
        assert job_ops(parsed(SweepOptions, ["sweep", *typed]), wl) is None


def test_show_prints_the_op_and_says_when_an_old_file_has_none(tmp_path, capsys) -> None:
    out = tmp_path / "w.json"
    assert main(["workload", "import", *map(str, FSDP2), "--out", str(out)]) == 0
    rows = [x.split() for x in capsys.readouterr().out.splitlines() if x.startswith("  ")]
    assert {(r[0], r[2]) for r in rows} == {("reduce_scatter", "avg"), ("all_gather", "-")}
    doc = json.loads(out.read_text())
    for e in doc["entries"]:
        del e["op"]                                # a file written before the op was recorded
    out.write_text(json.dumps(doc))
    wl = model.load(str(out))
    assert wl.op_unrecorded and all(e.key.op is None for e in wl.entries)
    assert main(["workload", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "written before workload files recorded the reduction op" in text
    assert {(r[0], r[2]) for r in (x.split() for x in text.splitlines() if x.startswith("  "))} == {
        ("reduce_scatter", "?"), ("all_gather", "-")}
    args = parsed(SweepOptions, ["sweep"])
    assert "does not say the op of 2 reduction point(s)" in op_lines(args, wl)[0]


def test_a_bad_op_names_the_file_and_entry(tmp_path) -> None:
    text = model.to_json(importer.import_files(FSDP2), {})
    doc = json.loads(text)
    doc["entries"][1]["op"] = "mean"
    with pytest.raises(UsageError, match=r"w.json: entries\[1\]: field 'op' must be one of sum, .* got 'mean'"):
        model.from_json(json.dumps(doc), "w.json")


def test_a_log_and_a_trace_of_one_process_stay_one_entry_per_call() -> None:
    """A trace gives no op (record_param_comms has none; NCCL names its kernels _Sum_ for every op): its entry
    folds into the log's, op and all."""
    wl = importer.import_files([DDP / "nccl.3864.log.gz", DDP / "trace_rank0.json.gz"])
    ar = [e for e in wl.entries if e.key.collective == "all_reduce"]
    assert len(ar) == len({e.key.size_bytes for e in ar}) and {e.key.op for e in ar} == {"sum"}
    assert any(e.timing is not None for e in ar)     # the trace's kernel times are on the log's entries


def test_nccl_redop_values() -> None:
    """nccl.h: ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4; ncclNumOps 5 and up are made at run time
    (ncclRedOpCreatePreMulSum only)."""
    assert [redop(v) for v in range(7)] == ["sum", "prod", "max", "min", "avg", "mulsum", "mulsum"]


def test_entries_that_differ_only_in_a_known_and_an_unknown_op_sort() -> None:
    """A trace's entry (op unknown) beside two log entries of its size in sum and max cannot fold into either: the
    three stay apart, and sorting them must not compare None with a string."""
    keys = [model.Key("all_reduce", 40, 4, "float", 10, None, op) for op in ("max", None, "sum")]
    wl = model.Workload([model.Entry(k, 1) for k in keys], [])
    assert [e.key.op for e in wl.by_bytes()] == [None, "max", "sum"]


def test_tune_notes_a_reduction_measured_in_another_op() -> None:
    """Rows of the real FSDP2 job's reduce_scatter sizes swept with sum (a sweep with -o sum): tune --workload says
    the job reduces with avg."""
    from ccltune.tune.weighted import op_notes

    wl = importer.import_files(FSDP2)
    rows = [{"collective": "reduce_scatter", "size_bytes": 50384896, "n_ranks": 4, "op": op} for op in ("sum", "sum")]
    assert op_notes(wl, rows) == ["reduce_scatter 50384896 B on 4 ranks: the job reduces with avg, measured with sum "
                                  "(sweep --workload measures in the job's op)"]
    assert op_notes(wl, [{**rows[0], "op": "avg"}]) == []
