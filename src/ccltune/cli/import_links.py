"""``ccltune import transferbench FILE`` and ``ccltune import nvbandwidth FILE``: another tool's link matrix
stored as a ``links`` run (``ccltune.commands.import_links`` stores it)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import DefaultsFormatter, help_from
from ccltune.commands.common import terminal
from ccltune.commands.import_links import READERS, ImportLinksOptions, run_import_links
from ccltune.commands.options import default, from_fields

# each tool's --help: (one line, the description)
_HELP = {
    "transferbench": ("TransferBench a2a / p2p preset output",
                      "Import TransferBench output (the a2a preset: Transfer lines and the SRC\\DST summary with "
                      "STotal/Actual; the p2p preset: uni- and bidirectional tables) as a links run. The method is "
                      "recorded as the tool printed it: GFX kernel (sm-write, or sm-read with USE_REMOTE_READ=1) or "
                      "DMA (ce), CU count, fine- or coarse-grained memory."),
    "nvbandwidth": ("nvbandwidth plain or -j JSON output",
                    "Import NVIDIA nvbandwidth output (plain matrices or -j JSON) as a links run: every "
                    "device_to_device_* test becomes a method (ce-read, ce-write, sm-read, sm-write) and direction."),
}
assert set(_HELP) == set(READERS), "a --help for each tool read"


def _D(name: str) -> Any:
    return default(ImportLinksOptions, name)


def register(src: argparse._SubParsersAction) -> None:
    """Add one subcommand per link tool under ``ccltune import``."""
    for name in READERS:
        short, long = _HELP[name]
        p = src.add_parser(name, help=short, description=long, formatter_class=DefaultsFormatter)
        p.add_argument("file", metavar="FILE")
        p.add_argument("--db", default=_D("db"))
        p.add_argument("--gpu", default=None, metavar="NAME")
        p.add_argument("--host", default=None, metavar="NAME")
        p.add_argument("--threshold", type=float, default=_D("threshold"))
        p.set_defaults(func=run, source=name)
        help_from(p, ImportLinksOptions)


def run(args: argparse.Namespace) -> int:
    run_import_links(from_fields(ImportLinksOptions, vars(args)), terminal())
    return 0
