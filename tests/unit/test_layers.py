"""No module imports from a layer above its own (every import, at the top or inside a function).

The layers, lowest first; a module may import its own layer and any below it:

  base      _version (the package's version), errors, status (the status words)
  core      sizes, datatypes, stats, commconfig, junit, files, gpus, environment, collectives, rules, store, storefile, groups, dist, launch,
            processes, tuner_plugin, profiler_plugin, builtlib, periter, inputs, ncclline,
            ncclt (nccl-tests' formats: each one's writer and reader)
  engines   engines/  (the collective libraries; nothing above them: buffers are laid out by measure)
  measure   measure/  (timing points and sizes, the run's lifecycle: measure.session)
  analysis  tune/, validate/, diagnose/, workload/  (sweeps, rules, verdicts, checks, workloads)
  ab        ab/  (`ccltune ab`: the user's job run across arms and judged; it reads profiler files through workload)
  report    report/
  commands  commands/  (each command's typed options and run_<command>(options) -> result, beneath both front ends)
  cli       cli/, __main__  (argv -> options, result -> exit code: the only place that parses argv)
  api       api  (the Python API: keywords -> options, the result returned)

No two modules import each other, directly or through others (test_no_import_cycle): within a layer too,
and counting imports inside functions (executed late, so Python tolerates the cycle, but the two modules
are one unit in two files) and imports under ``if TYPE_CHECKING:`` (never executed; counted as edges of
their own kind, "type-only": a type-only cycle means a type lives in the module that uses it, not below).

The package itself (ccltune/__init__.py) is the API's front: it stands above every layer (it hands out
ccltune.api's functions on first use), as an importer and as an import target: a module that needs the
version imports ccltune._version, not the package (test_nothing_imports_the_package_face).

The two front ends, cli and api, stand side by side over commands: neither imports the other
(test_the_front_ends_do_not_import_each_other); both read each option's help from the options
(commands/*Options fields, ``option(..., help=...)``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import ccltune
import source_trees

LAYERS = [
    ("base", {"_version", "errors", "status"}),
    ("core", {"sizes", "datatypes", "stats", "commconfig", "junit", "files", "inputs", "gpus", "environment", "collectives", "rules",
              "store", "storefile", "groups", "dist", "processes",
              "tuner_plugin", "profiler_plugin", "launch", "builtlib", "periter", "ncclline", "ncclt"}),
    ("engines", {"engines"}),
    ("measure", {"measure"}),
    ("analysis", {"tune", "validate", "diagnose", "workload"}),
    ("ab", {"ab"}),
    ("report", {"report"}),
    ("commands", {"commands"}),
    ("cli", {"cli", "__main__"}),
    ("api", {"api"}),
]
RANK = {part: i for i, (_, parts) in enumerate(LAYERS) for part in parts}
ROOT = Path(ccltune.__file__).parent


def _part(module: str) -> str:
    """ccltune.measure.sweep -> measure; ccltune -> '' (the package: base layer)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


FACE = len(LAYERS)  # the package (ccltune/__init__.py): above every layer, as importer and as target


def _layer(module: str) -> int:
    part = _part(module)
    if part in ("", "__version__", "__init__"):
        return FACE
    assert part in RANK, f"{module}: no layer for ccltune.{part}; add it to LAYERS in {__file__}"
    return RANK[part]


