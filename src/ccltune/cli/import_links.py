"""``ccltune import transferbench FILE`` and ``ccltune import nvbandwidth FILE``: another tool's link matrix
stored as a ``links`` run, read back by ``ccltune links --run N`` and ``ccltune report`` as a measured one."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any, Callable

from ccltune.cli._common import DefaultsFormatter
from ccltune import __version__
from ccltune.cli import _common
from ccltune.diagnose.checks import linkmath
from ccltune.diagnose.parsers import nvbandwidth, transferbench
from ccltune.diagnose.findings import format_findings
from ccltune.diagnose.parsers.linkimport import ImportedLinks
from ccltune.environment import platform_name
from ccltune.errors import UsageError
from ccltune.status import RunStatus
from ccltune.store import DEFAULT_DB, Store

_SOURCES: dict[str, tuple[Callable[[str, str], ImportedLinks], str, str]] = {
    "transferbench": (transferbench.parse, "TransferBench a2a / p2p preset output",
                      "Import TransferBench output (the a2a preset: Transfer lines and the SRC\\DST summary with "
                      "STotal/Actual; the p2p preset: uni- and bidirectional tables) as a links run. The method is "
                      "recorded as the tool printed it: GFX kernel (sm-write, or sm-read with USE_REMOTE_READ=1) or "
                      "DMA (ce), CU count, fine- or coarse-grained memory."),
    "nvbandwidth": (nvbandwidth.parse, "nvbandwidth plain or -j JSON output",
                    "Import NVIDIA nvbandwidth output (plain matrices or -j JSON) as a links run: every "
                    "device_to_device_* test becomes a method (ce-read, ce-write, sm-read, sm-write) and direction."),
}


def register(src: argparse._SubParsersAction) -> None:
    """Add one subcommand per link tool under ``ccltune import``."""
    for name, (_, short, long) in _SOURCES.items():
        p = src.add_parser(name, help=short, description=long, formatter_class=DefaultsFormatter)
        p.add_argument("file", metavar="FILE", help=f"{name} output file")
        p.add_argument("--db", default=DEFAULT_DB, help="results database")
        p.add_argument("--gpu", default=None, metavar="NAME",
                       help="GPU model, when the output does not name it (e.g. 'AMD Instinct MI300X')")
        p.add_argument("--host", default=None, metavar="NAME",
                       help="the host the output was measured on, when the output does not name it (default: none, "
                            "and the run's host is recorded as unknown: the report then says 'host unknown')")
        p.add_argument("--threshold", type=float, default=0.8, help="flag links below this fraction of their median")
        p.set_defaults(func=run, source=name)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {args.threshold}")
    parse = _SOURCES[args.source][0]
    found = parse(_common.read_input(args.file), args.file)  # parsed before the database is opened: bad input stores nothing
    if args.host is not None and not args.host.strip():
        raise UsageError("--host must name a host, got an empty string")
    if args.host and found.host and args.host != found.host:
        raise UsageError(f"--host {args.host!r} disagrees with the host {args.file!r} names ({found.host!r})")
    host = found.host or args.host
    names = found.gpu_names or ([args.gpu] * found.n_gpus if args.gpu else [])
    gpus = [{"index": i, "name": n} for i, n in enumerate(names)]
    env: dict[str, Any] = {"ccltune_version": __version__, "world_size": found.n_gpus, "n_nodes": 1, "gpus": gpus,
                           "host": host, "platform": platform_name(gpus, found.n_gpus, 1) if gpus else None,
                           "source": found.tool, "tool_version": found.version,
                           "driver_version": found.driver_version, "cuda_version": found.cuda_version,
                           "files": [str(Path(args.file).resolve())]}
    env["command"] = "ccltune " + shlex.join(["import", args.source, args.file, "--db", str(args.db)]
                                             + (["--gpu", args.gpu] if args.gpu else [])
                                             + (["--host", args.host] if args.host else []))
    summary, findings = linkmath.analyze_stored(found.rows, found.summary(), threshold=args.threshold)
    with Store(args.db) as store:
        run_id = store.begin_run("links", command=env["command"], env=env, engine=found.tool,
                                 args={k: v for k, v in vars(args).items() if k != "func"})
        store.add_links(run_id, found.rows)
        store.add_findings(run_id, [f.to_record() for f in findings])
        store.add_artifact(run_id, f"{args.source}.txt", _common.read_input(args.file))
        store.finish_run(run_id, RunStatus.COMPLETE, summary)
    print(f"# run {run_id} (links, imported from {found.tool} {found.version or ''}".rstrip() + f") in {args.db}: "
          f"{found.n_gpus} GPUs on {host or 'host unknown (give --host)'}, {len(found.rows)} links, "
          f"tests {', '.join(found.tests)}")
    for method, info in found.method_info.items():
        print(f"#   {method}: {json.dumps(info, sort_keys=True)}")
    for note in found.notes:
        print(f"# note: {note}")
    print(format_findings(findings, title="slowest-link checks"))
    print(f"# show it: ccltune links --run {run_id} --db {args.db}")
    return 0
