"""``ccltune search``'s candidates (pure): per (collective, size group) of the job's workload, the rules worth
trying inside the job (docs/ab.md "ccltune search").

- NCCL's choice: the default arm itself (no rule);
- the idle sweep's best: the rule that ``ccltune tune`` derived from the sweep (``--sweep-rules``) for the
  group's sizes, cut to the group's range;
- SM-budget candidates: NCCL's own algorithm and protocol on fewer channels (2, 4, 8, 16, each well under the
  channels NCCL ran, when the workload's profiler record says how many), for collectives that overlap compute:
  fewer channels leave SMs to the compute beside them, which an idle sweep cannot see (it times the collective
  alone). The workload's traces say whether compute overlaps (``compute_overlap``); without a trace that is
  unknown and the SM-budget candidates are tried anyway, said so.

A size group: a collective's sizes, sorted, cut where the next size is more than ``GROUP_SPAN`` times the
group's smallest; the groups that weigh most (GPU time when the workload has it, else bytes) are kept."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ccltune import collectives, rules
from ccltune.workload.model import Entry, Workload

GROUP_SPAN = 16
SM_CHANNELS = (2, 4, 8, 16)
MIN_OVERLAP = 0.05       # share of the NCCL kernels' time with compute beside it that makes SM budget worth a try


@dataclass(frozen=True)
class Group:
    collective: str      # the rule file's name (allreduce, ...)
    min_bytes: int
    max_bytes: int
    weight: float        # GPU time (us) per rank, or bytes when the workload has no time
    nccl_channels: int | None   # the channels NCCL ran most often here (profiler record), None: unknown
    nccl_ran: str        # what NCCL ran, in words

    @property
    def label(self) -> str:
        return f"{self.collective} {rules_size(self.min_bytes)}..{rules_size(self.max_bytes)}"


@dataclass(frozen=True)
class Candidate:
    name: str            # an arm name ([A-Za-z0-9_.-])
    group: Group
    rule: rules.Rule
    source: str          # 'sweep' or 'sm-budget'


def rules_size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _weight(e: Entry) -> float:
    """The entry's GPU time per rank over the job (its timed calls' mean times its calls), 0 when untimed."""
    t = e.timing
    return t.total_us / t.calls * e.calls if t is not None and t.calls > 0 else 0.0


def recurs(e: Entry, steps: int | None) -> bool:
    """Whether the entry's calls come back step after step: at least one a step when the workload knows its
    steps, else more than one. In-run arms switch inside the steps, so a collective issued only at the start
    (DDP's broadcast of the parameters, a barrier) cannot be judged by them and is no candidate (2 x H200,
    2026-11-28: DDP's start-up broadcasts, 193 MB, outweighed its gradient buckets and took 12 of 16 arms)."""
    return e.calls >= steps if steps else e.calls > 1


def groups(wl: Workload, max_groups: int) -> list[Group]:
    """The workload's (collective, size group)s that a tuner rule can change, heaviest first (module doc)."""
    by_coll: dict[str, list[Entry]] = {}
    for e in wl.entries:
        plugin = collectives.PLUGIN_NAMES.get(e.key.collective)
        if plugin is not None and e.key.nranks > 1 and recurs(e, wl.steps):  # one rank: NCCL asks no tuner
            by_coll.setdefault(plugin, []).append(e)
    out: list[Group] = []
    timed = any(_weight(e) for e in wl.entries)
    for coll, entries in by_coll.items():
        entries.sort(key=lambda e: e.key.size_bytes)
        cur: list[Entry] = []
        for nxt in [*entries, None]:
            if nxt is None or (cur and nxt.key.size_bytes > GROUP_SPAN * cur[0].key.size_bytes):
                out.append(_group(coll, cur, timed))
                cur = []
            if nxt is not None:
                cur.append(nxt)
    out.sort(key=lambda g: -g.weight)
    return out[:max_groups]


def _group(coll: str, entries: Sequence[Entry], timed: bool) -> Group:
    ran: Counter[tuple[str, str, int]] = Counter()
    for e in entries:
        ran.update(e.ran or {})
    weight = sum(_weight(e) for e in entries) if timed else float(sum(e.key.size_bytes * e.calls for e in entries))
    top = ran.most_common(1)
    words = f"{top[0][0][0]}/{top[0][0][1]}/{top[0][0][2]}ch" if top else "not recorded"
    return Group(coll, entries[0].key.size_bytes, entries[-1].key.size_bytes, weight,
                 top[0][0][2] if top and top[0][0][2] > 0 else None, words)


def overlap_note(wl: Workload) -> tuple[bool, str]:
    """Whether to try SM-budget candidates, and why (module doc)."""
    o = wl.compute
    if o is None:
        return True, "the workload has no trace, so whether compute overlaps the collectives is unknown: SM-budget " \
                     "candidates are tried anyway"
    if o.share >= MIN_OVERLAP:
        return True, f"compute runs beside {100 * o.share:.0f}% of the NCCL kernels' time: SM-budget candidates tried"
    return False, f"compute runs beside only {100 * o.share:.0f}% of the NCCL kernels' time: no SM-budget candidate"


def _arm(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:64]


def candidates(gs: Sequence[Group], sweep: rules.RuleSet | None, sm_budget: bool) -> list[Candidate]:
    """Every candidate of the groups (module doc), in the order of the groups."""
    out: list[Candidate] = []
    for g in gs:
        if sweep is not None:
            for r in sweep.rules:
                if r.collective == g.collective and r.min_bytes <= g.max_bytes and r.max_bytes >= g.min_bytes:
                    rule = rules.Rule(g.collective, g.min_bytes, g.max_bytes, r.algo, r.proto, r.channels)
                    chans = f"{r.channels}ch" if r.channels > 0 else "any"
                    out.append(Candidate(_arm(f"{g.collective}.{rules_size(g.min_bytes)}.sweep.{r.algo}.{r.proto}.{chans}"),
                                         g, rule, "sweep"))
                    break
        if sm_budget:
            for ch in SM_CHANNELS:
                if g.nccl_channels is not None and ch > g.nccl_channels // 2:
                    continue
                rule = rules.Rule(g.collective, g.min_bytes, g.max_bytes, rules.NCCL_CHOICE, rules.NCCL_CHOICE, ch)
                out.append(Candidate(_arm(f"{g.collective}.{rules_size(g.min_bytes)}.{ch}ch"), g, rule, "sm-budget"))
    return out
