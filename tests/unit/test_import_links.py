"""TransferBench and nvbandwidth imports as links runs, and ``links --run N`` (fixtures written from the tools'
print statements: their headers name file and version)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.diagnose.parsers import nvbandwidth, transferbench
from ccltune.diagnose.parsers.linkimport import times
from ccltune.errors import UsageError
from ccltune.store import Store

FIX = Path(__file__).parent.parent / "fixtures"
A2A = FIX / "transferbench" / "a2a_mi300x_8gpu.txt"
P2P = FIX / "transferbench" / "p2p_4gpu.txt"
NVB_TXT = FIX / "nvbandwidth" / "h100_4gpu.txt"
NVB_JSON = FIX / "nvbandwidth" / "h100_4gpu.json"


def tool_actual(text: str) -> dict[int, tuple[str, str]]:
    """The Actual and STotal columns as TransferBench printed them, read straight from the file."""
    out = {}
    for line in text.splitlines():
        if m := re.match(r"^GPU (\d+) .* (\d+\.\d{3})\s+(\d+\.\d{3})$", line):
            out[int(m.group(1))] = (m.group(2), m.group(3))
    return out


def test_rounding_keeps_printed_precision():
    assert times(45.21, 7, 2) == 316.47
    assert times(45.210, 7, 3) == 316.470
    assert times(0.1, 3, None) == pytest.approx(0.3)


def test_a2a_parse_rows_and_method():
    found = transferbench.parse(A2A.read_text(), "a2a")
    assert (found.version, found.tests, found.n_gpus, len(found.rows)) == ("1.59", ["a2a"], 8, 56)
    assert {r["method"] for r in found.rows} == {"sm-write"} and {r["direction"] for r in found.rows} == {"all2all"}
    info = found.method_info["sm-write"]["a2a"]
    assert (info["executor"], info["cus"], info["fine_grained"], info["size_bytes"]) == ("GFX", 8, True, 268435456)
    slow = next(r for r in found.rows if (r["src"], r["dst"]) == (3, 5))
    assert slow["bandwidth_gbps"] == 45.21 and "8 CUs" in slow["note"]


def test_a2a_import_then_links_run_prints_the_tools_figures(tmp_path, capsys):
    db = tmp_path / "t.db"
    assert main(["import", "transferbench", str(A2A), "--db", str(db), "--gpu", "AMD Instinct MI300X"]) == 0
    capsys.readouterr()
    assert main(["links", "--run", "1", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    printed = tool_actual(A2A.read_text())
    rows = {int(m.group(1)): m.groups() for m in re.finditer(
        r"^\s+(\d)\s+(\d+\.\d{3})\s+(\d)\s+(\d)\s+(\d+\.\d{3})\s+(\d+\.\d{3})\s+(\S+)\s+(\S+)\s+(\w+)$", out, re.M)}
    assert sorted(rows) == list(range(8))
    for gpu, (_, slowest, _, peers, bound, total, t_stotal, t_actual, agrees) in rows.items():
        assert peers == "7"
        assert f"{float(slowest) * 7:.3f}" == bound  # slowest x 7
        assert (t_stotal, t_actual) == printed[gpu] and bound == printed[gpu][1] and agrees == "yes"
        assert total == printed[gpu][0]
    assert rows[3][1] == "45.210" and rows[3][4] == "316.470"
    assert "node ceiling (smallest bound, ring collectives): 316.470 GB/s" in out
    with Store(db, readonly=True) as store:
        run = store.run(1)
        assert (run.kind, run.engine, run.world_size) == ("links", "TransferBench", 8)
        assert run.env["gpus"][0]["name"] == "AMD Instinct MI300X"
        assert run.summary["ring_ceiling_gbps"] == 316.47


def test_p2p_uni_and_bidir():
    found = transferbench.parse(P2P.read_text(), "p2p")
    assert found.tests == ["p2p/uni", "p2p/bidir"] and found.n_gpus == 4
    uni = {(r["src"], r["dst"]): r["bandwidth_gbps"] for r in found.rows if r["direction"] == "uni"}
    bidir = {(r["src"], r["dst"]): r["bandwidth_gbps"] for r in found.rows if r["direction"] == "bidir"}
    assert len(uni) == 12 and len(bidir) == 12 and uni[(1, 2)] == 39.87
    assert found.method_info["sm-write"]["p2p/uni"]["fine_grained"] is True
    assert found.decimals == {"sm-write/uni": 2, "sm-write/bidir": 2}


@pytest.mark.parametrize("path", [NVB_TXT, NVB_JSON], ids=["text", "json"])
def test_nvbandwidth_import_flags_the_slow_pair(path, tmp_path, capsys):
    found = nvbandwidth.parse(path.read_text(), path.name)
    assert found.version == "v0.8" and found.gpu_names == ["NVIDIA H100 80GB HBM3"] * 4
    read_ce = {(r["src"], r["dst"]): r["bandwidth_gbps"] for r in found.rows
               if (r["method"], r["direction"]) == ("ce-read", "uni")}
    assert len(read_ce) == 12 and read_ce[(2, 3)] == 301.45
    db = tmp_path / "n.db"
    assert main(["import", "nvbandwidth", str(path), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "WARN    links:ce-read/uni" in out and "slowest 2->3 301.4" in out
    assert main(["links", "--run", "1", "--db", str(db)]) == 0
    assert "below threshold: 2->3 301.45 GB/s" in capsys.readouterr().out
    # the driver and CUDA runtime the file names are the run's, as the report shows them
    assert (found.driver_version, found.cuda_version) == ("570.124.06", "12.8")
    from ccltune.report import data
    from ccltune.store import Store

    with Store(db, create=False) as store:
        facts = data.run_facts(store.run(1))
    assert (facts["driver"], facts["CUDA"]) == ("570.124.06", "12.8")
    assert nvbandwidth.cuda_text(11040) == "11.4" and nvbandwidth.cuda_text("12.2") == "12.2"


def test_nvbandwidth_text_keeps_bidir_direction_and_skips_total():
    found = nvbandwidth.parse(NVB_TXT.read_text(), "t")
    assert sum(r["direction"] == "bidir" for r in found.rows) == 12
    assert any("Total" in n for n in found.notes)


@pytest.mark.parametrize("text, message", [
    ("", "no TransferBench a2a or p2p results"),
    ("[ERROR] Cannot use 9 GPUs.  Detected 8 GPUs\n", ":1: TransferBench reported an error"),
])
def test_transferbench_refuses_what_it_cannot_read(text, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        transferbench.parse(text, "f.txt")


def test_truncated_a2a_summary_names_the_line(tmp_path):
    lines = A2A.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("GPU 04"))
    bad = tmp_path / "cut.txt"
    bad.write_text("\n".join(lines[:cut]) + "\n")
    with pytest.raises(UsageError, match=r"cut.txt:\d+: a2a summary row 'GPU 04' expected.*stops after 4 of 8"):
        transferbench.parse(bad.read_text(), str(bad))
    db = tmp_path / "none.db"
    assert main(["import", "transferbench", str(bad), "--db", str(db)]) == 2
    assert not db.exists()  # bad input stores nothing


def test_transfer_line_disagreeing_with_summary_is_refused():
    text = A2A.read_text().replace("|   45.210 GB/s", "|   46.210 GB/s")
    with pytest.raises(UsageError, match="mixes two runs"):
        transferbench.parse(text, "mixed")


def test_nvbandwidth_bad_json_and_no_gpu_matrix():
    with pytest.raises(UsageError, match="not valid JSON"):
        nvbandwidth.parse("{not json", "x.json")
    with pytest.raises(UsageError, match="no GPU-to-GPU bandwidth matrix"):
        nvbandwidth.parse('{"nvbandwidth": {"testcases": [{"name": "host_to_device_memcpy_ce", "status": "Passed",'
                          ' "bandwidth_matrix": [["55.1"]]}]}}', "h.json")


def test_links_run_refuses_a_run_of_another_kind(tmp_path, capsys):
    db = tmp_path / "k.db"
    with Store(db) as store:
        rid = store.begin_run("bench", command="ccltune bench")
        store.finish_run(rid, "complete")
    assert main(["links", "--run", str(rid), "--db", str(db)]) == 2
    assert "is a bench run, not a links run" in capsys.readouterr().err


def test_p2p_bidir_pair_measured_twice_keeps_its_lower_value(tmp_path, capsys):
    """TransferBench p2p's bidirectional table gives 1->2 twice: 39.87 (row GPU 01 ->, the 1<->2 run) and 46.39
    (row GPU 02 <-, the 2<->1 run). The slower one bounds the link; the later row must not hide it."""
    found = transferbench.parse(P2P.read_text(), "p2p")
    twice = sorted(r["bandwidth_gbps"] for r in found.rows if r["direction"] == "bidir" and (r["src"], r["dst"]) == (1, 2))
    assert twice == [39.87, 46.39]  # both stored
    db = tmp_path / "p.db"
    assert main(["import", "transferbench", str(P2P), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["links", "--run", "1", "--db", str(db), "--json", str(tmp_path / "l.json")]) == 0
    out = capsys.readouterr().out
    assert "# sm-write bidir (GB/s), row = source, column = destination; 12 pairs measured twice" in out
    row1 = next(line for line in out.splitlines()[out.splitlines().index(
        next(x for x in out.splitlines() if x.startswith("# sm-write bidir"))) + 2:] if line.split()[0] == "1")
    assert row1.split()[1:] == ["47.42", "-", "39.87", "46.18"]
    import json
    series = json.loads((tmp_path / "l.json").read_text())["summary"]["series"]["sm-write/bidir"]
    gpu1 = next(g for g in series["per_gpu"] if g["gpu"] == 1)
    assert (gpu1["slowest_gbps"], gpu1["slowest_peer"], series["pairs_measured_twice"]) == (39.87, 2, 12)


def test_import_host_flag_and_a_hostless_links_run_is_host_unknown(tmp_path, capsys):
    from ccltune.report.verdict import cards
    from ccltune.store import Run, Store
    db = tmp_path / "h.db"
    assert main(["import", "transferbench", str(A2A), "--gpu", "AMD Instinct MI300X", "--db", str(db)]) == 0
    assert "8 GPUs on host unknown (give --host)" in capsys.readouterr().out
    assert main(["import", "transferbench", str(A2A), "--host", "mi300x-12", "--db", str(db)]) == 0
    capsys.readouterr()
    with Store(db, create=False) as store:
        assert [store.run(i).host for i in (1, 2)] == [None, "mi300x-12"]
        assert "--host mi300x-12" in store.run(2).command
    assert main(["import", "transferbench", str(A2A), "--host", " ", "--db", str(db)]) == 2
    gpus = [{"name": "AMD Instinct MI300X"}] * 8
    bench = Run(1, "bench", "complete", "t", None, "ccltune bench", None, 8, 1, None, "node-a", None, None, "2.21.5",
                env={"host": "node-a", "gpus": gpus, "world_size": 8}, summary={})
    links = Run(2, "links", "complete", "t", None, "ccltune import", None, 8, 1, None, None, None, None, None,
                env={"gpus": gpus, "world_size": 8}, summary={"ring_ceiling_gbps": 316.47})
    card = next(c for c in cards([bench, links], {}, {}) if c.title == "node-a")
    # a links run that records no host does not bound a job on node-a: the card says so, not borrows it
    assert not any(k.startswith("slowest-link ceiling") for k in dict(card.figures))
    assert ("info", "no slowest-link ceiling for this job shape: links run 2 measured a host it did not record, "
                    "not this job's host") in card.lines


def test_an_output_handed_over_as_a_pipe_is_stored_whole(tmp_path):
    """`ccltune import nvbandwidth <(ssh node nvbandwidth)`: the pipe is read once, for the matrix and for the
    copy stored beside it (read twice, the copy was empty)."""
    import os
    import threading

    text = NVB_TXT.read_text()
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, text.encode()), os.close(w)))
    writer.start()
    try:
        assert main(["import", "nvbandwidth", f"/dev/fd/{r}", "--db", str(tmp_path / "p.db")]) == 0
    finally:
        writer.join()
        os.close(r)
    with Store(tmp_path / "p.db", readonly=True) as st:
        assert st.artifacts(1) == {"nvbandwidth.txt": text} and st.links(1)


def test_links_run_with_a_gpu_index_beyond_any_machine_is_refused_not_drawn(tmp_path, capsys):
    """Issue 38, item 7: a links database holding GPU index 100,000 made `links --run` draw a 100,001 x 100,001
    matrix (it hung). The index is bounded as every link reader bounds it (inputs.MAX_GPUS), naming the row."""
    import sqlite3
    db = tmp_path / "n.db"
    assert main(["import", "nvbandwidth", str(NVB_JSON), "--db", str(db)]) == 0
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT min(id) FROM links").fetchone()[0]
        conn.execute("UPDATE links SET dst = 100000 WHERE id = ?", (row,))
    capsys.readouterr()
    assert main(["links", "--run", "1", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"links row {row} (run 1) has dst = 100000, not a GPU index in 0..1023" in err and "Traceback" not in err
