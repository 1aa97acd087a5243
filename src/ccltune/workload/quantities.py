"""The workload loop's quantities, defined once (pure). ``workload show``, ``tune --workload``,
``replay`` and ``report`` all print through these, so one question gets one answer.

- **per call** (us): one call's time; a median over the calls or rounds that timed it.
- **per captured run** (us): the calls of every entry, one after another:
  ``sum over entries of calls x per-call time``. With entries timed alone this leaves out what
  happens between calls in the job's order (launch gaps, switching communicators, waiting for the
  host); ``replay`` times the captured order too and names the difference.
- **per step** (us): per captured run / steps (the workload's ``steps``; when unknown, figures are per
  captured run and say so).

Every line that prints one of these says which it is and how it was measured (:func:`how`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ccltune import collectives

if TYPE_CHECKING:
    from ccltune.workload.model import Workload

# The job's own median time per call over NCCL's default idle median at or above this: the job's
# conditions (compute on the same SMs, waiting for peers) are not an idle sweep's, and an idle
# winner is not evidence for the job (issue 28: a 100 MB all_gather took 2,274 us in the job,
# 279 us idle; rules from the idle sweep made the job slower). docs/workload.md, "In-job times".
SLOW_RATIO = 2.0


def unit(steps: int | None) -> str:
    """What a total is per: 'step', or 'captured run (steps unknown)'."""
    return "step" if steps else "captured run (steps unknown)"


def short_unit(steps: int | None) -> str:
    """For a column heading: 'step' or 'run'."""
    return "step" if steps else "run"


def per_step(calls: int, per_call_us: float, steps: int | None) -> float:
    """One entry's share of the time per step (per captured run when steps are unknown)."""
    return calls * per_call_us / (steps or 1)


def total(rows: Iterable[tuple[int, float]], steps: int | None) -> float:
    """The time per step of entries given as (calls, per-call us)."""
    return sum(per_step(n, us, steps) for n, us in rows)


def how(*, timed: str, mode: str | None = None, load: str | None = None, order: str | None = None) -> str:
    """How a figure was measured, for the line that prints it: e.g. 'each entry timed alone, eager,
    idle GPU' or 'the captured order, graph, under load'."""
    return ", ".join(x for x in (timed, mode, load, order) if x)


def tuner_calls_per_step(wl: Workload) -> int | None:
    """The calls one step makes on the job's busiest communicator (:func:`busiest_communicator`), or None."""
    got = busiest_communicator(wl)
    return got[0] if got else None


def busiest_communicator(wl: Workload) -> tuple[int, int, int] | None:
    """(calls a step, its ranks, how many communicator sizes make tuned calls) of the job's busiest communicator,
    from its workload: the calls NCCL hands to a tuner (not send/recv), per communicator of the captured order
    (by group size when the workload keeps no order), over its steps; None when the workload does not know its
    steps. A COLL log counts API calls, the tuner merged groups: a hint the plugin rounds to a multiple of the
    period it finds, not a period."""
    if not wl.steps or not wl.entries:
        return None
    tuned = {i: e for i, e in enumerate(wl.entries)
             if (c := collectives.REGISTRY.get(e.key.collective)) is not None and c.tuner_func is not None}
    per: Counter[object] = Counter()
    size: dict[object, int] = {}
    if wl.order:
        for entry, comm, repeat in wl.order:
            if entry in tuned:
                per[comm] += repeat
                size[comm] = tuned[entry].key.nranks
    else:
        for e in tuned.values():
            per[e.key.nranks] += e.calls
            size[e.key.nranks] = e.key.nranks
    if not per:
        return None
    top, calls = per.most_common(1)[0]
    n = round(calls / wl.steps)
    return (n, size[top], len(set(size.values()))) if n >= 1 else None
