"""bench against nccl-tests 2.19.6 on several ranks, where the CPU can tell: the size each row measures
(each rank's block aligned to 16 bytes, its GetCollByteCount), and in-place sendrecv timed but unchecked
(its sendrecv.cu: reportErrors = 0 in place, #wrong N/A)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ccltune import collectives
from ccltune.measure import bench, point
from ccltune.ncclt import table
from ccltune.sizes import size_series
from ccltune.store import Measurement


def _sizes(name: str, nranks: int, elem: int, lo: int, hi: int, factor: int) -> list[int]:
    ctx = SimpleNamespace(comm_size=nranks, comm_rank=0)
    return [bench.layout(collectives.get(name), s, elem, ctx).size_bytes for s in size_series(lo, hi, factor=factor)]


def test_per_rank_blocks_are_aligned_to_16_bytes_as_nccl_tests_aligns_them():
    # all_gather_perf -b 8 -e 512 -f 4 (float): nccl-tests prints 0, 0, 128, 512 on 4 ranks, 0, 32, 128, 512 on 2
    assert _sizes("all_gather", 4, 4, 8, 512, 4) == [0, 0, 128, 512]
    assert _sizes("all_gather", 2, 4, 8, 512, 4) == [0, 32, 128, 512]
    # 16 / eltSize elements a block: bfloat16 on 4 ranks needs 8 elements (64 B in all), int64 2 (64 B)
    assert _sizes("reduce_scatter", 4, 2, 32, 128, 2) == [0, 64, 128]
    assert _sizes("alltoall", 4, 8, 32, 128, 2) == [0, 64, 128]
    for name in ("gather", "scatter"):
        assert _sizes(name, 4, 4, 8, 512, 4) == [0, 0, 128, 512]


def test_whole_buffer_collectives_and_exact_layouts_are_not_aligned():
    assert _sizes("all_reduce", 4, 4, 8, 512, 4) == [8, 32, 128, 512]
    assert _sizes("sendrecv", 4, 4, 8, 512, 4) == [8, 32, 128, 512]
    # a workload's or a sweep's size is NCCL's own count: layout alone keeps it
    assert collectives.get("all_gather").layout(32, 4, 4, 0).size_bytes == 32


def _row(in_place: bool, wrong, note=None) -> Measurement:
    return Measurement("sendrecv", 64, 16, "float", "sum", None, in_place, 4, time_us=12.0, wrong=wrong, note=note)


def test_in_place_sendrecv_is_timed_and_its_na_explained_once():
    oop, ip = _row(False, 0), _row(True, None, point.IN_PLACE_UNCHECKED)
    line = table.row(oop, ip)
    cells = line.split()
    assert (cells[-8], cells[-5], cells[-4], cells[-1]) == ("12.00", "0", "12.00", "N/A")
    (note,) = table.notes(oop, ip)
    assert note.startswith("#  from 64 B, in-place: #wrong N/A: in place the send and receive buffers are one")
    assert table.notes(oop, _row(True, None)) == []  # -c 0: N/A everywhere, nothing to explain


@pytest.mark.parametrize("name", [n for n in collectives.REGISTRY])
def test_only_sendrecv_leaves_its_in_place_check_out(name):
    assert collectives.get(name).checks_in_place == (name != "sendrecv")


MPI = __import__("pathlib").Path(__file__).parent.parent / "fixtures" / "nccl-tests" / "v2.19.6-mpi"


@pytest.mark.parametrize("ranks", [2, 4])
def test_sizes_match_real_nccl_tests_all_gather_on_several_ranks(ranks):
    # all_gather_perf -b 8 -e 1G -f 4 under mpirun -np 2 and 4 (4 x H200, README there): its size column
    text = (MPI / f"all_gather-np{ranks}.txt").read_text()
    printed = [int(line.split()[0]) for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert printed[:3] == ([0, 0, 128] if ranks == 4 else [0, 32, 128])
    assert _sizes("all_gather", ranks, 4, 8, 1 << 30, 4) == printed


@pytest.mark.parametrize("ranks", [2, 4])
def test_real_nccl_tests_times_in_place_sendrecv_and_leaves_its_check_out(ranks):
    rows = [line.split() for line in (MPI / f"sendrecv-np{ranks}.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert rows and all(float(r[9]) > 0 and r[12] == "N/A" and r[8] == "0" for r in rows)
