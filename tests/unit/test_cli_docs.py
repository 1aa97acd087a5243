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


def test_the_exit_code_table_is_documented():
    """One table of exit codes (errors.EXIT_CODES), in --help and so in docs/cli.md."""
    from ccltune.cli import exit_code_table
    from ccltune.errors import EXIT_CODES

    text = DOC.read_text(encoding="utf-8")
    assert exit_code_table() in text, "docs/cli.md is stale (python scripts/gen_cli_docs.py)"
    assert {0, 1, 2, 3, 4, 130} <= set(EXIT_CODES)


def test_no_function_in_cli_is_longer_than_60_lines():
    """Commands parse, plan, call and render; the work is below the CLI."""
    import ast

    import ccltune.cli

    long = []
    for path in sorted(Path(ccltune.cli.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 60:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


def test_workload_walkthrough_commands_parse():
    """docs/workload.md's concrete commands (those without [optional] parts) are ones ccltune accepts."""
    import shlex

    text = (DOC.parent / "workload.md").read_text(encoding="utf-8")
    lines = [ln.split("#")[0].strip() for b in text.split("```")[1::2] for ln in b.splitlines()]
    cmds = [ln for ln in lines if ln.startswith("ccltune ") and "[" not in ln and "..." not in ln]
    assert len(cmds) >= 6, cmds
    parser = build_parser()
    for c in cmds:
        parser.parse_args(shlex.split(c)[1:])


def _helps(monkeypatch) -> dict[str, str]:
    """Every command's and subcommand's --help as an 80-column terminal shows it."""
    monkeypatch.setenv("COLUMNS", "80")
    out = {}
    for name, sub in _subcommands().items():
        out[name] = sub.format_help()
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                out.update({f"{name} {n}": p.format_help() for n, p in action.choices.items()})
    return out


def test_no_help_shows_none_and_each_stays_short(monkeypatch):
    """Issue 32: bench --help was 193 lines, its --buffers paragraph repeated in four commands, and some
    defaults read 'None' (tune --runs, workload show --db, six of ab's). Every help here names a default in
    words and fits a bound: bench, with nccl-tests' 33 options, 140 lines; every other command 110."""
    helps = _helps(monkeypatch)
    assert len(helps) >= 25
    import re

    nones = {name: [ln for ln in text.splitlines() if re.search(r"\bNone\b", ln)] for name, text in helps.items()}
    assert not {k: v for k, v in nones.items() if v}
    long = {name: text.count("\n") for name, text in helps.items() if text.count("\n") > (140 if name == "bench" else 110)}
    assert not long, long
    # the long texts are said once, in docs/bench.md, and each command names its own --buffers default
    words = {name: " ".join(text.split()) for name, text in helps.items()}
    assert "(default: ncclmem-max;" in words["bench"] and "(default: ncclmem;" in words["sweep"]
    assert all("docs/bench.md" in helps[c] for c in ("bench", "sweep", "validate", "replay"))
