"""Rule derivation: margins, boundaries, merging, objectives, platforms, bad input."""

from __future__ import annotations

import math

import pytest

from ccltune.errors import DataError
from ccltune.rules import Platform, Rule
from ccltune.stats import SINGLE_SAMPLE_NOISE, point_stats
from ccltune.tune.derive import BASELINE, account_gain, decide_sizes, derive, gpu_model, size_ranges
from tune_rows import rows_for

MB = 1 << 20
SIZES = [1 * MB, 2 * MB, 4 * MB, 8 * MB, 16 * MB]


def flat(value: float, sizes=SIZES, spread=0.01):
    return {s: [value * (1 - spread), value, value * (1 + spread)] for s in sizes}


def test_noise_level_win_produces_no_rule():
    times = {"default": flat(100.0, spread=0.03), "ring/ll128/-": flat(97.0, spread=0.03)}
    d = derive(rows_for(times))
    assert d.groups[0].rules == []
    assert all(dec.winner is None for dec in d.groups[0].decisions)


def test_win_at_4mb_covers_exactly_its_geometric_midpoint_range():
    times = {"default": flat(100.0), "ring/simple/-": flat(100.0)}
    times["ring/simple/-"][4 * MB] = [79.0, 80.0, 81.0]
    (rule,) = derive(rows_for(times)).groups[0].rules
    assert rule.min_bytes == math.isqrt(2 * MB * 4 * MB) + 1
    assert rule.max_bytes == math.isqrt(4 * MB * 8 * MB)
    assert (rule.algo, rule.proto, rule.channels) == ("ring", "simple", -1)
    assert (rule.collective, rule.n_ranks, rule.n_nodes) == ("allgather", 4, 1)
    assert rule.platform == Platform(gpu="h200", nvl_ranks=4)


def test_adjacent_equal_winners_merge_and_range_stays_inside_measured_sizes():
    times = {"default": flat(100.0), "default/default/16": flat(80.0)}
    rules = derive(rows_for(times)).groups[0].rules
    assert len(rules) == 1
    assert (rules[0].min_bytes, rules[0].max_bytes) == (SIZES[0], SIZES[-1])
    assert (rules[0].algo, rules[0].proto, rules[0].channels) == ("default", "default", 16)


def test_a_gap_splits_rules():
    times = {"default": flat(100.0), "ring/ll128/8": flat(80.0)}
    times["ring/ll128/8"][4 * MB] = [100.0, 100.5, 101.0]
    rules = derive(rows_for(times)).groups[0].rules
    assert [(r.min_bytes, r.max_bytes) for r in rules] == [
        (SIZES[0], math.isqrt(2 * MB * 4 * MB)), (math.isqrt(4 * MB * 8 * MB) + 1, SIZES[-1])]


def test_time_objective_picks_fastest_sm_objective_picks_fewest_channels():
    times = {"default": flat(100.0), "ring/simple/32": flat(80.0), "ring/simple/8": flat(81.0),
             "ring/simple/4": flat(90.0)}
    by_time = derive(rows_for(times), objective="time").groups[0].rules
    by_sm = derive(rows_for(times), objective="sm", sm_tolerance=0.02).groups[0].rules
    assert {r.channels for r in by_time} == {32}
    assert {r.channels for r in by_sm} == {8}
    wide = derive(rows_for(times), objective="sm", sm_tolerance=0.15).groups[0].rules
    assert {r.channels for r in wide} == {4}


def test_unavailable_and_error_rows_never_win():
    times = {"default": flat(100.0), "tree/ll/-": flat(10.0)}
    rows = rows_for(times)
    for r in rows:
        if r["algo"] == "tree":
            r["status"] = "unavailable"
    assert derive(rows).groups[0].rules == []


