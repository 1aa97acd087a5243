"""Every third-party module that src/ccltune imports is declared in pyproject.toml.

A fresh `pip install torch==2.13.0 && pip install .` must run every command: a module that
the code imports but the package does not declare works on the developer's machine and
fails on the user's (numpy did, hidden by the test extra's matplotlib). Optional modules are
allowed only behind an ImportError handler that says what to install, or that falls back
to another source on purpose (the reason is written here)."""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import source_trees

try:
    import tomllib
except ImportError:  # Python 3.10: tomli is a declared dependency there
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ccltune"

# import name -> distribution name, for every third-party module src/ccltune may import
DISTRIBUTION = {"rich": "rich", "numpy": "numpy", "tomli": "tomli", "matplotlib": "matplotlib",
                "pynvml": "nvidia-ml-py", "torch": "torch", "cupy": "cupy", "nvidia": "nvidia-nccl",
                "pandas": "pandas"}
# installed before ccltune, as the README's install line says (its CPU and CUDA builds live on
# different indexes, so the package cannot pick one)
PREREQUISITES = {"torch"}
# declared although no import names them: what the dependency is for
RUNTIME_ONLY = {"numpy": "torch.distributed's object exchange imports it (all_gather_object, broadcast_object_list)"}
# optional modules: the text their ImportError handler must show the user, or why it falls back
NAMES_IN_HANDLER = {"matplotlib": "pip install 'ccltune[png]'",
                    "pandas": "pip install pandas",
                    "cupy": "pip install cupy-cuda12x",
                    "tomli": "pip install tomli"}
FALLS_BACK = {"pynvml": "NVML is the first of several topology sources (sysfs and nvidia-smi follow)",
              "nvidia": "the nvidia-nccl wheel CUDA builds of torch bring; ldconfig and the loaded library follow",
              "cupy": "links' copy-engine path uses torch's copy when cupy is absent",
              "numpy": "imported with cupy, for the SM kernel's pointer arguments"}


@dataclass(frozen=True)
class Use:
    module: str        # top-level name
    where: str         # file:line
    guard: str | None  # source of the ImportError handler around it, or None
    caller_guarded: bool  # it runs only after a same-file guard for this module passed


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _imports(tree: ast.AST) -> list[tuple[ast.stmt, str]]:
    out = []
    for node in source_trees.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node, node.module.split(".")[0]))
    return out