@functools.lru_cache(maxsize=None)   # asked for every import of every scan
def _is_module(name: str) -> bool:
    """Whether ccltune.a.b names a module of the tree (a.b.py or a/b/__init__.py)."""
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every ccltune import in ``path``. ``from X import y`` imports X.y where X.y is a module
    (``from ccltune.cli import sweep`` imports ccltune.cli.sweep), else X (``from ccltune import __version__``
    imports the package, ccltune)."""
    out = []
    for node in source_trees.nodes(path):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "ccltune":
            if node.module == "ccltune":  # a module of the package, or a name of its face (__version__)
                out += [(node.lineno, f"ccltune.{a.name}" if _is_module(f"ccltune.{a.name}") else "ccltune")
                        for a in node.names]
            else:
                named = [f"{node.module}.{a.name}" for a in node.names]
                out += [(node.lineno, m) for m in named if _is_module(m)]
                if not all(_is_module(m) for m in named):
                    out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "ccltune"]
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: relative import; ccltune imports by absolute name")
    return out


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_every_module_is_in_a_layer():
    for path in ROOT.rglob("*.py"):
        _layer(_module(path))


def test_no_import_goes_up_a_layer():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = _module(path)
        mine = _layer(mod)
        for line, target in _imports(path):
            theirs = _layer(target)
            if theirs > mine:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line}: {mod} ({_name(mine)}) imports "
                              f"{target} ({_name(theirs)})")
    print(f"upward imports: {len(upward)}")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def _name(layer: int) -> str:
    return "the package's face" if layer == FACE else LAYERS[layer][0]


def test_nothing_imports_the_package_face():
    """`from ccltune import __version__` ran the package's face (the API's front) from tune/emit.py,
    report/, cli/, environment.py, validate/jobprune.py and five commands (issue 40): the version lives in
    ccltune._version, the lowest layer."""
    found = [f"{path.relative_to(ROOT.parent)}:{line}: imports {target}" for path in sorted(ROOT.rglob("*.py"))
             if _module(path) != "ccltune" for line, target in _imports(path) if _layer(target) == FACE]
    assert not found, "modules that import the package's face (ccltune/__init__.py):\n" + "\n".join(found)


def test_the_check_sees_the_package_face(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ccltune import __version__, errors\nimport ccltune\nfrom ccltune._version import __version__\n")
    assert _imports(bad) == [(1, "ccltune"), (1, "ccltune.errors"), (2, "ccltune"), (3, "ccltune._version")]
    assert [_layer(t) for _, t in _imports(bad)] == [FACE, 0, FACE, 0]


FRONT_ENDS = {"cli", "__main__", "api"}


def test_the_front_ends_do_not_import_each_other():
    """api.py imported ccltune.cli to build its docstrings from the parser's help (1.0 s on first use of the
    API, issue 40): each option's help is the options' (``option(..., help=...)``), read by both."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        mine = _part(_module(path))
        if mine not in FRONT_ENDS:
            continue
        for line, target in _imports(path):
            theirs = _part(target)
            if theirs in FRONT_ENDS and {mine, theirs} != {"__main__", "cli"} and (mine == "api") != (theirs == "api"):
                found.append(f"{path.relative_to(ROOT.parent)}:{line}: {mine} imports {target}")
    assert not found, "one front end imports the other:\n" + "\n".join(found)


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from ccltune.measure.buffers import Buffers\n")
    assert _imports(bad) == [(2, "ccltune.measure.buffers")]
    assert _layer("ccltune.measure.buffers") > _layer("ccltune.engines.base")


def _type_only_lines(tree: ast.AST) -> set[int]:
    """Lines of the imports under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    lines = set()
    for node in source_trees.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def _edges(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, kind) of every ccltune import in ``path``: kind "type-only" under TYPE_CHECKING, else
    "runtime" (at the top or inside a function alike)."""
    typed = _type_only_lines(source_trees.tree(path))
    return [(line, target, "type-only" if line in typed else "runtime") for line, target in _imports(path)]


def _cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself), each sorted:
    every module of one can reach every other through imports. Iterative Tarjan (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, {}):
                    out.append(sorted(component))
    return out


