"""ccltune.stats: the exact tables, the stopping rule, Holm, and simulations of ``ab``'s verdicts under a
true null (no arm differs: any FASTER/SLOWER is false) and with a planted effect. Seeded, a few seconds."""

from __future__ import annotations

import math
import random

import pytest

from ccltune import stats
from ccltune.ab import judge as jobab
from ccltune.ab import rounds as jobrounds
from ccltune.status import ArmStatus

MIN_EFFECT = 0.01   # ab's default --min-effect


def test_the_exact_tables_match_the_published_critical_values() -> None:
    # signed rank, two-sided 5%: critical W 8 at n = 10, 0 at n = 6 (k = W + 1); n = 5 reaches only 6.25%
    assert stats._signed_rank_k(10, 0.95) == 9 and stats._signed_rank_k(6, 0.95) == 1
    assert stats._signed_rank_k(5, 0.95) == 0 and stats.min_pairs() == 6
    # Mann-Whitney U, two-sided 5%: critical U 2 at 5 x 5, 23 at 10 x 10, 2 at 4 x 6; 3 x 3 reaches none
    assert stats._u_rank_k(5, 5, 0.95) == 3 and stats._u_rank_k(10, 10, 0.95) == 24
    assert stats._u_rank_k(4, 6, 0.95) == 3 and stats._u_rank_k(3, 3, 0.95) == 0
    assert stats._u_rank_k(60, 60, 0.95) == pytest.approx(1426, abs=2)   # the normal approximation
    assert stats._signed_rank_k(61, 0.95) == pytest.approx(stats._signed_rank_k(60, 0.95) + 24, abs=3)


def test_paired_estimate_interval_and_p_agree() -> None:
    e = stats.paired([1.10, 1.21, 0.97, 1.30, 1.12, 1.15, 1.19], [1.0] * 7)
    assert e.test == stats.PAIRED_TEST and e.n == 7 and e.level == 0.95
    assert e.low > 1 and e.p_value == pytest.approx(4 / 128)    # one negative log ratio, the smallest
    assert e.low < e.ratio < e.high
    few = stats.paired([2.0] * 5, [1.0] * 5)
    assert not few.bounded and stats.judge(few) is ArmStatus.NO_DIFFERENCE and "unbounded" in few.said


def test_unpaired_is_the_moses_interval_and_names_its_test() -> None:
    e = stats.unpaired([1.10, 1.20, 1.05, 1.30, 1.15], [1.0, 1.01, 0.99, 1.002, 1.02])
    assert e.test == stats.UNPAIRED_TEST and e.n == 5 and e.low > 1 and e.p_value == pytest.approx(2 / 252)
    assert stats.judge(e, MIN_EFFECT) is ArmStatus.SLOWER


