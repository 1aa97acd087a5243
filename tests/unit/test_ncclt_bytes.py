"""ccltune's table and -J output against real nccl-tests 2.19.6 output, byte for byte
(tests/fixtures/nccl-tests/v2.19.6, README there). Each capture is imported, and its numbers,
devices, options and clock (the -S timestamps, the JSON's start and end times) are fed back to
ccltune's writers: a fixed clock and environment. Every line must come out equal, with two
deliberate differences, asserted below: the version line carries ccltune's own name and version
after nccl-tests' fields, and ccltune does not print nccl-tests' source-line traces
(' .. vm pid 3040: Test failure common.cu:1454') after a failed run (its error goes to stderr)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccltune import periter
from ccltune.ncclt import json_doc, parse, table

V = Path(__file__).parent.parent / "fixtures" / "nccl-tests" / "v2.19.6"
EAGER = V.parent / "ar-eager-v2.19.6.txt"
MPI = V.parent / "v2.19.6-mpi"  # 2 and 4 ranks under mpirun (README there)
_SHAPE = re.compile(r"# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
                    r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+) unalign: (\d+)")
TOOL = "ccltune=0.test engine=nccl"


def _header(text: str, program: str, devices: list[dict], colors: list[int] | None = None, **kw) -> table.Header:
    """The run's options, read from its shape line (the reader a dashboard would write)."""
    m = _SHAPE.search(text)
    assert m, "no shape line"
    t, g, lo, hi, step, kind, w, n, agg, check, graph, unalign = m.groups()
    return table.Header(program=program, min_bytes=int(lo), max_bytes=int(hi),
                         step_factor=int(step) if kind == "factor" else 1, step_bytes=int(step), warmup=int(w),
                         iters=int(n), agg_iters=int(agg), check=int(check), graph=int(graph), unalign=int(unalign),
                         threads=int(t), gpus=int(g), nccl_code=22809, tool=TOOL,
                         devices=[table.Device(rank=d["rank"], pid=d["pid"], host=d["host"], device=d["device"],
                                                bus_id=d["bus_id"], name=d["name"], group=colors[n] if colors else 0)
                                  for n, d in enumerate(devices)], **kw)


def _cells(line: str) -> list[str]:
    return line.split()


def render(path: Path, *, cputime=False, timestamps=False, per_iter=False, min_bw=None, memory=None,
           skip=2) -> list[str]:
    text = path.read_text()
    [p] = parse(text, path.name)
    pairs = list(zip(p.rows[0::2], p.rows[1::2]))
    program = table.program(p.rows[0].collective)
    data = [ln for ln in text.splitlines() if ln and not ln.startswith("#") and ln[0] == " " and "pid" not in ln]
    h = _header(text, program, p.env["devices"], (p.env.get("groups") or {}).get("colors"), per_iter=per_iter,
                per_iter_skip=skip if per_iter else 0)
    lines = table.preamble(h) + table.header(cputime=cputime, timestamps=timestamps, per_iter=per_iter)
    for (oop, ip), real in zip(pairs, data):
        c = _cells(real)
        stats = None
        if per_iter:  # i_min i_max i_p99 i_cv% after each placement's block, by position
            s = [periter.IterStats(float(a), float(b), 0, 0, 0, float(p99), 0, float(cv))
                 for a, b, p99, cv in (c[9:13], c[17:21])]
            stats = (s[0], s[1])
        lines.append(table.row(oop, ip, timestamp=" ".join(c[-2:]) if timestamps else None, per_iter=stats))
    # nccl-tests averages unrounded busbw; the file's cells are rounded to 0.01: the mean of the
    # cells must agree to that rounding, and the footer then carries the file's own figure
    real_avg = float(re.search(r"# Avg bus bandwidth    : (\S+)", text).group(1))
    assert table.avg_busbw(p.rows) == pytest.approx(real_avg, abs=0.005)
    return lines + table.footer(p.rows, program, min_bw=min_bw, memory=memory, avg=real_avg) + [""]


def _same(path: Path, ours: list[str], trailer: list[str] = ()) -> None:
    real = path.read_text().splitlines()
    if real[0].startswith("# Writing JSON output to"):  # nccl-tests' -J notice, before everything
        real = real[1:]
    assert ours[0] == real[0] + " " + TOOL  # deliberate: ccltune's name and version beside nccl-tests'
    assert ours[1:] == real[1:len(real) - len(trailer)]
    assert real[len(real) - len(trailer):] == list(trailer)


@pytest.mark.parametrize("name", ["ar-graph", "ar-json", "ar-step", "sendrecv", "alltoall", "broadcast",
                                  "reduce_scatter", "all_gather"])
def test_plain_tables(name):
    path = V / f"{name}-v2.19.6.txt"
    _same(path, render(path))


