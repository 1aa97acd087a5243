"""Command-line entry point. The only place that maps errors to exit codes.

Each subcommand is one module in this package exposing ``register(subparsers)`` which
adds its parser and sets ``func`` (a callable ``(args) -> int``). Adding a command is one
module plus one line in ``_COMMANDS``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import re
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from ccltune import launch
from ccltune._version import __version__
from ccltune.cli._safeout import escaped_output
from ccltune.commands.common import check_outputs
from ccltune.errors import EXIT_CODES, CcltuneError, CheckFailed, DistError, Interrupted

# module name under ccltune.cli, in the order --help lists them
_COMMANDS = [
    "bench",
    "runs",
    "export",
    "plugin",
    "sweep",
    "tune",
    "validate",
    "replay",
    "ab",
    "search",
    "import_",
    "links",
    "topo",
    "doctor",
    "check",
    "report",
    "workload",
    "rules",
]


def _said_once(message: str) -> str:
    """argparse's message with the flag named once: a type's error names its flag (the API shows it
    beside the keyword), and argparse names it too."""
    flags = re.match(r"argument (\S+): (-\S+): ", message)
    if flags and set(flags.group(1).split("/")) <= set(flags.group(2).split("/")):
        message = f"argument {flags.group(2)}: {message[flags.end():]}"
    return message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own errors: exit 2, no traceback
        self.print_usage(sys.stderr)
        self.exit(2, f"ccltune: error: {_said_once(message)}\n")


class _CommandParser(_Parser):
    """A command's parser: an argument it does not take is refused with its own usage line
    (``ccltune links [-h] ...``), not the top level's (``ccltune [-h] [--version] COMMAND ...``)."""

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        ns, extra = super().parse_known_args(args, namespace)
        if extra:  # the innermost command says it first (``plugin check``'s parser before ``plugin``'s)
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return ns, extra


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = _Parser(
        prog="ccltune",
        description="Measure, diagnose, tune and validate NCCL/RCCL collectives.",
        epilog=exit_code_table(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ccltune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                parser_class=_CommandParser)
    for name in _COMMANDS:
        importlib.import_module(f"ccltune.cli.{name}").register(sub)
    return parser


@functools.lru_cache(maxsize=None)
def exit_code_table() -> str:
    """Every command's exit codes (errors.EXIT_CODES), as --help and docs/cli.md show them."""
    return "exit codes (every command):\n" + "\n".join(f"  {code:>3}  {what}" for code, what in EXIT_CODES.items())


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command (``main``; the Python API calls ``run_<command>`` on options instead).
    Errors are raised (typed, from ccltune.errors); the exit code is returned."""
    check_outputs(args)
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    with escaped_output():  # text from imported files never drives the terminal
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a worker of torchrun: it goes when torchrun goes
        launch.die_with_parent()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args._argv = argv  # commands that start torchrun pass the user's arguments on
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return run_command(args)
    except KeyboardInterrupt:
        print("ccltune: interrupted", file=sys.stderr)
        return Interrupted.exit_code
    except CheckFailed as exc:  # the check ran and said what failed: not a fault of this process
        print(f"ccltune: error: {exc}", file=sys.stderr)
        return launch.hand_over(exc.exit_code)
    except CcltuneError as exc:
        print(f"ccltune: error: {exc}", file=sys.stderr)
        if isinstance(exc, DistError):
            launch.leave_after_peer_loss(exc.exit_code)
        return exc.exit_code
    except BrokenPipeError:  # the reader of a pipe went (`ccltune runs | head`): nothing more to say
        from ccltune.measure.session import stdout_to_devnull

        stdout_to_devnull()
        return 0


def entry() -> None:
    sys.exit(main())
