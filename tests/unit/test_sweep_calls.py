"""One call count per size for every configuration of a side-by-side measurement."""

from ccltune.measure.sweep import Clock, SweepSettings, calls_per_replay, iters_for
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


def test_clock_sums_phases_and_lists_sub_phases_without_counting_them_twice():
    c = Clock()
    with c("timed"):
        pass
    c.add("timed", 2.0, 3)
    c.add("capture", 1.0, 2)
    c.add("communicator init", 0.5, 4, part_of="capture")
    c.add("communicator abort", 0.25, 1, part_of="first call and warm-up")
    assert c.counts["timed"] == 4 and 2.0 <= c.seconds["timed"] < 2.1
    line = c.line(10.0)
    assert line.startswith("10.0 s: timed 2.0 s (4), capture 1.0 s (2) [communicator init 0.5 s (4)], ")
    assert "communicator abort 0.2 s (1)" in line or "communicator abort 0.3 s (1)" in line
    # other = total - top-level phases only (7.0), the sub-phases are inside them
    assert line.endswith("other 7.0 s")
    summary = c.summary()
    assert list(summary)[0] == "timed" and summary["communicator init"]["part_of"] == "capture"
