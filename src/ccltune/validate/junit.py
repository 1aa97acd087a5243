"""JUnit XML for a validate verdict: one testcase per (collective, nRanks, nNodes, size),
a <failure> where the rules are slower, an <error> where a side is missing; written by
:mod:`ccltune.junit`."""

from __future__ import annotations

from ccltune import junit
from ccltune.sizes import format_size
from ccltune.status import Verdict as Status  # validate.verdict.ValidateVerdict is the whole judgement
from ccltune.validate.verdict import SizeVerdict, ValidateVerdict


def to_junit(v: ValidateVerdict, suite: str = "ccltune.validate") -> str:
    cases = []
    for s in v.sizes:
        fail, error = s.status == Status.FAIL, s.status == Status.ERROR
        cases.append(junit.Case(
            f"{suite}.{s.collective}.nranks{s.n_ranks}.nnodes{s.n_nodes}", f"{s.collective} {format_size(s.size_bytes)}B",
            s.status, s.reason, kind="slower" if fail else "missing" if error else None,
            detail=_detail(s) if fail else None, out=None if fail or error else s.reason,
            time_s=(s.rules.median_us if s.rules else 0.0) / 1e6))
    return junit.to_junit(suite, cases)


def _detail(s: SizeVerdict) -> str:
    d = s.to_dict()
    return (f"default {d['default_time_us']:.2f} us over {d['default_reps']} reps, "
            f"rules {d['rules_time_us']:.2f} us over {d['rules_reps']} reps, speedup {d['speedup']:.3f}x")
