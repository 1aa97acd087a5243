"""--under-load sized from the job (issue 28 item 4): the compute kernels beside the collectives in real torch
traces (tests/fixtures/workload/fsdp2-4-kernels: the FSDP2 example on 4 H200, ranks 0 and 1, trimmed to their
kernels, comms events and steps; README there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune.commands.sweep_options import SweepOptions
from ccltune.commands.sweep_workload import DEFAULT_LOAD_M, load_from_job
from ccltune.errors import UsageError
from ccltune.store import Measurement, Store
from ccltune.workload import compute, importer, model, show

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
TRACES = sorted((FIX / "fsdp2-4-kernels").glob("trace_rank*.json.gz"))


def test_the_real_fsdp2_traces_run_little_compute_beside_their_collectives() -> None:
    wl = importer.import_files(TRACES)
    o = wl.compute
    assert o is not None and o.traces == 2 and o.kernels > 100
    assert 0.05 < o.share < 0.1 and 40 < o.kernel_us_median < 50   # 7% of the NCCL kernels' time; GEMMs of ~44 us
    m, why = compute.load_for(o)
    assert m is None and "7% of the NCCL kernels' time" in why and "--under-load 2304" in why
    back = model.from_json(model.to_json(wl, {}), "w.json")
    assert back.compute is not None and back.compute.to_dict() == o.to_dict()
    assert any(line.startswith("# under load, sized from the job: ") and line.endswith(": no load")
               for line in show.table(back))


def test_a_slow_job_whose_collectives_run_alone_is_swept_idle_and_said(tmp_path) -> None:
    wl = importer.import_files(TRACES)
    e = max((x for x in wl.entries if x.timing is not None), key=lambda x: x.bytes_total)
    db = tmp_path / "r.db"
    with Store(db) as st:  # NCCL's default idle at a quarter of the job's median: the job is x4 slower
        run = st.begin_run("sweep", command="test")
        st.add_measurements(run, [Measurement(e.key.collective, e.key.size_bytes, e.key.count or 1, "float", None,
                                              None, False, e.key.nranks, time_us=e.timing.median_us / 4, n_nodes=1,
                                              rep=k) for k in range(3)])
        st.finish_run(run, "complete")
    o = SweepOptions(db=str(db))
    (note,), load = load_from_job(o, wl)
    assert load is None and "sweeping idle, and tune --workload gives those sizes no rule" in note
    wl.compute = compute.Overlap(1000.0, 600.0, 100.0, 12)   # a job that computes beside 60% of its collectives
    (note,), load = load_from_job(o, wl)
    assert load == compute.matrix_for(100.0) == 2816 and "--under-load 2816" in note
    wl.compute = None                                        # nothing sizes it: the default, said
    (note,), load = load_from_job(o, wl)
    assert load == DEFAULT_LOAD_M and "the default: nothing in the workload sizes the load" in note


def test_overlap_counts_the_compute_inside_nccl_kernels_and_weighs_kernels_by_it() -> None:
    o = compute.overlap({0: [(0.0, 100.0), (300.0, 400.0)]}, {0: [(50.0, 150.0), (60.0, 70.0), (200.0, 250.0)],
                                                              1: [(0.0, 400.0)]})   # another GPU's kernels: apart
    assert (o.nccl_us, o.overlap_us, o.kernels) == (200.0, 50.0, 2) and o.share == 0.25
    assert o.kernel_us_median == 100.0                      # (100 us, weight 50) beats (10 us, weight 10)
    assert compute.overlap({0: [(0.0, 1.0)]}, {}) is None   # a trace trimmed to its communication sizes nothing
    assert [compute.matrix_for(us) for us in (0.01, 100.0, 1e9)] == [256, 2816, 16384]


def test_a_bad_compute_overlap_names_the_file() -> None:
    doc = json.loads(model.to_json(importer.import_files(TRACES), {}))
    doc["compute_overlap"]["overlap_us"] = -1
    with pytest.raises(UsageError, match=r"w.json: compute_overlap.overlap_us must be a finite number >= 0"):
        model.from_json(json.dumps(doc), "w.json")