def test_no_import_cycle():
    """Every import counts, inside functions and under TYPE_CHECKING (see the module's docstring), the package's
    face too (it imports ccltune.api on first use; `from ccltune import __version__` closed a circle through it)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        mod = _module(path)
        for line, target, kind in _edges(path):
            graph.setdefault(mod, {}).setdefault(target, []).append(
                f"{path.relative_to(ROOT.parent)}:{line} ({kind})")
    found = []
    for component in _cycles(graph):
        found.append("cycle: " + ", ".join(component))
        found += [f"  {a} -> {b}: {', '.join(where)}" for a in component
                  for b, where in sorted(graph.get(a, {}).items()) if b in component]
    print(f"import cycles: {len(_cycles(graph))}")
    assert not found, "modules that import each other:\n" + "\n".join(found)


def test_the_cycle_check_sees_late_and_type_only_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ccltune.store import Store\n"
                   "def f():\n    from ccltune import launch\n")
    assert _edges(src) == [(3, "ccltune.store", "type-only"), (5, "ccltune.launch", "runtime")]
    assert _cycles({"a": {"b": ["a:5 (runtime)"]}, "b": {"c": ["b:3 (type-only)"]}, "c": {"a": ["c:1"]},
                    "d": {"a": ["d:1"]}, "e": {"e": ["e:1"]}}) == [["a", "b", "c"], ["e"]]


def test_the_check_sees_a_module_imported_from_its_package(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ccltune.cli import sweep, main\nfrom ccltune.diagnose.probes import topo as t\n")
    assert _imports(bad) == [(1, "ccltune.cli.sweep"), (1, "ccltune.cli"), (2, "ccltune.diagnose.probes.topo")]
    assert _command_imports(bad) == [(1, "ccltune.cli.sweep")]


# what command modules may import from ccltune.cli: the package (main, run_command), the argparse helpers and the
# parts of one command kept in a module of their own (no command: not in cli._COMMANDS)
SHARED_CLI = {
    "ccltune.cli",
    "ccltune.cli._common",  # argparse helpers
    "ccltune.cli._safeout",  # stdout/stderr with control characters escaped while a command runs
    "ccltune.cli.bench_options",  # bench's nccl-tests flags (cli/bench.py)
    "ccltune.cli.import_links",  # `import transferbench|nvbandwidth` (cli/import_.py)
}


def _command_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of each import of another ccltune.cli module than SHARED_CLI."""
    return [(line, t) for line, t in _imports(path)
            if (t == "ccltune.cli" or t.startswith("ccltune.cli.")) and t not in SHARED_CLI]


def test_no_command_module_imports_another():
    """Commands share argparse helpers (cli._common, ...) and the layers below, not each other."""
    from ccltune.cli import _COMMANDS

    assert not {t.rsplit(".", 1)[-1] for t in SHARED_CLI} & set(_COMMANDS), "a command is shared"
    found = [f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
             for path in sorted((ROOT / "cli").glob("*.py")) for line, target in _command_imports(path)]
    assert not found, "command modules that import another:\n" + "\n".join(found)


def test_no_module_reaches_a_subpackage_through_the_package():
    """`ccltune.tune`, `ccltune.validate` and `ccltune.report` are the API's functions (the package
    hides its subpackages of those names), so `import ccltune.tune as t` would get the function:
    code imports them by name (`from ccltune.tune import derive`)."""
    shadowed = {"tune", "validate", "report"}
    found = []
    for path in sorted([*ROOT.rglob("*.py"), *(ROOT.parents[1] / "tests").rglob("*.py")]):
        for node in source_trees.nodes(path):
            if isinstance(node, ast.Import):
                found += [f"{path}:{node.lineno}: import {a.name} as {a.asname}" for a in node.names
                          if a.asname and a.name.split(".")[:2][-1] in shadowed and a.name.startswith("ccltune.")]
            elif isinstance(node, ast.ImportFrom) and node.module == "ccltune":
                found += [f"{path}:{node.lineno}: from ccltune import {a.name}" for a in node.names if a.name in shadowed]
    assert not found, "subpackages reached as attributes of ccltune (they are the API's functions):\n" + "\n".join(found)


def test_no_module_is_imported_under_a_short_alias():
    """`from ccltune.workload import plan as WP` makes a reader look the letters up: a module imported under
    another name gets a name that says what it is (`workload_plan`), in the code and in the tests."""
    found = []
    for path in sorted([*ROOT.rglob("*.py"), *(ROOT.parents[1] / "tests").rglob("*.py")]):
        for node in source_trees.nodes(path):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ccltune":
                found += [f"{path}:{node.lineno}: {a.name} as {a.asname}" for a in node.names
                          if a.asname and _is_module(f"{node.module}.{a.name}")
                          and (len(a.asname.lstrip("_")) < 3 or a.asname.isupper())]
            elif isinstance(node, ast.Import):
                found += [f"{path}:{node.lineno}: {a.name} as {a.asname}" for a in node.names
                          if a.asname and a.name.startswith("ccltune") and (len(a.asname) < 3 or a.asname.isupper())]
    assert not found, "ccltune modules under short aliases:\n" + "\n".join(found)
