"""Issue 41's classes for bench/input_audit.py: inputs that lie rather than break. Each case is
(reader, class, case, argv, inputs, check): ``inputs`` is ("FILES", {name: what}, env) placed in the case's folder
(``{x:name}`` in argv is its path; what: a Path copied, "FIFO", "ZERO" a link to /dev/zero, "SPARSE2G", text);
``check(proc, folder) -> (outcome, detail)`` says whether the answer is right: "fine" (right, or the contradiction
named), "clear" (refused with an error line), "wrong" (exit 0 or a PASS on data that cannot be right). A case
whose input file was replaced is "lost data" (input_audit.run_case); a traceback, a hang, a MemoryError as there.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
WL = FIX / "workload"
COLL = WL / "coll-ddp-1gpu.vm.4029.log"       # 63 calls
TRACE = WL / "trace_rank0.json"                # 16 calls
PROFILES = WL / "profile-ddp-2"                # 41 calls per rank
PROFILES4 = WL / "profile-ddp-4"
FORCED = WL / "profile-ddp-tree-4"
CAPTURE = WL / "capture-fsdp2-4" / "ccltune-capture.vm.1565.efc820a254537a17.0.txt"  # 911 calls
INSPECTOR = WL / "inspector" / "gpu01-pid4101.log"  # 18 calls
NVB = FIX / "nvbandwidth"
LOG = FIX / "logs" / "nccl_4gpu_p2p.log"
DB = FIX / "bench" / "h200x2-flow.sqlite"
RULES = FIX / "rules" / "basic.conf"
NCCLT = FIX / "nccl-tests" / "ar-eager-v2.19.6.txt"

Check = Callable[[subprocess.CompletedProcess, Path], tuple[str, str]]


def _error_line(proc: subprocess.CompletedProcess) -> str:
    return next((ln for ln in proc.stderr.splitlines() if ln.startswith("ccltune: error:")), "")


def _refused(proc: subprocess.CompletedProcess) -> tuple[str, str] | None:
    if proc.returncode == 2 and _error_line(proc):
        return "clear", _error_line(proc)[len("ccltune: error: "):]
    return None


def calls(want: int) -> Check:
    """The workload written counts ``want`` calls per rank (one source given twice counted once)."""
    def check(proc, folder):
        if proc.returncode:
            return _refused(proc) or ("wrong", f"exit {proc.returncode}: {proc.stderr[-120:]}")
        got = sum(e["calls"] for e in json.loads((folder / "out.file").read_text())["entries"])
        note = "left out" in proc.stderr
        return ("fine", f"{got} calls{', what was left out said' if note else ''}") if got == want else \
            ("wrong", f"{got} calls per rank, not {want}")
    return check


def refused(proc, folder) -> tuple[str, str]:
    """Right: refused naming the contradiction (exit 2)."""
    return _refused(proc) or ("wrong", f"exit {proc.returncode}: accepted ({(proc.stdout.strip().splitlines() or [''])[-1][:100]})")


def said(words: str, rc: int | None = 0) -> Check:
    """Right: the command says ``words`` (names the contradiction) and exits ``rc`` (None: any)."""
    def check(proc, folder):
        text = proc.stdout + proc.stderr
        if words in text and (rc is None or proc.returncode == rc):
            return "fine", words
        return _refused(proc) or ("wrong", f"exit {proc.returncode}, '{words}' not said")
    return check


def stored_host(host: str) -> Check:
    def check(proc, folder):
        if proc.returncode not in (0, 1):
            return _refused(proc) or ("wrong", f"exit {proc.returncode}")
        got = sqlite3.connect(folder / "out.db").execute("SELECT host FROM runs").fetchall()
        return ("fine", f"stored as {got}") if got == [(host,)] else ("wrong", f"stored as {got}, the log is of {host}")
    return check


def gate_fails(proc, folder) -> tuple[str, str]:
    """Right: the gate FAILs (exit 1) or the file is refused (exit 2), never a PASS."""
    if proc.returncode == 1 and "FAIL" in proc.stdout:
        return "fine", "FAIL"
    return _refused(proc) or ("wrong", f"exit {proc.returncode}: {(proc.stdout.strip().splitlines() or [''])[-1][:100]}")


def no_line(section_words: str) -> Check:
    """Right: rules explain applies no rule of the other GPU's section (its line numbers)."""
    def check(proc, folder):
        if proc.returncode:
            return _refused(proc) or ("wrong", f"exit {proc.returncode}")
        hit = [ln for ln in proc.stdout.splitlines() if section_words in ln]
        return ("wrong", hit[0].strip()[:120]) if hit else ("fine", "the other GPU's rules left out")
    return check


