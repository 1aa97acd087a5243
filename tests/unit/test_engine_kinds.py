"""What an engine can do is said once, on its entry in ccltune.engines.KINDS: no module outside
engines/ compares an engine's name to a literal ('nccl', 'torch', 'gloo') to decide what it can do."""

from __future__ import annotations

import ast
from pathlib import Path

import ccltune
import source_trees
from ccltune import engines
from ccltune.commands import bench_options

ROOT = Path(ccltune.__file__).parent


def _name_comparisons(path: Path) -> list[str]:
    """`x == "gloo"`, `"nccl" != y`, `x in ("torch", ...)` where x's name says it is an engine."""
    found = []
    for node in source_trees.nodes(path):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        literals = {n.value for s in sides for n in source_trees.walk(s) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        about_engine = any("engine" in ast.unparse(s) for s in sides)
        if about_engine and literals & set(engines.ENGINES):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_engine_name_is_compared_outside_the_registry():
    found = [hit for path in sorted(ROOT.rglob("*.py")) if "engines" not in path.relative_to(ROOT).parts
             for hit in _name_comparisons(path)]
    assert not found, "capabilities decided by engine name (ask engines.kind(name) instead):\n" + "\n".join(found)


def test_the_check_sees_a_comparison(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('def f(run):\n    return (run.engine or "x") == "gloo" or engine_name in ("torch", "nccl")\n')
    assert len(_name_comparisons(src)) == 2


def test_every_ability_a_flag_needs_is_one_the_registry_names():
    """bench's flags map onto abilities; each engine's reasons are keyed by those same names."""
    abilities = set(bench_options._NEEDS.values())
    for kind in engines.KINDS.values():
        assert set(kind.lacks) <= abilities, kind.name
    assert engines.kind("nccl").lacks == {}  # nccl-tests' own library honours every flag
    assert all(abilities & set(k.lacks) for k in engines.KINDS.values() if k.name != "nccl")
