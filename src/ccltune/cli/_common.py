"""Argument helpers shared by the commands' parsers: the launch flags, --db, the help formatter. What the
commands do with the values is ``ccltune.commands`` (``commands.launching``: the engine, the job, the
checks the launching commands share); the run itself is ``measure.session``."""

from __future__ import annotations

import argparse
import dataclasses

from ccltune.commands.diagnosis import DiagnoseOptions
from ccltune.commands.launching import BUFFERS
from ccltune.commands.options import default, help_of
from ccltune.engines import ENGINES
from ccltune.store import DEFAULT_DB


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help with each default shown once: not '(default: None)' (a flag that is off unless given), not
    a second '(default: ...)' after help that already names its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or "default" in text.lower() or action.default is argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)

def help_from(parser: argparse.ArgumentParser, options: type) -> None:
    """Each of ``parser``'s flags that sets a field of ``options`` and was declared without help gets the
    field's (``option(..., help=...)``): the text lives with the options, where the Python API reads it
    too. A flag that says more than its field (an alias: bench's ``-T``) keeps its own."""
    fields = {f.name: f for f in dataclasses.fields(options)}
    for action in parser._actions:
        if action.help is None and action.dest in fields:
            action.help = help_of(fields[action.dest])


def add_virtual_nodes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--virtual-nodes", type=int, default=1, metavar="K")


def add_under_load(p: argparse.ArgumentParser) -> None:
    p.add_argument("--under-load", type=int, default=None, metavar="M")


def add_sysfs_root(p: argparse.ArgumentParser) -> None:

    p.add_argument("--sysfs-root", metavar="DIR", default=None)


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """``--db`` and ``--json`` of the diagnose commands (links, topo, doctor, check), spelled the same in each
    (``commands.diagnosis.DiagnoseOptions``)."""
    parser.add_argument("--db", default=default(DiagnoseOptions, "db"), metavar="PATH")
    parser.add_argument("--json", dest="json_path", metavar="PATH")


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, metavar="PATH")


def add_launch(p: argparse.ArgumentParser) -> None:
    """The launch flags (``commands.launching.LaunchOptions``: their defaults and help)."""
    g = p.add_argument_group("processes and engine")
    g.add_argument("--engine", choices=ENGINES, default=None)
    g.add_argument("--nproc", type=int, default=None, metavar="N")
    g.add_argument("--timeout", type=float, default=120.0, metavar="S")
    g.add_argument("--nccl-lib", default=None, metavar="PATH")
    g.add_argument("--buffers", choices=BUFFERS, default=None)

