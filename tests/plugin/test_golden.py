"""C matcher vs Python matcher on the same rule files and queries: decisions, diagnostics
(line numbers and reasons) and platform facts must agree exactly."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from ccltune import collectives, rules
from plugin_build import REPO, run

FIXTURES = sorted((REPO / "tests" / "fixtures" / "rules").glob("*.conf"))
SHAPES = [(8, 1), (16, 2), (4, 4), (8, 2), (2, 1)]  # (nRanks, nNodes)


def _tables() -> dict[str, list[list[float]]]:
    full = [[10.0 + a * 3 + p for p in range(3)] for a in range(7)]
    hopper = [[-1.0] * 3 for _ in range(7)]  # 8xH100 allreduce-like: tree, ring, nvls/simple
    hopper[0] = [12.0, 9.5, 9.5]  # a tie: the lowest index wins
    hopper[1] = [11.0, 8.0, 7.5]
    hopper[4][2] = 6.0
    rccl = [[5.0 + ((a * 7 + p * 5) % 9) * 0.5 for p in range(3)] for a in range(8)]
    only_ring = [[-1.0] * 3 for _ in range(7)]
    only_ring[1] = [3.0, -1.0, 2.5]
    flat = [[4.0] * 3 for _ in range(7)]  # every "default" pick is a tie: lowest index wins
    flat[0][0] = -1.0
    return {"full": full, "hopper": hopper, "rccl8": rccl, "ring": only_ring, "flat": flat, "null": []}


TABLES = _tables()


def _platforms(tmp: Path) -> dict[str, tuple[dict[str, str], list[str], rules.PlatformFacts]]:
    """name -> (env for the C harness, extra argv (nvlDomainInfo), Python facts)."""
    empty = tmp / "empty"
    empty.mkdir()
    nv = tmp / "nvidia"
    info = nv / "proc/driver/nvidia/gpus/0000:18:00.0"
    info.mkdir(parents=True)
    (info / "information").write_text("Model: \t NVIDIA H200\nIRQ:   120\n")
    amd = tmp / "amd"
    dev = amd / "sys/class/drm/card1/device"
    dev.mkdir(parents=True)
    (dev / "product_name").write_text("AMD Instinct MI300X\n")
    (dev / "current_compute_partition").write_text("CPX\n")
    (dev / "current_memory_partition").write_text("nps4\n")
    return {
        "unknown": ({"CCLTUNE_SYSFS_ROOT": str(empty)}, [], rules.PlatformFacts()),
        "h100-env": ({"CCLTUNE_SYSFS_ROOT": str(empty), "CCLTUNE_GPU_MODEL": "NVIDIA H100 80GB HBM3"}, [],
                     rules.PlatformFacts(gpu="NVIDIA H100 80GB HBM3")),
        # gpu= as whole words (issue 41): an H20, an MI300A and a GH200 are none of H200, MI300X, H20
        "h20-env": ({"CCLTUNE_SYSFS_ROOT": str(empty), "CCLTUNE_GPU_MODEL": "NVIDIA H20"}, [],
                    rules.PlatformFacts(gpu="NVIDIA H20")),
        "mi300a-env": ({"CCLTUNE_SYSFS_ROOT": str(empty), "CCLTUNE_GPU_MODEL": "AMD Instinct MI300A"}, [],
                       rules.PlatformFacts(gpu="AMD Instinct MI300A")),
        "gh200-env": ({"CCLTUNE_SYSFS_ROOT": str(empty), "CCLTUNE_GPU_MODEL": "NVIDIA GH200 480GB"}, [],
                      rules.PlatformFacts(gpu="NVIDIA GH200 480GB")),
        "h200-sysfs": ({"CCLTUNE_SYSFS_ROOT": str(nv)}, ["1,8,8"],
                       rules.PlatformFacts(gpu="NVIDIA H200", nvl_domains=1, min_ranks_per_nvl_domain=8,
                                           max_ranks_per_nvl_domain=8)),
        "mi300-cpx": ({"CCLTUNE_SYSFS_ROOT": str(amd)}, ["1,4,4"],
                      rules.PlatformFacts(gpu="AMD Instinct MI300X", nvl_domains=1, min_ranks_per_nvl_domain=4,
                                          max_ranks_per_nvl_domain=4, partition="CPX", nps="NPS4")),
    }


def _queries(ruleset: rules.RuleSet, seed: int) -> list[rules.Query]:
    rnd = random.Random(seed)
    sizes = {0, 1, 1023, 1024, 65535, 65536, 1 << 20, (1 << 64) - 1}
    for r in ruleset.rules:
        sizes |= {r.min_bytes, r.max_bytes, max(r.min_bytes - 1, 0), min(r.max_bytes + 1, (1 << 64) - 1)}
    sizes |= {rnd.randrange(1 << rnd.randrange(1, 45)) for _ in range(20)}
    out = []
    for size in sorted(sizes):
        for coll in rules.COLLECTIVES:
            for _ in range(3):
                n_ranks, n_nodes = rnd.choice(SHAPES)
                out.append(rules.Query(
                    coll, size, n_ranks, n_nodes, num_pipe_ops=rnd.choice([1, 1, 2]),
                    reg_buff=rnd.choice([0, 0, 1, None]), cost_table=TABLES[rnd.choice(list(TABLES))],
                ))
    return out


def _query_line(q: rules.Query) -> str:
    table = q.cost_table or []
    n_proto = len(table[0]) if table else 0
    costs = " ".join(repr(v) for row in table for v in row)
    reg = -1 if q.reg_buff is None else q.reg_buff
    return f"{q.collective} {q.size_bytes} {q.n_ranks} {q.n_nodes} {q.num_pipe_ops} {reg} {len(table)} {n_proto} {costs}"


def _py_decision(d: rules.Decision) -> str:
    if d.rule is None:
        return "- - - -"
    return f"{d.line} {d.algo or '-'} {d.proto or '-'} {d.channels}"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_c_and_python_agree(fixture: Path, c_build: Path, tmp_path: Path) -> None:
    ruleset = rules.load(fixture)
    queries = _queries(ruleset, seed=len(fixture.name))
    stdin = "\n".join(_query_line(q) for q in queries) + "\n"
    for name, (env, argv, facts) in _platforms(tmp_path).items():
        c_env = {k: v for k, v in os.environ.items() if not k.startswith("CCLTUNE_")} | env
        proc = run([c_build / "golden", fixture, *argv], input=stdin, env=c_env)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        c_diags = [ln for ln in lines if ln.startswith("diag ")]
        py_diags = [f"diag {d.line}: {d.reason}" for d in ruleset.diagnostics]
        assert c_diags == py_diags
        assert f"rules {len(ruleset.rules)}" in lines
        decisions = lines[len(c_diags) + 2:]
        assert len(decisions) == len(queries)
        mismatches = []
        for q, c_out in zip(queries, decisions):
            py_out = _py_decision(rules.match(ruleset, rules.Query(**{**q.__dict__, "platform": facts})))
            if py_out != c_out:
                mismatches.append(f"{name}: {_query_line(q)[:80]}: C {c_out!r} != Python {py_out!r}")
        assert not mismatches, "\n".join(mismatches[:20])
        matched = sum(1 for d in decisions if not d.startswith("-"))
        assert matched > 0, f"{name}: no query matched any rule; the comparison proves nothing"


def test_the_c_name_tables_are_pythons(c_build: Path) -> None:
    """The plugin's one definition of each vocabulary (plugin/src/parse.c, read from the built harness) equals
    Python's: the collectives' plugin names in ncclFunc_t order and ccltune's names for them (the aliases),
    rules.ALGORITHMS and rules.PROTOCOLS in NCCL's enum order."""
    proc = run([c_build / "golden", "--names"])
    assert proc.returncode == 0, proc.stderr
    tables = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}
    assert tables == {
        "collectives": list(collectives.PLUGIN_NAMES.values()),
        "aliases": list(collectives.PLUGIN_NAMES),
        "algorithms": list(rules.ALGORITHMS),
        "protocols": list(rules.PROTOCOLS),
    }
    assert tables["collectives"] == list(rules.COLLECTIVES)


