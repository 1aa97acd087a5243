"""Rule files as zones on the size axis (``ccltune.report.zones``)."""

from __future__ import annotations

from ccltune.report.model import Zone
from ccltune.report.zones import parse_rules, rule_zones

TEXT = """# header
allreduce,0,64K,tree,ll,16,1,8   # small
platform,gpu=H100
allreduce,32K,8M,ring,ll128,0,*,-1
AllGather,1M,1G,ring,simple,32
allreduce,2M,1M,ring,ll,16
broadcast,0,1K,ring
allgather,1X,2M,ring,ll,4
"""


def test_parse_rules_reads_sizes_sections_and_wildcards():
    rules, problems = parse_rules(TEXT)
    assert [(r.coll, r.min_bytes, r.max_bytes, r.choice, r.n_nodes, r.n_ranks, r.platform, r.line)
            for r in rules] == [
        ("allreduce", 0, 65536, "tree/ll/16", "1", "8", "", 2),
        ("allreduce", 32768, 8 << 20, "ring/ll128", "", "", "gpu=H100", 4),
        ("allgather", 1 << 20, 1 << 30, "ring/simple/32", "", "", "gpu=H100", 5),
    ]
    assert [p.split(":")[0] for p in problems] == ["line 6", "line 7", "line 8"]
    assert "minbytes 2097152 > maxbytes 1048576" in problems[0]
    assert "got 4 fields" in problems[1]


def test_rule_zones_show_first_match_only():
    rules, _ = parse_rules("allreduce,0,64K,tree,ll,16\nallreduce,32K,8M,ring,ll128,32\n"
                           "allreduce,1M,2M,ring,simple,8\nallgather,0,1K,ring,ll,0,2,16\n")
    rows = dict(rule_zones(rules, prefix="run 4:"))
    assert rows["run 4: allreduce"] == [Zone(0, 65536, "tree/ll/16"), Zone(65537, 8 << 20, "ring/ll128/32")]
    assert rows["run 4: allgather nNodes=2 nRanks=16"] == [Zone(0, 1024, "ring/ll")]


def test_empty_and_comment_only_files():
    assert parse_rules("") == ([], [])
    assert parse_rules("# nothing\n\n   \n") == ([], [])
