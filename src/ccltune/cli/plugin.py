"""`ccltune plugin`: where the NCCL/RCCL tuner plugin is, and checking rule files."""

from __future__ import annotations

import argparse

from ccltune import rules, tuner_plugin
from ccltune.errors import RuleFileError, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plugin", help="the NCCL/RCCL tuner plugin: library path, rule-file check",
        description="The ccltune tuner plugin (libnccl-tuner-ccltune.so) and its rule files.",
    )
    sub = parser.add_subparsers(dest="plugin_command", metavar="ACTION")
    path = sub.add_parser("path", help="print the absolute path of the built plugin library")
    path.set_defaults(func=_path)
    check = sub.add_parser(
        "check", help="check a rule file as the plugin reads it",
        description="Print each rejected line as FILE:LINE: REASON and a summary. "
        "Exit 1 when a line was rejected, 0 otherwise, 2 when the file cannot be read.",
    )
    check.add_argument("file", metavar="FILE", help="rule file (NCCL_TUNER_CONFIG_FILE format)")
    check.add_argument(
        "--platform", action="append", default=[], metavar="KEY=VALUE",
        help="also count the rules that apply on this platform "
        f"(keys: {', '.join(rules.PLATFORM_KEYS)}); repeatable",
    )
    check.set_defaults(func=_check)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _path(args: argparse.Namespace) -> int:
    print(tuner_plugin.library_path())
    return 0


def _check(args: argparse.Namespace) -> int:
    facts = rules.parse_platform_args(args.platform) if args.platform else None
    try:
        ruleset = rules.load(args.file)
    except RuleFileError as exc:  # unreadable: a usage problem, not a bad line
        raise UsageError(str(exc)) from exc
    for d in ruleset.diagnostics:
        print(d)
    print(f"{len(ruleset.rules)} rules loaded, {len(ruleset.diagnostics)} lines rejected")
    if facts is not None:
        n = sum(1 for r in ruleset.rules if r.platform.matches(facts))
        print(f"{n} rules apply to platform {','.join(args.platform)}")
    return 1 if ruleset.diagnostics else 0
