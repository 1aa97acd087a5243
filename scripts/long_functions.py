"""List the functions of src/ccltune longer than a limit (default 60 lines, issue 40), longest first:
``python scripts/long_functions.py [LIMIT]``. A function's length is its lines from ``def`` (decorators left
out) to its last statement, docstring included; a nested function counts within its parent and on its own.
tests/unit/test_function_length.py holds the tree to it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "ccltune"
LIMIT = 60


def long_functions(limit: int = LIMIT, root: Path = ROOT) -> list[tuple[int, str]]:
    """(lines, 'path:qualified.name') of each function over ``limit`` lines, longest first."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, node in _functions(tree, ""):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                out.append((lines, f"{path.relative_to(root.parent).as_posix()}:{name}"))
    return sorted(out, key=lambda x: (-x[0], x[1]))


def _functions(node: ast.AST, prefix: str):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            yield name, child
            yield from _functions(child, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


if __name__ == "__main__":
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else LIMIT
    found = long_functions(limit)
    for lines, where in found:
        print(f"{lines:5d}  {where}")
    print(f"{len(found)} functions over {limit} lines")
