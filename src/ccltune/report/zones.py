"""Tuned rule files drawn as zones on the size axis.

Parsing is ``ccltune.rules.parse_text`` (the plugin's twin: same lines accepted, same
reasons for rejected ones). Rule files are first-match, so a zone shows only the part of a
rule's range that no earlier rule of the same group (collective, nNodes, nRanks, platform
section) already covers.
"""

from __future__ import annotations

from collections import defaultdict

from ccltune.report.model import Zone
from ccltune.rules import ANY, Platform, Rule, parse_text


def parse_rules(text: str) -> tuple[list[Rule], list[str]]:
    """Rules in file order, and 'line N: reason' for each rejected line."""
    rs = parse_text(text, "rules")
    return rs.rules, [f"line {d.line}: {d.reason}" for d in rs.diagnostics]


def choice(rule: Rule) -> str:
    """'ring/ll128/32'; channels left out when the rule keeps NCCL's own count."""
    return "/".join([rule.algo, rule.proto] + ([str(rule.channels)] if rule.channels > 0 else []))


def platform_text(p: Platform) -> str:
    if not p.valid:
        return f"platform line {p.line} rejected: never applies"
    facts = (("gpu", p.gpu), ("nvlDomains", p.nvl_domains), ("nvlRanks", p.nvl_ranks),
             ("partition", p.partition), ("nps", p.nps))
    return ",".join(f"{k}={v}" for k, v in facts if v is not None)


def _uncovered(lo: int, hi: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi] outside every interval in ``covered`` (all inclusive)."""
    parts = [(lo, hi)]
    for c_lo, c_hi in covered:
        nxt = []
        for a, b in parts:
            if c_hi < a or c_lo > b:
                nxt.append((a, b))
                continue
            if a < c_lo:
                nxt.append((a, c_lo - 1))
            if b > c_hi:
                nxt.append((c_hi + 1, b))
        parts = nxt
    return parts


def rule_zones(rules: list[Rule], prefix: str = "") -> list[tuple[str, list[Zone]]]:
    """One row per (platform section, collective, nNodes, nRanks), zones in size order."""
    groups: dict[tuple[Platform, str, int, int], list[Rule]] = defaultdict(list)
    for r in rules:
        groups[(r.platform, r.collective, r.n_nodes, r.n_ranks)].append(r)
    rows = []
    for (platform, coll, nodes, ranks), rs in groups.items():
        covered: list[tuple[int, int]] = []
        zones = []
        for r in rs:
            zones += [Zone(a, b, choice(r)) for a, b in _uncovered(r.min_bytes, r.max_bytes, covered)]
            covered.append((r.min_bytes, r.max_bytes))
        where = platform_text(platform)
        label = " ".join(p for p in (prefix, coll, f"nNodes={nodes}" if nodes != ANY else "",
                                     f"nRanks={ranks}" if ranks != ANY else "",
                                     f"[{where}]" if where else "") if p)
        rows.append((label, sorted(zones, key=lambda z: z.lo)))
    return rows
