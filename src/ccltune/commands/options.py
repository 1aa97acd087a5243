"""Options are data: each command's options are a frozen dataclass whose fields are the command's
options, with their defaults, and a ``run_<command>(options)`` function takes them. Both front ends
build the same object: the CLI from argv (``ccltune.cli``: argparse stays there), the Python API from
keywords (``from_keywords``). A job's workers get their argv from the options (``to_argv``) and parse
it back with the CLI's own parser.

A field says how the command line spells it in its metadata (``option``): ``flag`` (the long spelling
``to_argv`` writes), ``keyword`` (the API's name where the flag runs words together: ``--minbytes`` is
``min_bytes``), ``parse`` (text to value, the same function the CLI's parser uses, so ``iters="0x10"``
reads as ``-n 0x10`` does), ``choices``, ``comma`` (a comma-separated list: the API takes a list too),
``repeat`` (a flag given once per value), ``positional``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ccltune.errors import UsageError, unknown_name

T = TypeVar("T")
REQUIRED: Any = dataclasses.MISSING


def option(default: Any = REQUIRED, *, flag: str | None = None, keyword: str | None = None,
           parse: Callable[[str], Any] | None = None, choices: Iterable[Any] | None = None, comma: bool = False,
           repeat: bool = False, positional: bool = False, help: str | None = None) -> Any:  # noqa: A002
    """A field of a command's options (see the module's docstring). ``default`` REQUIRED: the caller must
    give it (``tune --out``). ``help``: what the option means, as ``--help`` shows it and the Python API's
    docstrings (``%(default)s``: its default)."""
    meta = {"flag": flag, "keyword": keyword, "parse": parse, "choices": tuple(choices) if choices else None,
            "comma": comma, "repeat": repeat, "positional": positional, "help": help}
    if isinstance(default, (list, dict, set)):
        raise TypeError("options are frozen: a sequence default is a tuple")
    return dataclasses.field(default=default, metadata=meta)


def help_of(f: dataclasses.Field) -> str | None:
    """The option's help as its field says it, ``%(default)s`` still in (argparse fills it: the CLI's
    ``--help``, ``cli._common.help_from``)."""
    return f.metadata.get("help")


def helps(cls: type) -> dict[str, str]:
    """keyword -> the option's help with its default filled in, as the Python API's docstrings show it
    (``ccltune.api``; the CLI's ``--help`` shows the same text, from ``help_of``)."""
    out = {}
    for kw, f in keywords(cls).items():
        text = help_of(f)
        if text is not None:
            shown = "" if f.default is REQUIRED else str(f.default)
            out[kw] = text.replace("%(default)s", shown).replace("%%", "%")
    return out


def keyword_of(f: dataclasses.Field) -> str:
    return f.metadata.get("keyword") or f.name


def keywords(cls: type) -> dict[str, dataclasses.Field]:
    """keyword -> field: the names the Python API takes (positionals first)."""
    return {keyword_of(f): f for f in dataclasses.fields(cls)}


def from_fields(cls: type[T], values: Mapping[str, Any]) -> T:
    """The options from values named as the fields are (the CLI's parsed arguments, same names); names
    that are not fields are left out (argparse's ``func``, ``command``)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items() if k in names})


def from_keywords(cls: type[T], command: str, given: Mapping[str, Any]) -> T:
    """The options from the Python API's keywords (None keeps a default). An unknown keyword, a value of
    the wrong kind or a name not among an option's choices is a UsageError naming it and the valid ones."""
    fields = keywords(cls)
    values: dict[str, Any] = {}
    for kw, value in given.items():
        if kw not in fields:
            raise unknown_name("keyword argument", kw, fields, f"ccltune.{command}()")
        if value is not None:
            f = fields[kw]
            values[f.name] = _value(f, _hints(cls)[f.name], value, f"ccltune.{command}({kw}={value!r})")
    missing = [k for k, f in fields.items() if f.default is REQUIRED and f.name not in values]
    if missing:
        raise UsageError(f"ccltune.{command}() needs {', '.join(f'{k}=...' for k in missing)}")
    return cls(**values)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _value(f: dataclasses.Field, hint: Any, value: Any, where: str) -> Any:
    """``value`` as the field holds it: text parsed as the command line's, numbers as numbers."""
    kinds = {a for a in typing.get_args(hint) if a is not type(None)} or {hint}
    if bool in kinds:
        if not isinstance(value, bool):
            raise UsageError(f"{where}: True or False")
        return value
    if typing.get_origin(hint) is tuple or any(typing.get_origin(k) is tuple for k in kinds):
        return _sequence(f, hint, value, where)
    if f.metadata.get("comma") and isinstance(value, (list, tuple)):  # algos=["ring", "tree"]
        value = ",".join(_scalar(f, str, v, where) for v in value)
    if isinstance(value, (list, tuple)):
        raise UsageError(f"{where}: one value, not a list")
    kind = next((k for k in (int, float, str) if k in kinds), str)
    return _choice(f, _scalar(f, kind, value, where), where)


def _scalar(f: dataclasses.Field, kind: type, value: Any, where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Path)):
        raise UsageError(f"{where.split('=')[0]}=...) takes a string or a number, got {value!r}")
    if kind is str:
        return str(value)
    if isinstance(value, (int, float)) and not isinstance(value, Path):
        if kind is int and not float(value).is_integer():
            raise UsageError(f"{where}: a whole number")
        return kind(value)
    parse = f.metadata.get("parse") or kind
    try:
        return parse(str(value))
    except (UsageError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}") from None


