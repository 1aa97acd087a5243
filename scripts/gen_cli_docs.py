"""Write docs/cli.md from the commands' own --help (run after changing a flag)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

os.environ["COLUMNS"] = "100"
from ccltune.cli import _COMMANDS, build_parser  # noqa: E402


def help_text(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return buf.getvalue().rstrip()


def render() -> str:
    parser = build_parser()
    names = [a for a in parser._subparsers._group_actions[0].choices]  # type: ignore[union-attr]
    out = ["# ccltune command reference", "",
           "Generated from each command's `--help` by `python scripts/gen_cli_docs.py`; do not edit.", "",
           "```", help_text([]), "```", ""]
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in names:
        out += [f"## ccltune {name}", "", "```", help_text([name]), "```", ""]
        for sub in _subcommands(commands[name]):   # import nccl-tests, workload show, ...
            out += [f"### ccltune {name} {sub}", "", "```", help_text([name, sub]), "```", ""]
    return "\n".join(out)


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    acts = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [n for a in acts for n in a.choices]


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    target.write_text(render() + "\n", encoding="utf-8")
    print(f"wrote {target} ({len(_COMMANDS)} commands)", file=sys.stderr)
