"""One call count per size for every configuration of a side-by-side measurement."""

from ccltune.measure.sweep import SweepSettings, calls_per_replay, iters_for
from ccltune.types import dtype


def settings(target_us=1000.0, max_iters=100):
    return SweepSettings(dtype=dtype("float"), op="sum", reps=5, graph=True, target_us=target_us,
                         max_iters=max_iters, warmup=2, timeout_s=60)


def test_every_configuration_gets_the_fastest_estimates_count():
    # the default's one-call estimate caught a stall (150 us): it must not get fewer calls per
    # replay than the others, or the replay's fixed cost weighs five times more on it
    s = settings()
    assert calls_per_replay([150.0, 30.0, 60.0], s) == iters_for(30.0, s) == 33
    assert calls_per_replay([30.0, 150.0], s) == calls_per_replay([150.0, 30.0], s)


def test_the_count_stays_within_one_and_max_iters():
    s = settings(max_iters=100)
    assert calls_per_replay([1.0, 2.0], s) == 100
    assert calls_per_replay([5000.0, 9000.0], s) == 1
    assert calls_per_replay([], s) == 1
