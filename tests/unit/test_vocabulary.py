"""The collective, algorithm and protocol names are defined once (STYLE.md 14): a collective's names
(ours, the rule file's, NCCL's opName) and ids in its registry entry (collectives/), the algorithm and
protocol names in rules.py (ALGORITHMS, PROTOCOLS), the datatype ids in datatypes.py. Every other list is
derived from those; this test fails on a literal second copy anywhere else in src/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ccltune
import source_trees
from ccltune import collectives, datatypes, rules

ROOT = Path(ccltune.__file__).parent


def _norm(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


ALGOS = {_norm(a) for a in rules.ALGORITHMS}
PROTOS = {_norm(p) for p in rules.PROTOCOLS}
COLLS = {_norm(n) for c in collectives.REGISTRY.values()
         for n in (c.name, c.plugin_name or c.name, *c.nccl_names)}
# where the names are defined, and other programs' vocabularies mapped onto ours
HOME = {
    "rules.py": "ALGORITHMS and PROTOCOLS: the one table",
    "collectives": "the registry: each collective's names",
    "workload/torch_trace.py": "c10d's collective names (torch's vocabulary) -> ours",
}
LIMITS = (("algorithm", ALGOS, 2), ("protocol", PROTOS, 2), ("collective", COLLS, 3))


def _is_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (isinstance(node.value, int) or
                                                (isinstance(node.value, str) and " " not in node.value))


def _literals(node: ast.AST) -> list[str]:
    elts: list[ast.expr | None] = []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elts = list(node.elts)
    elif isinstance(node, ast.Dict) and all(_is_name(v) for v in node.values):
        elts = [*node.keys, *node.values]  # a name table; a dict of reasons per name is a table of facts
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "|" in node.value:
        return re.findall(r"\w+", node.value)  # a regular expression's alternation: AllReduce|AllGather|...
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def second_copies(path: Path, tree: ast.AST) -> list[str]:
    out = []
    for node in source_trees.walk(tree):
        names = {_norm(s) for s in _literals(node)}
        for what, vocab, limit in LIMITS:
            hit = names & vocab
            if len(hit) >= limit:
                out.append(f"{path}:{node.lineno}: a literal list of {what} names ({', '.join(sorted(hit))})")
    return out


def _home(rel: str) -> bool:
    return any(rel == h or rel.startswith(h + "/") for h in HOME)


def _outside_homes(scan) -> list[str]:
    """What ``scan(path, tree)`` finds in every module of src/ccltune but the tables' homes."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if not _home(path.relative_to(ROOT).as_posix()):
            found += scan(path.relative_to(ROOT.parent), source_trees.tree(path))
    return found


def test_names_are_defined_once():
    found = _outside_homes(second_copies)
    assert not found, ("a second copy of names that have one table (derive it from collectives/, "
                       "rules.ALGORITHMS/PROTOCOLS):\n" + "\n".join(found))


def underscore_strips(path: Path, tree: ast.AST) -> list[str]:
    """``x.replace("_", "")``: a name normalised by hand (all_reduce ~ AllReduce ~ allreduce) instead of
    through its table (collectives.canonical, rules.nccl_spelling)."""
    return [f"{path}:{node.lineno}: replace(\"_\", \"\") on a name" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace"
            and [a.value if isinstance(a, ast.Constant) else None for a in node.args][:2] == ["_", ""]]


def test_names_are_normalised_through_their_table():
    found = _outside_homes(underscore_strips)
    assert not found, ("a collective, algorithm or protocol name normalised by hand (use collectives.canonical "
                       "or rules.nccl_spelling):\n" + "\n".join(found))


def test_the_normalisations_agree_with_the_old_spellings():
    for spelling in ("all_reduce", "allreduce", "AllReduce", "ALL_REDUCE", "all-reduce", "all_reduce_perf"):
        assert collectives.canonical(spelling) == "all_reduce", spelling
    assert [collectives.canonical(c.name) for c in collectives.REGISTRY.values()] == list(collectives.REGISTRY)
    assert {collectives.canonical(n) for c in collectives.TUNABLE for n in c.nccl_names} == {c.name for c in collectives.TUNABLE}
    assert collectives.canonical("allreduce_x") is None and collectives.canonical("Send") is None
    assert rules.nccl_spelling(" CollNet_Direct ") == "collnetdirect"


def test_the_scan_sees_a_second_copy():
    tree = ast.parse('ALGOS = ("tree", "ring", "pat")\nX = {"AllReduce": 4, "AllGather": 2, "Reduce": 1}\n'
                     'P = ["LL", "Simple"]\nOK = ("tree", "x")\nWHY = {"nvls": "no NVSwitch", "pat": "one GPU a node"}\n'
                     'R = re.compile(r"^(?P<f>AllReduce|Broadcast|Send): (?P<b>\\d+)")\n')
    found = second_copies(Path("bad.py"), tree)
    assert underscore_strips(Path("bad.py"), ast.parse('k = name.lower().replace("_", "")\nok = s.replace("-", "_")'))\
        == ['bad.py:1: replace("_", "") on a name']
    assert [f.split(": ", 1)[1].split(" (")[0] for f in found] == [
        "a literal list of algorithm names", "a literal list of collective names", "a literal list of protocol names",
        "a literal list of collective names"]


def test_ids_come_from_the_tables():
    """ncclFunc_t ids live on the registry entries; ncclDataType_t ids in datatypes.DTYPES."""
    assert {c.plugin_name: c.tuner_func for c in collectives.TUNABLE} == {
        "broadcast": 0, "reduce": 1, "allgather": 2, "reducescatter": 3, "allreduce": 4}  # NCCL's enum
    assert rules.COLLECTIVES == tuple(collectives.PLUGIN_NAMES.values())
    assert [c.tuner_func for c in map(collectives.BY_PLUGIN_NAME.get, rules.COLLECTIVES)] == [0, 1, 2, 3, 4]
    assert datatypes.DTYPES["float"].nccl == 7 and datatypes.DTYPES["f8e5m2"].nccl == 11
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in source_trees.nodes(path):
            if (isinstance(node, ast.Assign) and not rel.startswith("collectives/")
                    and any(isinstance(t, ast.Name) and t.id == "tuner_func" for t in node.targets)):
                raise AssertionError(f"{rel}:{node.lineno}: tuner_func assigned outside a registry entry")
