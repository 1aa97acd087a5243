"""An argument a command does not take is refused with that command's usage line, not the top level's."""

from __future__ import annotations

import argparse

import pytest

from ccltune.cli import build_parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and action (``plugin check``), by walking the parser's subcommands."""
    out = [path] if path else []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                out += _commands(sub, (*path, name))
    return out


COMMANDS = _commands(build_parser())


def test_links_with_an_option_it_does_not_take(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["links", "--nproc", "3"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ccltune links [-h]") and "ccltune: error: unrecognized arguments: --nproc 3" in err


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_refuses_with_its_own_usage(command, capsys):
    with pytest.raises(SystemExit) as ei:
        main([*command, "--no-such-option"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: ccltune {' '.join(command)} "), err
    assert "ccltune: error: " in err
