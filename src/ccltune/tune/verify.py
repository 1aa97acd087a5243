"""Did the rules take effect? NCCL's own TUNING log lines against what the rule file asks.

With ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING`` rank 0 logs, for every collective call, the
algorithm, protocol and channel range NCCL settled on (:class:`ccltune.diagnose.parsers.ncclog.Choice`).
For each (collective, size) seen, the rule the plugin applies there is found with the
plugin's own first-match semantics (:func:`ccltune.rules.match`, the platform taken from the
plugin's log line for the communicator) and compared:

- ``APPLIED``: NCCL ran the rule's algorithm and protocol (where the rule names them) and no
  more channels than the rule's count (where it gives one). NCCL may use fewer channels than a
  rule allows for a small call, or than it asks when the communicator has fewer: that is noted.
- ``NOT APPLIED``: NCCL ran something else. The usual cause: the rule's algorithm/protocol is
  not available for this call (NCCL marks its cost cell IGNORE and the plugin skips the rule),
  or the rule is not the one the plugin loaded (another file, another platform section).
- ``NO RULE``: no rule covers the call; NCCL's own choice is shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ccltune.diagnose.parsers.ncclog import TUNER_FUNC, Choice
from ccltune.rules import NCCL_CHOICE, PlatformFacts, Query, Rule, RuleSet, match
from ccltune.status import RuleCheck

Seen = tuple[str, str, int | None]  # (algo, proto, channels) as NCCL logged them


@dataclass(frozen=True)
class SizeCheck:
    """What the rules asked of NCCL at one (collective, tuner size), and what NCCL did."""

    collective: str  # the plugin's name: allreduce, allgather, ...
    size_bytes: int  # the size a tuner sees (whole buffer)
    rule: Rule | None
    want_algo: str | None  # None: the rule leaves it to NCCL
    want_proto: str | None
    want_channels: int  # 0: the rule leaves channels to NCCL
    seen: tuple[tuple[Seen, int], ...]  # distinct choices NCCL logged, with their call counts
    status: RuleCheck
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "collective": self.collective, "size_bytes": self.size_bytes, "status": self.status,
            "reason": self.reason, "rule_line": self.rule.line if self.rule else None,
            "rule": self.rule.to_line() if self.rule else None,
            "want": {"algo": self.want_algo, "proto": self.want_proto, "channels": self.want_channels or None},
            "nccl": [{"algo": a, "proto": p, "channels": c, "calls": n} for (a, p, c), n in self.seen],
        }


def _seen_text(seen: Iterable[tuple[Seen, int]]) -> str:
    return ", ".join(f"{a}/{p}/{c if c is not None else '?'}ch" + (f" x{n}" if n > 1 else "") for (a, p, c), n in seen)


def judge(want_algo: str | None, want_proto: str | None, want_channels: int,
          seen: tuple[tuple[Seen, int], ...]) -> tuple[RuleCheck, str]:
    """(status, reason) for one (collective, size) with a rule."""
    bad, fewer = [], []
    for (algo, proto, channels), _ in seen:
        if want_algo and algo.lower() != want_algo.lower():
            bad.append(f"algorithm {algo}, not {want_algo.upper()}")
        if want_proto and proto.lower() != want_proto.lower():
            bad.append(f"protocol {proto}, not {want_proto.upper()}")
        if want_channels and channels is not None:
            if channels > want_channels:
                bad.append(f"{channels} channels, more than {want_channels}")
            elif channels < want_channels:
                fewer.append(channels)
    if bad:
        why = "; ".join(dict.fromkeys(bad))
        return RuleCheck.NOT_APPLIED, (f"NCCL ran {why}: the rule's choice may be unavailable for this call "
                               "(NCCL marks it IGNORE and the plugin skips the rule), or another rule file loaded")
    note = f" (NCCL used {min(fewer)} channels at this size, within the rule's {want_channels})" if fewer else ""
    return RuleCheck.APPLIED, f"NCCL ran {_seen_text(seen)}{note}"


def verify(ruleset: RuleSet, choices: Iterable[Choice], *, n_ranks: int, n_nodes: int,
           platform: PlatformFacts, sizes: Iterable[tuple[str, int]] | None = None) -> list[SizeCheck]:
    """One SizeCheck per (collective, tuner size) among ``choices`` (restricted to ``sizes`` when
    given: pairs of plugin collective name and size). Send/Recv lines are ignored: they never
    reach a tuner."""
    wanted = set(sizes) if sizes is not None else None
    grouped: dict[tuple[str, int], Counter[Seen]] = {}
    for c in choices:
        coll = TUNER_FUNC.get(c.func)
        if coll is None:
            continue
        key = (coll, c.tuner_bytes(n_ranks))
        if wanted is not None and key not in wanted:
            continue
        grouped.setdefault(key, Counter())[(c.algo, c.proto, c.channels)] += 1
    out = []
    for (coll, size), counts in sorted(grouped.items()):
        seen = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1], kv[0][2] or 0)))
        d = match(ruleset, Query(coll, size, n_ranks, n_nodes, platform=platform))
        if d.rule is None:
            out.append(SizeCheck(coll, size, None, None, None, 0, seen, RuleCheck.NO_RULE, f"NCCL's own choice: {_seen_text(seen)}"))
            continue
        want_algo = None if d.rule.algo == NCCL_CHOICE else d.rule.algo
        want_proto = None if d.rule.proto == NCCL_CHOICE else d.rule.proto
        status, reason = judge(want_algo, want_proto, d.channels, seen)
        out.append(SizeCheck(coll, size, d.rule, want_algo, want_proto, d.channels, seen, status, reason))
    return out
