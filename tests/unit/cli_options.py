"""A command's typed options as the command line parses its argv (the CLI's own parser, then
``from_fields``, as ``cli/<command>.py``'s ``main`` builds them)."""

from __future__ import annotations

from typing import Any, TypeVar

from ccltune.cli import build_parser
from ccltune.commands.options import from_fields

T = TypeVar("T")


def parsed(cls: type[T], argv: list[str]) -> T:
    """``cls`` from ``ccltune ARGV`` (``argv[0]`` the command)."""
    values: dict[str, Any] = vars(build_parser().parse_args(argv))
    return from_fields(cls, values)
