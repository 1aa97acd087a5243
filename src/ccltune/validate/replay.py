"""The verdict of ``ccltune replay`` (pure): the workload's communication time per step under
NCCL's default and under the rules, their ratio with its noise, and the breakdown per entry.

A *round* issues the whole replayed sequence once (one captured run: every step the sources
hold); its time per step is the round's time divided by the workload's steps (1 when unknown).
The two arms are timed in interleaved rounds on their own communicators, as ``validate`` times
its arms. Noise is :mod:`ccltune.tune.stats`'s half spread of the rounds; the ratio
``rules / default`` is judged beyond the sum of both arms' noise:

- FAIL: the rules are slower beyond the noise (``replay`` exits 1);
- PASS: faster beyond the noise, or no difference beyond it;
- WAIVED: only NCCL's default was replayed (one rank, where NCCL consults no tuner, or an
  engine without the tuner plugin, such as gloo), so there is nothing to compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccltune import engines
from ccltune.store import as_record
from ccltune.tune.stats import PointStats, beats, point_stats
from ccltune.validate.verdict import SIDES
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
    trace_us: float | None = None    # the job's own GPU time per call, from its trace's kernels (None: untimed)


@dataclass
class ReplayVerdict:
    status: str                      # PASS / FAIL / WAIVED
    reason: str
    steps: int | None
    default: PointStats              # µs per step
    rules: PointStats | None
    entries: list[EntryTime] = field(default_factory=list)
    library: str = "NCCL"            # whose default the default arm ran: NCCL, RCCL, or gloo on the CPU

    @property
    def ratio(self) -> float | None:
        return self.rules.median_us / self.default.median_us if self.rules else None

    @property
    def ratio_noise(self) -> float | None:
        return self.rules.noise + self.default.noise if self.rules else None

    def rows(self, rounds: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
        """Plain rows for the database and the report: one per arm and round (µs per step)."""
        return [{"arm": arm, "rep": i, "time_us_per_step": round(t, 3)}
                for arm, ts in rounds.items() for i, t in enumerate(ts)]

    def to_dict(self, rounds: Mapping[str, Sequence[float]]) -> dict[str, Any]:
        def stats(p: PointStats | None) -> dict[str, Any] | None:
            return None if p is None else {"median_us": round(p.median_us, 3), "noise": round(p.noise, 4), "n": p.n}
        return {"status": self.status, "reason": self.reason, "steps": self.steps, "library": self.library,
                "default_us_per_step": stats(self.default), "rules_us_per_step": stats(self.rules),
                "ratio": None if self.ratio is None else round(self.ratio, 4),
                "ratio_noise": None if self.ratio_noise is None else round(self.ratio_noise, 4),
                "comm_us_per_step": {"default": round(self.default.median_us, 3),
                                     "rules": None if self.rules is None else round(self.rules.median_us, 3)},
                "rounds": self.rows(rounds),
                "entries": [{"entry": e.index, "collective": e.collective, "size_bytes": e.size_bytes,
                             "calls": e.calls, "default_us": stats(e.default), "rules_us": stats(e.rules),
                             "trace_us": None if e.trace_us is None else round(e.trace_us, 3)}
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
            if r.get("status") == "ok" and r.get("time_us") and r.get("config") in SIDES:
                by.setdefault(r["config"], []).append(float(r["time_us"]))
        e = wl.entries[i]
        got = {arm: point_stats(by[arm]) if arm in by else None for arm in SIDES}
        job = e.timing.mean_us if e.timing is not None and e.timing.calls else None
        out.append(EntryTime(i, e.key.collective, e.key.size_bytes, e.calls, got["default"], got["rules"], job))
    return out


def verdict(rounds: Mapping[str, Sequence[float]], steps: int | None, entries: list[EntryTime],
            waived: str | None = None, library: str = "NCCL") -> ReplayVerdict:
    """Judge the rounds (µs per step per arm; module doc). ``waived``: why only the default ran;
    ``library``: whose default that is (:func:`library_of`)."""
    default = point_stats(rounds["default"])
    if waived is not None or not rounds.get("rules"):
        return ReplayVerdict("WAIVED", waived or f"only {library}'s default was replayed", steps, default, None,
                             entries, library)
    rules = point_stats(rounds["rules"])
    ratio, noise = rules.median_us / default.median_us, rules.noise + default.noise
    if beats(rules, default):
        return ReplayVerdict("FAIL", f"the rules are slower: x{ratio:.3f}, beyond the noise (+-{100 * noise:.1f}%)",
                             steps, default, rules, entries, library)
    if beats(default, rules):
        why = f"the rules are faster: x{ratio:.3f}, beyond the noise (+-{100 * noise:.1f}%)"
    else:
        why = f"no difference beyond the noise: x{ratio:.3f} (+-{100 * noise:.1f}%)"
    return ReplayVerdict("PASS", why, steps, default, rules, entries, library)


def lines(v: ReplayVerdict, wl: Workload, order: str, skipped: Iterable[Any] = (), notes: Iterable[str] = ()
          ) -> list[str]:
    """The report: time per step both ways, the ratio and its noise, the entries, what was skipped."""
    unit = "step" if v.steps else "captured run (steps unknown)"
    d = v.default
    head = f"# communication time per {unit}: {v.library} default {d.median_us:.1f} us (+-{100 * d.noise:.1f}%, {d.n} rounds)"
    if v.rules is not None:
        head += f", rules {v.rules.median_us:.1f} us (+-{100 * v.rules.noise:.1f}%): ratio {v.ratio:.3f}"
    out = [head, f"# {v.status}: {v.reason}", f"# order: {order}"]
    traced = any(e.trace_us is not None for e in v.entries)  # the job's own kernel time per call, beside replay's
    if traced:
        out.append("# trace_us: the job's own GPU time per call (its profiler trace's NCCL kernels), "
                   "beside replay's default_us")
    out.append(f"# {'collective':<15}{'size_bytes':>12}{'calls':>7}{'default_us':>12}"
               + (f"{'trace_us':>10}" if traced else "") + f"{'rules_us':>10}{'ratio':>8}"
               f"{f'default_us/{unit[:4]}':>17}")
    per = v.steps or 1
    for e in v.entries:
        dm = f"{e.default.median_us:.1f}" if e.default else "-"
        tm = (f"{e.trace_us:.1f}" if e.trace_us is not None else "-") if traced else ""
        rm = f"{e.rules.median_us:.1f}" if e.rules else "-"
        ratio = f"{e.rules.median_us / e.default.median_us:.3f}" if e.rules and e.default else "-"
        share = f"{e.calls * e.default.median_us / per:.1f}" if e.default else "-"
        out.append(f"  {e.collective:<15}{e.size_bytes:>12}{e.calls:>7}{dm:>12}{tm:>{10 if traced else 0}}{rm:>10}"
                   f"{ratio:>8}{share:>17}")
    for s in skipped:
        k = s.entry.key
        out.append(f"# not replayed: {k.collective} {k.size_bytes} B x{s.entry.calls}: {s.reason}")
    out.extend(f"# note: {n}" for n in notes)
    return out
