"""Worker script: several `ccltune` command lines, one after another, in one torchrun job.

    python -m torch.distributed.run --standalone --nproc-per-node=N cli_many.py OUT RUN RUN ...

Each RUN is a JSON object {"argv": [...], "env": {...}}: a command line given to ccltune.cli.main,
as the `ccltune` entry point would, in a worker that torchrun started (what `ccltune CMD --nproc N`
runs), with "env" added to the environment for that run only (a null value: unset). Instead of "argv",
"script": a Python file run as __main__ (a test's own worker script; it joins and leaves the group
itself): exit code 0, or 1 with its traceback on stderr. "as_headroom_bytes": the run's address space
limited to what the worker maps already plus that many bytes (RLIMIT_AS, lifted after the run), so
that an allocation larger than that fails as it would on a machine without the memory. Every rank writes run I's
stdout, stderr and exit code to OUT/I.RANK.out, .err and .rc. One launch instead of one per command
line: the process group is joined and left per run, as it is in separate jobs, without paying
torch's import in torchrun and in every worker each time (seconds of CPU on a 2-core machine).

torch resets its process-group counter when the default group is destroyed (so that an elastic job
re-creates groups under the same names), and the default group's keys in torchrun's store are named
after that counter: a second run would read the first run's gloo addresses and connect to sockets
that are gone. Each run starts at its own counter."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import runpy
import sys
import traceback
from pathlib import Path

import torch.distributed.distributed_c10d as c10d

from ccltune.cli import main


def run_one(spec: str) -> int:
    run = json.loads(spec)
    settings = run.get("env", {})
    saved = {name: os.environ.get(name) for name in settings}
    for name, value in settings.items():
        _set(name, value)
    limit = resource.getrlimit(resource.RLIMIT_AS)
    if "as_headroom_bytes" in run:
        resource.setrlimit(resource.RLIMIT_AS, (_mapped_bytes() + run["as_headroom_bytes"], limit[1]))
    try:
        return _script(run["script"]) if "script" in run else main(run["argv"])
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limit)
        for name, value in saved.items():
            _set(name, value)


def _script(path: str) -> int:
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:  # the script's own exit: its code, as a process of its own would end
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the run's failure, for its test to report; the next run goes on
        traceback.print_exc()
        return 1
    return 0


def _mapped_bytes() -> int:
    """This process's address space now (VmSize), in bytes."""
    with open("/proc/self/status", encoding="utf-8") as fh:
        return next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmSize:"))


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


if __name__ == "__main__":
    out, runs = Path(sys.argv[1]), sys.argv[2:]
    rank = os.environ.get("RANK", "0")
    for i, spec in enumerate(runs):
        c10d._world.group_count = 1000 * i   # fresh store keys for this run's groups
        base = out / f"{i}.{rank}"
        with open(f"{base}.out", "w", encoding="utf-8") as o, open(f"{base}.err", "w", encoding="utf-8") as e, \
                contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            rc = run_one(spec)
        Path(f"{base}.rc").write_text(str(rc), encoding="utf-8")
