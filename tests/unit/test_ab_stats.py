"""ccltune ab's statistics (validate/jobab.py), on synthetic samples: fast and seeded."""

from __future__ import annotations

import math
import random

import pytest

from ccltune.validate import jobab
from ccltune.validate.jobab import Status


def test_moses_ranks_match_the_mann_whitney_tables() -> None:
    # two-sided 5% critical U (tables): m=n=5: 2, m=n=10: 23, m=4,n=6: 2 -> k = U + 1
    assert jobab._rank_k(5, 5) == 3
    assert jobab._rank_k(10, 10) == 24
    assert jobab._rank_k(4, 6) == 3
    assert jobab._rank_k(3, 3) == 0  # 1 / C(6, 3) = 5% > 2.5%: no 95% interval exists
    assert jobab._rank_k(60, 60) == pytest.approx(1426, abs=2)  # normal approximation


def test_too_few_runs_give_an_unbounded_interval_and_no_verdict() -> None:
    (v,) = [x for x in jobab.verdicts({"default": [1.0, 1.1, 1.2], "a": [2.0, 2.1, 2.2]}, {}) if x.name == "a"]
    assert v.status is Status.NO_DIFFERENCE and not v.effect.bounded and "too few runs" in v.note


def _noisy(rng: random.Random, n: int, base: float, noise: float = 0.05) -> list[float]:
    return [base * math.exp(rng.gauss(0, noise)) for _ in range(n)]


def test_planted_five_percent_slowdown_is_found_with_its_size() -> None:
    rng = random.Random(5)
    e = jobab.effect(_noisy(rng, 12, 105.0, 0.02), _noisy(rng, 12, 100.0, 0.02))
    assert jobab.judge(e, 0.01) is Status.SLOWER
    assert e.ratio_lo < 1.05 < e.ratio_hi and e.ratio_lo > 1.0
    assert e.shift_lo < 5.0 < e.shift_hi


def test_identical_arms_say_no_difference_in_at_least_19_of_20_seeded_trials() -> None:
    same = 0
    for seed in range(20):
        rng = random.Random(seed)
        vs = jobab.verdicts({"default": _noisy(rng, 10, 100.0), "default-2": _noisy(rng, 10, 100.0)}, {},
                            controls=["default-2"], min_effect=0.0)
        same += vs[1].status is Status.NO_DIFFERENCE
    assert same >= 19


def test_an_arm_that_failed_in_every_run_is_failed() -> None:
    vs = jobab.verdicts({"default": [1.0] * 4, "bad": []}, {"bad": 4})
    assert vs[1].status is Status.FAILED and vs[1].failed == 4 and "every run failed" in vs[1].note


def test_confident_needs_the_interval_out_of_one_or_inside_the_band() -> None:
    e = jobab.Effect(1.001, 0.998, 1.004, 0.1, -0.2, 0.4, 8, 8)
    assert jobab.confident(e, 0.01) and not jobab.confident(e, 0.0)
    assert jobab.judge(jobab.Effect(1.004, 1.001, 1.008, 0, 0, 0, 8, 8), 0.01) is Status.NO_DIFFERENCE


def test_comm_time_sums_every_timed_entry_of_every_profiler_file(tmp_path) -> None:
    """A real two-rank DDP capture (profile-ddp-2, README there): the sum of every entry's sum_us in both files;
    the hand-written files' ReduceScatter entry timed no call and adds nothing (no real file has such an
    entry). A file cut short fails the run, named."""
    from pathlib import Path

    from ccltune.validate import profsum

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
    folder = fixtures / "profile-ddp-2"
    sums = [float(line.split()[11]) for f in sorted(folder.glob("*.txt")) for line in f.read_text().splitlines()
            if line.startswith("coll ")]
    assert len(sums) == 22 and profsum.comm_time_us(folder) == (pytest.approx(sum(sums)), "")
    assert profsum.comm_time_us(fixtures / "profile") == (2 * (272 + 468 + 138 + 110), "")
    cut = tmp_path / folder.joinpath("x").name
    cut.mkdir()
    src = sorted(folder.glob("ccltune-profile.*.txt"))[0]
    (cut / src.name).write_text(src.read_text().replace("# end\n", ""))
    value, why = profsum.comm_time_us(cut)
    assert value is None and src.name in why
    assert profsum.comm_time_us(tmp_path)[0] is None
