"""One call count per size for every configuration of a side-by-side measurement."""

from ccltune.datatypes import dtype
from ccltune.measure.sweep import Clock, SweepSettings, calls_per_replay, iters_for


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


def test_the_full_grid_adds_every_pair_with_every_channel_count_after_the_pairs():
    from ccltune.commands.sweep import candidates
    from ccltune.commands.sweep_options import SweepOptions

    def labels(grid):
        return [c.label for c in candidates(SweepOptions(algos="tree,ring", protos="ll,simple", channels="4,8",
                                                         grid=grid))]

    axes, full = labels("axes"), labels("full")
    assert axes == ["default", "tree/ll/default", "tree/simple/default", "ring/ll/default", "ring/simple/default",
                    "default/default/4", "default/default/8"]
    assert full[:len(axes)] == axes and len(full) == len(axes) + 2 * 2 * 2
    assert full[len(axes):] == ["tree/ll/4", "tree/ll/8", "tree/simple/4", "tree/simple/8",
                                "ring/ll/4", "ring/ll/8", "ring/simple/4", "ring/simple/8"]


def test_algorithms_without_protocols_are_refused_not_dropped():
    import pytest

    from ccltune.commands.sweep import candidates
    from ccltune.commands.sweep_options import SweepOptions
    from ccltune.errors import UsageError

    def ask(algos, protos):
        return candidates(SweepOptions(algos=algos, protos=protos, channels="", grid="full"))

    with pytest.raises(UsageError, match=r"--algos ring needs --protos too .*--protos is empty"):
        ask("ring", "")
    with pytest.raises(UsageError, match=r"--protos ll needs --algos too"):
        ask("", "ll")
    assert [c.label for c in ask("", "")] == ["default"]


def test_a_refused_pair_stands_for_its_channel_counts():
    from ccltune.commconfig import CommConfig
    from ccltune.measure.sweep import _pair

    assert _pair(CommConfig("tree", "ll", 16)) == CommConfig("tree", "ll")
    assert _pair(CommConfig(None, "ll128", 8)) == CommConfig(None, "ll128")
    # NCCL's own pair with a channel count, a pair at NCCL's count, the default: nothing stands for them
    assert _pair(CommConfig(None, None, 16)) is None
    assert _pair(CommConfig("ring", "ll")) is None
    assert _pair(CommConfig()) is None and _pair(None) is None
