"""rules explain: the table covers 0..2^64-1 without gaps, and every range's both ends get
the decision rules.match (the C matcher's proven twin) gives there."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune import rules
from ccltune.cli import main
from ccltune.tune.explain import MAX_SIZE, explain

RULES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "rules").glob("*.conf"))


@pytest.mark.parametrize("path", RULES, ids=[p.name for p in RULES])
@pytest.mark.parametrize("shape", [(8, 1), (4, 1), (16, 2)])
def test_table_is_exact(path: Path, shape: tuple[int, int]) -> None:
    rs = rules.load(path)
    facts = rules.PlatformFacts(gpu="NVIDIA H100 80GB HBM3")
    for coll in rules.COLLECTIVES:
        table = explain(rs, coll, *shape, facts)
        assert table[0].min_bytes == 0 and table[-1].max_bytes == MAX_SIZE
        for a, b in zip(table, table[1:]):
            assert a.max_bytes + 1 == b.min_bytes and a.decision != b.decision
        for r in table:
            for size in (r.min_bytes, r.max_bytes, (r.min_bytes + r.max_bytes) // 2):
                q = rules.Query(coll, size, *shape, platform=facts)
                assert rules.match(rs, q) == r.decision, (coll, size)


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    basic = next(p for p in RULES if p.name == "basic.conf")
    assert main(["rules", "explain", str(basic), "--collective", "allreduce", "--nranks", "8"]) == 0
    out = capsys.readouterr().out
    assert "line 3: tree/ll128" in out and "NCCL's default" in out
    assert main(["rules", "explain", str(basic), "--nranks", "2", "--nnodes", "4"]) == 2


@pytest.mark.parametrize("name", ["all_reduce", "allreduce", "AllReduce", "all-reduce"])
def test_collective_in_ccltunes_spelling_too(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """ccltune's own names (as workload show, sweep and tune print them) are accepted, not only the plugin's."""
    basic = next(p for p in RULES if p.name == "basic.conf")
    assert main(["rules", "explain", str(basic), "--collective", name, "--nranks", "8"]) == 0
    out = capsys.readouterr().out
    rows = [x.split()[0] for x in out.splitlines() if x.startswith("  ")]
    assert rows and set(rows) == {"allreduce"} and "line 3: tree/ll128" in out


def test_collective_that_no_rule_reaches_or_no_collective(capsys: pytest.CaptureFixture[str]) -> None:
    basic = next(p for p in RULES if p.name == "basic.conf")
    assert main(["rules", "explain", str(basic), "--collective", "alltoall"]) == 2
    assert "NCCL passes alltoall to no tuner" in capsys.readouterr().err
    assert main(["rules", "explain", str(basic), "--collective", "all_reduc"]) == 2
    assert "all_reduc" in capsys.readouterr().err


def test_a_file_with_no_rule_is_refused_not_explained_as_defaults(tmp_path, capsys) -> None:
    """A binary or a CSV of results passed by mistake: exit 2 naming the file and its first rejected
    line, not a table of NCCL's defaults with exit 0. A file with comments only is a valid empty one."""
    csv = tmp_path / "results.csv"
    csv.write_text("collective,size,time\nallreduce,8,1.0\n")
    assert main(["rules", "explain", str(csv)]) == 2
    err = capsys.readouterr().err
    assert f"{csv}: no line is a rule the plugin reads (2 rejected; line 1: " in err and "plugin check" in err
    empty = tmp_path / "empty.conf"
    empty.write_text("# nothing decided yet\n")
    assert main(["rules", "explain", str(empty), "--collective", "allreduce"]) == 0
    assert "NCCL's default" in capsys.readouterr().out


def test_cli_prints_every_boundary_in_exact_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    """One format for every boundary: the exact byte count (a rule's 64K and the 65537 after it alike)."""
    ext = next(p for p in RULES if p.name == "extensions.conf")
    assert main(["rules", "explain", str(ext), "--collective", "allreduce", "--nranks", "8"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "# collective       min_bytes   max_bytes  decision",
        "  allreduce                0       65536  line 4: cheapest/ll, nChannels 2",
        "  allreduce            65537    16777216  line 7: collnet_direct/simple",
        "  allreduce         16777217  4294967296  line 9: tree/simple",
        "  allreduce       4294967297         max  NCCL's default",
    ]


def test_a_tune_written_file_explains_for_its_own_platform_and_names_what_it_leaves_out(tmp_path, capsys) -> None:
    """Issue 30: `rules explain rules.conf --nranks 8` said NCCL's default at every size for any file tune
    writes (its rules sit under platform,gpu=...). Without --gpu the file's one GPU is taken; a section the
    communicator does not match is named with the reason (the real FSDP2 rules: nvlranks=4, 8 ranks asked)."""
    from ccltune.cli import main

    conf = tmp_path / "rules.conf"
    conf.write_text("# written by tune\nplatform,gpu=h200,nvlranks=4\n"
                    "allgather,100679680,100679680,default,default,32,1,4,-1,-1\n")
    assert main(["rules", "explain", str(conf), "--nranks", "4", "--collective", "all_gather"]) == 0
    out = capsys.readouterr().out
    assert "gpu=h200 (gpu from the file's platform section" in out and "line 3: default, nChannels 32" in out
    assert main(["rules", "explain", str(conf), "--nranks", "8", "--collective", "all_gather"]) == 0
    out = capsys.readouterr().out
    assert ("# left out: 1 rule(s) under platform,gpu=h200,nvlranks=4 (line 2): nvlranks=4, and this communicator "
            "has 8 ranks per node") in out and "nChannels" not in out
    assert main(["rules", "explain", str(conf), "--nranks", "4", "--gpu", "H100", "--collective", "all_gather"]) == 0
    assert "gpu=h200, and 'H100' does not hold it as whole words" in capsys.readouterr().out
def test_the_sweep_gives_the_decisions_of_a_full_match_per_segment_and_is_not_quadratic():
    """explain's heap sweep (issue 32: 100,000 rules took > 300 s) against one full first-match per
    segment, on overlapping rules of several collectives and rank counts, in random file orders."""
    import random
    import time

    from ccltune.tune.explain import MAX_SIZE, explain
    rnd = random.Random(7)
    lines = []
    for _ in range(300):
        lo = rnd.choice([0, 1 << rnd.randrange(30)])
        hi = rnd.choice([lo + rnd.randrange(1 << 20), 4096, MAX_SIZE])
        coll = rnd.choice(["allreduce", "allgather", "broadcast"])
        nranks = rnd.choice([-1, 8, 16])
        lines.append(f"{coll},{lo},{hi},{rnd.choice(['ring', 'tree', 'default'])},simple,{rnd.randrange(-1, 9)},-1,"
                     f"{nranks},-1,-1")
    rs = rules.parse_text("\n".join(lines) + "\n")
    assert len(rs.rules) > 150
    for coll in ("allreduce", "allgather", "broadcast"):
        for ranks in (8, 16, 32):
            for r in explain(rs, coll, ranks, 1):
                for size in {r.min_bytes, r.max_bytes, (r.min_bytes + r.max_bytes) // 2}:
                    full = rules.match(rs, rules.Query(coll, size, ranks, 1, 1, 0, rules.PlatformFacts()))
                    assert full == r.decision, (coll, ranks, size)
    many = rules.parse_text("".join(f"allreduce,{i * 64},{i * 64 + 63},ring,simple,4,-1,-1,-1,-1\n"
                                    for i in range(20_000)))
    t0 = time.process_time()
    explain(many, "allreduce", 8, 1)
    assert time.process_time() - t0 < 5  # the full match per segment took ~40 s here
