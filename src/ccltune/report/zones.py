"""Tuned rule files drawn as zones on the size axis.

A display reader: it keeps what a person needs to see (collective, size range, algo,
proto, channels, nNodes, nRanks, platform section) and lists the lines it cannot read,
never guessing. Rule files are first-match, so a zone shows only the part of a rule's
range that no earlier rule of the same group already covers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ccltune.errors import UsageError
from ccltune.report.model import Zone
from ccltune.sizes import parse_size

_ANY = ("", "*", "-1", "any")


@dataclass
class Rule:
    coll: str
    min_bytes: int
    max_bytes: int
    algo: str
    proto: str
    channels: int  # <= 0: NCCL's own choice
    n_nodes: str  # '' when any
    n_ranks: str
    platform: str  # the `platform,...` line in force, '' before any
    line: int

    @property
    def choice(self) -> str:
        parts = [self.algo, self.proto] + ([str(self.channels)] if self.channels > 0 else [])
        return "/".join(parts)


def parse_rules(text: str) -> tuple[list[Rule], list[str]]:
    """Rules in file order, and 'line N: reason' for each line that is not one."""
    rules: list[Rule] = []
    problems: list[str] = []
    platform = ""
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if cells[0].lower() == "platform":
            platform = ",".join(c for c in cells[1:] if c)
            continue
        if len(cells) < 6:
            problems.append(f"line {no}: expected coll,minbytes,maxbytes,algo,proto,channels[,nNodes,nRanks],"
                            f" got {len(cells)} fields")
            continue
        try:
            lo, hi = parse_size(cells[1], "minbytes"), parse_size(cells[2], "maxbytes")
            channels = int(cells[5]) if cells[5] else -1
        except (UsageError, ValueError) as exc:
            problems.append(f"line {no}: {exc}")
            continue
        if lo > hi:
            problems.append(f"line {no}: minbytes {lo} > maxbytes {hi}")
            continue
        extra = [c if c.lower() not in _ANY else "" for c in cells[6:8]] + ["", ""]
        rules.append(Rule(cells[0].lower(), lo, hi, cells[3].lower() or "default",
                          cells[4].lower() or "default", channels, extra[0], extra[1], platform, no))
    return rules, problems


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
    """One row per (platform, collective, nNodes, nRanks), zones in size order."""
    groups: dict[tuple[str, str, str, str], list[Rule]] = defaultdict(list)
    for r in rules:
        groups[(r.platform, r.coll, r.n_nodes, r.n_ranks)].append(r)
    rows = []
    for (platform, coll, nodes, ranks), rs in groups.items():
        covered: list[tuple[int, int]] = []
        zones = []
        for r in rs:
            zones += [Zone(a, b, r.choice) for a, b in _uncovered(r.min_bytes, r.max_bytes, covered)]
            covered.append((r.min_bytes, r.max_bytes))
        label = " ".join(p for p in (prefix, coll, f"nNodes={nodes}" if nodes else "",
                                     f"nRanks={ranks}" if ranks else "",
                                     f"[{platform}]" if platform else "") if p)
        rows.append((label, sorted(zones, key=lambda z: z.lo)))
    return rows
