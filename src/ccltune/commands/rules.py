"""``rules explain``: the decision table a rule file gives one communicator (the plugin's matcher's
Python twin: ``ccltune.tune.explain``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccltune import collectives, rules
from ccltune.collectives import PLUGIN_NAMES
from ccltune.commands.common import Console
from ccltune.commands.options import option
from ccltune.errors import RuleFileError, UsageError
from ccltune.tune.explain import MAX_SIZE, explain


@dataclass(frozen=True)
class RulesExplainOptions:
    """``ccltune rules explain``'s options (``ccltune rules explain --help``)."""

    file: str = option(positional=True)
    collective: str | None = option(None, flag="--collective",
                                    help=f"one collective, in ccltune's or the rule file's spelling ({', '.join(PLUGIN_NAMES)}; "
                                         f"{', '.join(PLUGIN_NAMES.values())}) (default: all)")
    nranks: int = option(8, flag="--nranks", help="ranks of the communicator")
    nnodes: int = option(1, flag="--nnodes", help="nodes of the communicator")
    gpu: str = option("", flag="--gpu",
                      help="GPU name, for rules under a platform gpu= line (default: the GPU the file's sections name, when "
                           "they name one; sections left out are listed with the reason)")
    num_pipe_ops: int = option(1, flag="--num-pipe-ops", help="numPipeOps of the calls")
    reg_buff: int = option(0, flag="--reg-buff", choices=(0, 1), help="regBuff of the calls")


def _plugin_name(name: str) -> str:
    """The rule file's name of a collective given in any spelling (all_reduce, allreduce, AllReduce)."""
    coll = collectives.get(name, "--collective")  # an unknown name: an error with a 'did you mean'
    if coll.name not in PLUGIN_NAMES:
        raise UsageError(f"--collective {name}: NCCL passes {coll.name} to no tuner, so no rule applies to it; "
                         f"give one of {', '.join(PLUGIN_NAMES)} (or {', '.join(PLUGIN_NAMES.values())})")
    return PLUGIN_NAMES[coll.name]


def run_rules_explain(o: RulesExplainOptions, console: Console = Console()) -> None:
    """Say the decision table a rule file gives one communicator, range by range, to ``console``."""
    only = _plugin_name(o.collective) if o.collective is not None else None
    if o.nranks < 1 or o.nnodes < 1 or o.nnodes > o.nranks:
        raise UsageError(f"--nranks {o.nranks} --nnodes {o.nnodes}: need 1 <= nnodes <= nranks")
    try:
        rs = rules.load(o.file)
    except RuleFileError as exc:
        raise UsageError(str(exc)) from None
    if not rs.rules and rs.diagnostics:   # a wrong file (a binary, a CSV of results): not a table of defaults
        first = rs.diagnostics[0]
        raise UsageError(f"{o.file}: no line is a rule the plugin reads ({len(rs.diagnostics)} rejected; "
                         f"line {first.line}: {first.reason}); `ccltune plugin check {o.file}` names each")
    if not rs.rules:
        console.warn(f"note: {o.file} holds no rules (empty, or comments only): every call below is NCCL's own "
                     "choice")
    sections = list(dict.fromkeys(r.platform for r in rs.rules if r.platform.valid and r.platform != rules.ANY_PLATFORM))
    gpu, taken = o.gpu, ""
    if not gpu and len({p.gpu for p in sections}) == 1 and sections[0].gpu:  # a file `tune` wrote for one GPU
        gpu = sections[0].gpu
        taken = " (gpu from the file's platform section; --gpu asks about another)"
    facts = rules.PlatformFacts(gpu=gpu) if gpu else rules.PlatformFacts()
    console.say(f"# {o.file}: {len(rs.rules)} rules, {len(rs.diagnostics)} rejected lines "
                f"(ccltune plugin check names them); communicator nranks={o.nranks} nnodes={o.nnodes}"
                f"{' gpu=' + gpu if gpu else ''}{taken} numPipeOps={o.num_pipe_ops} regBuff={o.reg_buff}")
    for line in _left_out(rs, sections, facts.with_nvl_defaults(o.nranks, o.nnodes)):
        console.say(line)
    table = [(coll, r) for coll in ([only] if only else rules.COLLECTIVES)
             for r in explain(rs, coll, o.nranks, o.nnodes, facts, o.num_pipe_ops, o.reg_buff)]
    console.say("\n".join(_table(table)))


def _left_out(rs: rules.RuleSet, sections: list[rules.Platform], facts: rules.PlatformFacts) -> list[str]:
    """One line per platform section this communicator does not match: its rules never apply here."""
    out = []
    for p in sections:
        if p.matches(facts):
            continue
        why = []
        if p.gpu is not None and (not facts.gpu or not rules.gpu_names(p.gpu, facts.gpu)):
            why.append(f"gpu={p.gpu}, and " + (f"{facts.gpu!r} does not hold it as whole words" if facts.gpu
                                               else "no --gpu given"))
        if p.nvl_ranks is not None and not (facts.min_ranks_per_nvl_domain == p.nvl_ranks
                                            == facts.max_ranks_per_nvl_domain):
            why.append(f"nvlranks={p.nvl_ranks}, and this communicator has {facts.min_ranks_per_nvl_domain} ranks "
                       "per node (--nranks / --nnodes)")
        if p.nvl_domains is not None and facts.nvl_domains != p.nvl_domains:
            why.append(f"nvldomains={p.nvl_domains}, and this communicator spans {facts.nvl_domains}")
        if p.partition is not None or p.nps is not None:
            why.append("a partition mode (partition=/nps=) this command is not told")
        n = sum(1 for r in rs.rules if r.platform == p)
        out.append(f"# left out: {n} rule(s) under {rules.platform_line(p)} (line {p.line}): "
                   f"{'; '.join(why) or 'the section does not match'}")
    return out


def _table(table: list[tuple[str, Any]]) -> list[str]:
    """The decision table's lines: every boundary in exact bytes (``max``: 2^64-1, no upper bound), as a rule
    file may give it in bytes or K/M/G; the columns as wide as the largest boundary shown."""
    def bound(n: int) -> str:
        return "max" if n == MAX_SIZE else str(n)

    width = max([12] + [len(bound(n)) + 2 for _, r in table for n in (r.min_bytes, r.max_bytes)])
    lines = [f"# {'collective':<14}{'min_bytes':>{width}}{'max_bytes':>{width}}  decision"]
    for coll, r in table:
        d = r.decision
        if d.rule is None:
            what = "NCCL's default"
        else:
            pick = "default" if d.algo is None and d.proto is None else f"{d.algo or 'cheapest'}/{d.proto or 'cheapest'}"
            what = f"line {d.line}: {pick}" + (f", nChannels {d.channels}" if d.channels else "")
        lines.append(f"  {coll:<14}{bound(r.min_bytes):>{width}}{bound(r.max_bytes):>{width}}  {what}")
    return lines
