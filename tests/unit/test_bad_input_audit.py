"""The bad-input audit (issue 17): every command driven with bad paths, sizes, numbers, files of the
wrong kind (folders, FIFOs, binary, empty, another program's database, a database with text where a
number belongs), names too long for the file system, names that are not UTF-8, and outputs that are
one of the command's inputs. For each case: exit code != 0, the bad value named in the one error
line, no traceback, no hang, and no file given to the command changed (content, inode, mode).

Commands run in this process through ``ccltune.cli.main(argv)``; starting a process (torchrun,
nvidia-smi, ...) fails the case: bad input must be refused before any work."""

from __future__ import annotations

import faulthandler
import hashlib
import importlib
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.store import Measurement, Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCCLT_AG = FIXTURES / "nccl-tests" / "ncclt-2.19.0_all_gather_h200x4.txt"  # a real nccl-tests output
HANG_S = int(os.environ.get("CCLTUNE_AUDIT_HANG_S", "15"))  # a case that takes longer is a hang (the audit's limit is 20 s)
LONG_NAME = "n" * 300  # over NAME_MAX (255 bytes)
LONG_PATH = "/".join(["d" * 200] * 22)  # over PATH_MAX (4096 bytes)
NOT_UTF8 = os.fsdecode(b"\xff\xfe.db")  # a file name that is not valid UTF-8


class _Launched(BaseException):
    """A case reached the point of starting a process."""


class _Hang(BaseException):
    """A case ran past HANG_S."""


