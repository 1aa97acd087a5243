"""ccltune from Python: each command as a function (bench, sweep, tune, validate, report; the imports,
export and the plugin's check and verify; the diagnose commands links, topo, doctor, check), and the
results database as typed objects (docs/api.md).

A function runs the command itself, not a copy of it: it builds the command's typed options from its
keywords (``ccltune.commands``: the same defaults, the same checks) and calls its ``run_<command>``, as
the command line does after parsing argv.
A command that starts ranks does so in a job of its own (torchrun), so the calling process (a notebook's)
never joins a process group; only one gloo process, which joins none, runs in the caller's main thread.
The run the call stored is returned, read back by the id the run itself reported (rank 0's, through the
launcher): two calls at once, on two threads, each get their own. Nothing is printed unless
``verbose=True`` (the table, notes and warnings, as the command line prints them); otherwise the lines go
to the ``ccltune`` logger. A bad argument raises ``ccltune.errors.UsageError`` naming it; what the CLI
would exit non-zero for raises the ``ccltune.errors`` type of that exit code, with ``run_id`` set when a
run was stored.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

from ccltune import launch
from ccltune.commands.bench import run_bench
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.check import CheckOptions, run_check
from ccltune.commands.common import Console, terminal
from ccltune.commands.diagnosis import CheckResult, Diagnosis, LinksResult, TopoResult
from ccltune.commands.doctor import DoctorOptions, run_doctor

# import, export, plugin check/verify (the block at the end)
from ccltune.commands.export import Exported, ExportOptions, run_export
from ccltune.commands.import_ import ImportNcclTestsOptions, run_import_nccl_tests
from ccltune.commands.import_links import ImportLinksOptions, LinksImportResult, run_import_links
from ccltune.commands.links import LinksOptions, run_links
from ccltune.commands.options import REQUIRED, from_keywords, helps, keywords
from ccltune.commands.plugin import PluginCheckOptions, RuleFileCheck, run_plugin_check
from ccltune.commands.plugin_verify import PluginVerifyOptions, VerifyResult, run_plugin_verify
from ccltune.commands.report import ReportOptions, run_report
from ccltune.commands.results import MEASUREMENT_COLUMNS, Outcome, RunResult, TuneResult, ValidateResult, pandas
from ccltune.commands.sweep import run_sweep
from ccltune.commands.sweep_options import SweepOptions
from ccltune.commands.topo import TopoOptions, run_topo
from ccltune.commands.tune import TuneOptions, run_tune
from ccltune.commands.validate import ValidateOptions, run_validate
from ccltune.errors import CheckFailed, UsageError, error_for_exit_code, unknown_name
from ccltune.store import DEFAULT_DB, RUN_KINDS, Measurement, Run, Store

__all__ = ["Database", "Measurement", "RunResult", "TuneResult", "ValidateResult", "bench", "open_db", "report",
           "sweep", "tune", "validate"]


# -- the results database ------------------------------------------------------------------------------
class Database:
    """A results database, read-only (``open_db``). Each call reads it afresh, so runs stored after
    it was opened are seen."""

    def __init__(self, path: str | Path = DEFAULT_DB):
        self.path = str(path)
        with self._store():  # not there, or not a ccltune database: said now
            pass

    def __repr__(self) -> str:
        return f"Database({self.path!r})"

    def _store(self) -> Store:
        return Store(self.path, readonly=True, flag="open_db()")

    def runs(self, kind: str | None = None) -> list[Run]:
        """Every run, oldest first; ``kind``: only bench, sweep, tune, validate, ... runs."""
        if kind is not None and kind not in RUN_KINDS:
            raise unknown_name("run kind", kind, RUN_KINDS, "runs(kind=...)")
        with self._store() as st:
            return st.runs(kind)

    def run(self, run_id: int) -> Run:
        """One run (UsageError naming the runs there are when ``run_id`` is not one)."""
        with self._store() as st:
            return st.run(_run_id(run_id))

    def latest(self, kind: str | None = None) -> Run | None:
        """The newest run (of ``kind``), or None in an empty database."""
        runs = self.runs(kind)
        return runs[-1] if runs else None

    def rows(self, run_id: int) -> list[Measurement]:
        """The measurements of run ``run_id``, in the order they were stored."""
        with self._store() as st:
            return st.measurements(st.run(_run_id(run_id)).id)

    def to_pandas(self, run_ids: int | list[int] | None = None) -> Any:
        """Measurements as a pandas DataFrame with a ``run_id`` column: of ``run_ids`` (one id or a
        list), or of every run (needs pandas)."""
        pd = pandas()
        with self._store() as st:
            if run_ids is None:
                ids = [r.id for r in st.runs()]
            else:
                ids = [st.run(_run_id(i)).id for i in ([run_ids] if isinstance(run_ids, int) else run_ids)]
            rows = st.measurement_rows(ids) if ids else []
        return pd.DataFrame([{c: r[c] for c in ["run_id", *MEASUREMENT_COLUMNS]} for r in rows],
                            columns=["run_id", *MEASUREMENT_COLUMNS])


def _run_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"a run id is an integer, got {value!r}")
    return value


def open_db(path: str | Path = DEFAULT_DB) -> Database:
    """The results database at ``path`` (default ./ccltune.db), read-only: ``runs()``, ``run(id)``,
    ``latest()``, ``rows(id)``, ``to_pandas()``. UsageError when it is missing or not a ccltune
    database."""
    return Database(path)


# -- the commands ----------------------------------------------------------------------------------------
def bench(collective: str | list[str], *, verbose: bool = False, **options: Any) -> RunResult:
    """``ccltune bench``: time collectives as nccl-tests does, store the run, return it.
    ``collective``: a name (all_reduce, ...), several (a list, or comma separated), or 'all'."""
    o = from_keywords(BenchOptions, "bench", {"collective": collective, **options})
    console = _console("bench", verbose)
    caller = launch.Caller(stdout=console.out, stderr=console.err)
    return _stored("bench", run_bench(o, console, caller=caller), RunResult)


def sweep(collective: str | list[str] | None = None, *, verbose: bool = False, **options: Any) -> RunResult:
    """``ccltune sweep``: NCCL's default against forced algorithm/protocol/channel candidates, side
    by side; store the run, return it. ``collective``: None for the command's default list."""
    o = from_keywords(SweepOptions, "sweep", {"collective": collective, **options})
    console = _console("sweep", verbose)
    return _stored("sweep", run_sweep(o, console, caller=launch.Caller(stdout=console.out, stderr=console.err)),
                   RunResult)