def clean_exit(proc, folder) -> tuple[str, str]:
    """Right: the command ends normally (the system file passed over)."""
    if proc.returncode in (0, 1):
        return "fine", (proc.stdout.strip().splitlines() or [""])[-1][:100]
    if "MemoryError" in proc.stderr:
        return "traceback", "MemoryError"
    return _refused(proc) or ("wrong", f"exit {proc.returncode}: {proc.stderr[-120:]}")


def _bench_json(n_ranks: int = 4, wrong: int = 0, slow: float = 1.0) -> str:
    recs = []
    for i, (size, busbw) in enumerate(((64 << 20, 300.0), (128 << 20, 320.0), (256 << 20, 335.0),
                                       (512 << 20, 346.0), (1024 << 20, 350.0))):
        algbw = busbw / 1.5
        recs.append({"collective": "all_reduce", "size_bytes": size, "in_place": True, "busbw_gbps": busbw,
                     "algbw_gbps": algbw, "time_us": size / algbw / 1e3 * (slow if i == 3 else 1.0),
                     "n_ranks": n_ranks, "graph": 0, "status": "ok", "wrong": wrong})
    env = {"world_size": 4, "engine": "nccl", "launcher": "torchrun", "platform": "NVIDIA H200 x4"}
    return json.dumps({"env": env, "records": recs})


def _profiles_nranks8() -> dict:
    files = sorted(PROFILES4.glob("ccltune-profile.*.txt"))
    out: dict = {f"p/{f.name}": f for f in files[:-1]}
    out[f"p/{files[-1].name}"] = files[-1].read_text().replace(" nranks 4 ", " nranks 8 ", 1)
    return out


def _profiles_clock_ahead() -> dict:
    files = sorted(PROFILES4.glob("ccltune-profile.*.txt"))
    out: dict = {f"p/{f.name}": f for f in files[:-1]}
    lines = []
    for ln in files[-1].read_text().splitlines(keepends=True):
        if ln.startswith("call "):
            _, seq, entry, start, end = ln.split()
            ln = f"call {seq} {entry} {int(start) + 10**12} {int(end) + 10**12}\n"
        lines.append(ln)
    out[f"p/{files[-1].name}"] = "".join(lines)
    return out


def _nvb_twice_text() -> str:
    t = (NVB / "h100_4gpu.txt").read_text()
    a, b = t.index("Running device_to_device_memcpy_read_ce."), t.index("SUM device_to_device_memcpy_read_ce")
    return t + "\n" + t[a:t.index("\n", b) + 1].replace("388.95", "100.00")


def _nvb_twice_json() -> str:
    doc = json.loads((NVB / "h100_4gpu.json").read_text())
    cases = doc["nvbandwidth"]["testcases"]
    cases.append(dict(cases[0]))
    return json.dumps(doc)


def _mixed_versions() -> str:
    lines = LOG.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "[3] NCCL INFO NCCL version" in ln)
    lines[at] = lines[at].replace("2.28.9", "2.18.1")
    return "".join(lines)


GPU_RULES = ("platform,gpu=h20\nallreduce,0,1M,ring,ll,1,-1,-1\nplatform,gpu=mi300\n"
             "allreduce,0,1M,ring,simple,2,-1,-1\n")


