"""``plugin path`` and ``plugin check``: where the built tuner and profiler plugins are, and a rule file as
the plugin reads it (``plugin verify``: ``ccltune.commands.plugin_verify``)."""

from __future__ import annotations

from dataclasses import dataclass

from ccltune import profiler_plugin, rules, tuner_plugin
from ccltune.commands.common import Console
from ccltune.commands.options import option
from ccltune.errors import RuleFileError, UsageError


@dataclass(frozen=True)
class PluginPathOptions:
    """``ccltune plugin path``'s options: ``profiler`` the profiler plugin instead of the tuner."""

    profiler: bool = option(False, flag="--profiler",
                            help="the profiler plugin libnccl-profiler-ccltune.so instead of the tuner")


@dataclass(frozen=True)
class PluginCheckOptions:
    """``ccltune plugin check``'s options: the rule file, and platforms (KEY=VALUE each) to count rules for."""

    file: str = option(positional=True, help="rule file (NCCL_TUNER_CONFIG_FILE format)")
    platform: tuple[str, ...] = option((), flag="--platform", repeat=True,
                                       help="also count the rules that apply on this platform "
                                            f"(keys: {', '.join(rules.PLATFORM_KEYS)}); repeatable")


@dataclass(frozen=True)
class RuleFileCheck:
    """A rule file the plugin reads whole (one with a line it skips raises RuleFileError instead): ``rules``
    the rules it holds, ``applying`` how many apply to the platform asked about (None: none was asked about)."""

    path: str
    rules: int
    applying: int | None


def run_plugin_path(o: PluginPathOptions, console: Console = Console()) -> str:
    """The absolute path of the built plugin library, said to ``console`` (EngineUnavailable when not built)."""
    path = str(profiler_plugin.library_path() if o.profiler else tuner_plugin.library_path())
    console.say(path)
    return path


def run_plugin_check(o: PluginCheckOptions, console: Console = Console()) -> RuleFileCheck:
    """Load the rule file as the plugin does; each rejected line is a warning, the counts are said. A file
    with rejected lines raises RuleFileError (exit 1) after saying them; an unreadable one is a UsageError."""
    facts = rules.parse_platform_args(o.platform) if o.platform else None
    try:
        ruleset = rules.load(o.file, "FILE")
    except RuleFileError as exc:  # unreadable: a usage problem, not a bad line
        raise UsageError(str(exc)) from exc
    for d in ruleset.diagnostics:
        console.warn(str(d))
    console.say(f"{len(ruleset.rules)} rules loaded, {len(ruleset.diagnostics)} lines rejected")
    if not ruleset.rules and not ruleset.diagnostics:
        console.warn(f"note: {o.file} holds no rules (empty, or comments only): with it the plugin leaves every "
                     "choice to NCCL")
    applying = None
    if facts is not None:
        applying = sum(1 for r in ruleset.rules if r.platform.matches(facts))
        console.say(f"{applying} rules apply to platform {','.join(o.platform)}")
    if ruleset.diagnostics:
        raise RuleFileError(f"{o.file}: {len(ruleset.diagnostics)} lines rejected (the plugin skips them)")
    return RuleFileCheck(o.file, len(ruleset.rules), applying)