def _db(path: Path, kind: str = "bench") -> None:
    with Store(path) as st:
        rid = st.begin_run(kind, command=f"ccltune {kind}", env={"world_size": 2, "platform": "cpu"}, args={})
        st.add_measurements(rid, [Measurement("all_reduce", 8 << i, 2 << i, "float", "sum", None, False, 2,
                                              time_us=1.0 + i) for i in range(4)])
        st.finish_run(rid, "complete")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The files the cases name: good ones, and every wrong kind of file."""
    d = tmp_path_factory.mktemp("audit")
    try:  # the first command that imports torch would pay its seconds inside the hang limit
        importlib.import_module("torch")
    except ImportError:
        pass
    _db(d / "good.db")
    _db(d / "text.db")
    con = sqlite3.connect(d / "text.db")
    con.execute("UPDATE measurements SET size_bytes = 'lots' WHERE id = 2")
    con.commit()
    con.close()
    con = sqlite3.connect(d / "other.db")
    con.execute("CREATE TABLE runs (a)")
    con.commit()
    con.close()
    (d / "empty").write_bytes(b"")
    (d / "garbage.bin").write_bytes(bytes(range(256)) * 200)
    (d / "dir").mkdir()
    (d / "file").write_text("a regular file\n")
    os.mkfifo(d / "fifo")
    (d / "rules.conf").write_text((FIXTURES / "rules" / "basic.conf").read_text())
    (d / "r.conf").write_text((FIXTURES / "rules" / "basic.conf").read_text())
    (d / "l.log").write_text((FIXTURES / "logs" / "nccl_tuner_plugin.log").read_text())
    (d / "b.json").write_text(json.dumps({"env": {}, "records": []}))
    (d / "x").write_text("x\n")
    assert main(["workload", "import", str(FIXTURES / "workload" / "coll-ddp-1gpu.vm.4029.log"),
                 "--out", str(d / "w.json")]) == 0  # a real workload file, from a real COLL log
    return d


def _snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
        out[str(p)] = (st.st_ino, st.st_mode, digest)
    for dev in ("/dev/null", "/dev/zero"):
        st = os.lstat(dev)
        out[dev] = (st.st_ino, st.st_mode, "")
    return out


def _run(argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    def launched(*a, **k):
        cmd = a[0] if a else k.get("args")
        if any(w in str(cmd) for w in ("torchrun", "python", "ccltune")):
            raise _Launched(f"started {cmd!r}")
        raise FileNotFoundError(2, "not installed in this test", str(cmd))  # nvidia-smi, lspci, ...

    def hang(signum, frame):
        raise _Hang(f"{argv} ran over {HANG_S} s")

    monkeypatch.setattr(subprocess, "Popen", launched)
    old = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    faulthandler.dump_traceback_later(HANG_S + 3, exit=True, file=sys.__stderr__)  # a hang in C code (SQLite on a FIFO) ends the run
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code if isinstance(exc.code, int) else 1
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    # `plugin check` reports each rejected line on stderr as FILE:LINE: reason (one short line per
    # line of the file); the rest of stderr is the error, which must not quote the bad input whole
    report = [line for line in err.splitlines() if re.match(r"\S+:\d+: ", line)]
    assert all(len(line) < 300 for line in report), f"a FILE:LINE: reason line quotes too much: {report[:3]}"
    rest = "\n".join(line for line in err.splitlines() if line not in report)
    assert len(rest) < 1500, f"an error quotes too much ({len(rest)} characters): {rest[:300]}..."
    return rc, out + err


# -- the cases -------------------------------------------------------------------------------------
# Each is (argv, needle): the needle is what the error must name (the bad value). '{w}' is the
# folder of the world fixture; commands run there.

BAD_DB = [  # (a --db value, what the error names)
    (LONG_NAME + ".db", LONG_NAME[:40]),
    (LONG_PATH + "/x.db", "d" * 40),
    ("file/x.db", "file/x.db"),
    ("dir", "'dir'"),
    ("no/such/x.db", "no/such/x.db"),
    ("fifo", "'fifo'"),
    ("garbage.bin", "'garbage.bin'"),
    ("other.db", "'other.db'"),
    ("/dev/zero", "/dev/zero"),
]
READ_DB = BAD_DB + [  # only for commands that read: a database that must exist
    ("missing.db", "missing.db"),
    ("empty", "'empty'"),
    (NOT_UTF8, "'\\xff\\xfe.db'"),
    ("/dev/null", "/dev/null"),
]
BAD_OUT = [  # (an output path, what the error names)
    (LONG_NAME + ".json", LONG_NAME[:40]),
    (LONG_PATH + "/x.json", "d" * 40),
    ("file/x.json", "file/x.json"),
    ("dir", "'dir'"),
    ("no/such/x.json", "no/such/x.json"),
    ("good.db", "good.db"),
]

READERS = [["runs"], ["export", "1"], ["report", "--out", "r.html"], ["tune", "--out", "t.conf"],
           ["workload", "show", "w.json"]]
SWEEP = ["sweep", "--algos", "", "--protos", "", "--channels", ""]  # what the CPU engine can sweep
MEASURERS = [["bench", "all_reduce"], SWEEP, ["validate", "rules.conf"], ["links"], ["topo"],
             ["doctor", "--no-run"], ["import", "nccl-tests", str(NCCLT_AG)]]
OUTPUT_FLAGS = [
    ["export", "1", "--out", "{p}"], ["report", "--out", "{p}"], ["tune", "--out", "{p}"],
    ["bench", "all_reduce", "--json", "{p}"], ["validate", "rules.conf", "--json", "{p}"],
    ["validate", "rules.conf", "--junit", "{p}"], ["topo", "--json", "{p}"], ["doctor", "--no-run", "--json", "{p}"],
    ["check", "--from-json", "b.json", "--json", "{p}"], ["check", "--from-json", "b.json", "--junit", "{p}"],
    ["plugin", "verify", "r.conf", "--from-log", "l.log", "--json", "{p}"], ["links", "--json", "{p}"],
    ["workload", "import", "l.log", "--out", "{p}"],
]
SIZES = [  # (size flags, needle) for bench, sweep and validate
    (["-f", "1e308"], "1e+308"),
    (["-f", "inf"], "inf"),
    (["-f", "nan"], "nan"),
    (["-f", "1.5"], "1.5"),
    (["-b", "1x"], "'1x'"),
    (["-e", "-5"], "-5"),
    (["-b", "1G", "-e", "1K"], "1073741824 > 1024"),
    (["-e", "99999999999999999999999"], "99999999999999999999999"),
    (["-b", ""], "''"),
]


def _cases() -> list[tuple[list[str], str]]:
    cases: list[tuple[list[str], str]] = []
    for cmd in READERS:
        cases += [(cmd + ["--db", v], n) for v, n in READ_DB]
    cases.append((["report", "--db", "text.db", "--out", "r.html"], "'lots'"))
    cases.append((["export", "1", "--db", "text.db"], "'lots'"))
    for cmd in MEASURERS:
        cases += [(cmd + ["--db", v], n) for v, n in BAD_DB]
    for cmd in OUTPUT_FLAGS:  # (plugin and workload have no --db: good.db is an ordinary file there)
        cases += [([a.format(p=v) for a in cmd], n) for v, n in BAD_OUT
                  if cmd[0] not in ("plugin", "workload") or v != "good.db"]
    for cmd in (["bench", "all_reduce"], SWEEP, ["validate", "rules.conf"]):
        # bench reads -f as nccl-tests' strtol does: an integer, refused as typed
        cases += [(cmd + flags, repr(flags[1]) if cmd[0] == "bench" and flags[0] == "-f" else n) for flags, n in SIZES]
    cases += [
        (["bench", "all_reduce", "-f", "0", "-i", "1", "-b", "1", "-e", "100M"], "104857600 sizes"),
        (["bench", "all_reduce", "-n", "-1"], "-1"),
        (["bench", "all_reduce", "-w", "-1"], "-1"),
        (["bench", "all_reduce", "-G", "-1"], "-1"),
        (["bench", "all_reduce", "-d", "flaot"], "'flaot'"),
        (["bench", "all_reduce", "-o", "xor"], "'xor'"),
        (["bench", "allreduce_x"], "allreduce_x"),
        (["bench", "all_reduce", "--nproc", "0"], "0"),
        (["bench", "all_reduce", "--timeout", "-1"], "-1"),
        (["bench", "all_reduce", "--timeout", "inf"], "inf"),
        (["sweep", "--reps", "0"], "0"),
        (["sweep", "--channels", "abc"], "abc"),
        (["sweep", "--algos", "rnig"], "rnig"),
        (["sweep", "--protos", "LL256"], "LL256"),  # named as typed
        (SWEEP + ["--resume", "99"], "99"),
        (SWEEP + ["--resume", "abc"], "abc"),
        (["validate", "missing.conf"], "missing.conf"),
        (["validate", "dir"], "'dir'"),
        (["validate", "fifo"], "fifo"),
        (["validate", "garbage.bin"], "garbage.bin"),
        (["validate", "/dev/zero"], "/dev/zero"),
        (["validate", LONG_NAME], LONG_NAME[:40]),
        (["validate", "rules.conf", "--reps", "-1"], "-1"),
        (["validate", "rules.conf", "--hard-limit", "nan"], "nan"),
        (["validate", "rules.conf", "--retest", "-2"], "-2"),
        (["validate", "rules.conf", "--best-from", "garbage.bin"], "garbage.bin"),
        (["validate", "rules.conf", "--best-from", "missing.db"], "missing.db"),
        (["validate", "rules.conf", "--json", "rules.conf"], "rules.conf"),
        (["validate", "rules.conf", "--junit", "rules.conf"], "rules.conf"),
        (["validate", "rules.conf", "--json", "x", "--junit", "x"], "'x'"),
        (["tune", "--out", "t.conf", "--exclude-failed", "garbage.bin"], "garbage.bin"),
        (["tune", "--out", "t.conf", "--exclude-failed", "missing.json"], "missing.json"),
        (["tune", "--out", "t.conf", "--exclude-failed", "fifo"], "fifo"),
        (["tune", "--out", "t.conf", "--exclude-failed", "dir"], "dir"),
        (["tune", "--out", "t.conf", "--exclude-failed", "empty"], "empty"),
        (["tune", "--out", "t.conf", "--runs", "abc"], "abc"),
        (["tune", "--out", "t.conf", "--min-margin", "nan"], "nan"),
        (["tune", "--out", "good.db"], "good.db"),
        (["export", "abc"], "abc"),
        (["export", "99"], "99"),
        (["report", "--run", "99", "--out", "r.html"], "99"),
        (["report", "--runs", "x-y", "--out", "r.html"], "x-y"),
        (["report", "--png", "file", "--out", "r.html"], "'file'"),
        (["report", "--out", "r.html", "--tolerance", "-5"], "-5"),
        (["runs", "--kind", "bnech"], "bnech"),
        (["check", "--profile", "nope"], "nope"),
        (["check", "--profile", LONG_NAME], LONG_NAME[:40]),
        (["check", "--profile", LONG_PATH], "d" * 40),
        (["check", "--profile", "garbage.bin"], "garbage.bin"),
        (["check", "--profile", "fifo"], "fifo"),
        (["check", "--profile", "empty"], "empty"),
        (["check", "--profile", "dir"], "dir"),
        (["check", "--from-json", "missing.json"], "missing.json"),
        (["check", "--from-json", "garbage.bin"], "garbage.bin"),
        (["check", "--from-json", "fifo"], "fifo"),
        (["check", "--from-json", "empty"], "empty"),
        (["check", "--from-json", "dir"], "dir"),
        (["check", "--from-json", LONG_NAME], LONG_NAME[:40]),
        (["check", "--from-json", "b.json", "--json", "b.json"], "b.json"),
        (["check", "--from-json", "b.json", "--junit", "b.json"], "b.json"),
        (["check", "--from-json", "b.json", "--json", "x", "--junit", "x"], "'x'"),
        (["check", "--from-json", "b.json", "--timeout", "nan"], "nan"),
        (["plugin", "check", "missing.conf"], "missing.conf"),
        (["plugin", "check", "garbage.bin"], "garbage.bin"),
        (["plugin", "check", "fifo"], "fifo"),
        (["plugin", "check", "dir"], "dir"),
        (["plugin", "check", "/dev/zero"], "/dev/zero"),
        (["plugin", "check", LONG_NAME], LONG_NAME[:40]),
        (["plugin", "check", "rules.conf", "--platform", "novalue"], "novalue"),
        (["plugin", "verify", "r.conf", "--json", "r.conf"], "r.conf"),
        (["plugin", "verify", "r.conf", "--from-log", "l.log", "--json", "r.conf"], "r.conf"),
        (["plugin", "verify", "r.conf", "--from-log", "l.log", "--json", "l.log"], "l.log"),
        (["plugin", "verify", "r.conf", "--from-log", "l.log", "--save-log", "l.log"], "l.log"),
        (["plugin", "verify", "r.conf", "--from-log", "garbage.bin"], "garbage.bin"),
        (["plugin", "verify", "r.conf", "--from-log", "fifo"], "fifo"),
        (["plugin", "verify", "r.conf", "--from-log", "dir"], "dir"),
        (["plugin", "verify", "garbage.bin", "--from-log", "l.log"], "garbage.bin"),
        (["plugin", "verify", "r.conf", "-f", "1e308"], "1e308"),
        (["plugin", "verify", "r.conf", "-e", "1x"], "1x"),
        (["doctor", "--nccl-log", "l.log", "--json", "l.log"], "l.log"),
        (["doctor", "--nccl-log", "missing.log"], "missing.log"),
        (["doctor", "--nccl-log", "fifo"], "fifo"),
        (["doctor", "--nccl-log", "dir"], "dir"),
        (["doctor", "--nccl-log", LONG_NAME], LONG_NAME[:40]),
        (["doctor", "--no-run", "--sysfs-root", "missing"], "missing"),
        (["doctor", "--no-run", "--sysfs-root", "file"], "file"),
        (["doctor", "--no-run", "--timeout", "nan"], "nan"),
        (["topo", "--sysfs-root", "missing"], "missing"),
        (["topo", "--sysfs-root", "file"], "file"),
        (["links", "-s", "1x"], "1x"),
        (["links", "-n", "0"], "0"),
        (["links", "--method", "warp"], "warp"),
        (["links", "--threshold", "nan"], "nan"),
        (["replay", "missing.json"], "missing.json"),
        (["replay", "garbage.bin"], "garbage.bin"),
        (["replay", "fifo"], "fifo"),
        (["replay", "dir"], "dir"),
        (["replay", "empty"], "empty"),
        (["replay", LONG_NAME], LONG_NAME[:40]),
        (["replay", "w.json", "--rules", "garbage.bin"], "garbage.bin"),
        (["replay", "w.json", "--rules", "fifo"], "fifo"),
        (["replay", "w.json", "--rules", "missing.conf"], "missing.conf"),
        (["replay", "w.json", "--iters", "0"], "0"),
        (["workload", "import", "missing.log", "--out", "w2.json"], "missing.log"),
        (["workload", "import", "fifo", "--out", "w2.json"], "fifo"),
        (["workload", "import", "dir", "--out", "w2.json"], "dir"),
        (["workload", "import", "garbage.bin", "--out", "w2.json"], "garbage.bin"),
        (["workload", "import", "l.log", "--out", "l.log"], "l.log"),
        (["workload", "import", "l.log", "--steps", "-1", "--out", "w2.json"], "-1"),
        (["workload", "show", "missing.json"], "missing.json"),
        (["workload", "show", "garbage.bin"], "garbage.bin"),
        (["workload", "show", "fifo"], "fifo"),
        (["workload", "show", "dir"], "dir"),
        (["workload", "show", "empty"], "empty"),
        (["workload", "show", "b.json"], "b.json"),
        (["rules", "explain", "missing.conf"], "missing.conf"),
        (["rules", "explain", "fifo"], "fifo"),
        (["rules", "explain", "dir"], "dir"),
        (["rules", "explain", "/dev/zero"], "/dev/zero"),
        (["rules", "explain", "rules.conf", "--nranks", "0"], "0"),
        (["rules", "explain", "rules.conf", "--collective", "allreduc"], "allreduc"),
        (["import", "transferbench", "missing.txt"], "missing.txt"),
        (["import", "transferbench", "garbage.bin"], "garbage.bin"),
        (["import", "transferbench", "fifo"], "fifo"),
        (["import", "transferbench", "empty"], "empty"),
        (["import", "nvbandwidth", "missing.txt"], "missing.txt"),
        (["import", "nvbandwidth", "garbage.bin"], "garbage.bin"),
        (["import", "nvbandwidth", "fifo"], "fifo"),
        (["import", "nvbandwidth", "dir"], "dir"),
        (["import", "nccl-tests", "missing.txt"], "missing.txt"),
        (["import", "nccl-tests", "garbage.bin"], "garbage.bin"),
        (["import", "nccl-tests", "fifo"], "fifo"),
        (["import", "nccl-tests", "dir"], "dir"),
        (["import", "nccl-tests", "empty"], "empty"),
        (["import", "nccl-tests", LONG_NAME], LONG_NAME[:40]),
        (["import", "nccl-tests", str(NCCLT_AG), "--algo", "rnig"], "rnig"),
        (["import", "nccl-tests", str(NCCLT_AG), "--nranks", "-2"], "-2"),
    ]
    return cases


CASES = _cases()


def test_the_audit_has_at_least_254_cases():
    assert len(CASES) >= 254, len(CASES)


@pytest.mark.parametrize("argv, needle", CASES, ids=[" ".join(a)[:80] for a, _ in CASES])
def test_bad_input_is_refused_cleanly(world, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(world)
    before = _snapshot(world)
    if argv[0] not in ("plugin", "rules") and argv[:2] != ["workload", "import"] and "--db" not in argv:
        argv = argv + ["--db", "good.db"]
    if argv[0] == "check" and "--profile" not in argv:  # this machine matches no built-in profile
        argv = argv + ["--profile", "h200-4"]
    rc, err = _run(argv, monkeypatch, capsys)
    assert rc != 0, f"exit 0: {err}"
    assert "Traceback" not in err, err
    assert needle in err, f"the error does not name {needle!r}: {err}"
    after = _snapshot(world)
    changed = [k for k in before if after.get(k) != before[k]]
    assert not changed, f"files changed or replaced: {changed}"
