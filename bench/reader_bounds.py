"""Time and memory of every file reader at its bound (src/ccltune/inputs.py; the table in docs/limits.md).

    python bench/reader_bounds.py [--scale 1.0] [--only NAME ...]

Each case writes a legal input of the reader's bound in bytes (or GPUs), made by repeating a real
fixture's lines or events, then reads it in a child process through the reader ccltune's command
uses, and prints one row: the input size, wall and CPU seconds, and the child's peak RSS. ``--scale``
shrinks every input (0.01 for a quick look); the docs quote a run at scale 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "src"))

from ccltune import inputs  # noqa: E402


def _repeat(head: str, body: str, tail: str, size: int) -> str:
    """``head`` + ``body`` repeated until the text is ``size`` bytes + ``tail``."""
    n = max(1, (size - len(head) - len(tail)) // max(1, len(body)))
    return head + body * n + tail


def nccl_tests_text(size: int) -> tuple[str, str]:
    lines = (FIX / "nccl-tests" / "ncclt-2.19.0_all_gather_h200x4.txt").read_text().split("\n")
    rows = [i for i, line in enumerate(lines) if line[:1] == " " and line.split()[:1] != []]
    head, body = "\n".join(lines[:rows[0]]) + "\n", "\n".join(lines[rows[0]:rows[-1] + 1]) + "\n"
    return _repeat(head, body, "\n".join(lines[rows[-1] + 1:]), size), (
        "from ccltune import ncclt; from ccltune.files import read_text\n"
        "ncclt.parse(read_text(PATH, 'FILE'), PATH)")


def nccl_tests_json(size: int) -> tuple[str, str]:
    doc = json.loads((FIX / "nccl-tests" / "v2.19.6" / "ar-v2.19.6.json").read_text())
    one = json.dumps(doc["results"][0])
    doc["results"] = [doc["results"][0]] * max(1, (size - 4096) // (len(one) + 2))  # under the bound
    return json.dumps(doc), ("from ccltune import ncclt; from ccltune.files import read_text\n"
                             "ncclt.parse(read_text(PATH, 'FILE'), PATH)")


def nccl_log_doctor(size: int) -> tuple[str, str]:
    text = (FIX / "logs" / "nccl_4gpu_p2p.log").read_text()
    return _repeat("", text, "", size), ("from ccltune.diagnose.parsers import ncclog\n"
                                         "ncclog.parse_log(ncclog.read_log(PATH))")


def coll_log(size: int) -> tuple[str, str]:
    text = (FIX / "workload" / "coll-ddp-1gpu.vm.4029.log").read_text()
    return _repeat("", text, "", size), ("from ccltune.workload import importer\n"
                                         "importer.load_file(importer.Path(PATH))")


def trace(size: int) -> tuple[str, str]:
    doc = json.loads((FIX / "workload" / "trace_rank0.json").read_text())
    events = doc["traceEvents"]
    one = sum(len(json.dumps(e)) for e in events) // len(events)
    doc["traceEvents"] = events * max(1, int(size * 0.95) // (one * len(events)))  # under the bound
    return json.dumps(doc), "from ccltune.workload import importer\nimporter.load_file(importer.Path(PATH))"


def workload_file(size: int) -> tuple[str, str]:
    sys_path = "from ccltune.workload import importer, model\n"
    code = sys_path + "model.load(PATH)"
    from ccltune.workload import importer, model
    doc = json.loads(model.to_json(importer.import_files([FIX / "workload" / "trace_rank0.json"]), {}))
    one = json.dumps(doc["entries"][0])
    doc["entries"] = [dict(doc["entries"][0], count=i, size_bytes=i * 4) for i in range(size // (len(one) + 4))]
    doc.pop("order", None)
    return json.dumps(doc), code


def nvbandwidth_matrix(_size: int) -> tuple[str, str]:
    n = inputs.MAX_GPUS  # the bound is the GPU count, not the bytes
    head = "Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
    cols = "".join(f"{c:>10}" for c in range(n)) + "\n"
    rows = "".join(f"{r:>2}" + "".join("       N/A" if r == c else "    388.95" for c in range(n)) + "\n"
                   for r in range(n))
    return head + cols + rows + "\nSUM device_to_device_memcpy_read_ce 1\n", (
        "from ccltune.diagnose.parsers import nvbandwidth; from ccltune.files import read_text\n"
        "nvbandwidth.parse(read_text(PATH, 'FILE'), PATH)")


def rule_file(size: int) -> tuple[str, str]:
    rows = "".join(f"allreduce,{i * 64},{i * 64 + 63},ring,simple,4,-1,-1,-1,-1\n" for i in range(size // 48))
    return rows[:size - 64], ("from ccltune import rules; from ccltune.tune.explain import explain\n"
                              "explain(rules.load(PATH), 'allreduce', 8, 1)")


def _capture(lines: int) -> str:
    text = (FIX / "workload" / "h200x4-1126" / "ccltune-capture.vm.1565.efc820a254537a17.0.txt").read_text()
    head = [ln for ln in text.splitlines() if "," not in ln and ln != "# end"]
    head = [f"calls={lines}" if ln.startswith("calls=") else ln for ln in head]
    return "\n".join(head + [f"reducescatter,{10**12 + i},1023,0,1" for i in range(lines)] + ["# end", ""])


_READ_CAPTURE = "from ccltune.workload import importer\nimporter.load_file(importer.Path(PATH))"


def capture_file(_size: int) -> tuple[str, str]:
    return _capture(4096), _READ_CAPTURE  # the most the plugin writes (CCLT_CAPTURE_SLOTS call lines)


def capture_too_long(size: int) -> tuple[str, str]:
    """A capture file of the import's byte bound: refused (more than a capture holds) before its lines are read."""
    return _capture(max(4097, (size - 4096) // 40)), _READ_CAPTURE


CASES = {  # name -> (bound in bytes, generator, what the bound is)
    "nccl-tests text": (inputs.MAX_TEXT_BYTES, nccl_tests_text, "bytes"),
    "nccl-tests -J JSON": (inputs.MAX_TEXT_BYTES, nccl_tests_json, "bytes"),
    "NCCL log (doctor)": (inputs.MAX_TEXT_BYTES, nccl_log_doctor, "bytes"),
    "COLL log (workload import)": (inputs.MAX_TRACE_BYTES, coll_log, "bytes"),
    "torch trace (workload import)": (inputs.MAX_TRACE_BYTES, trace, "bytes"),
    "capture file (workload import)": (0, capture_file, "4096 lines"),
    "capture, 512 MiB (refused)": (inputs.MAX_TRACE_BYTES, capture_too_long, "bytes"),
    "workload file": (inputs.MAX_WORKLOAD_BYTES, workload_file, "bytes"),
    "nvbandwidth matrix": (0, nvbandwidth_matrix, f"{inputs.MAX_GPUS} GPUs"),
    "rule file (rules explain)": (16 << 20, rule_file, "bytes"),
}

CHILD = """
import sys, time
sys.path.insert(0, {src!r})
PATH = {path!r}
w0, c0 = time.monotonic(), time.process_time()
try:
{code}
except Exception as exc:
    print("ERROR", type(exc).__name__, str(exc)[:200])
# VmHWM: this process's own peak (it starts again at exec; ru_maxrss keeps the parent's from fork)
hwm = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("RESULT", time.monotonic() - w0, time.process_time() - c0, hwm)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    print(f"# reader bounds, scale {a.scale:g}: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print(f"# {'reader':<31} {'bound':>12} {'input MiB':>10} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
    for name, (bound, make, unit) in CASES.items():
        if a.only and name not in a.only:
            continue
        text, code = make(int(bound * a.scale))
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
            fh.write(text)
        size = len(text.encode())
        del text
        try:
            child = CHILD.format(src=str(ROOT / "src"), path=fh.name,
                                 code="\n".join("    " + line for line in code.split("\n")))
            done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
        finally:
            os.unlink(fh.name)
        result = [line.split() for line in done.stdout.split("\n") if line.startswith(("RESULT", "ERROR"))]
        err = next((" ".join(r[1:]) for r in result if r[0] == "ERROR"), done.stderr.strip()[-200:] or None)
        res = next((r for r in result if r[0] == "RESULT"), None)
        bound_text = f"{bound >> 20} MiB" if unit == "bytes" else unit
        if res is None:
            print(f"  {name:<31} {bound_text:>12} {size / 2**20:>10.1f}  failed: {err}")
            continue
        wall, cpu, rss_kb = float(res[1]), float(res[2]), int(res[3])
        print(f"  {name:<31} {bound_text:>12} {size / 2**20:>10.1f} {wall:>8.1f} {cpu:>8.1f} {rss_kb / 1024:>13.0f}"
              + (f"  ({err})" if err else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
