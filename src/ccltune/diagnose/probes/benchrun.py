"""``ccltune bench`` run in a subprocess under torchrun (one process per GPU), its output and
JSON read back. Used by ``doctor`` (transport, P2P level, channels) and ``check`` (gates).

The child gets this process's environment plus the overrides given (NCCL_DEBUG=INFO for a
transport check, NCCL_P2P_LEVEL=SYS for a comparison...), so variables the site requires,
such as NCCL_NVLS_ENABLE=0, carry over.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccltune import collectives
from ccltune.errors import UsageError
from ccltune.files import read_text, shown
from ccltune.inputs import load_json
from ccltune.status import RowStatus

DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,TUNING,ENV"}


@dataclass
class BenchRun:
    """A finished (or failed) bench subprocess. ``error`` is None when it ran and wrote its JSON."""

    argv: list[str]
    env_overrides: dict[str, str]
    returncode: int | None
    output: str
    elapsed_s: float
    error: str | None = None
    bench_env: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    def busbw(self, size_bytes: int | None = None, *, in_place: bool = True) -> float | None:
        """Median busbw (GB/s) of the in-place records (at ``size_bytes``, or the largest size)."""
        rows = [r for r in self.records if bool(r.get("in_place")) == in_place and r.get("busbw_gbps") is not None]
        if not rows:
            return None
        size = size_bytes if size_bytes is not None else max(int(r["size_bytes"]) for r in rows)
        values = sorted(float(r["busbw_gbps"]) for r in rows if int(r["size_bytes"]) == size)
        return values[len(values) // 2] if values else None


@dataclass(frozen=True)
class Probe:
    """What one probe asks ``ccltune bench`` to measure, and where it writes its database and JSON."""

    db: str
    json_path: str
    collectives: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 1 << 20
    max_bytes: int = 1 << 20
    step_factor: int = 2
    iters: int = 5
    warmup: int = 2


# ``ccltune bench``'s arguments (after ``ccltune``) for a probe. The commands layer builds them from
# BenchOptions (ccltune.commands.bench_probe), so the workers' parser reads back the options meant; this
# layer only runs them.
BenchArgs = Callable[[Probe], list[str]]


def bench_argv(nproc: int, probe: Probe, bench_args: BenchArgs) -> list[str]:
    """The probe's command line: torchrun, one process per GPU, running ``ccltune`` with ``bench_args(probe)``."""
    if nproc < 1:
        raise UsageError(f"number of processes must be >= 1, got {nproc}")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "-m", "ccltune", *bench_args(probe)]


