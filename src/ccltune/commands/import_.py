"""``import nccl-tests``: nccl-tests (or rccl-tests) output, each run in each file, stored as one run of kind
'import': measurements of the configuration it ran with (the readers: ``ccltune.ncclt``)."""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccltune._version import __version__
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.options import option
from ccltune.commands.results import RunResult
from ccltune.commconfig import CommConfig
from ccltune.environment import platform_name
from ccltune.errors import UsageError, unknown_name
from ccltune.inputs import read_input_text
from ccltune.ncclt import Parsed, number_reps, parse
from ccltune.rules import ALGORITHMS, MAX_CHANNELS, PROTOCOLS, rule_spelling
from ccltune.status import RowStatus, RunStatus
from ccltune.store import DEFAULT_DB, Store


@dataclass(frozen=True)
class ImportNcclTestsOptions:
    """``ccltune import nccl-tests``'s options (``ccltune import nccl-tests --help``): the files read, the
    configuration they ran with (None: NCCL's default), and what the files may not say."""

    files: tuple[str, ...] = option(positional=True, help="nccl-tests output files")
    db: str = option(DEFAULT_DB, flag="--db", help="results database")
    algo: str | None = option(None, flag="--algo", help=f"algorithm forced in that run ({', '.join(ALGORITHMS)})")
    proto: str | None = option(None, flag="--proto", help=f"protocol forced in that run ({', '.join(PROTOCOLS)})")
    channels: int | None = option(None, flag="--channels", help="channel count forced in that run")
    nranks: int | None = option(None, flag="--nranks", help="ranks, when the file lists no '#  Rank' lines")
    gpu: str | None = option(None, flag="--gpu",
                             help="GPU model (e.g. 'NVIDIA H200'), when the file names none; else the platform is 'unknown'")
    collective: str | None = option(None, flag="--collective",
                                    help="collective (one), when the file header and name do not say; must agree with a header")


def candidate(o: ImportNcclTestsOptions) -> CommConfig:
    """The configuration the files ran with, checked (NCCL_ALGO's spellings too: CollNetDirect)."""
    algo = rule_spelling(o.algo) if o.algo else None  # collnet_direct or NCCL_ALGO's CollNetDirect
    proto = o.proto.lower() if o.proto else None
    if algo and algo not in ALGORITHMS:
        raise unknown_name("algorithm", o.algo or "", ALGORITHMS, "--algo")
    if proto and proto not in PROTOCOLS:
        raise unknown_name("protocol", o.proto or "", PROTOCOLS, "--proto")
    if o.channels is not None and not 1 <= o.channels <= MAX_CHANNELS:
        raise UsageError(f"--channels must be in 1..{MAX_CHANNELS}, got {o.channels}")
    if o.nranks is not None and o.nranks < 1:
        raise UsageError(f"--nranks must be >= 1, got {o.nranks}")
    return CommConfig(algo, proto, o.channels)


def _joined(parsed: list[Parsed], key: str) -> str | None:
    """One env fact over all runs: the distinct values, comma-joined (None when no run says)."""
    values = sorted({str(p.env[key]) for p in parsed if p.env.get(key)})
    return ", ".join(values) or None


def _library_version(parsed: list[Parsed]) -> str | None:
    """RCCL's NCCL-compatible version ('2.22.3' of 'RCCL version : 2.22.3-HEAD:7d8d67c')."""
    found = {m.group(0) for p in parsed if (m := re.match(r"\d+\.\d+\.\d+", str(p.env.get("rccl_version", ""))))}
    return ", ".join(sorted(found)) or None


def _process_per_gpu(devices: list[dict[str, Any]], world: int) -> bool | None:
    """Whether each rank had a process of its own, from the device lines' host and Pid (nccl-tests and
    rccl-tests ``-g 1`` under mpirun: one Pid per rank; ``-g 8``: one Pid for 8): False as soon as two ranks
    share a process, True when every rank is listed with a Pid of its own, None when the file cannot say."""
    procs = [(d.get("host"), d.get("pid")) for d in devices if d.get("pid")]
    if len(set(procs)) < len(procs):
        return False
    return True if procs and len(procs) == world else None