def test_bad_values_are_named() -> None:
    with pytest.raises(ValueError, match="paired arm: values must be finite and > 0, got 0"):
        stats.paired([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="2 arm values against 1 base"):
        stats.paired([1.0, 1.0], [1.0])


def test_look_levels_spend_at_most_alpha_over_every_look() -> None:
    spent = sum(1 - stats.look_level(k, 0.05) for k in range(1, 200_000))
    assert spent <= 0.05 and spent > 0.0499
    assert stats.look_level(1) < stats.look_level(2) < 1


def test_holm_steps_down() -> None:
    p = {"a": 0.01, "b": 0.02, "c": 0.04}
    assert stats.holm(p, 0.05) == {"a": True, "b": True, "c": True}      # 0.01 <= .05/3, .02 <= .025, .04 <= .05
    assert stats.holm({**p, "a": 0.02}, 0.05) == {"a": False, "b": False, "c": False}   # 0.02 > .05/3 stops
    levels = stats.holm_levels(p, 0.05)
    assert levels["a"] == pytest.approx(1 - 0.05 / 3) and levels["c"] == pytest.approx(0.95)


# --- simulations of ab's verdicts (ab.judge, ab.rounds): the real code path ---------------

def _plan(arms: int, until: bool, rounds: int) -> jobrounds.Plan:
    names = [jobrounds.DEFAULT, jobrounds.CONTROL] + [f"arm{i}" for i in range(arms - 1)]
    return jobrounds.Plan([], [jobrounds.Arm(n) for n in names], jobrounds.Metric("wall"), rounds, 0,
                          MIN_EFFECT, until)


def _ab(rng: random.Random, plan: jobrounds.Plan, noise: float, effect: float = 1.0) -> list[jobab.ArmVerdict]:
    """One simulated ``ab``: each round a common drift (5%, lognormal) and each run its own noise; the
    last arm's runs take ``effect`` times as long. Looks as jobrounds does; the verdicts at the end."""
    values: dict[str, dict[int, float]] = {a.name: {} for a in plan.arms}
    last = plan.arms[-1].name
    vs: list[jobab.ArmVerdict] = []
    for rnd in range(1, plan.rounds + 1):
        drift = math.exp(rng.gauss(0, 0.05))
        for a in plan.arms:
            values[a.name][rnd] = 100 * drift * math.exp(rng.gauss(0, noise)) * (effect if a.name == last else 1)
        if plan.until_confident and rnd >= jobrounds.first_look(plan) or rnd == plan.rounds:
            vs = jobab.verdicts(values, {}, controls=[jobrounds.CONTROL], min_effect=plan.min_effect,
                                alpha=jobrounds.alpha_after(plan, rnd))
            if plan.until_confident and jobab.all_confident(vs, plan.min_effect):
                break
    return vs


def _false_rate(noise: float, arms: int, until: bool, trials: int, seed: int) -> float:
    rng = random.Random(seed)
    fixed = max(5, jobab.min_rounds(arms))
    plan = _plan(arms, until, jobrounds.first_look(_plan(arms, True, 0)) + 19 if until else fixed)
    wrong = 0
    for _ in range(trials):
        vs = _ab(rng, plan, noise)
        wrong += any(v.status in (ArmStatus.FASTER, ArmStatus.SLOWER) for v in vs)
    return wrong / trials


@pytest.mark.parametrize("noise", [0.01, 0.05])
@pytest.mark.parametrize("arms", [2, 4, 8])
@pytest.mark.parametrize("until", [False, True], ids=["fixed-rounds", "until-confident-20-looks"])
def test_a_true_null_gives_at_most_5_percent_false_verdicts_over_every_arm(noise: float, arms: int,
                                                                            until: bool) -> None:
    """Family-wise (any arm, the A/A control included, any look), 150 trials (100 with looks: each runs
    up to 20 verdicts); the bound asserted is the nominal 5%."""
    rate = _false_rate(noise, arms, until, 100 if until else 150, seed=1000 * arms + int(noise * 100) + until)
    assert rate <= 0.05, f"{rate:.1%} false verdicts at noise {noise:.0%}, {arms} arms, until={until}"


@pytest.mark.parametrize(("noise", "old_above"), [(0.01, 0.06), (0.05, 0.15)])
def test_the_old_repeated_look_at_a_fixed_95_percent_gave_the_issues_false_rates_and_is_gone(
        noise: float, old_above: float) -> None:
    """Issue 39 item 4: looking again after every round at a fixed 95% (the old verdict: the unpaired
    Moses interval, no spending, no correction, stop once decided) gave false FASTER/SLOWER in 7.8% (1%
    noise) to 26% (5% noise) of jobs. Here, 20 rounds: 9% and 19%. The new rule on the same null: <= 5%."""
    def old(rng: random.Random) -> bool:
        base: list[float] = []
        arm: list[float] = []
        for rnd in range(1, 21):
            base.append(100 * math.exp(rng.gauss(0, noise)))
            arm.append(100 * math.exp(rng.gauss(0, noise)))
            if rnd >= 2:
                e = stats.unpaired(arm, base, 0.95)
                if stats.decided(e, MIN_EFFECT):
                    break
        return stats.judge(e, MIN_EFFECT) is not ArmStatus.NO_DIFFERENCE

    rng = random.Random(39)
    assert sum(old(rng) for _ in range(200)) / 200 > old_above
    assert _false_rate(noise, 2, True, 200, seed=39) <= 0.05


@pytest.mark.parametrize(("noise", "arms", "until", "rounds"), [(0.01, 4, True, 0), (0.05, 2, False, 30)])
def test_a_planted_5_percent_slowdown_is_found(noise: float, arms: int, until: bool, rounds: int) -> None:
    rng = random.Random(7)
    plan = _plan(arms, until, jobrounds.first_look(_plan(arms, True, 0)) + 19 if until else rounds)
    found = 0
    for _ in range(20):
        v = {v.name: v for v in _ab(rng, plan, noise, effect=1.05)}[plan.arms[-1].name]
        found += v.status is ArmStatus.SLOWER and v.effect is not None and v.effect.low < 1.05 < v.effect.high
    assert found >= 17
