"""Parsed source files for the tests that scan the tree (layers, vocabulary, dependencies, engine names,
status words): each file is parsed once per test process and each node's ``ast.walk`` listed once, instead
of once per check (those checks parsed src/ccltune ten times over and walked it tens of times: 20 s of CPU
of the suite). tests/conftest.py sends the modules that import this one to the same worker, so the cache
serves them all. The trees are shared: a check reads them and never changes them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

_WALKED: dict[int, tuple[ast.AST, tuple[ast.AST, ...]]] = {}


@functools.lru_cache(maxsize=None)
def _parse(text: str, name: str) -> ast.Module:
    return ast.parse(text, name)


def tree(path: Path) -> ast.Module:
    """The module in ``path`` as it is now on disk (a test that rewrites a file gets the new text's tree)."""
    return _parse(path.read_text(encoding="utf-8"), str(path))


def walk(node: ast.AST) -> tuple[ast.AST, ...]:
    """``tuple(ast.walk(node))``, listed once per node (kept with the node, so its id stays its own)."""
    got = _WALKED.get(id(node))
    if got is None or got[0] is not node:
        got = _WALKED[id(node)] = (node, tuple(ast.walk(node)))
    return got[1]


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s module, in ``ast.walk``'s order."""
    return walk(tree(path))
