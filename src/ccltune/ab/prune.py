"""``ccltune ab --prune OUT``: which parts of a rule file each get an arm, and the rule file that keeps
only the parts whose arm was faster than NCCL's default (pure, but for the files it writes).

How it chooses: the rules are grouped by what they change, (collective, min_bytes, max_bytes): rules
of one group differ only in ranks, nodes, pipe ops, buffer registration or platform, so the plugin
applies at most one of them to a call. With at most ``MAX_GROUPS`` groups, each group is one arm (a
rule file of that group alone), and the written file keeps the groups judged FASTER. With more, the
whole file is one arm, kept whole when FASTER, else nothing is kept: more arms would need more runs
than a job can spare (each arm costs a run per round).
"""

from __future__ import annotations

import datetime
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccltune import rules
from ccltune._version import __version__
from ccltune.ab import judge

MAX_GROUPS = 4


@dataclass(frozen=True)
class Part:
    """One arm of a pruning A/B: a name, its rules, and the rule file written for it."""

    name: str
    rules: tuple[rules.Rule, ...]
    path: str


def group_key(r: rules.Rule) -> tuple[str, int, int]:
    return (r.collective, r.min_bytes, r.max_bytes)


def parts(ruleset: rules.RuleSet, stem: str, folder: Path) -> tuple[list[Part], str]:
    """The arms for ``ruleset`` (module doc) and a sentence saying how they were chosen. Per-group rule
    files are written into ``folder``; the whole file is used as it is."""
    groups: dict[tuple[str, int, int], list[rules.Rule]] = {}
    for r in ruleset.rules:
        groups.setdefault(group_key(r), []).append(r)
    if len(groups) > MAX_GROUPS:
        how = (f"{len(groups)} groups of rules (collective and size range) is more than {MAX_GROUPS}: the whole "
               f"file is one arm, kept whole if it is faster, else nothing is kept")
        return [Part(stem, tuple(ruleset.rules), str(Path(ruleset.path).resolve()))], how
    out = []
    for i, ((coll, lo, hi), rs) in enumerate(groups.items(), 1):
        name = f"{stem}:{coll}:{lo}-{hi}" if lo != hi else f"{stem}:{coll}:{lo}"
        path = folder / f"part{i}.conf"
        rules.write_atomic(path, rules.format_rules(rs, [f"ccltune ab --prune: part {i} of {ruleset.path}"]))
        out.append(Part(name, tuple(rs), str(path)))
    how = (f"{len(groups)} group(s) of rules (collective and size range), at most {MAX_GROUPS}: one arm per "
           f"group; the groups judged faster are kept")
    return out, how


def kept_text(ps: Sequence[Part], verdicts: Sequence[judge.ArmVerdict], *, source: str, argv: Sequence[str],
              how: str) -> tuple[str, list[Part]]:
    """The pruned rule file's text (a header naming ab, the job, the date and every part's verdict; then
    the rules of the parts judged FASTER, in their file's order) and the parts kept."""
    by_name = {v.name: v for v in verdicts}
    kept = [p for p in ps if by_name.get(p.name) and by_name[p.name].status is judge.Status.FASTER]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = [f"written by ccltune {__version__} ab --prune on {date} from {source}",
              f"job: {shlex.join(argv)}", f"how: {how}", f"statistic: {judge.METHOD}"]
    for p in ps:
        v = by_name.get(p.name)
        header.append(f"{p.name}: {_verdict_text(v)}: {'kept' if p in kept else 'dropped'} ({len(p.rules)} rule(s))")
    if not kept:
        header.append("no rule was faster than NCCL's default: this file keeps none (NCCL decides)")
    body = [r for p in kept for r in p.rules]
    return rules.format_rules(sorted(body, key=lambda r: r.line), header), kept


def _verdict_text(v: judge.ArmVerdict | None) -> str:
    if v is None:
        return "not run"
    if v.effect is None:
        return v.status.value
    e = v.effect
    return f"{v.status.value}, {e.said}"