def test_single_sample_needs_the_documented_margin():
    assert point_stats([5.0]).noise == SINGLE_SAMPLE_NOISE
    small = {"default": {4 * MB: [100.0]}, "ring/simple/-": {4 * MB: [91.0]}}  # 9.9% < 2 * 5%
    big = {"default": {4 * MB: [100.0]}, "ring/simple/-": {4 * MB: [85.0]}}  # 17.6% > 10%
    assert derive(rows_for(small)).groups[0].rules == []
    (rule,) = derive(rows_for(big)).groups[0].rules
    assert (rule.min_bytes, rule.max_bytes) == (4 * MB, 4 * MB)


def test_min_margin_floors_the_noise():
    times = {"default": flat(100.0, spread=0.0), "ring/simple/-": flat(96.0, spread=0.0)}
    assert derive(rows_for(times), min_margin=0.02).groups[0].rules
    assert derive(rows_for(times), min_margin=0.05).groups[0].rules == []


def test_in_place_rows_ignored_by_default():
    times = {"default": flat(100.0), "ring/simple/-": flat(80.0)}
    rows = rows_for(times)
    for r in rows:
        r["in_place"] = r["algo"] == "ring"
    assert derive(rows).groups[0].rules == []
    with pytest.raises(DataError, match="no usable in-place"):
        derive(rows, placement="in-place")
    assert derive(rows, placement="both").groups[0].decisions


def test_no_defaults_is_an_error_naming_the_group():
    rows = rows_for({"ring/simple/-": flat(80.0)}, coll="reduce_scatter", n_ranks=2)
    with pytest.raises(DataError, match=r"reduce_scatter nranks=2 nnodes=1 gpu=H200"):
        derive(rows)


def test_mixed_platforms_give_separate_sections():
    times = {"default": flat(100.0), "ring/simple/-": flat(80.0)}
    d = derive(rows_for(times, gpu="H200") + rows_for(times, gpu="H100 80GB HBM3"))
    secs = d.sections()
    assert set(secs) == {Platform(gpu="h200", nvl_ranks=4), Platform(gpu="h100 80gb hbm3", nvl_ranks=4)}
    assert all(len(r) == 1 for r in secs.values())


def test_rows_without_platform_are_an_error():
    rows = rows_for({"default": flat(100.0)}, gpu=None)
    with pytest.raises(DataError, match="no GPU model"):
        derive(rows)


def test_mixed_datatypes_in_one_group_are_an_error():
    rows = rows_for({"default": flat(100.0)})
    rows[0]["dtype"] = "half"
    with pytest.raises(DataError, match="mixes dtype"):
        derive(rows)


def test_collectives_without_a_tuner_are_noted_not_ruled():
    d = derive(rows_for({"default": flat(1.0)}, coll="alltoall"))
    assert d.groups == [] and "alltoall" in d.notes[0]


def test_size_ranges_are_contiguous_and_inclusive():
    sizes = [8, 64, 1024, 1 << 30]
    ranges = size_ranges(sizes)
    assert ranges[0][0] == 8 and ranges[-1][1] == 1 << 30
    for (lo, hi), (lo2, _), s in zip(ranges, ranges[1:], sizes):
        assert lo <= s <= hi and lo2 == hi + 1
    assert size_ranges([1, 2]) == [(1, 1), (2, 2)]
    assert size_ranges([4096]) == [(4096, 4096)]


def test_gain_accounting_full_capture_and_nothing_slower():
    times = {"default": flat(100.0), "ring/simple/-": flat(80.0), "ring/ll/-": flat(120.0)}
    g = derive(rows_for(times)).groups[0]
    rep = account_gain(g)
    assert rep.capture == pytest.approx(1.0)
    assert rep.slower_sizes == []


def test_gain_accounting_sees_a_bad_rule():
    times = {"default": flat(100.0), "ring/simple/-": flat(80.0), "ring/ll/-": flat(120.0)}
    g = derive(rows_for(times)).groups[0]
    bad = [Rule("allgather", 0, 1 << 40, "ring", "ll", -1, 1, 4)]
    rep = account_gain(g, bad)
    assert rep.capture < 0 and rep.slower_sizes == SIZES
    assert account_gain(g, []).capture == 0.0


