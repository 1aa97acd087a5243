"""nccl-tests' text table, byte for byte: a real nccl-tests 2.19.0 output (whose util.cu print
statements 2.19.6 keeps) is rebuilt from its own numbers with a fixed environment, and read back
by a small column-position reader written from nccl-tests' format."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ccltune.ncclt import json_doc, parse, parse_text
from ccltune.ncclt import table as ncclt_table
from ccltune.store import Measurement

REAL = Path(__file__).parent.parent / "fixtures" / "nccl-tests" / "ncclt-2.19.0_all_reduce_h200x4.txt"


def _rows(text: str) -> list[tuple[Measurement, Measurement]]:
    """The real file's rows as ccltune's records."""
    [p] = parse_text(text, "all_reduce")
    it = iter(p.rows)
    return list(zip(it, it))


def _header(real_lines: list[str]) -> ncclt_table.Header:
    devices = [ncclt_table.Device(rank=r, pid=pid, host="vm", device=r, bus_id=f"0000:00:{r + 6:02x}", name="NVIDIA H200")
               for r, pid in enumerate((3943, 3944, 3945, 3949))]
    return ncclt_table.Header(program="all_reduce_perf", min_bytes=8, max_bytes=1073741824, step_factor=2, step_bytes=0,
                         warmup=1, iters=20, graph=10, nccl_code=22809, devices=devices)


def test_table_is_nccl_tests_byte_for_byte():
    text = REAL.read_text()
    real = text.splitlines()[1:]  # without the fixture's own comment line
    h = _header(real)
    pairs = _rows(text)
    ours = (ncclt_table.preamble(h) + ncclt_table.header() + [ncclt_table.row(o, i) for o, i in pairs]
            + ncclt_table.footer([m for pair in pairs for m in pair], "all_reduce_perf"))
    assert ours[0] == "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809 ccltune"
    assert real[0] == "# nccl-tests version 2.19.0 nccl-headers=22809 nccl-library=22809"
    avg = ours.index("# Avg bus bandwidth    : 207.809 ")  # the fixture's rows are trimmed: its average is not
    assert real[avg] == "# Avg bus bandwidth    : 104.372 "  # of these 5 sizes but of all 28
    assert ours[1:avg] + ours[avg + 1:] == real[1:avg] + real[avg + 1:len(ours)]  # every other byte
    assert real[len(ours):] == [""]  # writeErrors' empty line is the caller's


def test_without_nccl_the_header_names_the_engine_and_no_nccl_version():
    """The CPU engine has no NCCL: no nccl-headers=0 nccl-library=0, the engine in ccltune's own fields;
    the importer still reads the table (its run starts at '# nccl-tests version')."""
    h = dataclasses.replace(_header(REAL.read_text().splitlines()[1:]), nccl_code=0, tool="ccltune=0.test engine=gloo")
    assert ncclt_table.preamble(h)[0] == "# nccl-tests version 2.19.6 ccltune=0.test engine=gloo"
    pairs = _rows(REAL.read_text())
    text = "\n".join(ncclt_table.preamble(h) + ncclt_table.header() + [ncclt_table.row(o, i) for o, i in pairs]
                     + ncclt_table.footer([m for pair in pairs for m in pair], "all_reduce_perf"))
    [p] = parse_text(text, "all_reduce")
    assert len(p.rows) == 2 * len(pairs)


def test_float_cells_shrink_their_decimals():
    assert ncclt_table.float_cell(999.994, 6) == "999.99"
    assert ncclt_table.float_cell(1234.5678, 6) == "1234.6"
    assert ncclt_table.float_cell(123456.7, 6) == "123457"
    assert ncclt_table.float_cell(12345678.0, 6) == " 1e+07"
    assert ncclt_table.float_cell(12345.678, 7) == "12345.7"
    assert ncclt_table.float_cell(4547.32, 7) == "4547.32"


def test_na_wrong_timestamps_and_memory():
    m = Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, time_us=7.91, algbw_gbps=0.0,
                    busbw_gbps=1500.0, wrong=None)
    row = ncclt_table.row(m, m, timestamp="2026-01-02 03:04:05")
    assert row.endswith("   N/A  2026-01-02 03:04:05") and "  1500.0  " in row
    assert ncclt_table.header(timestamps=True)[2].endswith("#wrong           timestamp")
    assert ncclt_table.memory_line(3 << 20, 5 << 30, 512) == (
        "Initialization 3.00 MB | User-Allocated 5.00 GB | Collective 512 B | Total  5.00 GB")
    assert ncclt_table.footer([m], "x", min_bw=2000)[1] == "# Avg bus bandwidth    : 1500 FAILED"
    assert ncclt_table.footer([m], "x", min_bw=1600)[1] == "# Avg bus bandwidth    : 1500 OK"


def _read_table(text: str) -> list[dict[str, float]]:
    """A dashboard's reader, from nccl-tests' format only: data rows are the lines not starting
    with '#'; columns by position: size count type redop root, time algbw busbw #wrong twice."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        c = line.split()
        out.append({"size": int(c[0]), "oop_time": float(c[5]), "oop_busbw": float(c[7]),
                    "ip_time": float(c[9]), "ip_busbw": float(c[11])})
    return out


def test_reader_gets_the_records_numbers_and_import_round_trips(tmp_path):
    text = REAL.read_text()
    pairs = _rows(text)
    h = _header(text.splitlines())
    table = "\n".join(ncclt_table.preamble(h) + ncclt_table.header() + [ncclt_table.row(o, i) for o, i in pairs]
                      + ncclt_table.footer([m for p in pairs for m in p], "all_reduce_perf")) + "\n"
    assert _read_table(table) == [{"size": o.size_bytes, "oop_time": o.time_us, "oop_busbw": o.busbw_gbps,
                                   "ip_time": i.time_us, "ip_busbw": i.busbw_gbps} for o, i in pairs]
    doc = json_doc.document(h, pairs, argv=["all_reduce_perf", "-b", "8"], environ=["NCCL_DEBUG=WARN"],
                              start_time="2026-01-02 03:04:05", end_time="2026-01-02 03:04:06", iters=20)
    js = json.dumps(doc)
    got = [(r["size"], r["out_of_place"]["time"], r["in_place"]["bus_bw"]) for r in json.loads(js)["results"]]
    assert got == [(o.size_bytes, o.time_us, i.busbw_gbps) for o, i in pairs]
    for name, content in (("t.txt", table), ("t.json", js)):
        [p] = parse(content, name)
        assert [(m.size_bytes, m.in_place, m.time_us, m.busbw_gbps) for m in p.rows] == [
            (m.size_bytes, m.in_place, m.time_us, m.busbw_gbps) for pair in pairs for m in pair]
        assert (p.n_ranks, p.nccl_version, set(p.gpus)) == (4, "2.28.9", {"NVIDIA H200"})


@pytest.mark.parametrize("status", ["waived", "skipped", "error"])
def test_unmeasured_cells_keep_the_columns(status):
    ok = Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, time_us=7.91, algbw_gbps=0.0,
                     busbw_gbps=0.0, wrong=0)
    bad = Measurement("all_reduce", 8, 2, "float", "sum", None, True, 2, status=status, note="why")
    assert len(ncclt_table.row(ok, bad)) == len(ncclt_table.row(ok, ok))
    assert ncclt_table.notes(ok, bad) == [f"#  from 8 B, in-place: {status.upper()}: why"]
