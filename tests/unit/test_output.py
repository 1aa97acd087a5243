"""nccl-tests' text table: the same header, the same column positions, N/A cells, footer."""

from __future__ import annotations

import re
from pathlib import Path

from ccltune import output
from ccltune.store import Measurement

FIXTURE = Path(__file__).parent.parent / "fixtures" / "nccl-tests" / "all_gather_default.txt"


def _ok(size=1048576, time_us=12.5, busbw=62.91, wrong=0, in_place=False):
    return Measurement(collective="all_gather", size_bytes=size, count=size // 16, dtype="float", op=None, root=None,
                       in_place=in_place, n_ranks=4, time_us=time_us, algbw_gbps=size / time_us / 1e3,
                       busbw_gbps=busbw, wrong=wrong)


def _waived(size=1048576, in_place=True, status="waived", note="no in-place form"):
    return Measurement(collective="all_gather", size_bytes=size, count=size // 16, dtype="float", op=None,
                       root=None, in_place=in_place, n_ranks=4, status=status, note=note)


def _ends(line):
    return [m.end() for m in re.finditer(r"\S+", line)]


def _header_ends():
    return _ends(output._HEAD[1])[1:]   # without the leading '#'


def test_header_is_nccl_tests_header():
    lines = FIXTURE.read_text().splitlines()
    start = lines.index(output._HEAD[0])
    assert tuple(lines[start:start + 3]) == output._HEAD
    assert output.header("all_gather") == ["# Collective test starting: all_gather", *output._HEAD]


def test_row_values_end_under_their_column_names():
    row = output.row(_ok(), _ok(time_us=12.1, busbw=64.99, in_place=True))
    assert row.split() == ["1048576", "65536", "float", "none", "-1", "12.50", "83.89", "62.91", "0",
                           "12.10", "86.66", "64.99", "0"]
    assert _ends(row) == _header_ends()


def test_wide_values_still_line_up():
    big = 1 << 33
    row = output.row(_ok(size=big, time_us=123456.0, busbw=123.4), _ok(size=big, time_us=9999.9, in_place=True))
    assert row.split()[5] == "123456" and row.split()[9] == "9999.9"
    assert _ends(row) == _header_ends()


def test_op_and_root_cells():
    m = _ok()
    m.op, m.root = "max", 3
    assert output.row(m, m).split()[3:5] == ["max", "3"]


def test_na_cells_line_up_and_notes_explain_them():
    oop, ip = _ok(), _waived()
    row = output.row(oop, ip)
    assert row.split()[9:] == ["N/A"] * 4
    assert _ends(row) == _header_ends()
    assert output.notes(oop, ip) == ["#  from 1048576 B, in-place: WAIVED: no in-place form"]


def test_skipped_and_error_cells():
    skip = _waived(status="skipped", note="out of memory", in_place=False)
    err = _waived(status="error", note="boom")
    row = output.row(skip, err)
    assert row.split()[5:] == ["skip"] * 4 + ["err"] * 4
    assert _ends(row) == _header_ends()
    assert [n.split(": ", 1)[1] for n in output.notes(skip, err)] == ["SKIPPED: out of memory", "ERROR: boom"]


def test_footer_averages_busbw_of_measured_cells_only():
    rows = [_ok(busbw=1.0), _ok(busbw=2.0, in_place=True), _ok(busbw=6.0), _waived()]
    assert output.footer(rows) == ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 3 ", "#"]


def test_footer_counts_wrong_elements():
    rows = [_ok(wrong=2), _ok(wrong=3, in_place=True)]
    assert output.footer(rows)[0] == "# Out of bounds values : 5 FAILED"


def test_footer_of_nothing_measured():
    assert output.footer([_waived()])[:2] == ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 "]


def test_preamble_names_every_rank_and_the_sizes():
    lines = output.preamble(nranks=2, min_bytes=8, max_bytes=4096, step="8(factor)", warmup=1, iters=3, check=True,
                            graph=0, engine="gloo", devices=["Rank  0 Group  0 on h cpu", "Rank  1 Group  0 on h cpu"])
    assert lines[0] == "# ccltune bench: engine gloo, 2 processes (CPU)"
    assert "minBytes 8 maxBytes 4096 step: 8(factor) warmup iters: 1 iters: 3" in lines[1]
    assert "validation: 1 graph: 0" in lines[1]
    assert "#  Rank  1 Group  0 on h cpu" in lines
    assert all(line.startswith("#") for line in lines)