def test_the_c_sources_spell_each_name_once() -> None:
    """A second C table of names (a capture writer's own list, a lookup table with the aliases) is a copy to
    drift: each name is one string literal in plugin/src, the tables above."""
    import re

    text = "\n".join(p.read_text() for p in sorted((REPO / "plugin" / "src").glob("*.[ch]")))
    once = {*collectives.PLUGIN_NAMES.values(), *collectives.PLUGIN_NAMES, *rules.ALGORITHMS, *rules.PROTOCOLS}
    derived = set(rules.NCCL_ALGOS) - once  # collnetdirect: matched by leaving out the underscores, never spelled
    wrong = {n: c for n in once | derived
             if (c := len(re.findall(f'"{re.escape(n)}"', text, flags=re.IGNORECASE))) != (n in once)}
    assert not wrong, f"names spelled other than once in plugin/src: {wrong}"


def test_platform_facts_read_from_fake_sysfs(c_build: Path, tmp_path: Path) -> None:
    fixture = REPO / "tests" / "fixtures" / "rules" / "basic.conf"
    for name, (env, argv, facts) in _platforms(tmp_path).items():
        c_env = {k: v for k, v in os.environ.items() if not k.startswith("CCLTUNE_")} | env
        out = run([c_build / "golden", fixture, *argv], input="", env=c_env).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("platform "))
        assert f"gpu={facts.gpu or '?'} " in line, (name, line)
        assert f"partition={facts.partition or '?'} nps={facts.nps or '?'}" in line, (name, line)


