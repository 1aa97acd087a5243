"""The verdict of ``ccltune replay`` (pure): the workload's communication time per step under
NCCL's default and under the rules, their ratio with its interval, and the breakdown per entry.

A *round* issues the whole replayed sequence once (one captured run: every step the sources
hold) in the captured (or grouped) order, eagerly; its time per step is the round's time divided
by the workload's steps (1 when unknown; :mod:`ccltune.workload.quantities`). The two arms are timed
in interleaved rounds on their own communicators, so round i of each arm forms a pair. The ratio
rules / default and its 95% interval come from :func:`ccltune.stats.paired` (Wilcoxon signed-rank on
the paired log ratios, Hodges-Lehmann estimate; 6 rounds reach 95%, fewer leave it unbounded), judged
by :func:`ccltune.stats.judge` with ``stats.MIN_EFFECT`` (1%):

- FAIL: the interval lies above 1 and the ratio above 1.01: the rules are slower (``replay`` exits 1);
- PASS: faster, or no difference beyond 1%. The two arms run on two communicators, and two
  communicators of NCCL's default already differ by about that much (tune's A/A gap: median 0.5% on
  the DDP job of captures/h200x4-2026-11-28, up to 5% at some sizes), a bias no number of rounds
  removes; tune keeps a rule only where it gains at least ``--min-margin`` (2%). Without the band a
  0.4% difference measured tightly failed the rules tune had just written (issue 38 item 2);
- WAIVED: only NCCL's default was replayed (one rank, where NCCL consults no tuner, or an
  engine without the tuner plugin, such as gloo), so there is nothing to compare.

The rows time each entry alone (eager, ``validate``'s interleaved rounds at its size); their sum,
``sum of calls x median / steps``, leaves out what the round also holds: the time between calls in
the captured order (launches, switching communicators). :func:`lines` prints both and names that
difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccltune import engines, stats
from ccltune.stats import PointStats, point_stats
from ccltune.status import ArmStatus, RowStatus, Verdict
from ccltune.store import as_record
from ccltune.validate.verdict import SIDES
from ccltune.workload import quantities
from ccltune.workload.model import Workload


@dataclass(frozen=True)
class EntryTime:
    """One replayed entry measured alone (validate's interleaved rounds at its size)."""

    index: int
    collective: str
    size_bytes: int
    calls: int
    default: PointStats | None
    rules: PointStats | None
    job_us: float | None = None      # the job's own GPU time per call, median (profiler files or trace kernels)


@dataclass
class ReplayVerdict:
    status: Verdict                  # PASS, FAIL or WAIVED
    reason: str
    steps: int | None
    default: PointStats              # µs per step
    rules: PointStats | None
    entries: list[EntryTime] = field(default_factory=list)
    library: str = "NCCL"            # whose default the default arm ran: NCCL, RCCL, or gloo on the CPU
    estimate: stats.Estimate | None = None  # rules / default over the paired rounds (stats.paired)

    @property
    def interval(self) -> tuple[float, float, float] | None:
        """The ratio's interval: low, high, level (0 and inf when the rounds are too few)."""
        e = self.estimate
        return None if e is None else (e.low, e.high, e.level)

    @property
    def ratio(self) -> float | None:
        if self.estimate is not None:
            return self.estimate.ratio
        return self.rules.median_us / self.default.median_us if self.rules else None

    @property
    def ratio_noise(self) -> float | None:
        """Half the interval's width (the old field, kept for readers of stored runs)."""
        if self.estimate is not None and self.estimate.bounded:
            return (self.estimate.high - self.estimate.low) / 2
        return self.rules.noise + self.default.noise if self.rules else None

    @property
    def rows_us(self) -> float | None:
        """The entries timed alone, summed: sum of calls x default median / steps (None: none timed)."""
        got = [(e.calls, e.default.median_us) for e in self.entries if e.default is not None]
        return quantities.total(got, self.steps) if got else None

    def rows(self, rounds: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
        """Plain rows for the database and the report: one per arm and round (µs per step)."""
        return [{"arm": arm, "rep": i, "time_us_per_step": round(t, 3)}
                for arm, ts in rounds.items() for i, t in enumerate(ts)]

    def to_dict(self, rounds: Mapping[str, Sequence[float]]) -> dict[str, Any]:
        def stats(p: PointStats | None) -> dict[str, Any] | None:
            return None if p is None else {"median_us": round(p.median_us, 3), "noise": round(p.noise, 6), "n": p.n}
        return {"status": self.status, "reason": self.reason, "steps": self.steps, "library": self.library,
                "default_us_per_step": stats(self.default), "rules_us_per_step": stats(self.rules),
                "ratio": None if self.ratio is None else round(self.ratio, 5),
                "ratio_noise": None if self.ratio_noise is None else round(self.ratio_noise, 5),
                "ratio_interval": None if self.estimate is None or not self.estimate.bounded else
                {"low": round(self.estimate.low, 5), "high": round(self.estimate.high, 5),
                 "confidence": round(self.estimate.level, 4), "how": self.estimate.test},
                "rows_us_per_step": None if self.rows_us is None else round(self.rows_us, 3),
                "comm_us_per_step": {"default": round(self.default.median_us, 3),
                                     "rules": None if self.rules is None else round(self.rules.median_us, 3)},
                "rounds": self.rows(rounds),
                "entries": [{"entry": e.index, "collective": e.collective, "size_bytes": e.size_bytes,
                             "calls": e.calls, "default_us": stats(e.default), "rules_us": stats(e.rules),
                             "job_us": None if e.job_us is None else round(e.job_us, 3)}
                            for e in self.entries]}


def library_of(engine_name: str, info: Mapping[str, Any]) -> str:
    """The library whose default an engine runs: gloo on the CPU, else NCCL or RCCL (``info``: the
    engine's ``info()``, whose ``flavor`` names RCCL)."""
    if not engines.kind(engine_name).gpu:
        return engine_name
    return "RCCL" if info.get("flavor") == "rccl" else "NCCL"


def per_step(round_seconds: Iterable[float], steps: int | None) -> list[float]:
    """Round times (seconds) as µs per step."""
    return [t * 1e6 / (steps or 1) for t in round_seconds]


def entry_times(wl: Workload, rows_by_entry: Mapping[int, Iterable[Any]]) -> list[EntryTime]:
    """Per replayed entry (``rows_by_entry``: entry index -> its rows, Measurements or dicts with config,
    status and time_us; ``measure.replay.entry_rows``), the statistics of its 'ok' rows per arm."""
    out = []
    for i, rows in rows_by_entry.items():
        by: dict[str, list[float]] = {}
        for r in rows:
            r = as_record(r)
            if r.get("status") == RowStatus.OK and r.get("time_us") and r.get("config") in SIDES:
                by.setdefault(r["config"], []).append(float(r["time_us"]))
        e = wl.entries[i]
        got = {arm: point_stats(by[arm]) if arm in by else None for arm in SIDES}
        job = e.timing.median_us if e.timing is not None and e.timing.calls else None
        out.append(EntryTime(i, e.key.collective, e.key.size_bytes, e.calls, got["default"], got["rules"], job))
    return out


def pct(x: float) -> str:
    """A relative spread as a percentage with two significant digits (0.03%, not 0.0%)."""
    return f"{100 * x:.2g}%"


def verdict(rounds: Mapping[str, Sequence[float]], steps: int | None, entries: list[EntryTime],
            waived: str | None = None, library: str = "NCCL") -> ReplayVerdict:
    """Judge the rounds (µs per step per arm; module doc). ``waived``: why only the default ran;
    ``library``: whose default that is (:func:`library_of`)."""
    default = point_stats(rounds["default"])
    if waived is not None or not rounds.get("rules"):
        return ReplayVerdict(Verdict.WAIVED, waived or f"only {library}'s default was replayed", steps, default, None,
                             entries, library)
    rules = point_stats(rounds["rules"])
    n = min(len(rounds["default"]), len(rounds["rules"]))
    e = stats.paired(rounds["rules"][:n], rounds["default"][:n])
    word = stats.judge(e, stats.MIN_EFFECT)
    said = f"{e.said} over {n} paired rounds"
    if word is ArmStatus.SLOWER:
        status, why = Verdict.FAIL, f"the rules are slower: {said}"
    elif word is ArmStatus.FASTER:
        status, why = Verdict.PASS, f"the rules are faster: {said}"
    else:
        status, why = Verdict.PASS, f"no difference beyond {100 * stats.MIN_EFFECT:g}%: {said}"
    return ReplayVerdict(status, why, steps, default, rules, entries, library, e)


def lines(v: ReplayVerdict, wl: Workload, order: str, skipped: Iterable[Any] = (), notes: Iterable[str] = (),
          under_load: int | None = None) -> list[str]:
    """The report: time per step both ways, the ratio and its interval, the entries (their sum and how
    it differs from the rounds), what was skipped. ``under_load``: the --under-load matrix, said on the line."""
    unit = quantities.unit(v.steps)
    d = v.default
    load = f"under load (--under-load {under_load})" if under_load else "idle GPU" if v.library != "gloo" else "no load"
    head = (f"# communication time per {unit}, the whole sequence in {order} order, eager, {load}: {v.library} default "
            f"{d.median_us:.1f} us (median of {d.n} rounds, spread +-{pct(d.noise)})")
    if v.rules is not None:
        head += f", rules {v.rules.median_us:.1f} us (+-{pct(v.rules.noise)}): ratio {v.ratio:.4f}"
    out = [head, f"# {v.status}: {v.reason}", f"# order: {order}"]
    timed = any(e.job_us is not None for e in v.entries)  # the job's own time per call, beside replay's
    if timed:
        out.append("# job_us: the job's own GPU time per call (median: profiler files or trace kernels), "
                   "beside replay's default_us")
    short = quantities.short_unit(v.steps)
    out.append(f"# rows: each entry timed alone, eager, {load}, median per call; default_us/{short} = calls x default_us / "
               + ("steps" if v.steps else "1 (steps unknown)"))
    out.append(f"# {'collective':<15}{'size_bytes':>12}{'calls':>7}{'default_us':>12}"
               + (f"{'job_us':>10}" if timed else "") + f"{'rules_us':>10}{'ratio':>8}"
               f"{f'default_us/{short}':>17}")
    for e in v.entries:
        dm = f"{e.default.median_us:.1f}" if e.default else "-"
        tm = (f"{e.job_us:.1f}" if e.job_us is not None else "-") if timed else ""
        rm = f"{e.rules.median_us:.1f}" if e.rules else "-"
        ratio = f"{e.rules.median_us / e.default.median_us:.3f}" if e.rules and e.default else "-"
        share = f"{quantities.per_step(e.calls, e.default.median_us, v.steps):.1f}" if e.default else "-"
        out.append(f"  {e.collective:<15}{e.size_bytes:>12}{e.calls:>7}{dm:>12}{tm:>{10 if timed else 0}}{rm:>10}"
                   f"{ratio:>8}{share:>17}")
    rows = v.rows_us
    if rows is not None:
        gap = d.median_us - rows
        out.append(f"# the rows sum to {rows:.1f} us per {unit} (entries alone, back to back); the rounds took "
                   f"{d.median_us:.1f} us: {gap:+.1f} us ({100 * gap / d.median_us:+.1f}%) is the time between and "
                   f"around calls in {order} order (launches, communicator switches, synchronisation)")
    for s in skipped:
        k = s.entry.key
        out.append(f"# not replayed: {k.collective} {k.size_bytes} B x{s.entry.calls}: {s.reason}")
    out.extend(f"# note: {n}" for n in notes)
    return out
