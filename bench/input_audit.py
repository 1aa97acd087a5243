"""A fresh audit of ccltune's file and database readers with bad inputs (issue 32's classes): each case is a
real fixture spoiled one way (a bomb, an adversarial line, a wrong type, an out-of-range number, deep nesting,
a FIFO or device, huge counts or ranks), read by the command a user runs, in a child process with a time
and a memory limit (20 CPU seconds: a busy shared machine is not a hang; 2 GiB of address space). Prints one row per case and the table of docs/limits.md ("A fresh audit").

    python bench/input_audit.py [--only SUBSTRING] [--jobs 2] [--timeout 20]

Outcomes: fine (exit 0, nothing impossible stored), clear (a ccltune error line and its exit code, no
traceback), traceback, hang (past --timeout), wrong (exit 0 but an impossible value stored or written:
ranks outside 1..65,536, sizes or counts negative or past 4 TiB, a non-finite or negative time or busbw).
Issue 41's classes (bench/input_audit_41.py: the same data twice, contradictory files, a gpu= section of another
GPU, a gate on bad data, an output over an input, a system root's files) judge each case by what a right answer
is (the calls counted once, the contradiction refused or named, the rule left out, the gate failing), and
"lost data" when an input file was replaced. ``--src DIR`` audits another tree (main's, for the counts before).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import input_audit_41 as issue41

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
SRC = ROOT / "src"  # the ccltune under audit (--src: another tree's, e.g. main's, for the counts before a fix)
MEM_BYTES = 2 << 30  # address space of the reading process (RLIMIT_AS): a bomb must be refused below it
LINE = 200_000
EXIT_CODES = {1, 2, 3, 4, 5, 6, 7, 130}

NCCLT = FIX / "nccl-tests" / "ar-eager-v2.19.6.txt"
NCCLT_J = FIX / "nccl-tests" / "v2.19.6" / "ar-v2.19.6.json"
RCCLT = FIX / "rccl-tests" / "rccl-tests-2024-09_all_reduce_mi300x_np8_16g.txt"
NCCL_LOG = FIX / "logs" / "nccl_4gpu_p2p.log"
RCCL_LOG = FIX / "logs" / "rccl_mi300x_8gpu.log"
COLL_LOG = FIX / "workload" / "coll-ddp-1gpu.vm.4029.log"
TRACE = FIX / "workload" / "trace_rank0.json"
PROFILE = sorted((FIX / "workload" / "profile").glob("*.txt"))[0]
INSPECTOR = FIX / "workload" / "inspector" / "gpu01-pid4101.log"
CAPTURE = sorted(Path("/work/shared/captures/h200x4-2026-11-26").glob("ccltune-capture.*.0.txt"))[0]
NVB_TXT = FIX / "nvbandwidth" / "h100_4gpu.txt"
NVB_JSON = FIX / "nvbandwidth" / "h100_4gpu.json"
TB = FIX / "transferbench" / "a2a_mi300x_8gpu.txt"
AMDSMI = FIX / "amd-smi" / "mi300x_topology.json"
RULES = Path("/work/shared/captures/h200x4-2026-11-26/fsdp2_rules.conf")
PROFILE_TOML = ROOT / "src" / "ccltune" / "diagnose" / "profiles" / "h100-8.toml"
DB = FIX / "bench" / "h200x2-flow.sqlite"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)


def _edit(path: Path, pattern: str, repl: str, count: int = 1) -> str:
    """``path``'s text with the first ``count`` matches of ``pattern`` replaced (the case fails loudly if none)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    out, n = re.subn(pattern, repl, text, count=count, flags=re.M)
    if not n:
        raise SystemExit(f"{path.name}: no match for {pattern!r}")
    return out