@pytest.mark.parametrize("name", [f"{n}-np{r}" for n in ("ar-json", "all_gather", "sendrecv", "ar-split")
                                  for r in (2, 4)])
def test_plain_tables_of_several_ranks(name):
    """A device line per rank (NCCL_TESTS_SPLIT: its group), 0-byte rows, in-place sendrecv's N/A."""
    path = MPI / f"{name}.txt"
    _same(path, render(path))


@pytest.mark.parametrize("ranks", [2, 4])
def test_per_iteration_columns_of_several_ranks(ranks):
    path = MPI / f"ar-periter-np{ranks}.txt"
    _same(path, render(path, per_iter=True, skip=0))  # -I 1 without -K


@pytest.mark.parametrize("ranks", [2, 4])
def test_json_of_several_ranks_byte_for_byte(ranks):
    path = MPI / f"ar-np{ranks}.json"
    ours, real = json.loads(json_doc.dumps(_json_doc(path, per_iter=False))), json.loads(path.read_text())
    # nccl-tests averages unrounded busbw; ours is the mean of the file's rounded cells (see render)
    assert ours.pop("average_bus_bandwidth") == pytest.approx(real.pop("average_bus_bandwidth"), abs=5e-6)
    assert ours == real


def test_eager_table():
    _same(EAGER, render(EAGER))


def test_per_iteration_columns():
    path = V / "ar-periter-v2.19.6.txt"
    _same(path, render(path, per_iter=True))


def test_cputime_and_timestamps():
    path = V / "ar-ts-cpu-v2.19.6.txt"
    _same(path, render(path, cputime=True, timestamps=True))


def test_no_check_and_memory_report():
    path = V / "ar-nocheck-mem-v2.19.6.txt"
    mem = table.memory_line(586 << 20, 4 << 20, 0)
    ours = render(path, memory=mem)
    _same(path, ours)


def test_min_bw_failure_footer():
    """NCCL_TESTS_MIN_BW=100000: '0 FAILED' in the footer; nccl-tests then prints its trace line and
    exits 7 (testNumResults, common.cu main -> TESTCHECK(run())), which ccltune does not print."""
    path = V / "ar-minbw-v2.19.6.txt"
    _same(path, render(path, min_bw=100000.0), trailer=[" .. vm pid 3040: Test failure common.cu:1454"])


def _json_doc(path: Path, *, per_iter: bool) -> dict:
    real = json.loads(path.read_text())
    [p] = parse(path.read_text(), path.name)
    pairs = list(zip(p.rows[0::2], p.rows[1::2]))
    cfg = real["config"]
    h = table.Header(program="all_reduce_perf", min_bytes=cfg["minimum_bytes"], max_bytes=cfg["maximum_bytes"],
                      step_factor=cfg["step_factor"], step_bytes=0, warmup=cfg["warmup_iters"],
                      iters=cfg["iterations"], check=1, nccl_code=22809, per_iter=per_iter,
                      devices=[table.Device(d["rank"], d["pid"], d["hostname"], d["device"], d["device_hex"],
                                             d["device_info"]) for d in cfg["devices"]])
    stats = None
    if per_iter:  # recomputed from the file's per-iteration times: tests periter.compute too
        stats = [tuple(periter.compute(r[k]["times_us"], r[k]["skipped_iterations"])
                       for k in ("out_of_place_per_iter", "in_place_per_iter")) for r in real["results"]]
    return json_doc.document(h, pairs, argv=real["args"], environ=real["env"], start_time=real["start_time"],
                               end_time=real["end_time"], iters=20, per_iter=stats)


def test_json_byte_for_byte():
    path = V / "ar-v2.19.6.json"
    assert json_doc.dumps(_json_doc(path, per_iter=False)) == path.read_text()


def test_json_with_per_iteration_timing():
    """Every byte but the statistics nccl-tests computed from unrounded times (avg, stdev, cv: the
    file's times are rounded to 1e-6 us, so the 6th decimal may differ); those agree to 1e-5."""
    path = V / "ar-periter-v2.19.6.json"
    ours, real = json.loads(json_doc.dumps(_json_doc(path, per_iter=True))), json.loads(path.read_text())
    for r_ours, r_real in zip(ours["results"], real["results"]):
        for k in ("out_of_place_per_iter", "in_place_per_iter"):
            for stat in ("avg_us", "stdev_us", "cv_pct"):
                assert r_ours[k].pop(stat) == pytest.approx(r_real[k].pop(stat), abs=1e-5)
    assert ours == real


def test_json_strings_as_nccl_tests_writes_them():
    assert json_doc.dumps({"a/b": ['x"\\\t\n', True, None, 1, 0.5, float("nan")]}) == \
        '{"a\\/b":["x\\"\\\\\\t\\n","true",null,1,0.500000,"nan"]}'
    assert json_doc.dumps("ok\x01cut") == '"ok"'  # sanitizeJson stops at a control character
