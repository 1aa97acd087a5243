"""Rule files as zones on the size axis (``ccltune.report.zones``)."""

from __future__ import annotations

from ccltune.report.model import Zone
from ccltune.report.zones import choice, parse_rules, rule_zones

TEXT = """# header
allreduce,0,64K,tree,ll,16,1,8
platform,gpu=H100
allreduce,32K,8M,ring,ll128,0,-1,-1
all_gather,1M,1G,ring,simple,32,-1,-1
allreduce,2M,1M,ring,ll,16,1,8
broadcast,0,1K,ring
"""


def test_parse_rules_uses_the_plugin_twin_and_lists_rejected_lines():
    rules, problems = parse_rules(TEXT)
    assert [(r.collective, r.min_bytes, r.max_bytes, choice(r), r.n_nodes, r.n_ranks, r.line) for r in rules] == [
        ("allreduce", 0, 65536, "tree/ll/16", 1, 8, 2),
        ("allreduce", 32768, 8 << 20, "ring/ll128", -1, -1, 4),
        ("allgather", 1 << 20, 1 << 30, "ring/simple/32", -1, -1, 5),
    ]
    assert [p.split(":")[0] for p in problems] == ["line 6", "line 7"]
    assert "minbytes 2097152 > maxbytes 1048576" in problems[0]


def test_rule_zones_show_first_match_only():
    rules, _ = parse_rules("allreduce,0,64K,tree,ll,16,-1,-1\nallreduce,32K,8M,ring,ll128,32,-1,-1\n"
                           "allreduce,1M,2M,ring,simple,8,-1,-1\nallgather,0,1K,ring,ll,0,2,16\n")
    rows = dict(rule_zones(rules, prefix="run 4:"))
    assert rows["run 4: allreduce"] == [Zone(0, 65536, "tree/ll/16"), Zone(65537, 8 << 20, "ring/ll128/32")]
    assert rows["run 4: allgather nNodes=2 nRanks=16"] == [Zone(0, 1024, "ring/ll")]


def test_platform_sections_label_their_rows():
    rules, _ = parse_rules(TEXT)
    labels = [label for label, _ in rule_zones(rules)]
    assert labels == ["allreduce nNodes=1 nRanks=8", "allreduce [gpu=h100]", "allgather [gpu=h100]"]


def test_empty_and_comment_only_files():
    assert parse_rules("") == ([], [])
    assert parse_rules("# nothing\n\n   \n") == ([], [])