def test_gain_accounting_none_when_nothing_to_capture():
    g = derive(rows_for({"default": flat(100.0)})).groups[0]
    assert account_gain(g).capture is None
    assert account_gain(g).sizes[0].selected == BASELINE


def test_gpu_model_from_env_and_platform():
    assert gpu_model({"gpus": [{"name": "NVIDIA H200"}] * 4}) == "H200"
    assert gpu_model({}, "NVIDIA H200 x4") == "H200"
    with pytest.raises(DataError, match="no GPU model"):
        gpu_model({}, "cpu x2")
    with pytest.raises(DataError, match="mixed GPU models"):
        gpu_model({"gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H100"}]})


# --- the isolation rule: a win no neighbouring size corroborates needs isolated_margin -------
def _one_rule(times, **kw):
    rules = derive(rows_for(times), **kw).groups[0].rules
    return [(r.min_bytes, r.max_bytes, r.algo, r.proto) for r in rules]


def test_isolated_small_win_is_dropped():
    times = {"default": flat(100.0), "ring/simple/-": flat(100.0)}
    times["ring/simple/-"][4 * MB] = [94.0, 95.0, 96.0]  # 5.3% > noise 2%, only at 4 MB
    g = derive(rows_for(times)).groups[0]
    assert g.rules == []
    (d,) = [d for d in g.decisions if d.size_bytes == 4 * MB]
    assert d.winner is None and d.qualifying == frozenset()
    assert _one_rule(times, isolated_margin=0.05) == [  # a lower isolated margin keeps it
        (math.isqrt(2 * MB * 4 * MB) + 1, math.isqrt(4 * MB * 8 * MB), "ring", "simple")]
    assert account_gain(g).capture is None  # nothing the rules may take: nothing missed


def test_isolated_large_win_is_kept():
    times = {"default": flat(100.0), "ring/ll/-": flat(100.0)}
    times["ring/ll/-"][4 * MB] = [79.0, 80.0, 81.0]  # 25% > 10%
    assert _one_rule(times) == [(math.isqrt(2 * MB * 4 * MB) + 1, math.isqrt(4 * MB * 8 * MB), "ring", "ll")]
    assert _one_rule(times, isolated_margin=0.30) == []


def test_two_size_run_of_small_wins_is_kept():
    times = {"default": flat(100.0), "ring/simple/-": flat(100.0)}
    for s in (4 * MB, 8 * MB):
        times["ring/simple/-"][s] = [94.0, 95.0, 96.0]
    assert _one_rule(times) == [(math.isqrt(2 * MB * 4 * MB) + 1, math.isqrt(8 * MB * 16 * MB), "ring", "simple")]


def test_a_neighbour_where_it_beats_the_default_but_does_not_win_corroborates():
    # like ring/LL128 on 2 H200s: +22% at 2 MB where ring/LL wins (+30%), +10% at 4 MB where it wins
    times = {"default": flat(100.0), "ring/ll/-": flat(120.0), "ring/ll128/-": flat(110.0)}
    times["ring/ll/-"][2 * MB] = [76.0, 77.0, 78.0]
    times["ring/ll128/-"][2 * MB] = [81.0, 82.0, 83.0]
    times["ring/ll128/-"][4 * MB] = [92.0, 93.0, 94.0]  # 7.5%: below the isolated margin
    mid = [math.isqrt(a * b) for a, b in zip(SIZES, SIZES[1:])]
    assert _one_rule(times) == [(mid[0] + 1, mid[1], "ring", "ll"), (mid[1] + 1, mid[2], "ring", "ll128")]
    # the fastest uncorroborated candidate gives way to a slower corroborated one
    times["ring/simple/-"] = flat(120.0)
    times["ring/simple/-"][4 * MB] = [90.0, 91.0, 92.0]  # 9.9%, isolated: dropped
    assert _one_rule(times)[-1] == (mid[1] + 1, mid[2], "ring", "ll128")