def read_bench_json(path: str | Path, *, flag: str = "--from-json") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(env, records) of a bench JSON file ``{"env": {...}, "records": [...]}``; UsageError if it is not one."""
    p = Path(path)
    data = load_json(read_text(p, flag), f"{flag} {shown(p)}", what="is not JSON", finite=False)  # fields named below
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise UsageError(f"{flag}: {str(p)!r} is not a bench JSON file (needs an object with a 'records' list; "
                         "write one with `ccltune bench --json PATH`)")
    env = data.get("env", {})
    problems = [_env_problem(env), *(_record_problem(i, r) for i, r in enumerate(data["records"]))]
    problem = next((why for why in problems if why), None) or _contradiction(env, data["records"])
    if problem:
        raise UsageError(f"{flag}: {str(p)!r}: {problem}")
    return env, data["records"]


# What check and doctor read from a bench JSON, and the JSON types each may have: a wrong one is bad
# input, not a figure to convert (a string world size or bandwidth would otherwise crash the gates).
_INT, _NUM, _STR, _BOOL = "an integer", "a number", "a string", "true or false"
_ENV_FIELDS = {"world_size": (_INT, 1), "graph": (_INT, 0), "process_per_gpu": (_BOOL, None),
               "engine": (_STR, None), "launcher": (_STR, None), "platform": (_STR, None),
               "nccl_version": (_STR, None)}
_RECORD_FIELDS = {"collective": (_STR, None), "size_bytes": (_INT, 0), "in_place": (_BOOL, None),
                  "busbw_gbps": (_NUM, 0), "algbw_gbps": (_NUM, 0), "status": (_STR, None),
                  "graph": (_INT, 0), "n_ranks": (_INT, 1), "time_us": (_NUM, 0), "wrong": (_INT, 0)}
_RECORD_REQUIRED = ("collective", "size_bytes")
_RECORD_NULLABLE = ("busbw_gbps", "algbw_gbps", "time_us", "wrong")  # null: not measured (a skipped or failed point)
BW_TOLERANCE = 0.02  # busbw against size / time_us x the bus factor: bench writes all three from one time


def _contradiction(env: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str | None:
    """Figures that cannot all be right: a record of another rank count than the environment's world size (or than
    the other records), a time that does not give the stored algbw and busbw (size_bytes / time_us, x the
    collective's bus factor, within BW_TOLERANCE). A record whose results were wrong is the gate's FAIL
    (gates.evaluate), not a contradiction."""
    world = env.get("world_size") if isinstance(env, Mapping) else None
    ranks = {r["n_ranks"] for r in records if r.get("n_ranks") is not None}
    for i, r in enumerate(records):
        n = r.get("n_ranks")
        if n is not None and world is not None and n != world:
            return f"records[{i}].n_ranks is {n} but env.world_size is {world}: the records are not of this run"
        if n is not None and len(ranks) > 1:
            return f"records of {', '.join(map(str, sorted(ranks)))} ranks in one file (records[{i}]: {n})"
        t, size = r.get("time_us"), r.get("size_bytes")
        coll = collectives.REGISTRY.get(collectives.canonical(str(r.get("collective"))) or "")
        n = n if n is not None else world
        if not t or coll is None or n is None or r.get("status", RowStatus.OK) != RowStatus.OK:
            continue
        algbw = size / t / 1e3
        for key, want in (("algbw_gbps", algbw), ("busbw_gbps", algbw * coll.bus_factor(n))):
            got = r.get(key)
            if got is not None and abs(got - want) > BW_TOLERANCE * max(abs(want), 1e-9):
                return (f"records[{i}].{key} is {got:g} GB/s but size_bytes {size} in time_us {t:g} on {n} ranks "
                        f"gives {want:.4g}: the record's figures contradict each other")
    return None


def _env_problem(env: Any) -> str | None:
    if not isinstance(env, dict):
        return f"'env' must be an object, got {_json_type(env)}"
    for key, (kind, low) in _ENV_FIELDS.items():
        why = _value_problem(env[key], kind, low, nullable=True) if key in env else None
        if why:
            return f"env.{key}: {why}"
    return None


def _record_problem(i: int, record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"records[{i}] must be an object, got {_json_type(record)}"
    missing = [key for key in _RECORD_REQUIRED if key not in record]
    if missing:
        return f"records[{i}] lacks {' and '.join(map(repr, missing))}"
    for key, (kind, low) in _RECORD_FIELDS.items():
        why = _value_problem(record[key], kind, low, nullable=key in _RECORD_NULLABLE) if key in record else None
        if why:
            return f"records[{i}].{key}: {why}"
    return None


def _value_problem(value: Any, kind: str, low: float | None, *, nullable: bool) -> str | None:
    """Why ``value`` is not a JSON value of ``kind`` (>= ``low`` for numbers), or None when it is."""
    if value is None:
        return None if nullable else f"must be {kind}, got null"
    if kind == _BOOL:
        ok = isinstance(value, bool)
    elif kind == _STR:
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, int if kind == _INT else (int, float)) and not isinstance(value, bool)
    if not ok:
        return f"must be {kind}{' or null' if nullable else ''}, got {_json_type(value)} {json.dumps(value)}"
    if low is not None and not low <= value < math.inf:  # also NaN and Infinity, which Python's json reads
        return f"must be a finite number >= {low}, got {value}"
    return None


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def run_bench(nproc: int, *, bench_args: BenchArgs | None, env_overrides: Mapping[str, str] | None = None,
              timeout_s: float = 600, collective: str | Sequence[str] = "all_reduce", **sizes: int) -> BenchRun:
    """Run bench on ``nproc`` GPUs (``sizes``: Probe's min_bytes, max_bytes, step_factor, iters, warmup);
    never raises for a failed child, ``error`` says what went wrong. ``bench_args``: the command's
    builder of bench's arguments (None: a caller that cannot start bench, a programming error)."""
    if bench_args is None:
        raise ValueError("run_bench needs the command's bench_args (ccltune.commands.bench_probe.bench_args)")
    overrides = dict(env_overrides or {})
    with tempfile.TemporaryDirectory(prefix="ccltune-diag-") as tmp:
        json_path = os.path.join(tmp, "bench.json")
        probe = Probe(db=os.path.join(tmp, "bench.db"), json_path=json_path,
                      collectives=(collective,) if isinstance(collective, str) else tuple(collective), **sizes)
        argv = bench_argv(nproc, probe, bench_args)
        env = {**os.environ, **overrides}
        if "NCCL_DEBUG" in overrides:
            env.pop("NCCL_DEBUG_FILE", None)  # the log must come to our pipe, not to the user's file
        start = time.monotonic()
        try:
            proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  errors="replace", timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return BenchRun(argv, overrides, None, out, time.monotonic() - start,
                            error=f"bench did not finish within {timeout_s:g} s")
        except OSError as exc:
            return BenchRun(argv, overrides, None, "", time.monotonic() - start, error=f"could not start: {exc}")
        run = BenchRun(argv, overrides, proc.returncode, proc.stdout, time.monotonic() - start)
        if proc.returncode != 0:
            run.error = f"bench exited with {proc.returncode}: {_error_lines(proc.stdout)}"
            return run
        try:
            run.bench_env, run.records = read_bench_json(json_path, flag="bench --json")
        except UsageError as exc:
            run.error = str(exc)
        return run


def _error_lines(output: str) -> str:
    """The child's own error lines (ccltune's, a Python exception), else its last lines."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ccltune: error") or line.endswith("Error") or
              (line.split(":", 1)[0].endswith(("Error", "Exception")) and " " not in line.split(":", 1)[0])]
    picked = list(dict.fromkeys(errors))[-2:] or lines[-3:]
    return " | ".join(picked)[-500:]
