"""validate judges only sizes a rule covers; elsewhere the plugin changes nothing."""

from __future__ import annotations

from ccltune.validate.ab import coverage
from ccltune.validate.verdict import verdict

RULES = """\
platform,gpu=h200,nvlranks=4
allgather,2965821,16777216,ring,ll128,-1,1,4
allreduce,1M,1M,default,default,8,1,4
"""


def test_coverage_follows_the_rules_and_the_platform(tmp_path):
    path = tmp_path / "r.conf"
    path.write_text(RULES)
    h200 = coverage(str(path), "NVIDIA H200")
    assert h200("all_gather", 4, 1, 4 << 20) and h200("all_gather", 4, 1, 16 << 20)
    assert not h200("all_gather", 4, 1, 2 << 20)          # below the rule's range
    assert not h200("all_gather", 2, 1, 4 << 20)          # other communicator size
    assert h200("all_reduce", 4, 1, 1 << 20) and not h200("reduce_scatter", 4, 1, 4 << 20)
    assert not coverage(str(path), "NVIDIA H100")("all_gather", 4, 1, 4 << 20)   # other platform


def _rows(size, default_us, rules_us):
    out = []
    for rep, (d, r) in enumerate(zip(default_us, rules_us)):
        for config, t in (("default", d), ("rules", r)):
            out.append(dict(collective="all_gather", n_ranks=4, n_nodes=1, size_bytes=size, config=config,
                            rep=rep, time_us=t, status="ok", in_place=False))
    return out


def test_uncovered_sizes_pass_and_covered_slower_sizes_fail(tmp_path):
    path = tmp_path / "r.conf"
    path.write_text(RULES)
    rows = _rows(2 << 20, [10.0, 10.1, 10.0], [11.0, 11.1, 11.0])      # 10% "slower", but no rule there
    rows += _rows(4 << 20, [20.0, 20.1, 20.0], [21.0, 21.1, 21.0])     # 5% slower where a rule applies
    v = verdict(rows, covered=coverage(str(path), "NVIDIA H200"))
    by = {s.size_bytes: s for s in v.sizes}
    assert by[2 << 20].status == "PASS" and "no rule applies" in by[2 << 20].reason
    assert by[4 << 20].status == "FAIL" and v.status == "FAIL"
    assert verdict(rows).sizes[0].status == "FAIL"   # without coverage every size is judged
