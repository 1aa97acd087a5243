"""Every reader bounded (issue 32, STYLE 18): adversarial lines fed to every regex-based reader within a
CPU-time bound, bombs (gzip, nesting, huge numbers) refused within a time and memory bound, and numbers
read from a file (ranks, counts, sizes, GPU indices) checked before anything is sized by them.

Time is CPU time of this process (``time.process_time``): the bound holds on a loaded machine too. Memory
is bounded by running the bomb cases in a child process under RLIMIT_AS (see ``_limited``)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ccltune import ncclt
from ccltune.diagnose.parsers import ncclog, nvbandwidth, rcclog, transferbench
from ccltune.diagnose.probes import amdsmi, smitopo
from ccltune.errors import UsageError
from ccltune.workload import capture, nccl_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CPU_S = 1.5  # one reader on one adversarial file: the fixed regexes take ~0.05 s, the old ones minutes
LINE = 200_000  # characters: the 100-200 KB lines that hung doctor and plugin verify

# lines an attacker (or a launcher gone wrong) may write: srun --label's own prefix repeated, a line
# without blank or colon, bracket runs, NCCL prefixes and "busId" repeated, digit runs
ADVERSARIAL = {
    "srun-labels": "1: " * (LINE // 3) + "x",
    "no-blank-no-colon": "a" * LINE,
    "digits": "1" * LINE,
    "digits-colons": "1:" * (LINE // 2),
    "brackets": "[" * LINE,
    "bracket-pairs": "[]" * (LINE // 2),
    "prefixes": "vm:1:2 [0] NCCL INFO " * (LINE // 21),
    "busid": "rank 1 nranks 2 cudaDev 0 " + "busId 1 " * (LINE // 8),
    "hashes": "#" + " " * LINE + "x",
    "colons": "a:" * (LINE // 2),
}
READERS = {
    "workload nccl_log": lambda t: (nccl_log.has_coll_lines(t), nccl_log.parse(t, "x.log")),
    "doctor ncclog": lambda t: ncclog.parse_log(t),
    "rcclog": lambda t: rcclog.parse(t),
    "nccl-tests text": lambda t: ncclt.parse_text(t, "x.txt"),
    "nvbandwidth": lambda t: nvbandwidth.parse(t, "x.txt"),
    "transferbench": lambda t: transferbench.parse(t, "x.txt"),
    "capture": lambda t: capture.parse(t, "x.cap"),
    "nvidia-smi topo": lambda t: smitopo.parse_topo_matrix(t),
}


def _timed(reader, text: str) -> float:
    t0 = time.process_time()
    try:
        reader(text)
    except UsageError:
        pass  # a clear error is a fine answer; a traceback of another kind fails the test
    return time.process_time() - t0


@pytest.mark.parametrize("reader", READERS)
def test_every_regex_reader_reads_adversarial_lines_in_bounded_time(reader):
    slow = {}
    for name, line in ADVERSARIAL.items():
        for text in (line, f"{line}\n", f"vm:1:2 [0] NCCL INFO {line}\n", f"#  Rank  0 {line}\n"):
            spent = _timed(READERS[reader], text)
            if spent > CPU_S:
                slow[name] = round(spent, 2)
    assert not slow, f"{reader}: CPU seconds per adversarial line over {CPU_S}: {slow}"


def test_srun_label_lines_still_read_and_a_long_prefix_chain_is_not_a_hang():
    """The fix keeps the real thing: srun --label's '0: ' before NCCL's prefix is still read."""
    line = ("0: vm:4029:4042 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 "
            "op 0 root 0 comm 0x1b65c030 [nranks=1] stream 0x22d29970\n")
    records, warnings = nccl_log.parse(line * 3, "x.log")
    assert not warnings and sum(records[0].calls.values()) == 3
    assert _timed(lambda t: nccl_log.parse(t, "x.log"), "1: " * 70 + line) < CPU_S


# --- nccl-tests import: ranks are the rank lines listed; sizes, counts, types and ops are nccl-tests' ---

NCCLT = FIXTURES / "nccl-tests"
AG = (NCCLT / "ncclt-2.19.0_all_gather_h200x4.txt").read_text()
AR_JSON = json.loads((NCCLT / "v2.19.6" / "ar-v2.19.6.json").read_text())
ROW = "    16777216       1048576     float    none"


@pytest.mark.parametrize("old, new, message", [
    ("#  Rank  3 Group  0 Pid   1686", "#  Rank 100000000 Group  0 Pid   1686",
     "ag.txt:9: rank 100000000, but the file lists 4 rank lines: ranks are 0..3"),
    ("#  Rank  3 Group  0 Pid   1686", "#  Rank 1000000 Group  0 Pid   1686", "ag.txt:9: rank 1000000"),
    ("# nThread 1 nGpus 1", "# nThread 100000000 nGpus 1", None),  # not cut: the 4 rank lines are the ranks
    # a cut list ('...'): nThread x nGpus x processes, capped
    ("NVIDIA H200\n#  Rank  1", "NVIDIA H200...\n#  Rank  1",
     "ag.txt:3: 400000000 ranks (nThread x nGpus x processes, the rank list cut): more than the 65536"),
    (ROW, ROW.replace("16777216", "1000000000000000000000"), "ag.txt:14: bad size '1000000000000000000000'"),
    (ROW, ROW.replace("float", '=HYPERLINK("x")'), "ag.txt:14: bad type '=HYPERLINK(\"x\")'"),
    (ROW, ROW.replace("none", "\x1b[31m"), "ag.txt:14: bad redop '\\\\x1b[31m'"),
])
def test_nccl_tests_text_numbers_and_names_from_the_file_are_checked(old, new, message):
    assert old in AG
    text = AG.replace(old, new, 1)
    if "..." in new:
        text = text.replace("# nThread 1 nGpus 1", "# nThread 100000000 nGpus 1")
    t0 = time.process_time()
    if message is None:
        [run] = ncclt.parse_text(text, "ag.txt")
        assert run.n_ranks == 4
    else:
        with pytest.raises(UsageError) as info:
            ncclt.parse_text(text, "ag.txt")
        assert str(info.value).startswith(message), str(info.value)
    assert time.process_time() - t0 < CPU_S


@pytest.mark.parametrize("path, value, message", [
    (("config", "devices", 0, "rank"), (1 << 63) - 1, '"config.devices[0].rank": rank 9223372036854775807, but'),
    (("config", "devices", 0, "rank"), 5, '"config.devices[0].rank": rank 5, but the file lists 1 rank lines'),
    (("results", 0, "size"), 10 ** 30, '"results[0].size" must be a non-negative integer up to 4398046511104'),
    (("results", 0, "count"), 1 << 60, '"results[0].count" must be a non-negative integer up to'),
    (("results", 0, "type"), "=1+1", '"results[0].type" must be one of nccl-tests\' types'),
    (("results", 0, "redop"), "summ", '"results[0].redop" must be one of nccl-tests\' redops'),
])
def test_nccl_tests_json_numbers_and_names_from_the_file_are_checked(path, value, message):
    doc = json.loads(json.dumps(AR_JSON))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(UsageError) as info:
        ncclt.parse_json(json.dumps(doc), "ar.json")
    assert message in str(info.value)


# --- link matrices: GPU indices the matrix's own 0..n-1, values finite, sizes within a real copy ---

NVB = (FIXTURES / "nvbandwidth" / "h100_4gpu.txt").read_text()
TB = (FIXTURES / "transferbench" / "a2a_mi300x_8gpu.txt").read_text()
HEAD = "           0         1         2         3\n"


@pytest.mark.parametrize("reader, text, message", [
    (nvbandwidth.parse, NVB.replace(HEAD, HEAD.replace("3\n", "9999999\n"), 1), "x.txt:23: matrix of"),
    (nvbandwidth.parse, NVB.replace(HEAD, HEAD.replace("1", "0"), 1), "column ids 0 0 2 3 are not 0..3"),
    (transferbench.parse, TB.replace("Copying 268435456 bytes", f"Copying {1 << 76} bytes", 1),
     f"x.txt: {1 << 76} bytes per transfer: must be in 0..4398046511104"),
])
def test_link_matrices_refuse_impossible_indices_and_sizes(reader, text, message):
    with pytest.raises(UsageError) as info:
        reader(text, "x.txt")
    assert message in str(info.value)


def test_a_bandwidth_beyond_any_float_is_refused_not_stored_as_infinity():
    assert " 0       N/A    388.95" in NVB
    with pytest.raises(UsageError, match="'1e999999' is not a bandwidth"):
        nvbandwidth.parse(NVB.replace(" 0       N/A    388.95", " 0       N/A    1e999999", 1), "x.txt")


# --- workload files, traces, COLL logs, captures: every field typed and in range, naming the entry ---

WL = FIXTURES / "workload"


def _workload_doc() -> dict:
    from ccltune.workload import importer as wl_importer
    from ccltune.workload import model
    wl = wl_importer.import_files([WL / "trace_rank0.json"])
    return json.loads(model.to_json(wl, {}))


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(steps=-3), "steps must be an integer in 1.."),
    (lambda d: d.update(order=[[0, 0, 10 ** 12]]), "order[0] repeat must be an integer in 1.."),
    (lambda d: d["entries"][0].update(collective="all_sum"), "entries[0]: unknown collective 'all_sum'"),
    (lambda d: d["entries"][0].update(datatype="quad"), "entries[0]: unknown datatype 'quad'"),
    (lambda d: d["entries"][0].update(count=-1), "entries[0]: count must be an integer in 0.."),
    (lambda d: d["entries"][0].update(size_bytes=10 ** 40), "entries[0]: size_bytes must be an integer in 0.."),
    (lambda d: d["entries"][0].update(nranks=0), "entries[0]"),
    (lambda d: d["entries"][0].update(tuner_calls="many"), "entries[0]: tuner_calls must be a list of objects"),
    (lambda d: d.update(overflow_calls="x"), "overflow_calls must be an integer"),
    (lambda d: d.update(sources=7), "sources must be a list of objects"),
    (lambda d: d["entries"][0].update(time_us_mean=float("nan")), "NaN is not a finite number"),
])
def test_workload_file_fields_are_checked_naming_the_entry(tmp_path, edit, message):
    from ccltune.workload import model
    doc = _workload_doc()
    edit(doc)
    with pytest.raises(UsageError) as info:
        model.from_json(json.dumps(doc), "w.json")
    assert message in str(info.value), str(info.value)


def test_a_workload_file_nested_past_the_parser_is_a_clear_error():
    from ccltune.workload import model
    with pytest.raises(UsageError, match="w.json: not a workload file"):
        model.from_json("[" * 100_000, "w.json")


TRACE = json.loads((WL / "trace_rank0.json").read_text())


def _comm_event(doc: dict) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("name") == "record_param_comms")


@pytest.mark.parametrize("edit, ok", [
    (lambda d: _comm_event(d).update(args=["x"]), True),  # args a list: the event carries nothing
    (lambda d: _comm_event(d).update(args="x"), True),
    (lambda d: _comm_event(d)["args"].update({"External id": [1]}), True),
    (lambda d: next(e for e in d["traceEvents"] if e.get("cat") == "cuda_runtime")["args"].update(correlation=[1]), True),
    (lambda d: _comm_event(d)["args"].update({"Collective name": ["allreduce"]}), True),
    (lambda d: _comm_event(d)["args"].update({"In msg nelems": 10 ** 30}), False),
    (lambda d: _comm_event(d)["args"].update({"Group size": 10 ** 9}), False),
    (lambda d: d["traceEvents"].append({"name": "ProfilerStep#" + "9" * 5000}), True),
])
def test_trace_fields_of_unexpected_types_are_skipped_or_refused_never_a_traceback(edit, ok):
    from ccltune.workload import torch_trace
    doc = json.loads(json.dumps(TRACE))
    edit(doc)
    if ok:
        torch_trace.parse(doc, "t.json")
    else:
        with pytest.raises(UsageError, match=r"t.json: traceEvents\[\d+\] \(record_param_comms\)"):
            torch_trace.parse(doc, "t.json")


def test_a_coll_line_beyond_any_real_call_is_skipped_with_a_warning():
    line = ("vm:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count {} datatype 7 op 0 root 0 "
            "comm 0x1b65c030 [nranks={}] stream 0x22d29970\n")
    for count, nranks in ((10 ** 30, 2), (8, 0), (8, 10 ** 9), ("9" * 5000, 2)):
        records, warnings = nccl_log.parse(line.format(count, nranks), "x.log")
        assert not records and "beyond any real call" in warnings[0]


@pytest.mark.parametrize("nranks, nbytes, message", [
    (0, 1024, "x.cap: nranks '0' is not an integer in 1..65536"),  # was written to a workload, then refused
    (4, 10 ** 30, f"x.cap:9: nbytes '{10 ** 30}' is not an integer in 0..4398046511104"),
    (4, "9" * 5000, "x.cap:9: nbytes '99999"),
])
def test_capture_numbers_beyond_any_real_call_are_refused(nranks, nbytes, message):
    text = (f"{capture.MAGIC}\npid=1\nnranks={nranks}\nnnodes=1\ncalls=3\noverflow_calls=0\noverflow_bytes=0\nhost=vm\n"
            f"allreduce,{nbytes},1,0,3\n# end\n")
    with pytest.raises(UsageError) as info:
        capture.parse(text, "x.cap")
    assert str(info.value).startswith(message), str(info.value)


# --- bombs: a gzip that inflates past the cap, nesting past the parser, devices and FIFOs ---

_CHILD = textwrap.dedent("""
    import gzip, io, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB of address space for this process
    from ccltune.errors import UsageError
    from ccltune.workload import importer
    importer.MAX_TRACE_BYTES = 8 << 20  # the smallest cap that proves the stream is cut: 8 MiB out
    t0 = time.process_time()
    try:
        importer.load_file(importer.Path(sys.argv[1]))
    except UsageError as exc:
        print("REFUSED", exc)
    print("CPU_S", time.process_time() - t0)
    # this process's own peak (VmHWM starts again at exec; ru_maxrss would keep a large parent's from fork)
    print("MAX_RSS_KB", next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
""")


def test_a_gzip_bomb_is_inflated_as_a_stream_and_cut_at_the_cap(tmp_path):
    bomb = tmp_path / "b.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:  # 64 MiB of '[' in ~64 KiB: 8 times the cap
        for _ in range(64):
            fh.write(b"[" * (1 << 20))
    assert bomb.stat().st_size < 1 << 20
    done = subprocess.run([sys.executable, "-c", _CHILD, str(bomb)], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(Path(ncclt.__file__).parents[2]), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = dict(line.split(" ", 1) for line in done.stdout.strip().split("\n"))
    assert out["REFUSED"] == f"{bomb}: inflates to more than {8 << 20} bytes (the limit for this input; docs/limits.md)"
    assert float(out["CPU_S"]) < 5 and int(out["MAX_RSS_KB"]) < 200_000  # the old reader: 64 MiB out, then a str


NESTED = "[" * 100_000


@pytest.mark.parametrize("reader, message", [
    (lambda t: ncclt.parse_json("{" + '"a":' + NESTED, "x.json"), "x.json: not nccl-tests -J output"),
    (lambda t: nvbandwidth.parse("{" + '"a":' + NESTED, "x.json"), "x.json: not valid JSON: nested deeper"),
    (lambda t: amdsmi.parse([(NESTED, "x.json")]), "x.json: not amd-smi JSON: nested deeper"),
])
def test_nesting_past_the_parser_is_a_clear_error_in_every_json_reader(reader, message):
    with pytest.raises(UsageError) as info:
        reader(NESTED)
    assert str(info.value).startswith(message), str(info.value)


def test_nesting_in_files_read_by_commands_is_a_clear_error(tmp_path, capsys):
    from ccltune.cli import main
    from ccltune.diagnose.checks import profiles
    from ccltune.diagnose.probes import benchrun
    deep = tmp_path / "deep.json"
    deep.write_text(NESTED)
    toml = tmp_path / "deep.toml"
    toml.write_text("a = " + NESTED)
    for argv, message in ((["workload", "import", str(deep), "--out", str(tmp_path / "w.json")], "nested deeper"),
                          (["workload", "show", str(deep)], "not a workload file"),
                          (["topo", "--from-amd-smi", str(deep)], "not amd-smi JSON: nested deeper")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    # what check --from-json and check --profile FILE read, without the rest of check
    with pytest.raises(UsageError, match="is not JSON: nested deeper"):
        benchrun.read_bench_json(deep)
    with pytest.raises(UsageError, match="not valid TOML: nested deeper"):
        profiles.load_profile(str(toml))


def test_devices_and_fifos_are_refused_by_the_amd_smi_reader(tmp_path):
    import os
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, message in (("/dev/zero", "is not a regular file"), (str(fifo), "is a FIFO")):
        t0 = time.monotonic()
        with pytest.raises(UsageError, match=message):
            amdsmi.read_saved([path])
        assert time.monotonic() - t0 < 5


# --- the database: named columns, number columns checked, non-finite figures skipped ---

def _bench_db(path: Path) -> None:
    from ccltune.store import Measurement, Store
    with Store(path) as st:
        rid = st.begin_run("bench", command="ccltune bench", env={"world_size": 2, "platform": "cpu"}, args={})
        st.add_measurements(rid, [Measurement("all_reduce", 8 << i, 2 << i, "float", "sum", None, False, 2,
                                              time_us=1.0 + i, algbw_gbps=1.0, busbw_gbps=1.0) for i in range(4)])
        st.finish_run(rid, "complete")
        lid = st.begin_run("links", command="ccltune links", env={"world_size": 2}, args={})
        st.add_links(lid, [{"src": 0, "dst": 1, "method": "ce", "direction": "uni", "size_bytes": 1 << 20,
                            "bandwidth_gbps": 100.0}])
        st.finish_run(lid, "complete")


@pytest.mark.parametrize("sql, argv, rc, message", [
    ("ALTER TABLE runs ADD COLUMN colour TEXT", ["runs"], 0, None),
    ("ALTER TABLE runs DROP COLUMN nccl_version", ["runs"], 2, "table runs has no column nccl_version"),
    ("UPDATE measurements SET busbw_gbps = 9e999 WHERE id = 2", ["export", "1", "--out", "{tmp}/x.csv"], 0, None),
    ("UPDATE measurements SET busbw_gbps = 9e999 WHERE id = 2", ["report", "--out", "{tmp}/r.html"], 0, None),
    ("UPDATE links SET bandwidth_gbps = 'fast'", ["links", "--run", "2"], 2, "links row 1 (run 2) has bandwidth_gbps"),
])
def test_a_database_edited_by_hand_is_read_by_name_or_refused_naming_the_row(tmp_path, capsys, sql, argv, rc,
                                                                             message):
    import sqlite3

    from ccltune.cli import main
    db = tmp_path / "x.db"
    _bench_db(db)
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()
    assert main([a.format(tmp=tmp_path) for a in argv] + ["--db", str(db)]) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err and (message is None or message in err), err


def test_escape_sequences_in_imported_names_never_reach_the_terminal(tmp_path, capsys):
    from ccltune.cli import main
    evil = "NVIDIA \x1b[31mH200\x1b]8;;http://x\x07\x9b"
    ag = tmp_path / "ag.txt"
    ag.write_text(AG.replace("NVIDIA H200", evil))
    nv = tmp_path / "nv.txt"
    nv.write_text(NVB.replace("NVIDIA H100 80GB HBM3", evil))
    db = str(tmp_path / "e.db")
    for argv in (["import", "nccl-tests", str(ag)], ["import", "nvbandwidth", str(nv)], ["runs"],
                 ["links", "--run", "2"]):
        assert main(argv + ["--db", db]) == 0, argv
        out = capsys.readouterr()
        text = out.out + out.err
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, (argv, text)
    main(["runs", "--db", db])
    assert "NVIDIA \\x1b[31mH200" in capsys.readouterr().out  # shown, escaped


def test_csv_export_guards_formula_cells_and_latest_skips_runs_without_rows(tmp_path, capsys):
    import sqlite3

    from ccltune.cli import main
    from ccltune.store import Store
    db = tmp_path / "x.db"
    _bench_db(db)
    con = sqlite3.connect(db)
    con.execute("UPDATE measurements SET note = '=HYPERLINK(\"http://x\",\"y\")' WHERE id = 1")
    con.commit()
    con.close()
    with Store(db) as st:  # a check run: findings only, no rows
        st.finish_run(st.begin_run("check", command="ccltune check", env={}, args={}), "complete")
    assert main(["export", "1", "--format", "csv", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "'=HYPERLINK" in out and ",=HYPERLINK" not in out
    assert main(["export", "latest", "--db", str(db)]) == 0
    assert '"id": 2' in capsys.readouterr().out  # the links run, not the newer check run


# --- rccl-tests output without 'Collective test starting', pasted output with '...' lines ---

RCCL = FIXTURES / "rccl-tests"


@pytest.mark.parametrize("fixture, expect", [
    ("rccl-tests-2022-10_all_reduce_np8.txt", "all_reduce"),
    ("rccl-tests-2024-09_reduce_scatter_np16_inplace.txt", "reduce_scatter"),
    ("rccl-tests-2024-03_all_gather_g8.txt", "it could be all_gather, alltoall"),
])
def test_rccl_tests_collective_told_from_the_table_or_the_candidates_listed(fixture, expect):
    text = (RCCL / fixture).read_text()
    assert "Collective test starting" not in text
    if expect.startswith("it could be"):
        with pytest.raises(UsageError, match=f"x.txt: cannot tell the collective .*{expect}; pass --collective"):
            ncclt.parse_text(text, "x.txt")  # a name that tells nothing
        return
    [run] = ncclt.parse_text(text, "x.txt")
    assert run.collective == expect and "told from the table" in run.notes[0]


def test_elision_lines_of_pasted_output_are_skipped_with_a_note():
    lines = (RCCL / "rccl-tests-2022-10_all_reduce_np8.txt").read_text().split("\n")
    rows = [i for i, line in enumerate(lines) if line[:1] == " " and line.split()[:1] != []]
    lines.insert(rows[1], "...")  # between two rows
    lines.insert(rows[0] - 3, "...")  # before the column header
    [run] = ncclt.parse_text("\n".join(lines), "x.txt")
    assert run.collective == "all_reduce" and len(run.rows) == 8
    assert sum("'...' skipped" in n for n in run.notes) == 2



def test_a_full_disk_during_a_run_is_one_error_with_the_rows_kept(tmp_path):
    from ccltune.errors import StoreError
    from ccltune.store import Measurement, Store
    with Store(tmp_path / "x.db") as st:
        rid = st.begin_run("bench", command="ccltune bench", env={"world_size": 2}, args={})
        st.add_measurements(rid, [Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, time_us=1.0)])
        pages = st.conn.execute("PRAGMA page_count").fetchone()[0]
        st.conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
        rows = [Measurement("all_reduce", 8 << i % 40, 2, "float", "sum", None, False, 2, time_us=1.0, note="x" * 200)
                for i in range(2000)]
        with pytest.raises(StoreError) as info:
            st.add_measurements(rid, rows)
        assert str(info.value) == f"cannot store rows in '{tmp_path / 'x.db'}': disk full; 1 rows of run {rid} kept"
        assert info.value.exit_code == 5


def test_amd_smi_gpu_indices_beyond_one_host_are_refused():
    doc = [{"gpu": 0, "bdf": "0000:0c:00.0", "links": []}, {"gpu": 10 ** 9, "bdf": "0000:22:00.0", "links": []}]
    with pytest.raises(UsageError, match="more than the 1024 GPUs of one host"):
        amdsmi.parse([(json.dumps(doc), "t.json")])


def test_a_database_locked_by_another_process_is_one_error(tmp_path):
    import sqlite3

    from ccltune.errors import StoreError
    from ccltune.store import Measurement, Store
    with Store(tmp_path / "x.db") as st:
        rid = st.begin_run("bench", command="ccltune bench", env={"world_size": 2}, args={})
        other = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
        st.conn.execute("PRAGMA busy_timeout = 50")  # ccltune waits 30 s; the test need not
        with pytest.raises(StoreError, match=r"x.db': locked by another process for more than 30 s; the rows of run"):
            st.add_measurements(rid, [Measurement("all_reduce", 8, 2, "float", "sum", None, False, 2, time_us=1.0)])
        other.execute("ROLLBACK")
        other.close()


REAL_CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "workload" / "h200x4-1126" / \
    "ccltune-capture.vm.1565.efc820a254537a17.0.txt"


def _capture_of(lines: int) -> str:
    """The real capture's header with ``lines`` call lines of one call each (distinct sizes), its counts adding up."""
    head = [ln for ln in REAL_CAPTURE.read_text().splitlines() if not ln[:1].isalpha() or "=" in ln]
    head = [f"calls={lines}" if ln.startswith("calls=") else ln for ln in head if ln != "# end"]
    return "\n".join(head + [f"allreduce,{1024 + i},1,0,1" for i in range(lines)] + ["# end", ""])


def test_a_capture_longer_than_the_plugin_writes_is_refused_before_it_is_read():
    """Issue 38, item 7: the plugin writes at most 4,096 call lines (CCLT_CAPTURE_SLOTS); a far longer file took
    minutes to be read. One more line is refused naming the bound; bytes past 1 MiB before any line is parsed."""
    assert sum(capture.parse(REAL_CAPTURE.read_text(), "real.txt").calls.values()) == 911
    assert sum(capture.parse(_capture_of(capture.MAX_CALL_LINES), "ok.txt").calls.values()) == 4096
    with pytest.raises(UsageError, match=r"long\.txt:\d+: more than 4096 call lines: the tuner plugin writes at most"):
        capture.parse(_capture_of(capture.MAX_CALL_LINES + 1), "long.txt")
    with pytest.raises(UsageError, match=r"huge\.txt: \d+ characters, more than a capture file holds"):
        capture.parse(_capture_of(60_000), "huge.txt")
