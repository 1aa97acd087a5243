"""One rank, and results left unchecked: what a point reports (a fake engine on the CPU, no process group)."""

from __future__ import annotations

import warnings

import pytest

from ccltune import collectives
from ccltune.datatypes import dtype
from ccltune.engines.base import Engine, Point, Timing
from ccltune.measure import bench, point
from ccltune.ncclt import table
from ccltune.store import Measurement


class _Ctx:
    rank, is_root, n_nodes = 0, True, 1
    comm_rank, comm_nodes = 0, 1  # one group: the world (dist.DistContext without NCCL_TESTS_SPLIT)

    def __init__(self, world_size: int = 1):
        self.world_size = self.comm_size = self.min_comm_size = world_size

    def allreduce_floats(self, values, op, what):  # every rank alike
        return [v * self.world_size for v in values] if op == "sum" else list(values)

    def barrier(self, what):
        pass


class _CopyEngine(Engine):
    """Runs a one-rank all_reduce as NCCL does (out of place: a copy; in place: nothing), 10 us a call."""

    name = "fake"

    def __init__(self, world_size: int = 1):
        super().__init__(_Ctx(world_size), None)
        self.device = "cpu"
        self.launches = 0

    def launch(self, pt, bufs):
        self.launches += 1
        if not pt.in_place:
            bufs.recv.copy_(bufs.send)

    def time_point(self, pt, bufs):
        if pt.in_place and self.ctx.world_size == 1:
            warnings.warn("The CUDA Graph is empty. This usually means that the graph was attempted to be "
                          "captured on wrong device or stream.", UserWarning)  # torch, capturing a no-op
        return Timing(10e-6)


def _point(in_place: bool, size: int = 1024) -> Point:
    coll = collectives.REGISTRY["all_reduce"]
    return Point(coll, coll.layout(size, 4, 1, 0), dtype("float"), "sum", 0, in_place, 2, 1, 10)


def test_one_rank_in_place_is_a_note_row_without_bandwidth():
    eng = _CopyEngine()
    out = point.measure(eng, _point(True), check=True, average="avg", timeout_s=5)
    assert out.status == "waived" and out.time_us is None
    assert "one rank" in out.note and "nothing to move" in out.note
    assert eng.launches == 0  # nothing was launched, so no library can warn about an empty graph


def test_one_rank_in_place_row_prints_no_bandwidth_and_says_why():
    eng = _CopyEngine()
    plan = bench.BenchPlan(collectives=[collectives.REGISTRY["all_reduce"]], sizes=[1024], dtype=dtype("float"),
                           op="sum", root=0, iters=2, warmup=1, graph=10, check=True, average="avg", timeout_s=5,
                           warm_first=False)
    pairs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a library warning reaching the user fails the test
        rows = bench.run(eng, plan, on_row=lambda a, b: pairs.append((a, b)))
    oop, ip = rows
    assert oop.status == "ok" and oop.busbw_gbps is not None
    assert ip.status == "waived" and ip.busbw_gbps is None and ip.algbw_gbps is None
    line = table.row(oop, ip)
    assert line.split()[-4:] == ["N/A"] * 4
    assert any("in-place: WAIVED: one rank" in n for n in table.notes(oop, ip))


def test_two_ranks_in_place_is_measured():
    eng = _CopyEngine(world_size=2)
    eng.ctx.world_size = 2
    pt = _point(True)
    pt = Point(pt.coll, pt.coll.layout(1024, 4, 2, 0), pt.dt, "sum", 0, True, 2, 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = point.measure(eng, pt, check=False, average="avg", timeout_s=5)
    assert out.status == "ok" and out.time_us == pytest.approx(10.0)


def test_unchecked_results_store_null_and_print_na():
    eng = _CopyEngine()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = point.measure(eng, _point(False), check=False, average="avg", timeout_s=5)
    assert out.status == "ok" and out.wrong is None  # -c 0: not "0 wrong", unknown
    checked = point.measure(eng, _point(False), check=True, average="avg", timeout_s=5)
    assert checked.wrong == 0
    m = Measurement(collective="all_reduce", size_bytes=1024, count=256, dtype="float", op="sum", root=None,
                    in_place=False, n_ranks=1, n_nodes=1, status="ok", time_us=10.0, algbw_gbps=0.1,
                    busbw_gbps=0.0, wrong=None)
    assert table.row(m, m).split()[8] == "N/A"  # nccl-tests prints N/A in #wrong with -c 0
    assert m.to_record()["wrong"] is None


def test_unchecked_rows_round_trip_as_null_through_store_export_and_report(tmp_path, capsys):
    from ccltune.cli import main
    from ccltune.store import Store

    db = tmp_path / "r.db"
    rows = [Measurement(collective="all_reduce", size_bytes=s, count=s // 4, dtype="float", op="sum", root=None,
                        in_place=ip, n_ranks=2, n_nodes=1, status="ok", time_us=10.0, algbw_gbps=s / 1e4,
                        busbw_gbps=s / 1e4, wrong=None) for s in (1024, 2048) for ip in (False, True)]
    with Store(db) as st:
        rid = st.begin_run("bench", command="ccltune bench all_reduce -c 0", env={"world_size": 2})
        st.add_measurements(rid, rows)
        st.finish_run(rid, "complete", {"rows": 4, "wrong": None})
        assert [m.wrong for m in st.measurements(rid)] == [None] * 4
    assert main(["export", str(rid), "--db", str(db)]) == 0
    assert '"wrong": null' in capsys.readouterr().out
    assert main(["export", str(rid), "--db", str(db), "--format", "csv"]) == 0
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "rep")]) == 0


@pytest.mark.parametrize("max_bytes, want", [(0, 256 * 1024), (1 << 20, 1 << 20)])
def test_bench_reserves_minus_e_bytes_as_nccl_tests_allocates_them(max_bytes, want):
    """-b 8 -e 1M -f 32 ends at 256 KB; nccl-tests still allocates 1 MB and steps through it."""
    eng, asked = _CopyEngine(), []
    eng.reserve = asked.append
    plan = bench.BenchPlan(collectives=[collectives.REGISTRY["all_reduce"]], sizes=[8, 256, 8192, 256 * 1024],
                           dtype=dtype("float"), op="sum", root=0, iters=2, warmup=0, graph=0, check=0,
                           average="avg", timeout_s=5, warm_first=False, placements=(False,), max_bytes=max_bytes)
    bench.run(eng, plan)
    assert asked == [want]
