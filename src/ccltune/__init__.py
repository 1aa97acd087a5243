"""ccltune: measure, diagnose, tune and validate GPU collective communication.

From Python (docs/api.md)::

    import ccltune
    r = ccltune.bench("all_reduce", engine="gloo", nproc=2, min_bytes="8", max_bytes="1M")
    for m in r.rows:
        print(m.size_bytes, m.in_place, m.busbw_gbps)

bench, sweep, tune, validate and report run the command of that name (the same options and
defaults as keywords, the same checks, the same results database) in a job of their own, and return
what it stored; import_nccl_tests, import_links, export, plugin_check and plugin_verify, and the
diagnose commands links, topo, doctor and check, likewise; open_db reads a results database. Errors are ccltune.errors types: a bad argument
raises UsageError naming it. The command line: ``ccltune --help`` (docs/cli.md).
"""

import sys as _sys
import types as _types

from ccltune._version import __version__

# The Python API (ccltune.api), imported on first use: `import ccltune` alone stays light, as the
# command line and every rank of a job import it.
_API: tuple[str, ...] = ("bench", "sweep", "tune", "validate", "report", "open_db", "Database", "RunResult", "TuneResult",
        "ValidateResult")
_API += ("import_nccl_tests", "import_links", "export", "plugin_check", "plugin_verify", "Exported",
         "LinksImportResult", "RuleFileCheck", "VerifyResult")
# the diagnose commands and what they return
_API += ("links", "topo", "doctor", "check", "Diagnosis", "LinksResult", "TopoResult", "CheckResult")
__all__ = ["__version__", "errors", *_API]


class _Package(_types.ModuleType):
    """The package. Its API names are the functions of ccltune.api, also where a subpackage has the
    same name (tune/, validate/, report/): the import system records such a subpackage here, where it
    stays hidden, so `ccltune.tune(...)` is the function. Code imports the subpackages by name
    (`from ccltune.tune import derive`), never as attributes of the package."""


def _api_attribute(name: str) -> property:
    def get(module: _types.ModuleType):  # noqa: ANN202
        from ccltune import api

        return getattr(api, name)

    def keep(module: _types.ModuleType, value: object) -> None:
        module.__dict__[name] = value

    return property(get, keep, doc=f"ccltune.api.{name}")


for _name in _API:
    setattr(_Package, _name, _api_attribute(_name))
_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: ccltune.errors without importing it first
    if name == "errors":
        from ccltune import errors

        return errors
    raise AttributeError(f"module 'ccltune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*(n for n in globals() if not n.startswith("_")), *__all__})
