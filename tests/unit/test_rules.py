"""ccltune.rules: the Python twin of the plugin's parser and matcher (pure, no C)."""

from __future__ import annotations

import math

import pytest

from ccltune import rules
from ccltune.errors import RuleFileError
from ccltune.rules import Decision, PlatformFacts, Query, parse_text

IGN = -1.0


def table(**cells: float) -> list[list[float]]:
    """7x3 table, every cell 10.0 unless named like ring_ll=1.0 or nvls_simple=IGN."""
    t = [[10.0] * 3 for _ in range(7)]
    for name, v in cells.items():
        algo, proto = name.rsplit("_", 1)
        t[rules.ALGORITHMS.index(algo)][rules.PROTOCOLS.index(proto)] = v
    return t


def decide(text: str, q: Query) -> Decision:
    rs = parse_text(text, "t.conf")
    assert not rs.diagnostics, rs.diagnostics
    return rules.match(rs, q)


@pytest.mark.parametrize(("line", "reason"), [
    ("allreduce,0,1,ring,ll,4,1", "expected 8, 9 or 10 fields, got 7"),
    ("gather,0,1,ring,ll,4,1,8",
     "unknown collective 'gather' (valid: broadcast, reduce, allgather, reducescatter, allreduce)"),
    ("allreduce,0,1,Rings,ll,4,1,8",
     "unknown algorithm 'Rings' (valid: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, default)"),
    ("allreduce,0,1,ring,LL64,4,1,8", "unknown protocol 'LL64' (valid: ll, ll128, simple, default)"),
    ("allreduce,1.5K,2K,ring,ll,4,1,8",
     "minbytes: invalid size '1.5K' (expected digits with optional K, M, G or T suffix)"),
    ("allreduce,0,18446744073709551616,ring,ll,4,1,8", "maxbytes: size '18446744073709551616' does not fit in 64 bits"),
    ("allreduce,2K,1K,ring,ll,4,1,8", "minbytes 2048 > maxbytes 1024"),
    ("allreduce,0,1,ring,ll,65,1,8", "channels: '65' is not -1, 0 or 1..64"),
    ("allreduce,0,1,ring,ll,4,-1,0", "nRanks: '0' is not -1 or a positive integer"),
    ("allreduce,0,1,ring,ll,4,1,8,1,2", "regBuff: '2' is not -1, 0 or 1"),
    ("platform,arch=gfx942", "platform: unknown key 'arch' (valid: gpu, nvldomains, nvlranks, partition, nps)"),
    ("platform,gpu", "platform: malformed pair 'gpu' (expected key=value)"),
    ("platform,nps=NPS3", "platform: nps 'NPS3' is not one of NPS1, NPS2, NPS4"),
    ("a\x00b", "embedded NUL byte"),
    ("allreduce,0,1,ring,ll,1,1,8" + " " * 1000, "line longer than 1024 bytes"),
])
def test_rejected_lines_name_the_reason(line: str, reason: str) -> None:
    rs = parse_text(f"# header\n{line}\nreduce,0,1,ring,ll,1,1,8\n", "f.conf")
    assert [str(d) for d in rs.diagnostics] == [f"f.conf:2: {reason}"]
    assert [r.line for r in rs.rules] == [3]  # the rest still loads


def test_accepted_spellings() -> None:
    rs = parse_text(" \tAll_Reduce , 1kb , 4GB , NVLSTree , Simple , -1 , -1 , -1 \r\n  # c\n\n"
                    "reduce_scatter,0,18446744073709551615,collnetdirect,default,0,2,16,3,1\n")
    assert not rs.diagnostics
    a, b = rs.rules
    assert (a.collective, a.min_bytes, a.max_bytes, a.algo, a.proto) == ("allreduce", 1024, 4 << 30, "nvls_tree", "simple")
    assert (a.num_pipe_ops, a.reg_buff, a.line) == (-1, -1, 1)
    assert (b.collective, b.max_bytes, b.algo, b.proto, b.n_nodes, b.n_ranks, b.num_pipe_ops, b.reg_buff) == (
        "reducescatter", (1 << 64) - 1, "collnet_direct", "default", 2, 16, 3, 1)


def test_first_match_wins_and_bounds_are_inclusive() -> None:
    text = "allreduce,0,1K,ring,ll,-1,-1,-1\nallreduce,1K,2K,tree,simple,3,-1,-1\n"
    assert decide(text, Query("allreduce", 1024, 8, 1)).line == 1
    d = decide(text, Query("allreduce", 1025, 8, 1))
    assert (d.line, d.algo, d.proto, d.channels) == (2, "tree", "simple", 3)
    assert decide(text, Query("allreduce", 2049, 8, 1)) == Decision()
    assert decide(text, Query("reduce", 10, 8, 1)) == Decision()


def test_ignored_cell_skips_to_next_rule() -> None:
    text = "allreduce,0,1M,nvls,simple,8,-1,-1\nallreduce,0,1M,ring,ll,2,-1,-1\n"
    d = decide(text, Query("allreduce", 10, 8, 1, cost_table=table(nvls_simple=IGN)))
    assert (d.line, d.algo, d.channels) == (2, "ring", 2)
    d = decide(text, Query("allreduce", 10, 8, 1, cost_table=table(nvls_simple=math.nan)))
    assert d.line == 2  # NaN is never usable either
    small = [[1.0] * 3 for _ in range(4)]  # numAlgo 4: NVLS (4) out of range
    assert decide(text, Query("allreduce", 10, 8, 1, cost_table=small)).line == 2


