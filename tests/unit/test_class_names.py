"""One name per concept (STYLE.md 21): no two classes of src/ccltune share a name, so a name read in a traceback,
a docstring or a review means one thing (the tree had four classes called Outcome, two RunResult, two Verdict).
Module-private classes (a leading underscore) are left out."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import ccltune
import source_trees

ROOT = Path(ccltune.__file__).parent

# names still held by two classes, each pair two concepts: rename one side, then remove its line here
KNOWN = {
    "Series": "engines/series.py's struct ccltune_series and report/model.py's chart series",
    "Timing": "engines/base.py's timing of a launch and workload/timing.py's times of a job's calls",
}


def _classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        for node in source_trees.nodes(path):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_two_classes_share_a_name():
    twice = {name: where for name, where in _classes().items() if len(where) > 1 and name not in KNOWN}
    assert not twice, "classes that share a name (rename one):\n" + "\n".join(
        f"  {name}: {', '.join(where)}" for name, where in sorted(twice.items()))


def test_the_known_pairs_are_still_pairs():
    found = _classes()
    gone = [name for name in KNOWN if len(found.get(name, [])) < 2]
    assert not gone, f"renamed: remove {gone} from KNOWN"