def _env(parsed: list[Parsed], o: ImportNcclTestsOptions, world: int, nodes: int) -> dict[str, Any]:
    """The run's environment record: what the files say (GPU model per rank, hosts, NCCL or RCCL,
    HIP and ROCm versions, the library path, the tool and its version), else --gpu."""
    named = next((p.gpus for p in parsed if p.gpus), [])
    model = named[0] if named else (o.gpu.strip() if o.gpu else "unknown")
    gpus = [{"index": i, "name": model} for i in range(world)]
    versions = {p.nccl_version for p in parsed if p.nccl_version}
    devices: list[dict[str, Any]] = next((p.env["devices"] for p in parsed if p.env.get("devices")), [])
    tool = _joined(parsed, "tool") or "nccl-tests"
    return {"ccltune_version": __version__, "world_size": world, "n_nodes": nodes, "gpus": gpus,
            "gpu_source": "file" if named else ("--gpu" if o.gpu else "unknown"),
            "devices": devices, "process_per_gpu": _process_per_gpu(devices, world),
            "hosts": sorted({h for p in parsed for h in p.hosts}),
            "platform": platform_name(gpus, world, nodes),
            "nccl_version": ", ".join(sorted(versions)) or _library_version(parsed),
            "rccl_version": _joined(parsed, "rccl_version"), "hip_version": _joined(parsed, "hip_version"),
            "rocm_version": _joined(parsed, "rocm_version"), "library_path": _joined(parsed, "library_path"),
            "host": _joined(parsed, "hostname"), "source": tool,
            "tool_version": _joined(parsed, "tool_version") or _joined(parsed, "rccl_tests_version"),
            "files": [str(Path(f).resolve()) for f in o.files]}


def run_import_nccl_tests(o: ImportNcclTestsOptions, console: Console = Console()) -> RunResult:
    """Parse every file (bad input stores nothing), store them as one import run, say its table to
    ``console``; return the run, read back by the id the store gave it."""
    check_outputs(o)
    if not o.files:
        raise UsageError("import nccl-tests: name at least one FILE")
    cand = candidate(o)
    # every file is parsed before the database is opened: bad input stores nothing
    parsed: list[Parsed] = [p for f in o.files
                            for p in parse(read_input_text(f, "FILE"), f, candidate=cand, collective=o.collective,
                                           nranks=o.nranks)]
    models = {g for p in parsed for g in p.gpus}
    if o.gpu is not None and not o.gpu.strip():
        raise UsageError("--gpu must name a GPU model, got an empty string")
    if o.gpu and models and models != {o.gpu.strip()}:
        raise UsageError(f"--gpu {o.gpu!r}, but the files name {', '.join(sorted(models))}")
    if len(models) > 1:
        raise UsageError(f"the files ran on different GPU models ({', '.join(sorted(models))}); import them"
                         " separately so each run has one platform")
    number_reps(parsed)
    world = max(p.n_ranks for p in parsed)
    nodes = max(p.n_nodes for p in parsed)
    env = _env(parsed, o, world, nodes)
    command = "ccltune " + shlex.join(["import", "nccl-tests", *o.files, "--db", str(o.db)]
                                      + [f"--{k}={v}" for k in ("algo", "proto", "channels", "nranks", "gpu", "collective")
                                         if (v := getattr(o, k)) is not None])
    with Store(o.db) as store:
        run_id = store.begin_run("import", command=command, env=env, engine=env["source"],
                                 args={"source": "nccl-tests", **dataclasses.asdict(o)})
        for p in parsed:
            store.add_measurements(run_id, p.rows)
        store.finish_run(run_id, RunStatus.COMPLETE, {"rows": sum(len(p.rows) for p in parsed), "config": cand.label})
    console.say(f"# run {run_id} (import) in {o.db}: config {cand.label}, platform {env['platform']}")
    console.say(f"# {'file':<40} {'collective':<15} {'n_ranks':>7} {'sizes':>5} {'rows':>5} {'not_ok':>6}")
    runs_in = Counter(p.path for p in parsed)
    for p in parsed:
        bad = sum(m.status != RowStatus.OK for m in p.rows)
        where = f"{p.path}:{p.line}" if runs_in[p.path] > 1 else p.path  # a file of several runs: one line each
        console.say(f"  {where:<40} {p.collective:<15} {p.n_ranks:>7} {len({m.size_bytes for m in p.rows}):>5}"
                    f" {len(p.rows):>5} {bad:>6}")
    for p in parsed:
        for note in p.notes:
            console.say(f"# note: {p.path}: {note}")
    return RunResult.read(o.db, run_id)
