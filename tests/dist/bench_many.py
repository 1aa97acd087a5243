"""Worker script: several `ccltune bench` command lines, one after another, in one torchrun job.

    python -m torch.distributed.run --standalone --nproc-per-node=2 bench_many.py "ARGS" "ARGS" ...

Each argument is one command line (split on spaces) given to ccltune.cli.main, as the
`ccltune` entry point would; rank 0 prints `# bench_many: run I exit RC` after each. One
launch instead of one per command line: the process group is joined and left per run, as
it is in separate jobs, without paying torch's import and torchrun's start each time.

torch resets its process-group counter when the default group is destroyed (so that an
elastic job re-creates groups under the same names), and the default group's keys in
torchrun's store are named after that counter: a second run would read the first run's
gloo addresses and connect to sockets that are gone. Each run starts at its own counter."""

from __future__ import annotations

import os
import sys

import torch.distributed.distributed_c10d as c10d

from ccltune.cli import main

if __name__ == "__main__":
    worst = 0
    for i, line in enumerate(sys.argv[1:]):
        c10d._world.group_count = 1000 * i   # fresh store keys for this run's groups
        rc = main(line.split())
        worst = worst or rc
        if os.environ.get("RANK", "0") == "0":
            print(f"# bench_many: run {i} exit {rc}", flush=True)
    sys.exit(worst)
