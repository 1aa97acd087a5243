"""Validate verdict: per-size speedup and noise, PASS/FAIL/ERROR, JSON and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ccltune import stats
from ccltune.errors import DataError
from ccltune.validate.junit import to_junit
from ccltune.validate.verdict import judge, verdict

MB = 1 << 20


def ab_rows(pairs, coll="all_gather", n_ranks=4):
    """pairs: size -> (default samples, rules samples); reps interleaved like the sweep does."""
    out = []
    for size, (dflt, rules) in pairs.items():
        for rep, (a, b) in enumerate(zip(dflt, rules)):
            for cfg, t in (("default", a), ("rules", b)):
                out.append(dict(collective=coll, size_bytes=size, n_ranks=n_ranks, n_nodes=1, config=cfg,
                                rep=rep, time_us=t, status="ok", in_place=False))
    return out


def test_faster_and_noise_level_sizes_pass():
    v = verdict(ab_rows({1 * MB: ([100, 101, 99], [80, 81, 79]), 4 * MB: ([100, 103, 97], [101, 104, 98])}))
    assert v.status == "PASS"
    assert v.sizes[0].speedup == pytest.approx(1.25)
    assert v.sizes[1].noise == pytest.approx(0.03 + 3 / 101)


def test_slower_by_the_test_fails_and_names_it():
    default, rules = [100.0, 100.2, 99.8, 100.1, 99.9], [101.5, 101.6, 101.4, 101.55, 101.45]  # 1.5% slower
    v = verdict(ab_rows({4 * MB: (default, rules)}))
    assert v.status == "FAIL" and "rules slower than default: x1.015" in v.sizes[0].reason
    assert "Mann-Whitney U" in v.sizes[0].reason and v.sizes[0].to_dict()["test"] == stats.UNPAIRED_TEST
    # three repetitions a side cannot reach 95% (2 / C(6, 3) = 10%): no test verdict, the hard limit only
    assert verdict(ab_rows({4 * MB: (default[:3], rules[:3])})).status == "PASS"


def test_slower_by_more_than_two_percent_is_a_hard_fail_even_when_noisy():
    v = verdict(ab_rows({4 * MB: ([100, 110, 90], [103, 113, 93])}))
    assert v.status == "FAIL" and "hard limit 2%" in v.sizes[0].reason
    assert judge([100, 110, 90], [101.5, 111, 92])[0] == "PASS"


def test_missing_side_is_an_error_and_fail_wins_over_error():
    rows = ab_rows({1 * MB: ([100] * 3, [100] * 3)})
    rows += [dict(collective="all_gather", size_bytes=2 * MB, n_ranks=4, config="default", time_us=5.0),
             dict(collective="all_gather", size_bytes=2 * MB, n_ranks=4, config="rules", time_us=None,
                  status="error")]
    v = verdict(rows)
    assert [s.status for s in v.sizes] == ["PASS", "ERROR"] and v.status == "ERROR"
    assert "no usable rules samples" in v.sizes[1].reason
    v2 = verdict(rows + ab_rows({4 * MB: ([100] * 3, [110] * 3)}))
    assert v2.status == "FAIL"


def test_no_ab_rows_is_a_data_error():
    with pytest.raises(DataError, match="'default' or 'rules'"):
        verdict([dict(collective="all_gather", size_bytes=1, n_ranks=2, config="ring/ll/-", time_us=1.0)])


def test_json_round_trips():
    v = verdict(ab_rows({1 * MB: ([100] * 3, [80] * 3), 2 * MB: ([100] * 3, [120] * 3)}))
    d = json.loads(json.dumps(v.to_dict()))
    assert d["status"] == "FAIL" and d["counts"] == {"PASS": 1, "FAIL": 1, "ERROR": 0}
    assert d["sizes"][0]["speedup"] == pytest.approx(1.25) and d["sizes"][0]["rules_reps"] == 3


def test_junit_has_one_testcase_per_size_and_failures_when_slower():
    v = verdict(ab_rows({1 * MB: ([100] * 3, [80] * 3), 2 * MB: ([100] * 3, [120] * 3)})
                + ab_rows({1 * MB: ([50] * 3, [50] * 3)}, coll="all_reduce", n_ranks=2))
    root = ET.fromstring(to_junit(v))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 3 and suite.get("failures") == "1" and root.get("tests") == "3"
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["all_gather 2MB"]
    assert "slower" in failed[0].find("failure").get("message")
    assert failed[0].get("classname").endswith("all_gather.nranks4.nnodes1")


def test_junit_all_pass_has_no_failure_elements():
    root = ET.fromstring(to_junit(verdict(ab_rows({1 * MB: ([100] * 3, [80] * 3)}))))
    assert root.find(".//failure") is None and root.find(".//error") is None


def test_a_retest_judges_a_failed_size_by_its_new_measurement_and_keeps_the_first():
    from ccltune.validate.verdict import retested

    first = verdict(ab_rows({1 * MB: ([100, 101, 99], [80, 81, 79]), 4 * MB: ([100, 101, 99], [113, 160, 112])}))
    assert [s.status for s in first.sizes] == ["PASS", "FAIL"]
    # the transient is gone: the failed size passes, the other is untouched
    again = retested(first, verdict(ab_rows({4 * MB: ([100, 101, 99], [99, 100, 98])})))
    assert again.status == "PASS"
    assert again.sizes[0] is first.sizes[0]
    s = again.sizes[1]
    assert s.reason.startswith("on retest: ") and "first: rules" in s.reason and s.first is first.sizes[1]
    d = again.to_dict()["sizes"][1]
    assert d["first"]["status"] == "FAIL" and d["first"]["rules_time_us"] == 113
    # a real slowdown fails again; two retests keep the very first judgement
    worse = retested(first, verdict(ab_rows({4 * MB: ([100, 101, 99], [110, 111, 109])})))
    worse = retested(worse, verdict(ab_rows({4 * MB: ([100, 101, 99], [110, 111, 109])})))
    assert worse.status == "FAIL" and worse.sizes[1].reason.startswith("again on retest: ")
    assert worse.sizes[1].first is first.sizes[1]