def tune(*, verbose: bool = False, **options: Any) -> TuneResult:
    """``ccltune tune``: derive rules from the sweep and import runs in ``db``, write them to ``out``
    (atomically), store a tune run; return it with the rules' text."""
    return run_tune(from_keywords(TuneOptions, "tune", options), _console("tune", verbose))


def validate(rules: str | Path, collective: str | list[str] | None = None, *, verbose: bool = False,
             **options: Any) -> ValidateResult:
    """``ccltune validate``: NCCL's default against the tuner plugin loaded with ``rules``,
    interleaved; return the verdict (PASS or FAIL) with every size's judgement. Needs the nccl engine."""
    o = from_keywords(ValidateOptions, "validate", {"rules": str(rules), "collective": collective, **options})
    console = _console("validate", verbose)
    ran = run_validate(o, console, caller=launch.Caller(stdout=console.out, stderr=console.err))
    if ran.exit_code == CheckFailed.exit_code and ran.run_id is not None:  # a FAIL verdict: the answer
        ran = dataclasses.replace(ran, exit_code=0)
    return _stored("validate", ran, ValidateResult)


def report(*, verbose: bool = False, **options: Any) -> Path:
    """``ccltune report``: write the HTML page of the runs in ``db``; return its path."""
    return run_report(from_keywords(ReportOptions, "report", options), _console("report", verbose)).path


# -- how a call runs its command ---------------------------------------------------------------------------
def _console(command: str, verbose: Any) -> Console:
    """Where the command's lines go: the terminal's streams with ``verbose``, else the ``ccltune`` logger."""
    if not isinstance(verbose, bool):
        raise UsageError(f"ccltune.{command}(verbose={verbose!r}): True or False")
    return terminal() if verbose else Console()


