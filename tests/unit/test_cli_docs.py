"""docs/cli.md must list every command and every flag the commands accept."""

from __future__ import annotations

import argparse
from pathlib import Path

from ccltune.cli import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_and_flag_is_documented():
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for name, sub in _subcommands().items():
        if f"## ccltune {name}" not in text:
            missing.append(f"command {name}")
        for action in sub._actions:
            for opt in action.option_strings:
                if opt not in text:
                    missing.append(f"{name} {opt}")
    assert not missing, f"docs/cli.md is stale (python scripts/gen_cli_docs.py): {missing}"


def test_readme_commands_exist():
    readme = (DOC.parent.parent / "README.md").read_text(encoding="utf-8")
    names = set(_subcommands())
    blocks = readme.split("```")[1::2]  # the fenced command blocks
    used = {line.split()[1] for b in blocks for line in b.splitlines() if line.startswith("ccltune ")}
    assert used and used <= names, used - names
