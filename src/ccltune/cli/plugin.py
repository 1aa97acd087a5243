"""`ccltune plugin`: where the NCCL/RCCL tuner plugin is, and checking rule files (``ccltune.commands.plugin``
and ``ccltune.commands.plugin_verify`` run the actions)."""

from __future__ import annotations

import argparse
from typing import Any

from ccltune.cli._common import help_from
from ccltune.commands.common import terminal
from ccltune.commands.options import default, from_fields
from ccltune.commands.plugin import PluginCheckOptions, PluginPathOptions, run_plugin_check, run_plugin_path
from ccltune.commands.plugin_verify import PluginVerifyOptions, run_plugin_verify
from ccltune.errors import EngineUnavailable


def _D(name: str) -> Any:
    return default(PluginVerifyOptions, name)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plugin", help="the NCCL/RCCL tuner and profiler plugins: library paths, rule-file check",
        description="The ccltune tuner plugin (libnccl-tuner-ccltune.so) and its rule files, and the "
        "profiler plugin (libnccl-profiler-ccltune.so, docs/profiler.md).",
    )
    sub = parser.add_subparsers(dest="plugin_command", metavar="ACTION")
    path = sub.add_parser(
        "path", help="print the absolute path of the built plugin library",
        description="Print the absolute path of the built tuner plugin (for NCCL_TUNER_PLUGIN), or with "
        "--profiler of the profiler plugin (for NCCL_PROFILER_PLUGIN, with CCLTUNE_PROFILE=DIR). "
        f"Exit {EngineUnavailable.exit_code} when it is not built.",
    )
    path.add_argument("--profiler", action="store_true")
    path.set_defaults(func=_path)
    help_from(path, PluginPathOptions)
    check = sub.add_parser(
        "check", help="check a rule file as the plugin reads it",
        description="Print each rejected line to stderr as FILE:LINE: REASON, and a summary on stdout. "
        "Exit 1 when a line was rejected, 0 otherwise, 2 when the file cannot be read.",
    )
    check.add_argument("file", metavar="FILE")
    check.add_argument(
        "--platform", action="append", default=[], metavar="KEY=VALUE",
    )
    check.set_defaults(func=_check)
    help_from(check, PluginCheckOptions)
    verify = sub.add_parser(
        "verify", help="run collectives with the plugin and RULES, and check NCCL's TUNING log obeys them",
        description="Run `ccltune bench` (one process per GPU, under torchrun) with the plugin loaded and "
        "NCCL_TUNER_CONFIG_FILE=RULES, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING; read the algorithm, "
        "protocol and channel range NCCL logs for every call and compare them with the rule the plugin "
        "applies at that size (APPLIED / NOT APPLIED / NO RULE). --from-log FILE checks a log you already "
        "have and runs nothing. Exit 1 when a rule was not applied or the log has no TUNING lines, "
        "0 otherwise, 2 on bad input.",
    )
    verify.add_argument("file", metavar="RULES")
    verify.add_argument("collective", nargs="*", default=None, metavar="COLLECTIVE")
    verify.add_argument("-b", "--minbytes", default=_D("minbytes"))
    verify.add_argument("-e", "--maxbytes", default=_D("maxbytes"))
    verify.add_argument("-f", "--stepfactor", type=int, default=_D("stepfactor"))
    verify.add_argument("--nproc", type=int, default=None, metavar="N")
    verify.add_argument("--from-log", default=None, metavar="FILE")
    verify.add_argument("--profile", default=None, metavar="DIR")
    verify.add_argument("--platform", action="append", default=[], metavar="KEY=VALUE")
    verify.add_argument("--save-log", default=None, metavar="PATH")
    verify.add_argument("--json", dest="json_path", default=None, metavar="PATH")
    verify.add_argument("--timeout", type=float, default=_D("timeout"), metavar="S")
    verify.set_defaults(func=_verify)
    help_from(verify, PluginVerifyOptions)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _path(args: argparse.Namespace) -> int:
    run_plugin_path(from_fields(PluginPathOptions, vars(args)), terminal())
    return 0


def _check(args: argparse.Namespace) -> int:
    run_plugin_check(from_fields(PluginCheckOptions, vars(args)), terminal())
    return 0


def _verify(args: argparse.Namespace) -> int:
    return run_plugin_verify(from_fields(PluginVerifyOptions, vars(args)), terminal()).exit_code