def test_defaults() -> None:
    t = table(ring_ll=5.0, ring_ll128=2.0, ring_simple=2.0, tree_simple=1.0, pat_simple=IGN)
    d = decide("allreduce,0,1,ring,default,-1,-1,-1\n", Query("allreduce", 1, 8, 1, cost_table=t))
    assert (d.algo, d.proto) == ("ring", "ll128")  # cheapest; tie goes to the lower index
    d = decide("allreduce,0,1,default,simple,-1,-1,-1\n", Query("allreduce", 1, 8, 1, cost_table=t))
    assert (d.algo, d.proto) == ("tree", "simple")
    d = decide("allreduce,0,1,default,default,12,-1,-1\nallreduce,0,1,ring,ll,1,-1,-1\n",
               Query("allreduce", 1, 8, 1, cost_table=t))
    assert (d.line, d.algo, d.proto, d.channels) == (1, None, None, 12)  # stops, changes no cell
    none_usable = [[IGN] * 3 for _ in range(7)]
    assert decide("allreduce,0,1,ring,default,-1,-1,-1\n",
                  Query("allreduce", 1, 8, 1, cost_table=none_usable)) == Decision()
    rs = parse_text("allreduce,0,1,ring,default,-1,-1,-1\n")
    assert rules.match(rs, Query("allreduce", 1, 8, 1, cost_table=t), partial_defaults=False) == Decision()


def test_wildcards_pipe_ops_and_registered_buffers() -> None:
    text = "allgather,0,1M,ring,ll,-1,2,16,4\nallgather,0,1M,ring,ll128,-1,-1,-1,-1,1\nallgather,0,1M,tree,ll,-1,-1,-1\n"
    assert decide(text, Query("allgather", 5, 16, 2, num_pipe_ops=4)).line == 1
    assert decide(text, Query("allgather", 5, 16, 2, num_pipe_ops=1, reg_buff=1)).line == 2
    assert decide(text, Query("allgather", 5, 16, 2, num_pipe_ops=1, reg_buff=None)).line == 3  # v3: unknown
    assert decide(text, Query("allgather", 5, 8, 1, num_pipe_ops=4)).line == 3


def test_platform_sections() -> None:
    text = ("platform,gpu=h100,nvlranks=8\nallreduce,0,1,ring,ll,1,-1,-1\n"
            "platform,bogus=1\nallreduce,0,1,ring,ll,2,-1,-1\n"
            "platform,partition=cpx,nps=nps4\nallreduce,0,1,ring,ll,3,-1,-1\n"
            "platform,*\nallreduce,0,1,ring,ll,4,-1,-1\n")
    rs = parse_text(text, "p.conf")
    assert [d.line for d in rs.diagnostics] == [3]
    assert len(rs.rules) == 4 and rs.rules[1].platform.valid is False

    def channels(facts: PlatformFacts, n_ranks: int = 8, n_nodes: int = 1) -> int:
        return rules.match(rs, Query("allreduce", 1, n_ranks, n_nodes, platform=facts)).channels

    assert channels(PlatformFacts(gpu="NVIDIA H100 80GB HBM3")) == 1  # nvlranks derived: 8/1
    assert channels(PlatformFacts(gpu="NVIDIA H100 80GB HBM3"), 16, 4) == 4  # 4 per node
    assert channels(PlatformFacts(gpu="NVIDIA H100", nvl_domains=1, min_ranks_per_nvl_domain=4,
                                  max_ranks_per_nvl_domain=8)) == 4  # uneven domains
    assert channels(PlatformFacts(gpu="AMD Instinct MI300X", partition="CPX", nps="NPS4")) == 3
    assert channels(PlatformFacts()) == 4  # unknown facts never match a key


def test_format_round_trip_and_atomic_write(tmp_path) -> None:
    rs = parse_text("allreduce,0,64K,ring,ll,4,1,8\nplatform,gpu=h200,nvlranks=8\n"
                    "allgather,1K,1M,default,simple,-1,-1,-1,2,1\nplatform,*\nreduce,0,1,tree,ll,0,-1,-1\n")
    text = rules.format_rules(rs.rules, ["ccltune 0.1.0 rules from run 3"])
    assert text.startswith("# ccltune 0.1.0 rules from run 3\n")
    again = parse_text(text)
    assert not again.diagnostics
    strip = [(r.to_line(), r.platform.gpu, r.platform.nvl_ranks) for r in rs.rules]
    assert [(r.to_line(), r.platform.gpu, r.platform.nvl_ranks) for r in again.rules] == strip

    target = tmp_path / "nccl_tuner.conf"
    target.write_text("stale,old,rule\n" * 3)
    rules.write_atomic(target, text)
    assert target.read_text() == text  # replaced whole, never appended
    assert [p.name for p in tmp_path.iterdir()] == ["nccl_tuner.conf"]  # no temp file left


def test_load_errors_and_bytes(tmp_path) -> None:
    with pytest.raises(RuleFileError, match="rule file: '.*missing.conf' does not exist"):
        rules.load(tmp_path / "missing.conf")
    f = tmp_path / "bin.conf"
    f.write_bytes(b"allreduce,0,1,ring,ll,1,1,8\n\xff\xfe,0,1,ring,ll,1,1,8\n")
    rs = rules.load(f)
    assert len(rs.rules) == 1
    assert rs.diagnostics[0].reason.startswith("unknown collective '\\xff\\xfe'")