def test_one_size_group_needs_the_isolated_margin():
    small = {"default": {4 * MB: [99.0, 100.0, 101.0]}, "ring/simple/-": {4 * MB: [94.0, 95.0, 96.0]}}
    big = {"default": {4 * MB: [99.0, 100.0, 101.0]}, "ring/simple/-": {4 * MB: [84.0, 85.0, 86.0]}}
    d = derive(rows_for(small))
    assert d.groups[0].rules == [] and "isolated margin" in d.notes[0]
    assert _one_rule(big) == [(4 * MB, 4 * MB, "ring", "simple")]


def test_decide_sizes_is_what_derive_decides():
    times = {"default": flat(100.0), "ring/simple/-": flat(100.0), "default/default/16": flat(97.0)}
    times["ring/simple/-"][4 * MB] = [94.0, 95.0, 96.0]
    g = derive(rows_for(times)).groups[0]
    points = {d.size_bytes: (d.default, d.candidates) for d in g.decisions}
    assert {s: w for s, (w, _) in decide_sizes(points).items()} == {d.size_bytes: d.winner for d in g.decisions}
    assert {d.winner.label for d in g.decisions} == {"default/default/16"}  # a 3% win at every size


def test_twin_gap_raises_the_margin_and_the_twin_never_wins():
    # two sizes where ring/simple wins by ~5.3% (corroborated, above the 2% margin)
    times = {"default": flat(100.0), "ring/simple/-": flat(100.0), "default-twin": flat(100.0)}
    for s in (4 * MB, 8 * MB):
        times["ring/simple/-"][s] = [94.0, 95.0, 96.0]
    assert _one_rule(times) != []  # twin agrees with the default: the wins stand
    # the same default on a second communicator is 6% off at 4 MB: 5.3% is within that gap
    times["default-twin"][4 * MB] = [93.0, 94.0, 95.0]
    g = derive(rows_for(times)).groups[0]
    assert g.rules == []
    assert all(d.winner is None or not d.winner.twin for d in g.decisions)
    assert any("A/A gap" in n for n in derive(rows_for(times)).notes)
    # the twin is faster than the default by 6% at 4 MB, yet it never makes a rule
    times = {"default": flat(100.0), "default-twin": flat(100.0)}
    times["default-twin"][4 * MB] = [70.0, 70.0, 70.0]
    assert derive(rows_for(times)).groups[0].rules == []


def test_a_win_must_save_half_a_microsecond():
    # 6 us calls: ring/simple saves 0.3 us (5%) at two neighbouring sizes: jitter, no rule
    times = {"default": flat(6.0), "ring/simple/-": flat(6.0)}
    for s in (4 * MB, 8 * MB):
        times["ring/simple/-"][s] = [5.69, 5.7, 5.71]
    assert _one_rule(times) == []
    assert _one_rule(times, min_gain_us=0.2) != []


def test_a_candidate_must_beat_the_twin_too_where_the_twin_is_faster():
    # 32 channels beats a slow default communicator by 15% at every size, but NCCL's default on
    # a second communicator is just as fast: the gain is the communicator's, not a better choice
    times = {"default": flat(115.0), "default/default/32": flat(100.0), "default-twin": flat(101.0)}
    assert derive(rows_for(times)).groups[0].rules == []
    # where the twin is as slow as the default, the same candidate wins
    times["default-twin"] = flat(115.0)
    (rule,) = derive(rows_for(times)).groups[0].rules
    assert rule.channels == 32