def _stored(command: str, ran: Outcome, cls: Any) -> Any:
    """The run ``ran`` stored, read back; a non-zero exit code raised as its error (with the run)."""
    if ran.exit_code:
        message = "; ".join(ran.errors) if ran.errors else (
            f"ccltune {command} exited with code {ran.exit_code}" + (f": {ran.last_words}" if ran.last_words else ""))
        error = error_for_exit_code(ran.exit_code, message)
        error.run_id = ran.run_id
        raise error
    if ran.run_id is None:
        raise CheckFailed(f"ccltune {command} stored no run in {ran.db}")
    return cls.read(ran.db, ran.run_id)


# -- help(): each function's options ------------------------------------------------------------------------
def _document(func: Any, command: str, positionals: int, options: type) -> None:
    """Give ``func`` the command's options as its signature (real defaults) and in its docstring (each
    option's help, from its field: the text the command line's ``--help`` shows)."""
    texts = helps(options)
    params = list(inspect.signature(func).parameters.values())[:positionals]
    lines = []
    for keyword, f in keywords(options).items():
        if f.metadata.get("positional"):
            continue
        params.append(inspect.Parameter(keyword, inspect.Parameter.KEYWORD_ONLY,
                                        default=None if f.default is REQUIRED else f.default))
        flag = f.metadata.get("flag")
        lines.append(f"    {keyword} ({flag}): {texts.get(keyword, '')}" if flag else f"    {keyword}")
    params.append(inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False))
    lines.append("    verbose: True prints what the command line prints (its table on stdout, notes and warnings on "
                 "stderr); False (default) prints nothing: the lines go to the 'ccltune' logger, errors are raised")
    func.__signature__ = inspect.Signature(params)
    func.__doc__ = f"{func.__doc__}\n\n    Options (``ccltune {command} --help``; None keeps the default):\n" + "\n".join(lines)




# -- importing other tools' results, exporting a run, checking rule files ----------------------------------
# (no ``ccltune.runs()``: ``open_db(db).runs(kind)`` returns the runs ``ccltune runs`` lists, as typed records)

__all__ += ["Exported", "LinksImportResult", "RuleFileCheck", "VerifyResult", "export", "import_links",
            "import_nccl_tests", "plugin_check", "plugin_verify"]


def import_nccl_tests(files: str | Path | list[str | Path], *, verbose: bool = False, **options: Any) -> RunResult:
    """``ccltune import nccl-tests``: store nccl-tests (or rccl-tests) output, each run of each file, as one
    import run of the configuration it ran with (``algo``, ``proto``, ``channels``; None: NCCL's default);
    return it (``tune`` derives rules from it as from a sweep). ``files``: one path or a list."""
    o = from_keywords(ImportNcclTestsOptions, "import_nccl_tests", {"files": files, **options})
    return run_import_nccl_tests(o, _console("import_nccl_tests", verbose))


def import_links(source: str, file: str | Path, *, verbose: bool = False, **options: Any) -> LinksImportResult:
    """``ccltune import transferbench|nvbandwidth``: store the tool's link matrix (``source``: 'transferbench'
    or 'nvbandwidth') as a links run with its slowest-link checks; return the run, its links and findings."""
    o = from_keywords(ImportLinksOptions, "import_links", {"source": source, "file": str(file), **options})
    return run_import_links(o, _console("import_links", verbose))


def export(run: int | str, *, verbose: bool = False, **options: Any) -> Exported:
    """``ccltune export``: run ``run`` (an id, or 'latest') as a JSON document or a CSV table (``format``);
    written to ``out`` when given. Returns the text (``.text``), the run's id and the file written (``.path``);
    with ``verbose=True`` and no ``out`` the text is printed, as the command line prints it."""
    o = from_keywords(ExportOptions, "export", {"run": str(run), **options})
    return run_export(o, _console("export", verbose))