def _insert(path: Path, line: str, at: int | None = None) -> str:
    lines = _lines(path)
    lines.insert(len(lines) // 2 if at is None else at, line + "\n")
    return "".join(lines)


def _gzip_bomb(mib: int = 1100) -> bytes:
    """A gzip of ``mib`` MiB of spaces (about 1 MiB compressed), made in chunks."""
    import io

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        chunk = b" " * (1 << 20)
        for _ in range(mib):
            gz.write(chunk)
    return buf.getvalue()


def _nest(n: int = 100_000) -> str:
    return "[" * n + "]" * n


def _json(path: Path, change) -> str:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    return json.dumps(data)


def _trace(change) -> str:
    return _json(TRACE, change)


def _first_comm_event(data: dict) -> dict:
    return next(e for e in data["traceEvents"] if isinstance(e.get("args"), dict) and "In msg nelems" in e["args"])


def _set_trace(key: str, value) -> str:
    def change(d):
        _first_comm_event(d)["args"][key] = value
    return _trace(change)


WORKLOAD_TEXT = ""


def _wl_edit(change) -> str:
    data = json.loads(WORKLOAD_TEXT)
    change(data)
    return json.dumps(data)


def cases(tmp: Path) -> list[tuple[str, str, str, list[str], str | bytes | None]]:
    """(reader, class, case, argv with {f} for the input file, the input's content: text, bytes, or None when
    the argv names its own path). Every command writes to --db {db} / --out {out} in the case's folder."""
    big = "1: " * (LINE // 3) + "x"
    colon = "a" * LINE
    out: list = []

    def add(reader, cls, name, argv, content):
        out.append((reader, cls, name, argv, content))

    imp = ["import", "nccl-tests", "{f}", "--db", "{db}"]
    # nccl-tests text
    add("nccl-tests text", "bomb", "sparse 1 GiB file", imp, "SPARSE")
    add("nccl-tests text", "adversarial line", "200 KB srun-label line in the table", imp, _insert(NCCLT, big))
    add("nccl-tests text", "adversarial line", "200 KB line without blank", imp, _insert(NCCLT, colon, 3))
    add("nccl-tests text", "wrong type", "time cell 'abc'", imp, _edit(NCCLT, r"^(\s+\d+\s+\d+\s+float\s+sum\s+-1\s+)\S+", r"\1abc"))
    add("nccl-tests text", "wrong type", "size cell 1.5e3", imp, _edit(NCCLT, r"^(\s+)(\d+)(\s+\d+\s+float)", r"\g<1>1.5e3\3"))
    add("nccl-tests text", "out of range", "size 2^70", imp, _edit(NCCLT, r"^(\s+)(\d+)(\s+\d+\s+float)", r"\g<1>1180591620717411303424\3"))
    add("nccl-tests text", "out of range", "busbw 1e400", imp, _edit(NCCLT, r"(\s)(\d+\.\d+)(\s+\d+\s*$)", r"\g<1>1e400\3"))
    add("nccl-tests text", "out of range", "negative time", imp, _edit(NCCLT, r"^(\s+\d+\s+\d+\s+float\s+sum\s+-1\s+)(\S+)", r"\1-5.2"))
    add("nccl-tests text", "huge counts/ranks", "nThread 100000000", imp, _edit(NCCLT, r"nThread \d+", "nThread 100000000"))
    add("nccl-tests text", "huge counts/ranks", "Rank 4294967296", imp, _edit(NCCLT, r"#\s+Rank\s+0 ", "#  Rank 4294967296 "))
    add("nccl-tests text", "huge counts/ranks", "count 10^30", imp, _edit(NCCLT, r"^(\s+\d+\s+)(\d+)(\s+float)", r"\g<1>1000000000000000000000000000000\3"))
    add("nccl-tests text", "FIFO/device", "/dev/zero", ["import", "nccl-tests", "/dev/zero", "--db", "{db}"], None)
    add("nccl-tests text", "FIFO/device", "a FIFO", imp, "FIFO")
    add("nccl-tests text", "FIFO/device", "a folder", ["import", "nccl-tests", "{dir}", "--db", "{db}"], None)
    # nccl-tests -J
    impj = ["import", "nccl-tests", "{f.json}", "--db", "{db}"]
    add("nccl-tests -J JSON", "deep nesting", "[ x 100000", impj, _nest())
    add("nccl-tests -J JSON", "wrong type", "results a string", impj, _json(NCCLT_J, lambda d: d.__setitem__("results", "x")))
    add("nccl-tests -J JSON", "wrong type", "a result a list", impj, _json(NCCLT_J, lambda d: d["results"].__setitem__(0, [1, 2])))
    add("nccl-tests -J JSON", "wrong type", "size a dict", impj, _json(NCCLT_J, lambda d: d["results"][0].__setitem__("size", {"a": 1})))
    add("nccl-tests -J JSON", "out of range", "size 1e300", impj, _json(NCCLT_J, lambda d: d["results"][0].__setitem__("size", 1e300)))
    add("nccl-tests -J JSON", "out of range", "size -8", impj, _json(NCCLT_J, lambda d: d["results"][0].__setitem__("size", -8)))
    add("nccl-tests -J JSON", "out of range", "time -1", impj, _json(NCCLT_J, lambda d: _set_all(d["results"][0], "time", -1.0)))
    add("nccl-tests -J JSON", "huge counts/ranks", "nranks 10^12", impj, _json(NCCLT_J, lambda d: _set_all(d, "nranks", 10**12)))
    add("nccl-tests -J JSON", "wrong type", "top level a list", impj, "[1, 2, 3]")
    add("nccl-tests -J JSON", "bomb", "a 5,000-digit integer", impj, _json(NCCLT_J, lambda d: None).replace('"version":3', '"version":' + "9" * 5000).replace('"version": 3', '"version": ' + "9" * 5000))
    # rccl-tests
    add("rccl-tests text", "adversarial line", "200 KB line of '1: '", imp, _insert(RCCLT, big))
    add("rccl-tests text", "wrong type", "redop cell =HYPERLINK", imp, _edit(RCCLT, r"(\s)sum(\s)", r"\1=HYPERLINK(x)\2"))
    add("rccl-tests text", "out of range", "algbw nan", imp, _edit(RCCLT, r"(\s)(\d+\.\d+)(\s+\d+\.\d+\s+\S+\s+\d+\.\d+)", r"\1nan\3"))
    add("rccl-tests text", "huge counts/ranks", "Rank 99999999", imp, _edit(RCCLT, r"#\s+Rank\s+1 ", "#  Rank 99999999 "))
    # NCCL / RCCL logs: doctor and plugin verify
    doc = ["doctor", "--nccl-log", "{f}", "--db", "{db}"]
    ver = ["plugin", "verify", str(RULES), "--from-log", "{f}"]
    add("NCCL log (doctor)", "adversarial line", "200 KB '1: ' line", doc, _insert(NCCL_LOG, big))
    add("NCCL log (doctor)", "adversarial line", "NCCL prefix + 200 KB", doc, _insert(NCCL_LOG, "vm:1:2 [0] NCCL INFO " + colon))
    add("NCCL log (doctor)", "wrong type", "busId not hex", doc, _edit(NCCL_LOG, r"busId \w+", "busId zz:yy"))
    add("NCCL log (doctor)", "huge counts/ranks", "nranks 10^12", doc, _edit(NCCL_LOG, r"nranks \d+", "nranks 1000000000000"))
    add("NCCL log (doctor)", "huge counts/ranks", "rank 2^63", doc, _edit(NCCL_LOG, r"cudaDev \d+", "cudaDev 9223372036854775808"))
    add("NCCL log (doctor)", "FIFO/device", "a FIFO", doc, "FIFO")
    add("NCCL log (doctor)", "bomb", "sparse 1 GiB", doc, "SPARSE")
    add("RCCL log (doctor)", "adversarial line", "200 KB line", doc, _insert(RCCL_LOG, "[" * LINE))
    add("RCCL log (doctor)", "huge counts/ranks", "nranks 10^12", doc, _edit(RCCL_LOG, r"nranks \d+", "nranks 1000000000000"))
    add("NCCL log (plugin verify)", "adversarial line", "200 KB TUNING-like line", ver, _insert(NCCL_LOG, "vm:1:2 [0] NCCL INFO TUNING " + "1: " * 60000))
    add("NCCL log (plugin verify)", "FIFO/device", "/dev/zero", ["plugin", "verify", str(RULES), "--from-log", "/dev/zero"], None)
    # workload import: COLL logs, traces, captures, profiler files, Inspector
    wimp = ["workload", "import", "{f}", "--out", "{out}"]
    add("COLL log (workload import)", "bomb", "gzip bomb 1.1 GiB", ["workload", "import", "{f.gz}", "--out", "{out}"], _gzip_bomb())
    add("COLL log (workload import)", "adversarial line", "200 KB '1: ' line", wimp, _insert(COLL_LOG, big))
    add("COLL log (workload import)", "wrong type", "count 'x'", wimp, _edit(COLL_LOG, r"count \d+", "count x"))
    add("COLL log (workload import)", "out of range", "count 10^30", wimp, _edit(COLL_LOG, r"count \d+", "count 1000000000000000000000000000000"))
    add("COLL log (workload import)", "out of range", "datatype 99", wimp, _edit(COLL_LOG, r"datatype \d+", "datatype 99"))
    add("COLL log (workload import)", "huge counts/ranks", "nranks=10^12", wimp, _edit(COLL_LOG, r"nranks=\d+", "nranks=1000000000000"))
    add("COLL log (workload import)", "huge counts/ranks", "nranks=0", wimp, _edit(COLL_LOG, r"nranks=\d+", "nranks=0"))
    add("torch trace (workload import)", "deep nesting", "[ x 100000", ["workload", "import", "{f.json}", "--out", "{out}"], _nest())
    tr = ["workload", "import", "{f.json}", "--out", "{out}"]
    add("torch trace (workload import)", "wrong type", "traceEvents a dict", tr, _trace(lambda d: d.__setitem__("traceEvents", {"a": 1})))
    add("torch trace (workload import)", "wrong type", "an event a list", tr, _trace(lambda d: d["traceEvents"].insert(0, [1, 2])))
    add("torch trace (workload import)", "wrong type", "nelems a string", tr, _set_trace("In msg nelems", "many"))
    add("torch trace (workload import)", "wrong type", "nelems a float 1.5", tr, _set_trace("In msg nelems", 1.5))
    add("torch trace (workload import)", "wrong type", "Group size a list", tr, _set_trace("Group size", [2]))
    add("torch trace (workload import)", "wrong type", "dtype a number", tr, _set_trace("dtype", 7))
    add("torch trace (workload import)", "wrong type", "ts a string", tr, _trace(lambda d: _first_comm_event(d).__setitem__("ts", "noon")))
    add("torch trace (workload import)", "wrong type", "dur a dict", tr, _trace(lambda d: _first_comm_event(d).__setitem__("dur", {})))
    add("torch trace (workload import)", "out of range", "nelems -5", tr, _set_trace("In msg nelems", -5))
    add("torch trace (workload import)", "out of range", "nelems 10^30", tr, _set_trace("In msg nelems", 10**30))
    add("torch trace (workload import)", "out of range", "dur -1e9", tr, _trace(lambda d: _first_comm_event(d).__setitem__("dur", -1e9)))
    add("torch trace (workload import)", "huge counts/ranks", "Group size 10^12", tr, _set_trace("Group size", 10**12))
    add("torch trace (workload import)", "huge counts/ranks", "world_size 10^12", tr, _trace(lambda d: d["distributedInfo"].__setitem__("world_size", 10**12)))
    add("torch trace (workload import)", "bomb", "gzip bomb", ["workload", "import", "{f.json.gz}", "--out", "{out}"], _gzip_bomb())
    cap = ["workload", "import", "{f}", "--out", "{out}"]
    add("capture (workload import)", "adversarial line", "200 KB line", cap, _insert(CAPTURE, colon))
    add("capture (workload import)", "out of range", "nbytes 1e40", cap, _capture_field(1, "1" + "0" * 40))
    add("capture (workload import)", "wrong type", "nbytes 'x'", cap, _capture_field(1, "x"))
    add("capture (workload import)", "out of range", "calls -5", cap, _capture_field(4, "-5"))
    add("capture (workload import)", "huge counts/ranks", "nranks=10^12", cap, _edit(CAPTURE, r"^nranks=\d+", "nranks=1000000000000"))
    add("capture (workload import)", "huge counts/ranks", "nranks=-1", cap, _edit(CAPTURE, r"^nranks=\d+", "nranks=-1"))
    add("capture (workload import)", "huge counts/ranks", "slots=10^15", cap, _edit(CAPTURE, r"^slots=\d+", "slots=1000000000000000"))
    pro = ["workload", "import", "{f}", "--out", "{out}"]
    add("profiler file (workload import)", "adversarial line", "200 KB line", pro, _insert(PROFILE, colon))
    add("profiler file (workload import)", "wrong type", "calls 'x'", pro, _profile_col(9, "x"))
    add("profiler file (workload import)", "out of range", "count 10^30", pro, _profile_col(2, "1" + "0" * 30))
    add("profiler file (workload import)", "out of range", "p50_us -3", pro, _profile_col(13, "-3.0"))
    add("profiler file (workload import)", "out of range", "sum_us inf", pro, _profile_col(11, "inf"))
    add("profiler file (workload import)", "huge counts/ranks", "nranks 10^12", pro, _edit(PROFILE, r"nranks \d+", "nranks 1000000000000"))
    add("profiler file (workload import)", "huge counts/ranks", "calls 10^20", pro, _profile_col(9, "1" + "0" * 20))
    ins = ["workload", "import", "{f}", "--out", "{out}"]
    add("NCCL Inspector (workload import)", "deep nesting", "a record nested 100000", ins, _insert(INSPECTOR, _nest(), 0))
    add("NCCL Inspector (workload import)", "wrong type", "a record a list", ins, _insert(INSPECTOR, "[1,2,3]", 0))
    add("NCCL Inspector (workload import)", "wrong type", "coll_msg_size_bytes a string", ins, _inspector(lambda r: _set_deep(r, "coll_msg_size_bytes", "big")))
    add("NCCL Inspector (workload import)", "out of range", "coll_msg_size_bytes -1", ins, _inspector(lambda r: _set_deep(r, "coll_msg_size_bytes", -1)))
    add("NCCL Inspector (workload import)", "huge counts/ranks", "nranks 10^12", ins, _inspector(lambda r: _set_deep(r, "n_ranks", 10**12)))
    add("NCCL Inspector (workload import)", "adversarial line", "200 KB line", ins, _insert(INSPECTOR, colon, 0))
    # workload files
    wsh = ["workload", "show", "{f.json}"]
    add("workload file (workload show)", "deep nesting", "[ x 100000", wsh, _nest())
    add("workload file (workload show)", "wrong type", "entries a string", wsh, _wl_edit(lambda d: d.__setitem__("entries", "x")))
    add("workload file (workload show)", "wrong type", "an entry's calls a string", wsh, _wl_edit(lambda d: d["entries"][0].__setitem__("calls", "7")))
    add("workload file (workload show)", "wrong type", "an entry a list", wsh, _wl_edit(lambda d: d["entries"].__setitem__(0, [1])))
    add("workload file (workload show)", "out of range", "calls -2", wsh, _wl_edit(lambda d: d["entries"][0].__setitem__("calls", -2)))
    add("workload file (workload show)", "out of range", "size_bytes 10^20", wsh, _wl_edit(lambda d: d["entries"][0].__setitem__("size_bytes", 10**20)))
    add("workload file (workload show)", "huge counts/ranks", "nranks 10^9", wsh, _wl_edit(lambda d: d["entries"][0].__setitem__("nranks", 10**9)))
    add("workload file (workload show)", "huge counts/ranks", "steps 10^30", wsh, _wl_edit(lambda d: d.__setitem__("steps", 10**30)))
    add("workload file (workload show)", "FIFO/device", "/dev/zero", ["workload", "show", "/dev/zero"], None)
    # nvbandwidth, TransferBench
    nvb = ["import", "nvbandwidth", "{f}", "--db", "{db}"]
    add("nvbandwidth text", "adversarial line", "200 KB line", nvb, _insert(NVB_TXT, big))
    add("nvbandwidth text", "out of range", "a cell 1e999999", nvb, _edit(NVB_TXT, r"(\s)(\d+\.\d+)(\s)", r"\g<1>1e999999\3"))
    add("nvbandwidth text", "out of range", "a cell -3.5", nvb, _edit(NVB_TXT, r"(\s)(\d+\.\d+)(\s)", r"\g<1>-3.5\3"))
    add("nvbandwidth text", "huge counts/ranks", "column id 9999999", nvb, _edit(NVB_TXT, r"^(\s+)0(\s+)1(\s)", r"\g<1>9999999\g<2>1\3"))
    nvj = ["import", "nvbandwidth", "{f.json}", "--db", "{db}"]
    add("nvbandwidth JSON", "deep nesting", "[ x 100000", nvj, _nest())
    add("nvbandwidth JSON", "wrong type", "testcases a number", nvj, _json(NVB_JSON, lambda d: _set_first_list(d, 7)))
    add("nvbandwidth JSON", "bomb", "sparse 1 GiB", nvj, "SPARSE")
    tbi = ["import", "transferbench", "{f}", "--db", "{db}"]
    add("TransferBench", "adversarial line", "200 KB line", tbi, _insert(TB, big))
    add("TransferBench", "out of range", "bytes 2^76", tbi, _edit(TB, r"\b(\d{6,})\b", "75557863725914323419136"))
    add("TransferBench", "wrong type", "a GB/s cell 'fast'", tbi, _edit(TB, r"(\s)(\d+\.\d+)(\s)", r"\1fast\3"))
    add("TransferBench", "FIFO/device", "a FIFO", tbi, "FIFO")
    # amd-smi
    am = ["topo", "--from-amd-smi", "{f.json}", "--db", "{db}"]
    add("amd-smi JSON (topo)", "deep nesting", "[ x 100000", am, _nest())
    add("amd-smi JSON (topo)", "wrong type", "a GPU a string", am, _json(AMDSMI, lambda d: _set_first_list(d, "gpu")))
    add("amd-smi JSON (topo)", "wrong type", "top level a number", am, "42")
    add("amd-smi JSON (topo)", "huge counts/ranks", "gpu index 10^12", am, _json(AMDSMI, lambda d: _set_all(d, "gpu", 10**12)))
    add("amd-smi JSON (topo)", "FIFO/device", "/dev/zero", ["topo", "--from-amd-smi", "/dev/zero", "--db", "{db}"], None)
    add("amd-smi JSON (topo)", "FIFO/device", "a FIFO", ["topo", "--from-amd-smi", "{f.json}", "--db", "{db}"], "FIFO")
    # rule files
    rex = ["rules", "explain", "{f}", "--nranks", "8"]
    add("rule file (rules explain)", "adversarial line", "200 KB line", rex, _insert(RULES, colon))
    add("rule file (rules explain)", "out of range", "size 2^70", rex, _edit(RULES, r"^(allgather,\d+,)(\d+)", r"\g<1>1180591620717411303424"))
    add("rule file (rules explain)", "huge counts/ranks", "nranks 10^12 range", rex, _edit(RULES, r"^(allgather,\d+,\d+,\w+,\w+,\d+,\d+,)(\d+)", r"\g<1>1000000000000"))
    add("rule file (rules explain)", "bomb", "sparse 1 GiB", rex, "SPARSE")
    add("rule file (plugin check)", "FIFO/device", "a FIFO", ["plugin", "check", "{f}"], "FIFO")
    add("rule file (plugin check)", "adversarial line", "NUL bytes", ["plugin", "check", "{f}"], RULES.read_text() + "\x00" * 5000 + "\n")
    # TOML profiles, bench JSON, verdict JSON
    pr = ["check", "--profile", "{f.toml}", "--from-json", str(FIX / "bench" / "h200x2-flow-validate.json"), "--db", "{db}"]
    add("TOML profile (check)", "deep nesting", "a = [[[... x 100000", pr, "a = " + _nest())
    add("TOML profile (check)", "wrong type", "gates a string", pr, PROFILE_TOML.read_text() + '\ngates = "x"\n')
    add("TOML profile (check)", "out of range", "a gate of 1e400", pr, re.sub(r"= (\d+\.?\d*)", "= 1e400", PROFILE_TOML.read_text(), count=1))
    add("TOML profile (check)", "FIFO/device", "/dev/zero", ["check", "--profile", "/dev/zero", "--from-json", str(FIX / "bench" / "h200x2-flow-validate.json"), "--db", "{db}"], None)
    cj = ["check", "--profile", "h100-8", "--force-profile", "--from-json", "{f.json}", "--db", "{db}"]
    add("bench JSON (check --from-json)", "deep nesting", "[ x 100000", cj, _nest())
    add("bench JSON (check --from-json)", "wrong type", "records a string", cj, json.dumps({"env": {}, "records": "x"}))
    add("bench JSON (check --from-json)", "wrong type", "a record's busbw a string", cj, json.dumps({"env": {}, "records": [{"collective": "all_reduce", "size_bytes": 8, "busbw_gbps": "fast", "status": "ok"}]}))
    add("bench JSON (check --from-json)", "out of range", "size_bytes -1", cj, json.dumps({"env": {}, "records": [{"collective": "all_reduce", "size_bytes": -1, "busbw_gbps": 1.0, "status": "ok"}]}))
    tx = ["tune", "--db", str(DB), "--out", "{out}", "--exclude-failed", "{f.json}"]
    add("verdict JSON (tune --exclude-failed)", "deep nesting", "{ x 100000", tx, '{"a":' * 100000 + "1" + "}" * 100000)
    add("verdict JSON (tune --exclude-failed)", "wrong type", "results a number", tx, json.dumps({"results": 5}))
    # databases
    add("database (runs)", "wrong type", "env_json deep nesting", ["runs", "--db", "{f.db}"], ("DB", "UPDATE runs SET env_json = '" + _nest(5000) + "'"))
    add("database (report)", "wrong type", "busbw stored as text", ["report", "--db", "{f.db}", "--out", "{out}"], ("DB", "UPDATE measurements SET busbw_gbps = 'fast' WHERE rowid = 1"))
    add("database (report)", "out of range", "time 1e308*10 (inf)", ["report", "--db", "{f.db}", "--out", "{out}"], ("DB", "UPDATE measurements SET time_us = 9e999, busbw_gbps = -9e999 WHERE rowid <= 3"))
    add("database (export)", "out of range", "size_bytes -1", ["export", "latest", "--db", "{f.db}", "--out", "{out.csv}"], ("DB", "UPDATE measurements SET size_bytes = -1 WHERE rowid <= 3"))
    add("database (runs)", "huge counts/ranks", "world_size 10^18", ["runs", "--db", "{f.db}"], ("DB", "UPDATE runs SET world_size = 1000000000000000000"))
    add("database (report)", "wrong type", "summary_json a list", ["report", "--db", "{f.db}", "--out", "{out}"], ("DB", "UPDATE runs SET summary_json = '[1,2]'"))
    add("database (runs)", "bomb", "not a database (zero bytes 1 GiB)", ["runs", "--db", "{f.db}"], "SPARSE")
    add("database (runs)", "FIFO/device", "/dev/zero", ["runs", "--db", "/dev/zero"], None)
    return out


# --- issue 41, items 7-11 (Medium): what import writes, runs that never end, an edited database, ab's inputs,
# terminal text. A separate block (items 1-6 are another's): cases in cases()'s form, and the check of each
# class that tells a silently wrong exit 0 (_wrong41, called by run_case)
AUDIT41_CLASSES = ("import writes, show refuses", "runs never end", "edited database", "ab inputs", "terminal text")
_BIDI = ("\u202e", "\u2066", "\u2069", "\u200f")
_KILLED41 = """
import os, signal, sys
from ccltune.store import AbSample, Store
st = Store(sys.argv[1])
src = st.run(1)
env = {k: v for k, v in src.env.items() if k != "processes"}
rid = st.begin_run("import", command="ccltune import (killed)", env=env, args=src.args)
rows = st.measurements(1)
for m in rows:
    m.algo, m.proto, m.config = "ring", "ll", "ring/ll"
st.add_measurements(rid, rows[:8])
os.kill(os.getpid(), signal.SIGKILL)
"""
_ENRICH41 = """
import sys
from ccltune.store import AbSample, Store
with Store(sys.argv[1]) as st:
    d = st.begin_run("doctor", command="ccltune doctor", env={"host": "h"})
    st.add_findings(d, [{"name": "gpu", "status": "PASS", "evidence": "ok", "value": 1.5, "data": {"a": 1}}])
    st.finish_run(d, "complete", {})
    a = st.begin_run("ab", command="ccltune ab", env={"host": "h"})
    st.add_ab_arms(a, {"default": {}, "r": {"rules": "x.conf"}})
    for rnd in range(6):
        for arm in ("default", "r"):
            st.add_ab_sample(a, AbSample(arm, rnd, 0, 10.0 + rnd, "ms", "ok", 0, 1.0, 3, ""))
    st.finish_run(a, "complete", {"seed": 1})
"""


def _py41(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def _db41(tmp: Path, sql: str, base: str = "enriched") -> bytes:
    """The real sweep database with a doctor and an ab run added by ccltune's writers (or, ``base`` 'killed',
    two imports and one killed mid-run), then ``sql`` run on it by hand."""
    made = tmp / f"base41-{base}.db"
    if not made.exists():
        if base == "killed":
            for extra in ([], ["--algo", "tree", "--proto", "simple"]):
                _py41("-m", "ccltune", "import", "nccl-tests", str(NCCLT), "--db", str(made), *extra)
            _py41("-c", _KILLED41, str(made))
        else:
            made.write_bytes(DB.read_bytes())
            _py41("-c", _ENRICH41, str(made))
    path = tmp / f"db41-{abs(hash(sql)):x}.db"
    path.write_bytes(made.read_bytes())
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.commit()
    con.close()
    return path.read_bytes()


def issue41_medium_cases(tmp: Path) -> list[tuple[str, str, str, list[str], str | bytes | None]]:
    """Issue 41's items 7-11 as cases (docs/limits.md, "A third audit")."""
    out: list = []

    def add(reader, cls, name, argv, content):
        out.append((reader, cls, name, argv, content))

    c7, c8, c9, c10, c11 = AUDIT41_CLASSES
    cap = ["workload", "import", "{f}", "--out", "{out}"]
    capture = CAPTURE.read_text()
    add("capture (workload import)", c7, "calls 2^50", cap, re.sub(r"^calls=\d+", "calls=1125899906843247", re.sub(
        r",288$", ",1125899906842624", capture, count=1, flags=re.M), count=1, flags=re.M))
    add("capture (workload import)", c7, "nnodes 0", cap, re.sub(r"^nnodes=\d+", "nnodes=0", capture, flags=re.M))
    add("capture (workload import)", c7, "nnodes 9 of 4 ranks", cap, re.sub(r"^nnodes=\d+", "nnodes=9", capture, flags=re.M))
    add("capture (workload import)", c7, "num_pipe_ops 2^62", cap, re.sub(
        r"^(reducescatter,\d+),1,", r"\g<1>,4611686018427387904,", capture, count=1, flags=re.M))
    ins, inspector = ["workload", "import", "{f}", "--out", "{out}"], INSPECTOR.read_text()
    add("NCCL Inspector (workload import)", c7, "size 10^15 B", ins,
        re.sub(r'"coll_msg_size_bytes":\d+', '"coll_msg_size_bytes":1000000000000000', inspector))
    add("NCCL Inspector (workload import)", c7, "size of 400 digits", ins,
        re.sub(r'"coll_msg_size_bytes":\d+', '"coll_msg_size_bytes":' + "9" * 400, inspector))
    add("NCCL Inspector (workload import)", c7, "time 10^16 us", ins,
        re.sub(r'"coll_exec_time_us":\d+', '"coll_exec_time_us":10000000000000000', inspector, count=1))
    pro = ["workload", "import", "{f}", "--out", "{out}"]
    add("profiler file (workload import)", c7, "calls 2^64-1", pro, _profile_col(9, str((1 << 64) - 1)))
    add("profiler file (workload import)", c7, "count 2^64-1", pro, _profile_col(2, str((1 << 64) - 1)))
    killed = _db41(tmp, "", "killed")
    add("database (tune)", c8, "an import killed by kill -9", ["tune", "--db", "{f.db}", "--out", "{out}"], killed)
    add("database (runs)", c8, "an import killed by kill -9", ["runs", "--db", "{f.db}"], killed)
    nest = "[" * 5000 + "]" * 5000
    pid = json.dumps({"processes": {"host": os.uname().nodename, "pids": {"9" * 5000: 1}}})
    for name, sql, argv in [
        ("a dropped table", "DROP TABLE measurements", ["runs"]),
        ("a dropped findings table", "DROP TABLE findings", ["report", "--out", "{out}"]),
        ("findings JSON invalid", "UPDATE findings SET data_json = '{bad'", ["export", "4", "--out", "{out}"]),
        ("findings JSON nested 5000", f"UPDATE findings SET data_json = '{nest}'", ["export", "4", "--out", "{out}"]),
        ("text in ab_samples", "UPDATE ab_samples SET wall_s = 'slow' WHERE id = 1", ["report", "--out", "{out}"]),
        ("infinity in a finding", "UPDATE findings SET value = 9e999", ["export", "4", "--out", "{out}"]),
        ("a pid of 5,000 digits", f"UPDATE runs SET status = 'running', env_json = '{pid}' WHERE id = 5", ["runs"]),
        ("schema version '³'", "UPDATE meta SET value = '³' WHERE key = 'schema_version'", ["tune", "--out", "{out}"]),
        ("a trigger deleting rows", "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM measurements; END;",
         ["import", "nccl-tests", str(NCCLT)]),
    ]:
        add(f"database ({argv[0]})", c9, name, [*argv, "--db", "{f.db}"], _db41(tmp, sql))
    job = [sys.executable, "-c", "print('a' * 60 + 'b')"]
    add("ab", c10, "metric (a+)+$ (backtracking)", ["ab", "--db", "{db}", "--env", "A=1", "--metric", "(a+)+$",
                                                     "--rounds", "2", "--", *job], None)
    add("ab", c10, "--env value with a newline", ["ab", "--db", "{db}", "--env", "X=1\n  X=1  5  0  1.0  faster",
                                                   "--rounds", "1", "--", "true"], None)
    add("ab", c10, "--run-timeout 1e300", ["ab", "--db", "{db}", "--env", "A=1", "--run-timeout", "1e300",
                                           "--rounds", "1", "--", "true"], None)
    inrun = ["ab", "--in-run", "--db", "{db}", "--rules", str(RULES), "--metric", r"step +[0-9]+ +([0-9.]+) ms",
             "--workload", "{f.json}", "--", sys.executable, "-c", "print('step 1 5.0 ms')"]
    wdoc = json.loads(WORKLOAD_TEXT) if WORKLOAD_TEXT else {}
    add("ab", c10, "--in-run --workload of 2^39 calls a step", inrun,
        json.dumps({**wdoc, "steps": 1, "order": [], "entries": [{**e, "calls": 1 << 39} for e in wdoc.get("entries", [])]}))
    add("ab", c10, "--in-run --workload without steps", inrun, json.dumps({**wdoc, "steps": None}))
    add("ab", c10, "--in-run --workload naming a capture file", inrun, CAPTURE.read_text())
    add("bench", c10, "-T 10^12", ["bench", "all_reduce", "-T", "1000000000000", "-b", "8", "-e", "8", "-n", "1",
                                   "--db", "{db}"], None)
    add("bench", c10, "--timeout 1e15", ["bench", "all_reduce", "--timeout", "1e15", "-b", "8", "-e", "8", "-n", "1",
                                         "--db", "{db}"], None)
    rewrite = ("import os; p = os.environ.get('CCLTUNE_RULES'); p and open(p, 'a').write('allgather,0,1024,ring,ll,"
               "-1,-1,-1\\n'); print('step 1 5.0 ms')")
    add("ab", c10, "rules file rewritten by the job", ["ab", "--db", "{db}", "--rules", "{f}", "--metric",
                                                       r"step +[0-9]+ +([0-9.]+) ms", "--rounds", "2", "--",
                                                       sys.executable, "-c", rewrite],
        "allreduce,0,1024,ring,simple,-1,-1,-1\n")
    add("nccl-tests text (import, runs)", c11, "GPU name with U+202E U+2066", ["import", "nccl-tests", "{f}", "--db", "{db}"],
        NCCLT.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100\u202e\u2066 80GB HBM3"))
    add("database (runs)", c11, "a CR in a platform name", ["runs", "--db", "{f.db}"],
        _db41(tmp, "UPDATE runs SET platform = 'NVIDIA H200 x2\r  99  sweep  complete'"))
    add("rule file (plugin check)", c11, "U+2066 in a rule line", ["plugin", "check", "{f}"],
        "allreduce,0,1024,ring\u2066,simple,-1,-1,-1\n")
    doc = json.loads(WORKLOAD_TEXT) if WORKLOAD_TEXT else {}
    add("workload file (workload show)", c11, "CR and U+202E in a warning", ["workload", "show", "{f.json}"],
        json.dumps({**doc, "warnings": ["rank 3\rrank 0 fine \u202eevil"]}))
    return out


def _wrong41(cls: str, name: str, folder: Path, proc: subprocess.CompletedProcess) -> str:
    """What an exit 0 of an issue-41 case did wrong ('' when nothing)."""
    c7, c8, c9, c10, c11 = AUDIT41_CLASSES
    printed = proc.stdout + proc.stderr
    # text mode reads a raw CR as a line end: a forged row starting a line is the CR's work
    if re.search(r"^\s+99\s+sweep", proc.stdout, re.M) or any(c in printed for c in _BIDI):
        return "a carriage return or bidirectional control printed raw"
    wl = folder / "out.file"
    if wl.exists() and "Infinity" in wl.read_text(errors="replace"):
        return "wrote Infinity (not JSON)"
    if cls == c7 and wl.exists():
        show = _py41("-m", "ccltune", "workload", "show", str(wl))
        return f"wrote a workload that show refuses: {show.stderr.strip()[-100:]}" if show.returncode else ""
    if cls in (c8, c9) and (folder / "input.db").exists():
        con = sqlite3.connect(folder / "input.db")
        try:
            if cls == c8:
                row = con.execute("SELECT summary_json FROM runs WHERE kind = 'tune' ORDER BY id DESC").fetchone()
                if row and 3 in json.loads(row[0]).get("source_runs", []):
                    return "tuned from the killed run's partial rows"
                if re.search(r"^\s+3\s+import\s+running", proc.stdout, re.M):
                    return "the killed run shown as running"
            elif "trigger" in name and con.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] < 1428:
                return "the file's trigger deleted other runs' rows"
        except sqlite3.Error:
            return ""
        finally:
            con.close()
    if cls == c10:
        return "exit 0: ran unguarded, or the change went unnoticed"
    return ""


def _set_all(obj, key: str, value) -> None:
    """Set ``key`` wherever it appears in nested dicts/lists."""
    if isinstance(obj, dict):
        for k in list(obj):
            if k == key:
                obj[k] = value
            else:
                _set_all(obj[k], key, value)
    elif isinstance(obj, list):
        for x in obj:
            _set_all(x, key, value)


def _set_first_list(obj, value) -> None:
    """Replace the first list found (depth first) by ``value``."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, list):
                obj[k] = value
                return
            _set_first_list(v, value)


def _set_deep(rec, key, value):
    _set_all(rec, key, value)


def _capture_field(col: int, value: str) -> str:
    lines = _lines(CAPTURE)
    for i, ln in enumerate(lines):
        if ln.count(",") == 4 and not ln.startswith("#"):
            parts = ln.strip().split(",")
            parts[col] = value
            lines[i] = ",".join(parts) + "\n"
            return "".join(lines)
    raise SystemExit("capture: no data line")


def _profile_col(col: int, value: str) -> str:
    lines = _lines(PROFILE)
    for i, ln in enumerate(lines):
        if ln.startswith("coll "):
            parts = ln.split()
            parts[col] = value
            lines[i] = " ".join(parts) + "\n"
            return "".join(lines)
    raise SystemExit("profile: no coll line")


def _inspector(change) -> str:
    lines = _lines(INSPECTOR)
    for i, ln in enumerate(lines):
        if ln.strip().startswith("{"):
            rec = json.loads(ln)
            change(rec)
            lines[i] = json.dumps(rec) + "\n"
            return "".join(lines)
    raise SystemExit("inspector: no record")


CPU_S = 20  # CPU seconds of the reading process (RLIMIT_CPU): a loop or backtracking is a hang, a busy machine is not


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_BYTES, MEM_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 1))


def _materialise(folder: Path, argv: list[str], content) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    names = {"{db}": str(folder / "out.db"), "{out}": str(folder / "out.file"), "{out.csv}": str(folder / "out.csv"),
             "{dir}": str(folder)}
    path = None
    for a in argv:
        m = re.fullmatch(r"\{f(\.[a-z.]+)?\}", a)
        if m:
            path = folder / f"input{m.group(1) or '.txt'}"
            names[a] = str(path)
    if path is not None:
        if content == "SPARSE":
            with open(path, "wb") as fh:
                fh.truncate(1 << 30)
        elif content == "FIFO":
            os.mkfifo(path)
        elif isinstance(content, tuple) and content[0] == "DB":
            path.write_bytes(DB.read_bytes())
            con = sqlite3.connect(path)
            con.execute(content[1])
            con.commit()
            con.close()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            path.write_text(content, encoding="utf-8")
    if isinstance(content, tuple) and content[0] == "FILES":
        for name, what in content[1].items():
            _place(folder / name, what)
    out = [names.get(a, a) for a in argv]
    return [re.sub(r"\{x:([^}]+)\}", lambda m: str(folder / m.group(1)), a) for a in out]


def _place(path: Path, what) -> None:
    """One input of a several-file case: a Path (copied: a file, or a folder's files), "FIFO", "ZERO" (a link
    to /dev/zero), "SPARSE2G", text or bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(what, Path):
        if what.is_dir():
            shutil.copytree(what, path, dirs_exist_ok=True)
        else:
            shutil.copy(what, path)
    elif what == "FIFO":
        os.mkfifo(path)
    elif what == "ZERO":
        path.symlink_to("/dev/zero")
    elif what == "SPARSE2G":
        with open(path, "wb") as fh:
            fh.truncate(2 << 30)
    elif isinstance(what, bytes):
        path.write_bytes(what)
    else:
        path.write_text(what, encoding="utf-8")


def _impossible(folder: Path) -> str:
    """What a fine run stored or wrote that no real run holds ('' when nothing)."""
    bad = []
    db = folder / "out.db"
    if db.exists():
        con = sqlite3.connect(db)
        try:
            q = ("SELECT count(*) FROM measurements WHERE n_ranks < 1 OR n_ranks > 65536 OR size_bytes < 0 "
                 "OR size_bytes > 4398046511104 OR count < 0 OR time_us < 0 OR busbw_gbps < 0 OR algbw_gbps < 0 "
                 "OR abs(time_us) > 1e300 OR abs(busbw_gbps) > 1e300 OR typeof(busbw_gbps) = 'text' "
                 "OR typeof(time_us) = 'text' OR dtype NOT IN ('int8','uint8','int32','uint32','int64','uint64',"
                 "'half','float','double','bfloat16','f8e4m3','f8e5m2') OR (op IS NOT NULL AND op NOT IN "
                 "('sum','prod','max','min','avg','mulsum'))")
            n = con.execute(q).fetchone()[0]
            if n:
                bad.append(f"{n} impossible rows")
            q = "SELECT count(*) FROM runs WHERE world_size < 0 OR world_size > 65536"
            if con.execute(q).fetchone()[0]:
                bad.append("a run of impossible size")
            q = ("SELECT count(*) FROM links WHERE bandwidth_gbps < 0 OR abs(bandwidth_gbps) > 1e300 OR src > 1024 "
                 "OR dst > 1024 OR typeof(bandwidth_gbps) = 'text'")
            if con.execute(q).fetchone()[0]:
                bad.append("impossible link rows")
        except sqlite3.Error:
            pass
        finally:
            con.close()
    wl = folder / "out.file"
    if wl.exists() and wl.read_bytes()[:1] == b"{":
        data = json.loads(wl.read_text())
        for e in data.get("entries", []):
            if not (1 <= e.get("nranks", 1) <= 65536 and 0 <= e.get("size_bytes", 0) <= 1 << 42
                    and 0 <= e.get("calls", 0) <= 1 << 40):
                bad.append(f"entry {e}")
            for k, v in e.items():
                if isinstance(v, float) and (not math.isfinite(v) or v < 0):
                    bad.append(f"entry field {k}={v}")
        if isinstance(data.get("steps"), int) and data["steps"] < 1:
            bad.append(f"steps {data['steps']}")
    return "; ".join(bad[:3])


def run_case(case, tmp: Path, timeout: float, i: int) -> tuple:
    reader, cls, name, argv, content = case[:5]
    check = case[5] if len(case) > 5 else None  # issue 41's classes: what a right answer is, beyond a clean exit
    folder = tmp / f"case{i:03d}"
    full = _materialise(folder, argv, content)
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200"}
    if isinstance(content, tuple) and content[0] == "FILES" and len(content) > 2:
        env.update({k: v.replace("{dir}", str(folder)) for k, v in content[2].items()})
    before = _digests(folder)
    try:
        proc = subprocess.run([sys.executable, "-m", "ccltune", *full], cwd=folder, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=_limit, env=env)
    except subprocess.TimeoutExpired:
        return (reader, cls, name, "hang", f"over {timeout:g} s wall (blocked)")
    err = proc.stderr
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return (reader, cls, name, "hang", f"over {CPU_S} CPU s")
    if check is not None and "Traceback" not in err:
        lost = [n for n, d in before.items() if _digests(folder).get(n) != d]
        if lost:
            return (reader, cls, name, "lost data", f"{', '.join(lost)} replaced (rc {proc.returncode})")
        outcome, detail = check(proc, folder)
        return (reader, cls, name, outcome, detail[:160])
    if "Traceback" in err or proc.returncode not in EXIT_CODES | {0}:
        last = [ln for ln in err.splitlines() if ln.strip()][-1:] or [f"exit {proc.returncode}"]
        return (reader, cls, name, "traceback", last[0][:160])
    if proc.returncode:
        line = next((ln for ln in err.splitlines() if ln.startswith("ccltune: error:")), "")
        if not line:
            return (reader, cls, name, "traceback", f"exit {proc.returncode} without an error line: {err[-160:]}")
        return (reader, cls, name, "clear", line[len("ccltune: error: "):][:160])
    wrong = _impossible(folder) or _wrong41(cls, name, folder, proc)
    return (reader, cls, name, "wrong" if wrong else "fine", wrong or (proc.stdout.strip().splitlines() or [""])[-1][:120])


def _digests(folder: Path) -> dict[str, str]:
    """The inputs of a case (its regular files, not what the command writes: out.*), by content."""
    import hashlib

    out = {}
    for p in sorted(folder.rglob("*")) if folder.exists() else []:
        if p.is_file() and not p.is_symlink() and not p.name.startswith("out.") and p.stat().st_size < 1 << 26:
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="cases whose reader or name holds one of these (comma-separated)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="wall seconds (a process blocked, not busy)")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the ccltune source tree to audit (its src/)")
    ap.add_argument("--classes", choices=("all", "issue32", "issue41"), default="all",
                    help="issue 32's seven classes, issue 41's six, or both")
    args = ap.parse_args(argv)
    global SRC, WORKLOAD_TEXT
    SRC = Path(args.src)
    with tempfile.TemporaryDirectory(prefix="ccltune-audit-") as tmp_s:
        tmp = Path(tmp_s)
        w = tmp / "w.json"
        subprocess.run([sys.executable, "-m", "ccltune", "workload", "import", str(CAPTURE), "--out", str(w)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(SRC)}, preexec_fn=_limit)
        WORKLOAD_TEXT = w.read_text()
        only = args.only.split(",")
        every = ((cases(tmp) + issue41_medium_cases(tmp) if args.classes != "issue41" else [])
                 + (issue41.cases(tmp, SRC, _limit) if args.classes != "issue32" else []))
        todo = [c for c in every if any(o in c[0] or o in c[1] or o in c[2] for o in only)]
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda ic: run_case(ic[1], tmp, args.timeout, ic[0]), enumerate(todo)))
    for r in results:
        print(f"{r[3]:<10} {r[0]:<36} {r[1]:<18} {r[2]:<36} {r[4]}")
    kinds = ("fine", "clear", "traceback", "hang", "wrong", "lost data")
    print("\n| class | cases | " + " | ".join(kinds) + " |\n|---|---|" + "---|" * len(kinds))
    for cls in dict.fromkeys(r[1] for r in results):
        rows = [r for r in results if r[1] == cls]
        print(f"| {cls} | {len(rows)} | " + " | ".join(str(sum(r[3] == k for r in rows)) for k in kinds) + " |")
    print(f"| all | {len(results)} | " + " | ".join(str(sum(r[3] == k for r in results)) for k in kinds) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
