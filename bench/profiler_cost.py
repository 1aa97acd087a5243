"""CPU cost per call of the ccltune profiler plugin (profiler/), with profiling on, sampled and off.

    python bench/profiler_cost.py [--rounds 200] [--cc gcc]

Builds the plugin and profiler/bench/profiler_cost.c (``make -C profiler bench``, into a
temporary folder), which loads the library as NCCL does and drives it through the same harness
as the C tests: for batches of 512 calls, the task's startEvent, a KernelCh startEvent,
recordEventState(KernelChStop), the KernelCh stopEvent and the task's stopEvent, each timed per
batch. Prints the table the program prints: ns per call, median of the rounds. This is a
microbenchmark on this machine's CPU, not a timed test: the in-job cost is what `ccltune ab`
measures on a real step.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROFILER = Path(__file__).resolve().parents[1] / "profiler"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="batches of 512 calls per column (median taken)")
    p.add_argument("--cc", default="gcc", help="C compiler")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    if shutil.which(args.cc) is None or shutil.which("make") is None:
        print(f"profiler_cost: needs make and a C compiler ({args.cc} not found)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ccltune-profiler-cost-") as tmp:
        build = Path(tmp) / "build"
        made = subprocess.run(["make", "-s", "-C", str(PROFILER), f"BUILD={build}", f"CC={args.cc}", "bench"],
                              capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            print(made.stdout + made.stderr, file=sys.stderr)
            return 1
        ran = subprocess.run([str(build / "profiler_cost"), str(build / "libnccl-profiler-ccltune.so"),
                              str(args.rounds)], capture_output=True, text=True, timeout=600)
    sys.stdout.write(ran.stdout)
    sys.stderr.write(ran.stderr)
    return ran.returncode


if __name__ == "__main__":
    raise SystemExit(main())