def plugin_check(file: str | Path, *, verbose: bool = False, **options: Any) -> RuleFileCheck:
    """``ccltune plugin check``: read a rule file as the tuner plugin does; the number of rules (and with
    ``platform=["gpu=NVIDIA H200", ...]``, how many apply there). A line the plugin would skip raises
    ``RuleFileError`` naming how many (``verbose=True`` prints each, FILE:LINE: reason)."""
    o = from_keywords(PluginCheckOptions, "plugin_check", {"file": str(file), **options})
    return run_plugin_check(o, _console("plugin_check", verbose))


def plugin_verify(rules: str | Path, collective: str | list[str] | None = None, *, verbose: bool = False,
                  **options: Any) -> VerifyResult:
    """``ccltune plugin verify``: whether NCCL ran what the rule file says, from a TUNING log (``from_log``),
    the profiler plugin's files (``profile``) or a bench run it starts on this machine's GPUs. Returns every
    check; a rule NCCL did not follow is the answer (``verdict`` FAIL), not an error."""
    o = from_keywords(PluginVerifyOptions, "plugin_verify", {"file": str(rules), "collective": collective, **options})
    return run_plugin_verify(o, _console("plugin_verify", verbose))




# The diagnose commands (links, topo, doctor, check) ------------------------------------------------
__all__ += ["CheckResult", "Diagnosis", "LinksResult", "TopoResult", "check", "doctor", "links", "topo"]


def links(*, verbose: bool = False, **options: Any) -> LinksResult:
    """``ccltune links``: every GPU pair's bandwidth and latency, measured from this process (it opens the
    GPUs; WAIVED without 2), analysed for the slowest link; stored as a links run. ``run=N``: stored links
    run N analysed again instead, nothing stored. Returns the checks, ``rows`` and ``summary``."""
    return run_links(from_keywords(LinksOptions, "links", options), _console("links", verbose))


def topo(*, verbose: bool = False, **options: Any) -> TopoResult:
    """``ccltune topo``: this host's GPUs and how each pair is connected (or saved amd-smi outputs read with
    ``from_amd_smi=[...]``), and its checks; stored as a topo run. Returns them with the ``topology``."""
    return run_topo(from_keywords(TopoOptions, "topo", options), _console("topo", verbose))


def doctor(*, verbose: bool = False, **options: Any) -> Diagnosis:
    """``ccltune doctor``: host, environment and NCCL transport checks (a short all_reduce under torchrun
    unless ``no_run=True``; ``nccl_log=PATH``: only that log read), each with evidence and a fix; stored as
    a doctor run. A FAIL is returned (``status``), not raised: it is the answer."""
    return run_doctor(from_keywords(DoctorOptions, "doctor", options), _console("doctor", verbose))


def check(*, verbose: bool = False, **options: Any) -> CheckResult:
    """``ccltune check``: hold all_reduce (measured now, or ``run=N``'s, or a bench JSON's: ``from_json=``)
    to a platform profile's gates; stored as a check run. A FAIL is returned (``status``), not raised."""
    return run_check(from_keywords(CheckOptions, "check", options), _console("check", verbose))


# Every function's signature and docstring from its command's options: (function, the command whose
# --help documents it, its positionals, its options)
_DOCUMENTED: list[tuple[Any, str, int, type]] = [
    (bench, "bench", 1, BenchOptions), (sweep, "sweep", 1, SweepOptions), (tune, "tune", 0, TuneOptions),
    (validate, "validate", 2, ValidateOptions), (report, "report", 0, ReportOptions),
    (import_nccl_tests, "import nccl-tests", 1, ImportNcclTestsOptions),
    (import_links, "import nvbandwidth", 2, ImportLinksOptions), (export, "export", 1, ExportOptions),
    (plugin_check, "plugin check", 1, PluginCheckOptions), (plugin_verify, "plugin verify", 2, PluginVerifyOptions),
    (links, "links", 0, LinksOptions), (topo, "topo", 0, TopoOptions), (doctor, "doctor", 0, DoctorOptions),
    (check, "check", 0, CheckOptions),
]
for _func, _command, _n, _options in _DOCUMENTED:
    _document(_func, _command, _n, _options)