def cases(tmp: Path, src: Path, limit: Callable[[], None]) -> list[tuple]:
    """The cases; ``src`` (the tree audited) and ``limit`` (the child's limits) make the workload file a case
    reads."""
    out: list[tuple] = []

    def add(reader, cls, name, argv, files, check, env=None):
        out.append((reader, cls, name, argv, ("FILES", files, env or {}), check))

    wi = ["workload", "import"]
    o = ["--out", "{out}"]
    twice = "same data twice"
    # 1. the same data given twice
    add("COLL log (workload import)", twice, "one log twice", [*wi, "{x:a.log}", "{x:a.log}", *o], {"a.log": COLL}, calls(63))
    add("COLL log (workload import)", twice, "a log and its copy", [*wi, "{x:a.log}", "{x:b.log}", *o],
        {"a.log": COLL, "b.log": COLL}, calls(63))
    add("COLL log (workload import)", twice, "a log and its gzip", [*wi, "{x:a.log}", "{x:a.log.gz}", *o],
        {"a.log": COLL, "a.log.gz": gzip.compress(COLL.read_bytes())}, calls(63))
    add("COLL log (workload import)", twice, "a copy with a comment line", [*wi, "{x:a.log}", "{x:b.log}", *o],
        {"a.log": COLL, "b.log": "# copied\n" + COLL.read_text()}, calls(63))
    add("torch trace (workload import)", twice, "a trace and its copy", [*wi, "{x:t0.json}", "{x:t0-copy.json}", *o],
        {"t0.json": TRACE, "t0-copy.json": TRACE}, calls(16))
    add("profiler files (workload import)", twice, "a folder twice", [*wi, "{x:p}", "{x:p}", *o], {"p": PROFILES}, calls(41))
    first = sorted(PROFILES.glob("*.txt"))[0]
    add("profiler files (workload import)", twice, "a folder with a copied file", [*wi, "{x:p}", *o],
        {"p": PROFILES, f"p/{first.name.replace('.txt', '.copy.txt')}": first}, calls(41))
    add("profiler files (workload import)", twice, "a folder and its file", [*wi, "{x:p}", f"{{x:p/{first.name}}}", *o],
        {"p": PROFILES}, calls(41))
    add("capture (workload import)", twice, "a capture and its copy", [*wi, "{x:c.txt}", "{x:d.txt}", *o],
        {"c.txt": CAPTURE, "d.txt": CAPTURE}, calls(911))
    add("NCCL Inspector (workload import)", twice, "an Inspector file twice", [*wi, "{x:i.log}", "{x:j.log}", *o],
        {"i.log": INSPECTOR, "j.log": INSPECTOR}, calls(18))
    fforced = sorted(FORCED.glob("ccltune-profile.*.txt"))[0]
    add("profiler files (plugin verify)", twice, "a copied file in --profile",
        ["plugin", "verify", str(FORCED / "force.conf"), "--profile", "{x:p}"],
        {"p": FORCED, f"p/{fforced.name.replace('.txt', '.again.txt')}": fforced}, said("TREE/SIMPLE/4ch x144"))
    # 2. contradictory files
    con = "contradictory files"
    add("profiler files (workload import)", con, "one file says nranks 8 of 4", [*wi, "{x:p}", *o], _profiles_nranks8(), refused)
    add("nvbandwidth text", con, "two hosts' outputs concatenated", ["import", "nvbandwidth", "{x:n.txt}", "--db", "{db}"],
        {"n.txt": (NVB / "h100_4gpu.txt").read_text() * 1 + (NVB / "h100_4gpu.txt").read_text().replace("h100-node-07", "node-99")},
        refused)
    add("nvbandwidth text", con, "a test run twice", ["import", "nvbandwidth", "{x:n.txt}", "--db", "{db}"],
        {"n.txt": _nvb_twice_text()}, refused)
    add("nvbandwidth JSON", con, "a testcase listed twice", ["import", "nvbandwidth", "{x:n.json}", "--db", "{db}"],
        {"n.json": _nvb_twice_json()}, refused)
    add("NCCL log (doctor)", con, "a log of another host", ["doctor", "--nccl-log", "{x:o.log}", "--db", "{db}"],
        {"o.log": LOG.read_text().replace("vm:", "node-99:")}, stored_host("node-99"))
    add("NCCL log (doctor)", con, "rank 3 on NCCL 2.18.1", ["doctor", "--nccl-log", "{x:m.log}", "--db", "{db}"],
        {"m.log": _mixed_versions()}, said("FAIL    log:version", rc=1))
    add("profiler files (workload import)", con, "one rank's clock 1000 s ahead", [*wi, "{x:p}", *o],
        _profiles_clock_ahead(), said("stands +1e+03 s from the others'"))  # named, and lined up by the RING calls' ends
    # 3. gpu= of another GPU
    gpu = "gpu= of another GPU"
    ex = ["rules", "explain", "{x:r.conf}", "--nranks", "8", "--gpu"]
    add("rule file (rules explain)", gpu, "gpu=h20 on an H200", [*ex, "NVIDIA H200"], {"r.conf": GPU_RULES}, no_line("line 2:"))
    add("rule file (rules explain)", gpu, "gpu=mi300 on an MI300A", [*ex, "AMD Instinct MI300A"], {"r.conf": GPU_RULES},
        no_line("line 4:"))
    add("rule file (rules explain)", gpu, "gpu=h20 on a GH200", [*ex, "NVIDIA GH200 480GB"], {"r.conf": GPU_RULES},
        no_line("line 2:"))
    # 4. check --from-json's gate
    cj = ["check", "--profile", "h200-4", "--from-json", "{x:b.json}", "--db", "{db}"]
    gate = "gate on bad data"
    add("bench JSON (check --from-json)", gate, "#wrong 12, status ok", cj, {"b.json": _bench_json(wrong=12)}, gate_fails)
    add("bench JSON (check --from-json)", gate, "time_us 1000x the busbw's", cj, {"b.json": _bench_json(slow=1000.0)}, gate_fails)
    add("bench JSON (check --from-json)", gate, "records of 2 ranks, env of 4", cj, {"b.json": _bench_json(n_ranks=2)}, gate_fails)
    # 5. an output over an input (the input's content is checked by run_case: "lost data")
    ovr = "output over input"
    add("ab (--prune)", ovr, "--prune onto --db", ["ab", "--rules", "{x:r.conf}", "--prune", "{x:d.db}", "--db", "{x:d.db}",
                                                  "--rounds", "1", "--", "true"], {"r.conf": RULES, "d.db": DB}, refused)
    add("ab (--prune)", ovr, "--prune onto --json", ["ab", "--rules", "{x:r.conf}", "--prune", "{x:P}", "--json", "{x:P}",
                                                    "--db", "{db}", "--rounds", "1", "--", "true"],
        {"r.conf": RULES, "P": "mine\n"}, refused)
    add("workload file (tune --workload)", ovr, "--out onto --workload",  # the database is tune's to write: out.db
        ["tune", "--db", "{db}", "--workload", "{x:w.json}", "--out", "{x:w.json}"],
        {"out.db": DB, "w.json": _workload_text(src, limit)}, refused)
    add("profiler files (workload import)", ovr, "--out onto a file of its folder",
        [*wi, "{x:p}", "--out", f"{{x:p/{first.name}}}"], {"p": PROFILES}, refused)
    # 6. files under a system root
    sysr = "system root"
    dd = ["doctor", "--no-run", "--sysfs-root", "{x:root}", "--db", "{db}"]
    drm = "root/sys/class/drm/card0/device/"
    for what, label in (("ZERO", "/dev/zero"), ("FIFO", "a FIFO"), ("SPARSE2G", "a 2 GB sparse file")):
        add("system root (doctor --sysfs-root)", sysr, f"proc/cmdline {label}", dd, {"root/proc/cmdline": what}, clean_exit)
        add("system root (topo --sysfs-root)", sysr, f"DRM partition {label}",
            ["topo", "--sysfs-root", "{x:root}", "--db", "{db}"],
            {f"{drm}current_compute_partition": what, f"{drm}product_name": what}, clean_exit)
        add("system root ($CCLTUNE_SYSFS_ROOT, import)", sysr, f"DRM partition {label}",
            ["import", "nccl-tests", "{x:t.txt}", "--db", "{db}"],
            {"t.txt": NCCLT, f"{drm}current_compute_partition": what, f"{drm}current_memory_partition": what},
            clean_exit, env={"CCLTUNE_SYSFS_ROOT": "{dir}/root"})
    return out


def _workload_text(src: Path, limit: Callable[[], None]) -> str:
    """A workload file as ccltune writes it (of the COLL log), made by the audited tree."""
    import os
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp) / "w.json"
        subprocess.run([sys.executable, "-m", "ccltune", "workload", "import", str(COLL), "--out", str(w)], check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(src)}, preexec_fn=limit)
        return w.read_text()