def test_excluded_sizes_get_no_rule_and_the_rest_keep_theirs():
    times = {"default": flat(100.0), "ring/simple/-": flat(80.0)}
    whole = derive(rows_for(times)).groups[0].rules
    assert [(r.min_bytes, r.max_bytes) for r in whole] == [(1 * MB, 16 * MB)]
    d = derive(rows_for(times), exclude=[("all_gather", 4, 1, 4 * MB)])
    lo, hi = [(r.min_bytes, r.max_bytes) for r in d.groups[0].rules]
    assert lo == (1 * MB, math.isqrt(2 * MB * 4 * MB)) and hi == (math.isqrt(4 * MB * 8 * MB) + 1, 16 * MB)
    assert any("no rule at 4194304 B (excluded: failed validate)" in n for n in d.notes)
    # another group's size, or a size with no rule anyway, changes nothing
    assert derive(rows_for(times), exclude=[("reduce", 4, 1, 4 * MB)]).groups[0].rules == whole


def test_tune_excludes_the_sizes_a_validate_verdict_failed(tmp_path):
    import json

    from ccltune.commands import tune as tune_cli
    from ccltune.errors import UsageError

    v = tmp_path / "v.json"
    v.write_text(json.dumps({"sizes": [
        {"collective": "all_gather", "n_ranks": 4, "n_nodes": 1, "size_bytes": 4 * MB, "status": "FAIL"},
        {"collective": "all_gather", "n_ranks": 4, "n_nodes": 1, "size_bytes": 8 * MB, "status": "PASS"}]}))
    assert tune_cli.failed_sizes([str(v)]) == [("all_gather", 4, 1, 4 * MB)]
    bad = tmp_path / "bad.json"
    bad.write_text('{"status": "PASS"}')
    with pytest.raises(UsageError, match="bad.json': not a `ccltune validate --json` verdict"):
        tune_cli.failed_sizes([str(bad)])
    with pytest.raises(UsageError, match="--exclude-failed: '.*missing.json' does not exist"):
        tune_cli.failed_sizes([str(tmp_path / "missing.json")])


def test_an_aa_gap_inside_the_twins_own_spread_does_not_bar_a_win():
    """A twin slowed by a transient in its rounds (wide spread) leaves the margin alone; a steady
    gap between the two communicators (narrow spreads) still raises it."""
    from ccltune.commconfig import TWIN, CommConfig
    from ccltune.tune.derive import aa_margin

    def pts(t_default, twin, cand):
        return (point_stats(t_default), {TWIN: point_stats(twin), CommConfig("ring", "ll128"): point_stats(cand)})

    steady = {s: pts([100, 100.5, 99.5], [120, 120.5, 119.5], [90, 90.5, 89.5]) for s in (1, 2, 3)}
    transient = {s: pts([100, 100.5, 99.5], [101, 135, 200], [90, 90.5, 89.5]) for s in (1, 2, 3)}
    assert aa_margin(*steady[2]) == pytest.approx(0.2 - 0.005 - 0.5 / 120, abs=1e-3)
    assert aa_margin(*transient[2]) == 0.0
    assert all(w is None for w, _ in decide_sizes(steady).values())            # 10% < the 19% steady gap
    assert all(w == CommConfig("ring", "ll128") for w, _ in decide_sizes(transient).values())


def test_a_zero_byte_size_gets_no_rule_and_corroborates_none():
    # 8 B of float all_gather on 4 ranks is 0 B: NCCL launches nothing, any "win" there is noise
    sizes = [0, 16, 32]
    times = {"default": {0: [0.10, 0.10, 0.10], 16: [10.0, 10.0, 10.0], 32: [10.0, 10.0, 10.0]},
             "ring/ll/-": {0: [0.05, 0.05, 0.05], 16: [9.5, 9.5, 9.5], 32: [10.0, 10.0, 10.0]}}
    (group,) = derive(rows_for(times)).groups
    assert [d.size_bytes for d in group.decisions] == sizes
    assert all(d.winner is None for d in group.decisions)  # 16 B's 5% needs the isolated margin: 0 B is no neighbour
    times["ring/ll/-"][16] = [8.5, 8.5, 8.5]  # 15%: a win on its own
    (group,) = derive(rows_for(times)).groups
    assert [d.winner is not None for d in group.decisions] == [False, True, False]
    assert group.rules[0].min_bytes == 1  # the range still starts past 0 B
