"""``ccltune import nccl-tests FILE...``: store nccl-tests output (each run in each file) as measurements of one
configuration."""

from __future__ import annotations

import argparse
import re
import shlex
from collections import Counter
from typing import Any
from pathlib import Path

from ccltune.cli._common import DefaultsFormatter
from ccltune import __version__
from ccltune.cli import _common, import_links
from ccltune.commconfig import CommConfig
from ccltune.environment import platform_name
from ccltune.errors import UsageError, unknown_name
from ccltune.rules import ALGORITHMS, MAX_CHANNELS, PROTOCOLS, rule_spelling
from ccltune.status import RowStatus, RunStatus
from ccltune.store import DEFAULT_DB, Store
from ccltune.ncclt import Parsed, number_reps, parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="store results of other benchmarks (nccl-tests, TransferBench, nvbandwidth) as a run",
                       description="Store measurements made by other tools as a run of kind 'import'.")
    src = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    n = src.add_parser(
        "nccl-tests", help="nccl-tests text output or -J JSON",
        description="Import nccl-tests output (stdout table or -J JSON; both out-of-place and in-place"
                    " columns) as measurements of the configuration it was run with: pass --algo/--proto/"
                    "--channels as set through NCCL_ALGO/NCCL_PROTO/the plugin; none = NCCL's default.",
        formatter_class=DefaultsFormatter)
    n.add_argument("files", nargs="+", metavar="FILE", help="nccl-tests output files")
    n.add_argument("--db", default=DEFAULT_DB, help="results database")
    n.add_argument("--algo", default=None, help=f"algorithm forced in that run ({', '.join(ALGORITHMS)})")
    n.add_argument("--proto", default=None, help=f"protocol forced in that run ({', '.join(PROTOCOLS)})")
    n.add_argument("--channels", type=int, default=None, help="channel count forced in that run")
    n.add_argument("--nranks", type=int, default=None, help="ranks, when the file lists no '#  Rank' lines")
    n.add_argument("--gpu", default=None, metavar="NAME",
                   help="GPU model (e.g. 'NVIDIA H200'), when the file names none; else the platform is 'unknown'")
    n.add_argument("--collective", default=None,
                   help="collective (one), when the file header and name do not say; must agree with a header")
    n.set_defaults(func=run)
    import_links.register(src)  # transferbench, nvbandwidth: link matrices, stored as links runs


def candidate_from_args(args: argparse.Namespace) -> CommConfig:
    algo = rule_spelling(args.algo) if args.algo else None  # collnet_direct or NCCL_ALGO's CollNetDirect
    proto = args.proto.lower() if args.proto else None
    if algo and algo not in ALGORITHMS:
        raise unknown_name("algorithm", args.algo, ALGORITHMS, "--algo")
    if proto and proto not in PROTOCOLS:
        raise unknown_name("protocol", args.proto, PROTOCOLS, "--proto")
    if args.channels is not None and not 1 <= args.channels <= MAX_CHANNELS:
        raise UsageError(f"--channels must be in 1..{MAX_CHANNELS}, got {args.channels}")
    if args.nranks is not None and args.nranks < 1:
        raise UsageError(f"--nranks must be >= 1, got {args.nranks}")
    return CommConfig(algo, proto, args.channels)


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


def _env(parsed: list[Parsed], args: argparse.Namespace, world: int, nodes: int) -> dict[str, Any]:
    """The run's environment record: what the files say (GPU model per rank, hosts, NCCL or RCCL,
    HIP and ROCm versions, the library path, the tool and its version), else --gpu."""
    named = next((p.gpus for p in parsed if p.gpus), [])
    model = named[0] if named else (args.gpu.strip() if args.gpu else "unknown")
    gpus = [{"index": i, "name": model} for i in range(world)]
    versions = {p.nccl_version for p in parsed if p.nccl_version}
    devices = next((p.env["devices"] for p in parsed if p.env.get("devices")), [])
    tool = _joined(parsed, "tool") or "nccl-tests"
    return {"ccltune_version": __version__, "world_size": world, "n_nodes": nodes, "gpus": gpus,
            "gpu_source": "file" if named else ("--gpu" if args.gpu else "unknown"),
            "devices": devices, "process_per_gpu": _process_per_gpu(devices, world), "hosts": sorted({h for p in parsed for h in p.hosts}),
            "platform": platform_name(gpus, world, nodes),
            "nccl_version": ", ".join(sorted(versions)) or _library_version(parsed),
            "rccl_version": _joined(parsed, "rccl_version"), "hip_version": _joined(parsed, "hip_version"),
            "rocm_version": _joined(parsed, "rocm_version"), "library_path": _joined(parsed, "library_path"),
            "host": _joined(parsed, "hostname"), "source": tool,
            "tool_version": _joined(parsed, "tool_version") or _joined(parsed, "rccl_tests_version"),
            "files": [str(Path(f).resolve()) for f in args.files]}


def run(args: argparse.Namespace) -> int:
    cand = candidate_from_args(args)
    # every file is parsed before the database is opened: bad input stores nothing
    parsed: list[Parsed] = [p for f in args.files
                            for p in parse(_common.read_input(f), f, candidate=cand, collective=args.collective, nranks=args.nranks)]
    models = {g for p in parsed for g in p.gpus}
    if args.gpu is not None and not args.gpu.strip():
        raise UsageError("--gpu must name a GPU model, got an empty string")
    if args.gpu and models and models != {args.gpu.strip()}:
        raise UsageError(f"--gpu {args.gpu!r}, but the files name {', '.join(sorted(models))}")
    if len(models) > 1:
        raise UsageError(f"the files ran on different GPU models ({', '.join(sorted(models))}); import them"
                         " separately so each run has one platform")
    number_reps(parsed)
    world = max(p.n_ranks for p in parsed)
    nodes = max(p.n_nodes for p in parsed)
    env = _env(parsed, args, world, nodes)
    command = "ccltune " + shlex.join(["import", "nccl-tests", *args.files, "--db", str(args.db)]
                                      + [f"--{k}={v}" for k in ("algo", "proto", "channels", "nranks", "gpu", "collective")
                                         if (v := getattr(args, k)) is not None])
    with Store(args.db) as store:
        run_id = store.begin_run("import", command=command, env=env, engine=env["source"],
                                 args={k: v for k, v in vars(args).items() if k != "func"})
        for p in parsed:
            store.add_measurements(run_id, p.rows)
        store.finish_run(run_id, RunStatus.COMPLETE, {"rows": sum(len(p.rows) for p in parsed), "config": cand.label})
    print(f"# run {run_id} (import) in {args.db}: config {cand.label}, platform {env['platform']}")
    print(f"# {'file':<40} {'collective':<15} {'n_ranks':>7} {'sizes':>5} {'rows':>5} {'not_ok':>6}")
    runs_in = Counter(p.path for p in parsed)
    for p in parsed:
        bad = sum(m.status != RowStatus.OK for m in p.rows)
        where = f"{p.path}:{p.line}" if runs_in[p.path] > 1 else p.path  # a file of several runs: one line each
        print(f"  {where:<40} {p.collective:<15} {p.n_ranks:>7} {len({m.size_bytes for m in p.rows}):>5}"
              f" {len(p.rows):>5} {bad:>6}")
    for p in parsed:
        for note in p.notes:
            print(f"# note: {p.path}: {note}")
    return 0