def _uses(path: Path, root: Path = ROOT) -> list[Use]:
    text = path.read_text(encoding="utf-8")
    tree = source_trees.tree(path)
    guard_of: dict[int, str] = {}     # id(import node) -> handler source
    for node in source_trees.walk(tree):
        if isinstance(node, ast.Try):
            handlers = [h for h in node.handlers if _catches_import_error(h)]
            for stmt in node.body:
                for imp, _ in _imports(stmt):
                    if handlers:
                        guard_of[id(imp)] = "\n".join(ast.get_source_segment(text, h) or "" for h in handlers)
    funcs = [n for n in source_trees.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    guards: dict[str, set[str]] = {}  # module -> names of functions in this file that import it guarded
    for f in funcs:
        for imp, mod in _imports(f):
            if id(imp) in guard_of:
                guards.setdefault(mod, set()).add(f.name)
    def callee(c: ast.Call) -> str | None:
        return getattr(c.func, "id", getattr(c.func, "attr", None))

    def checked(mod: str) -> set[str]:
        """Functions that only run after this file's guard for ``mod`` passed: those that call the
        guard first, then private helpers called only from such functions."""
        done = {f.name for f in funcs for c in source_trees.walk(f) if isinstance(c, ast.Call) and callee(c) in guards.get(mod, ())}
        while True:
            more = {f.name for f in funcs if f.name.startswith("_") and f.name not in done
                    and (callers := {g.name for g in funcs for c in source_trees.walk(g)
                                     if isinstance(c, ast.Call) and callee(c) == f.name})
                    and callers <= done}
            if not more:
                return done
            done |= more

    uses = []
    for imp, mod in _imports(tree):
        enclosing = {f.name for f in funcs if f.lineno <= imp.lineno <= (f.end_lineno or f.lineno)}
        after_guard = bool(enclosing & checked(mod)) if guards.get(mod) else False
        uses.append(Use(mod, f"{path.relative_to(root)}:{imp.lineno}", guard_of.get(id(imp)), after_guard))
    return uses


@functools.cache
def _third_party() -> tuple[Use, ...]:
    return tuple(u for p in sorted(SRC.rglob("*.py")) for u in _uses(p)
            if u.module not in sys.stdlib_module_names and u.module != "ccltune")


def _names(reqs: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower().replace("_", "-") for r in reqs}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_every_third_party_import_is_declared_or_optional_behind_a_clear_handler():
    project = _project()
    required = _names(project["dependencies"])
    extras = {name: _names(reqs) for name, reqs in project["optional-dependencies"].items()}
    problems = []
    for use in _third_party():
        dist = DISTRIBUTION.get(use.module)
        if dist is None:
            problems.append(f"{use.where}: imports {use.module!r}, which is neither declared in pyproject.toml "
                            "nor listed in DISTRIBUTION here")
        elif dist in required or use.module in PREREQUISITES:
            continue
        elif use.guard is None and not use.caller_guarded:
            problems.append(f"{use.where}: imports {use.module!r} ({dist}) without an ImportError handler, "
                            "and pyproject.toml does not require it")
        elif use.guard is not None and use.module not in FALLS_BACK and NAMES_IN_HANDLER[use.module] not in use.guard:
            problems.append(f"{use.where}: the ImportError handler for {use.module!r} does not tell the user "
                            f"to {NAMES_IN_HANDLER[use.module]!r}")
    # every optional module that has a message shows it in at least one of its handlers
    handlers = [u for u in _third_party() if u.guard is not None]
    for module, text in NAMES_IN_HANDLER.items():
        if any(u.module == module for u in handlers) and DISTRIBUTION[module] not in required:
            assert any(text in u.guard for u in handlers if u.module == module), (module, text)
    # an extra named in a message exists
    for module, text in NAMES_IN_HANDLER.items():
        m = re.search(r"ccltune\[(\w+)\]", text)
        if m:
            assert DISTRIBUTION[module] in extras.get(m.group(1), set()), (module, m.group(1), extras)
    assert not problems, "\n".join(problems)


def test_every_declared_dependency_is_used():
    imported = {DISTRIBUTION.get(u.module) for u in _third_party()}
    runtime_only = {DISTRIBUTION[m] for m in RUNTIME_ONLY}
    unused = _names(_project()["dependencies"]) - imported - runtime_only
    assert not unused, f"declared in pyproject.toml but never imported: {sorted(unused)}"


def test_numpy_and_tomli_are_plain_dependencies():
    deps = _project()["dependencies"]
    assert "numpy" in _names(deps)
    tomli = [d for d in deps if d.startswith("tomli")]
    assert tomli and "python_version < '3.11'" in tomli[0]


def test_the_checker_sees_an_unguarded_optional_import(tmp_path):
    """The rule itself: a bare import of an optional module is found, a guarded one is not, and
    so is an import after a call to this file's guard."""
    (tmp_path / "m.py").write_text(
        "def need():\n    try:\n        import matplotlib\n    except ImportError:\n        raise SystemExit('x')\n"
        "def draw():\n    need()\n    import matplotlib.figure\n"
        "def bare():\n    import pynvml\n"
        "def _helper():\n    import matplotlib.colors\n"
        "def plot():\n    need()\n    _helper()\n", encoding="utf-8")
    uses = {u.where.split(":")[1]: u for u in _uses(tmp_path / "m.py", tmp_path)}
    assert uses["3"].guard and "SystemExit" in uses["3"].guard
    assert uses["8"].guard is None and uses["8"].caller_guarded
    assert uses["10"].guard is None and not uses["10"].caller_guarded
    assert uses["12"].guard is None and uses["12"].caller_guarded   # a private helper of guarded callers only