def test_platform_sections_select_different_rules() -> None:
    """The fixture must actually exercise sections, or the golden test above is hollow."""
    rs = rules.load(REPO / "tests" / "fixtures" / "rules" / "platforms.conf")
    seen = {}
    for name, facts in {"h100": rules.PlatformFacts(gpu="NVIDIA H100"),
                        "h200": rules.PlatformFacts(gpu="NVIDIA H200", nvl_domains=1,
                                                    min_ranks_per_nvl_domain=8, max_ranks_per_nvl_domain=8),
                        "mi300": rules.PlatformFacts(gpu="AMD Instinct MI300X", partition="CPX", nps="NPS4"),
                        "none": rules.PlatformFacts()}.items():
        seen[name] = rules.match(rs, rules.Query("allreduce", 4096, 16, 4, platform=facts)).channels
    # h200 gives nvlranks 8 explicitly; the others fall to nvlranks=4, derived from 16 ranks / 4 nodes
    assert seen == {"h100": 2, "h200": 4, "mi300": 6, "none": 7}


def test_gpu_sections_name_whole_words_in_c_as_in_python(c_build: Path, tmp_path: Path) -> None:
    """Issue 41: `gpu=h20` is not an H200, `mi300` not an MI300A; C and Python pick the same line per model."""
    fixture = REPO / "tests" / "fixtures" / "rules" / "gpu_words.conf"
    rs = rules.load(fixture)
    want = {"NVIDIA H20": 1, "AMD Instinct MI300A": 7, "NVIDIA GH200 480GB": 5, "NVIDIA H200": 4,
            "NVIDIA H100 80GB HBM3": 3, "AMD Instinct MI300X": 6, "NVIDIA H800": 9}
    q = rules.Query("allreduce", 4096, 8, 1, cost_table=TABLES["full"])
    for model, channels in want.items():  # the channels of the rule each model must take
        py = rules.match(rs, rules.Query(**{**q.__dict__, "platform": rules.PlatformFacts(gpu=model)}))
        c_env = {k: v for k, v in os.environ.items() if not k.startswith("CCLTUNE_")} | {
            "CCLTUNE_SYSFS_ROOT": str(tmp_path), "CCLTUNE_GPU_MODEL": model}
        c_out = run([c_build / "golden", fixture], input=_query_line(q) + "\n", env=c_env).stdout.splitlines()[-1]
        assert (py.channels, c_out.split()[3]) == (channels, str(channels)), model
