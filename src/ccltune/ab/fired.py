"""Proof that rules fired: the profiler's record of a job against the rule file it ran with (pure).

ccltune's profiler plugin (docs/profiler.md) writes, per communicator and rank, every (collective, count,
datatype, algorithm, protocol, channels) NCCL actually ran, with its calls. Each such group of calls is
put to the rules as the tuner plugin meets it (:func:`ccltune.rules.match`, one rule at a time in file
order: the tuner's nBytes, the communicator's ranks and nodes, the platform):

- the calls belong to the first rule that covers them and whose algorithm, protocol and channels agree
  with what ran (the plugin skips a rule whose cell NCCL marks IGNORE and goes on to the next one, so
  a later rule can be the one that fired);
- when no covering rule agrees, to the first rule that covers them: that rule was asked and NCCL ran
  something else;
- the covering rules before the one that agreed were skipped for those calls (said, not a failure);
- calls no rule covers are NCCL's own choice.

Per rule: ``APPLIED`` (every call it got ran what it asks; NCCL may use fewer channels than a rule
allows, which is said), ``NOT APPLIED`` (calls it covers ran something else: its cell unavailable for
them, or the plugin did not load the file), ``NEVER FIRED`` (no call of the job fell in it). The
profiler sees no numPipeOps or regBuff (a rule that names them is matched as if they fit, and says so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ccltune import collectives
from ccltune.datatypes import DTYPES
from ccltune.rules import ANY, NCCL_CHOICE, PlatformFacts, Query, Rule, RuleSet, match, nccl_spelling
from ccltune.status import RuleCheck, Verdict
from ccltune.workload.model import add_counts
from ccltune.workload.profile_file import ProfileFile

MAX_SKIPPED = 100  # entries not judged that are named (the rest are counted in none: a handful shows the cause)
Ran = tuple[str, str, int]  # (algorithm, protocol, channels) as the profiler wrote them


Fired = RuleCheck  # APPLIED / NOT APPLIED / NEVER FIRED, one vocabulary with plugin verify's


@dataclass
class Tally:
    """Calls per rule (by its line) and what ran, summed over profiler files (every rank's calls), and the
    calls no rule covered. Adds up over runs (``ab``: every round of an arm)."""

    ran: dict[int, Counter[Ran]] = field(default_factory=dict)      # rule line -> what its calls ran
    asked: dict[int, Counter[Ran]] = field(default_factory=dict)    # rule line -> calls it covered that ran other
    passed: dict[int, Counter[int]] = field(default_factory=dict)   # rule line -> later rule line -> calls it skipped
    unruled: Counter[tuple[str, int, Ran]] = field(default_factory=Counter)  # (collective, bytes, ran) -> calls
    files: int = 0
    skipped: list[str] = field(default_factory=list)

    def merge(self, other: Tally) -> None:
        for line, ran in other.ran.items():
            add_counts(self.ran, line, ran)
        for line, ran in other.asked.items():
            add_counts(self.asked, line, ran)
        for line, later in other.passed.items():
            add_counts(self.passed, line, later)
        self.unruled.update(other.unruled)
        self.files += other.files
        self.skipped += [s for s in other.skipped if s not in self.skipped][:MAX_SKIPPED - len(self.skipped)]


@dataclass(frozen=True)
class RuleFiring:
    rule: Rule
    status: Fired
    calls: int                      # calls the rule got (all ranks' files)
    ran: tuple[tuple[Ran, int], ...]  # what those calls ran, most calls first
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"rule_line": self.rule.line, "rule": self.rule.to_line(), "status": self.status.value,
                "calls": self.calls, "reason": self.reason,
                "ran": [{"algo": a, "proto": p, "channels": c, "calls": n} for (a, p, c), n in self.ran]}




def agrees(rule: Rule, ran: Ran) -> bool:
    """Whether a call that ran ``ran`` is what ``rule`` asks: its algorithm and protocol where it names them, and no
    more channels than it gives (NCCL may use fewer for a small call)."""
    algo, proto, channels = ran
    return ((rule.algo == NCCL_CHOICE or nccl_spelling(rule.algo) == nccl_spelling(algo))
            and (rule.proto == NCCL_CHOICE or nccl_spelling(rule.proto) == nccl_spelling(proto))
            and (rule.channels < 1 or channels <= rule.channels))


def tally(ruleset: RuleSet, files: Iterable[ProfileFile], platform: PlatformFacts = PlatformFacts()) -> Tally:
    """Every collective call of the profiler files, given to the rule that took it (module doc)."""
    out = Tally()
    files = list(files)  # read twice: the rank counts first (ABI v1-v3 files take theirs from another rank's)
    nranks = {f.comm: f.nranks for f in files if f.nranks is not None}
    for f in files:
        out.files += 1
        n = f.nranks or nranks.get(f.comm)
        for e in f.entries:
            coll = collectives.REGISTRY.get(e.op)
            if e.kind != "coll" or coll is None or coll.tuner_func is None:
                continue  # point-to-point, or a collective NCCL passes to no tuner
            if n is None or e.count is None or e.datatype not in DTYPES or not e.algo or not e.proto:
                why = f"{f.path}: {e.op} count {e.count} {e.datatype}: " + (
                    "the file gives no rank count" if n is None else "no datatype, algorithm or protocol")
                if len(out.skipped) < MAX_SKIPPED:
                    out.skipped.append(why)
                continue
            size = e.count * DTYPES[e.datatype].size * (n if coll.per_rank_count else 1)
            ran: Ran = (e.algo, e.proto, e.nchannels or 0)
            covering = [r for r in ruleset.rules if match(RuleSet([r]), Query(
                coll.name, size, n, f.nnodes or 1, reg_buff=None if r.reg_buff == ANY else r.reg_buff,
                num_pipe_ops=1 if r.num_pipe_ops == ANY else r.num_pipe_ops, platform=platform)).rule is not None]
            took = next((r for r in covering if agrees(r, ran)), None)
            if took is not None:
                out.ran.setdefault(took.line, Counter())[ran] += e.calls
                for r in covering[:covering.index(took)]:
                    out.passed.setdefault(r.line, Counter())[took.line] += e.calls
            elif covering:
                out.asked.setdefault(covering[0].line, Counter())[ran] += e.calls
            else:
                out.unruled[(coll.name, size, ran)] += e.calls
    return out


def _text(ran: Iterable[tuple[Ran, int]]) -> str:
    return ", ".join(f"{a}/{p}/{c}ch x{n}" for (a, p, c), n in ran)


def _sorted(c: Counter[Ran]) -> tuple[tuple[Ran, int], ...]:
    return tuple(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def firings(ruleset: RuleSet, t: Tally) -> list[RuleFiring]:
    """One line per rule of the file, in file order (module doc)."""
    out = []
    for r in ruleset.rules:
        good, other = t.ran.get(r.line, Counter()), t.asked.get(r.line, Counter())
        everything = _sorted(good + other)
        calls = sum(good.values()) + sum(other.values())
        extra = "" if r.num_pipe_ops == ANY and r.reg_buff == ANY else \
            " (the profiler does not see numPipeOps or regBuff: matched as if they fit)"
        if other:
            status, why = Fired.NOT_APPLIED, (f"NCCL ran {_text(_sorted(other))} on {sum(other.values())} of the "
                                              f"{calls} calls it covers, not what it asks: its choice unavailable for "
                                              "them (NCCL marks the cell IGNORE and the plugin skips the rule), or "
                                              "the plugin did not load this file")
        elif good:
            fewer = sorted({c for (_, _, c) in good if 1 <= r.channels and c < r.channels})
            note = (f"; NCCL used {', '.join(map(str, fewer))} channel(s), within the rule's {r.channels}"
                    if fewer else "")
            status, why = Fired.APPLIED, f"NCCL ran {_text(everything)}{note}"
        elif t.passed.get(r.line):
            to = ", ".join(f"{n} to line {line}" for line, n in sorted(t.passed[r.line].items()))
            status, why = Fired.NEVER_FIRED, (f"the calls it covers ran a later rule's choice ({to}): the plugin "
                                              "skipped it, as it does where NCCL marks the rule's choice "
                                              "unavailable (IGNORE) for the call")
        else:
            earlier = _taken_earlier(ruleset, r, t)
            status, why = Fired.NEVER_FIRED, ("no call of the job fell in this rule's collective, sizes, ranks, "
                                              "nodes and platform" if not earlier else
                                              f"the calls it covers went to line {earlier} first")
        out.append(RuleFiring(r, status, calls, everything, why + extra))
    return out


def _taken_earlier(ruleset: RuleSet, rule: Rule, t: Tally) -> int | None:
    """The first earlier rule of the same collective that got calls (a rule behind it never sees those)."""
    for r in ruleset.rules:
        if r.line >= rule.line:
            return None
        if r.collective == rule.collective and (t.ran.get(r.line) or t.asked.get(r.line)):
            return r.line
    return None


def statuses(fired: list[RuleFiring]) -> list[str]:
    """The verdict words for an exit code: NOT APPLIED fails; a file none of whose rules fired proved nothing
    (FAIL); a rule that never fired, beside others that did, is not a failure (the job never made such a call)."""
    words = [f.status.value for f in fired]
    return words + ([Verdict.FAIL] if not any(f.status is Fired.APPLIED for f in fired) else [])


def lines(fired: list[RuleFiring], t: Tally) -> list[str]:
    """The per-rule table and the calls no rule covered, as text lines."""
    from ccltune.sizes import format_size

    out = [f"# rules against the profiler's record ({t.files} file(s), every rank's calls): what NCCL ran for "
           "the calls each rule covers",
           f"# {'line':>5}  {'rule':<40} {'calls':>7}  {'status':<12} what NCCL ran / why"]
    for f in fired:
        r = f.rule
        top = "max" if r.max_bytes >= (1 << 64) - 1 else format_size(r.max_bytes)
        text = (f"{r.collective} {format_size(r.min_bytes)}..{top} {r.algo}/{r.proto}"
                + (f"/{r.channels}ch" if r.channels >= 1 else ""))
        out.append(f"  {r.line:>5}  {text:<40} {f.calls:>7}  {f.status.value:<12} {f.reason}")
    if t.unruled:
        shown = sorted(t.unruled.items(), key=lambda kv: -kv[1])
        out.append(f"# calls no rule covers (NCCL's own choice): {sum(t.unruled.values())}: "
                   + ", ".join(f"{c} {format_size(s)} {a}/{p}/{ch}ch x{n}" for (c, s, (a, p, ch)), n in shown[:6])
                   + (f" and {len(shown) - 6} more" if len(shown) > 6 else ""))
    for s in t.skipped[:3]:
        out.append(f"# not judged: {s}")
    counts = Counter(f.status for f in fired)
    out.append(f"# {counts[Fired.APPLIED]} applied, {counts[Fired.NOT_APPLIED]} not applied, "
               f"{counts[Fired.NEVER_FIRED]} never fired")
    return out