def _choice(f: dataclasses.Field, value: Any, where: str) -> Any:
    choices = f.metadata.get("choices")
    if choices is not None and value not in choices:
        raise unknown_name(keyword_of(f), str(value), [str(c) for c in choices], where.split("(")[0] + "()")
    return value


def _sequence(f: dataclasses.Field, hint: Any, value: Any, where: str) -> tuple[Any, ...]:
    """A tuple field: ``--exclude-failed A --exclude-failed B`` (str, ...), ``--compare A B`` (int, int)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    args = next(typing.get_args(a) for a in [hint, *typing.get_args(hint)] if typing.get_origin(a) is tuple)
    if Ellipsis not in args and len(values) != len(args):
        raise UsageError(f"{where}: {len(args)} values")
    kind = args[0]
    return tuple(_choice(f, _scalar(f, kind, v, where), where) for v in values)


class OmittedStr(str):
    """A default of a type of its own: the option was left out (by the command line or the API's caller),
    so the command may still choose for it (bench's ``-b`` under ``--ncclt-defaults``, sweep's ``-d`` with
    ``--workload``); the same value given is a plain ``str``, which ``to_argv`` writes."""


class OmittedInt(int):
    """An integer default of a type of its own: the option was left out (``OmittedStr``)."""


def to_argv(options: Any, command: str) -> list[str]:
    """The command line that stands for ``options``: ``[command, positionals..., --flag=value...]`` with
    each option that differs from its default (the command's own, then those it shares: ``--db``,
    ``--engine``, ...), the way the CLI's parser reads it back."""
    argv = [command]
    own = set(vars(type(options)).get("__annotations__", {}))  # the command's own options before inherited ones
    fields = sorted(dataclasses.fields(options), key=lambda f: (not f.metadata.get("positional"), f.name not in own))
    for f in fields:
        value = getattr(options, f.name)
        if f.metadata.get("positional"):
            argv += [str(v) for v in (value if isinstance(value, tuple) else [value])]
            continue
        flag = f.metadata.get("flag")
        if flag is None or value is None or (f.default is not REQUIRED and _same(value, f.default)):
            continue
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif isinstance(value, tuple) and f.metadata.get("repeat"):
            argv += [f"{flag}={v}" for v in value]
        elif isinstance(value, tuple):
            argv += [flag, *map(str, value)]
        else:
            argv.append(f"{flag}={value}")
    return argv


def _same(value: Any, default: Any) -> bool:
    """Whether ``value`` is the default, and of its type: a default of a type of its own (bench's
    ``-b`` that ``--ncclt-defaults`` may replace) is not the same as the value given."""
    return type(value) is type(default) and value == default


def default(cls: type, name: str) -> Any:
    """The default of option ``name`` of ``cls``: the CLI's parser shows and uses it (one place for each default)."""
    return cls.__dataclass_fields__[name].default  # type: ignore[attr-defined]
