"""The Python API's keywords for the commands still on argparse (sweep): the command line a
call stands for, parsed by the CLI's own parser, whose refusals are raised as UsageError (never
SystemExit: nothing is printed, nothing exits). Also each command's help text by option, which the
API shows in its functions' docstrings. Commands on typed options (``ccltune.commands``) need none of
this: the API builds their options from keywords (``commands.options.from_keywords``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ccltune.errors import UsageError, unknown_name

# keywords spelled apart where the command's option runs words together (-b/--minbytes: min_bytes)
RENAMED = {"minbytes": "min_bytes", "maxbytes": "max_bytes", "stepbytes": "step_bytes", "stepfactor": "step_factor"}


_PARSERS: dict[str, argparse.ArgumentParser] = {}


def parser(command: str) -> argparse.ArgumentParser:
    """The CLI's parser of ``command`` (its options, defaults, help), refusing by UsageError."""
    if command not in _PARSERS:
        from ccltune.cli import build_parser

        root = build_parser(raising=True)
        sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
        _PARSERS[""] = root
        _PARSERS.update(sub.choices)
    return _PARSERS[command]


def options(command: str) -> dict[str, argparse.Action]:
    """keyword -> the option it sets (its dest, or the spelled-apart name of ``RENAMED``)."""
    out: dict[str, argparse.Action] = {}
    for a in parser(command)._actions:
        if not a.option_strings or a.dest == "help" or a.default is argparse.SUPPRESS:
            continue
        out.setdefault(RENAMED.get(a.dest, a.dest), a)
    return out


def flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def help_of(command: str) -> dict[str, tuple[str, str, Any, bool]]:
    """keyword -> (its flag, its help text, its default, required) for ``command``."""
    return {k: (flag(a), (a.help or "").replace("%(default)s", str(a.default)).replace("%%", "%"), a.default,
                bool(a.required)) for k, a in options(command).items()}


def _text(keyword: str, value: Any, command: str) -> str:
    """One value as the command line spells it; a value of the wrong kind is refused, named."""
    if isinstance(value, (str, int, float, Path)) and not isinstance(value, bool):
        text = str(value)
        if text.startswith("-") and not _number(text):
            raise UsageError(f"ccltune.{command}({keyword}={value!r}): a value may not start with '-'")
        return text
    raise UsageError(f"ccltune.{command}({keyword}=...) takes a string or a number, got {value!r}")


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _option_argv(command: str, keyword: str, action: argparse.Action, value: Any) -> list[str]:
    """``keyword=value`` as the command's flag (checked by the option's own type and choices)."""
    where = f"ccltune.{command}({keyword}={value!r})"
    if action.nargs == 0:  # a switch (--no-graph)
        if not isinstance(value, bool):
            raise UsageError(f"{where}: True or False")
        return [flag(action)] if value != action.default else []
    if getattr(action, "comma_list", False) and isinstance(value, (list, tuple)):  # --algos ring,tree
        value = ",".join(_text(keyword, v, command) for v in value)
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    want = action.nargs if isinstance(action.nargs, int) else None
    if isinstance(action, argparse._AppendAction) or want:
        if want and len(values) != want:
            raise UsageError(f"{where}: {want} values")
    elif len(values) != 1:
        raise UsageError(f"{where}: one value, not a list")
    texts = [_text(keyword, v, command) for v in values]
    for text in texts:
        try:
            typed = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise UsageError(f"{where}: {exc}") from None
        if action.choices is not None and typed not in action.choices:
            raise unknown_name(keyword, text, [str(c) for c in action.choices], f"ccltune.{command}()")
    if want:
        return [flag(action), *texts]
    return [f"{flag(action)}={t}" for t in texts]


def command_argv(command: str, positionals: list[Any], given: dict[str, Any], extra: tuple[str, ...] = ()) -> list[str]:
    """The command line a call stands for: ``sweep("all_reduce", nproc=2, no_graph=True)`` ->
    ``['sweep', 'all_reduce', '--nproc=2', '--no-graph']``. Options left at None keep their default;
    ``extra``: the API's own keywords, named among the valid ones when a keyword is unknown."""
    known = options(command)
    names = [a.dest for a in parser(command)._actions if not a.option_strings]
    argv = [command]
    for name, value in zip(names, positionals):
        argv += [_text(name, v, command) for v in (list(value) if isinstance(value, (list, tuple)) else [value])]
    for keyword, value in given.items():
        if keyword not in known:
            raise unknown_name("keyword argument", keyword, [*known, *extra], f"ccltune.{command}()")
        if value is not None:
            argv += _option_argv(command, keyword, known[keyword], value)
    missing = [k for k, a in known.items() if a.required and given.get(k) is None]
    if missing:
        raise UsageError(f"ccltune.{command}() needs {', '.join(f'{k}=...' for k in missing)}")
    return argv


def parse(argv: list[str]) -> argparse.Namespace:
    """The CLI's parser on ``argv`` (``command_argv``'s); its refusal is a UsageError."""
    args = parser("").parse_args(argv)
    args._argv = argv
    return args
