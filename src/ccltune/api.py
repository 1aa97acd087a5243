"""ccltune from Python: each command that measures or derives (bench, sweep, tune, validate, report)
as a function, and the results database as typed objects (docs/api.md).

A function runs the command itself, not a copy of it: its keyword arguments are the command's
options (the same defaults, read from the command's parser), turned into the command line a user
would type, parsed by the CLI's own parser and run by ``ccltune.cli.run_command``, so the checks,
the launch (torchrun for several processes) and the run's lifecycle are the CLI's. Each call starts
a job of its own, so the calling process (a notebook's) never joins a process group; only one gloo
process, which joins none, runs in the caller. What the run stored is read back from the database
and returned (run, status, rows). A bad argument raises ``ccltune.errors.UsageError`` naming it;
what the CLI would exit non-zero for raises the ``ccltune.errors`` type of that exit code, with
``run_id`` set when a run was stored.
"""

from __future__ import annotations

import argparse
import inspect
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccltune.errors import CcltuneError, CheckFailed, UsageError, error_for_exit_code, unknown_name
from ccltune.store import DEFAULT_DB, RUN_KINDS, Measurement, Run, Store

# keywords spelled apart where the command's option runs words together (-b/--minbytes: min_bytes)
_RENAMED = {"minbytes": "min_bytes", "maxbytes": "max_bytes", "stepbytes": "step_bytes", "stepfactor": "step_factor"}
_LAUNCHING = ("bench", "sweep", "validate")   # the commands that start ranks (and store their run)


# -- results -----------------------------------------------------------------------------------------
@dataclass
class RunResult:
    """A run one call stored, read back from the results database ``db``: ``run`` (its record:
    ``id``, ``kind``, ``status``, ``env``, ``args``, ``summary``) and ``rows``, one
    ``ccltune.store.Measurement`` per measured (or waived) point: ``size_bytes``, ``time_us``,
    ``algbw_gbps``, ``busbw_gbps``, ``wrong``, ``status``, ``in_place``, ``config``..."""

    run: Run
    rows: list[Measurement]
    db: str

    @property
    def run_id(self) -> int:
        return self.run.id

    @property
    def status(self) -> str:
        """complete, interrupted or failed (the run's, as ``ccltune runs`` shows it)."""
        return self.run.status

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame, one column per Measurement field (needs pandas)."""
        return _pandas().DataFrame([m.to_record() for m in self.rows], columns=_MEASUREMENT_COLUMNS)


@dataclass
class TuneResult(RunResult):
    """A tune run: ``rules`` is the rule file's text (written to ``rules_path``, and stored)."""

    rules_path: str = ""
    rules: str = ""


@dataclass
class ValidateResult(RunResult):
    """A validate run: ``verdict`` PASS or FAIL (a FAIL is returned, not raised: it is the answer),
    ``sizes`` one dict per size (collective, size_bytes, status, speedup, noise, reason...)."""

    verdict: str = ""
    sizes: list[dict[str, Any]] = field(default_factory=list)


_MEASUREMENT_COLUMNS = list(Measurement.__dataclass_fields__)


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise UsageError("to_pandas() needs pandas, which is not installed here: pip install pandas "
                         "(or pip install 'ccltune[pandas]')") from None
    return pandas


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
        pd = _pandas()
        with self._store() as st:
            if run_ids is None:
                ids = [r.id for r in st.runs()]
            else:
                ids = [st.run(_run_id(i)).id for i in ([run_ids] if isinstance(run_ids, int) else run_ids)]
            rows = st.measurement_rows(ids) if ids else []
        return pd.DataFrame([{c: r[c] for c in ["run_id", *_MEASUREMENT_COLUMNS]} for r in rows],
                            columns=["run_id", *_MEASUREMENT_COLUMNS])


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
def bench(collective: str | list[str], **options: Any) -> RunResult:
    """``ccltune bench``: time collectives as nccl-tests does, store the run, return it.
    ``collective``: a name (all_reduce, ...), several (a list, or comma separated), or 'all'."""
    return _run("bench", [collective], options)


def sweep(collective: str | list[str] | None = None, **options: Any) -> RunResult:
    """``ccltune sweep``: NCCL's default against forced algorithm/protocol/channel candidates, side
    by side; store the run, return it. ``collective``: None for the command's default list."""
    return _run("sweep", [] if collective is None else [collective], options)


def tune(**options: Any) -> TuneResult:
    """``ccltune tune``: derive rules from the sweep and import runs in ``db``, write them to ``out``
    (atomically), store a tune run; return it with the rules' text."""
    return _run("tune", [], options)  # type: ignore[return-value]


def validate(rules: str | Path, collective: str | list[str] | None = None, **options: Any) -> ValidateResult:
    """``ccltune validate``: NCCL's default against the tuner plugin loaded with ``rules``,
    interleaved; return the verdict (PASS or FAIL) with every size's judgement. Needs the nccl engine."""
    return _run("validate", [str(rules)] + ([] if collective is None else [collective]), options)  # type: ignore[return-value]


def report(**options: Any) -> Path:
    """``ccltune report``: write the HTML page of the runs in ``db``; return its path."""
    args, _ = _call("report", [], options)
    return Path(args.out)


# -- how a call becomes the command --------------------------------------------------------------------
_PARSERS: dict[str, argparse.ArgumentParser] = {}


def _parser(command: str) -> argparse.ArgumentParser:
    """The CLI's parser of ``command`` (its options, defaults, help)."""
    if command not in _PARSERS:
        from ccltune.cli import build_parser

        root = build_parser()
        sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
        _PARSERS[""] = root
        _PARSERS.update(sub.choices)
    return _PARSERS[command]


def _options(command: str) -> dict[str, argparse.Action]:
    """keyword -> the option it sets (its dest, or the spelled-apart name of ``_RENAMED``)."""
    out: dict[str, argparse.Action] = {}
    for a in _parser(command)._actions:
        if not a.option_strings or a.dest == "help" or a.default is argparse.SUPPRESS:
            continue
        out.setdefault(_RENAMED.get(a.dest, a.dest), a)
    return out


def _flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def _text(keyword: str, value: Any, command: str) -> str:
    """One value as the command line spells it; a value of the wrong kind is refused, named."""
    if isinstance(value, (str, int, float, Path)) and not isinstance(value, bool):
        text = str(value)
        if text.startswith("-") and not _number(text):
            raise UsageError(f"ccltune.{command}({keyword}={value!r}): a value may not start with '-'")
        return text
    raise UsageError(f"ccltune.{command}({keyword}=...) takes a string or a number, got {value!r}")


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _option_argv(command: str, keyword: str, action: argparse.Action, value: Any) -> list[str]:
    """``keyword=value`` as the command's flag (checked by the option's own type and choices)."""
    where = f"ccltune.{command}({keyword}={value!r})"
    if action.nargs == 0:  # a switch (--no-graph, --symmetric)
        if not isinstance(value, bool):
            raise UsageError(f"{where}: True or False")
        return [_flag(action)] if value != action.default else []
    if getattr(action, "comma_list", False) and isinstance(value, (list, tuple)):  # --algos ring,tree
        value = ",".join(_text(keyword, v, command) for v in value)
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    want = action.nargs if isinstance(action.nargs, int) else None
    if isinstance(action, argparse._AppendAction) or want:
        if want and len(values) != want:
            raise UsageError(f"{where}: {want} values")
    elif len(values) != 1:
        raise UsageError(f"{where}: one value, not a list")
    texts = [_text(keyword, v, command) for v in values]
    for text in texts:
        try:
            typed = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise UsageError(f"{where}: {exc}") from None
        if action.choices is not None and typed not in action.choices:
            raise unknown_name(keyword, text, [str(c) for c in action.choices], f"ccltune.{command}()")
    if want:
        return [_flag(action), *texts]
    return [f"{_flag(action)}={t}" for t in texts]


def _positional(command: str, name: str, value: Any) -> list[str]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return [_text(name, v, command) for v in values]


def command_argv(command: str, positionals: list[Any], options: dict[str, Any]) -> list[str]:
    """The command line a call stands for: ``bench("all_reduce", nproc=2, min_bytes="1K")`` ->
    ``['bench', 'all_reduce', '--nproc=2', '--minbytes=1K']``. Options left at None keep their default."""
    known = _options(command)
    names = [a.dest for a in _parser(command)._actions if not a.option_strings]
    argv = [command, *(t for name, p in zip(names, positionals) for t in _positional(command, name, p))]
    for keyword, value in options.items():
        if keyword not in known:
            raise unknown_name("keyword argument", keyword, [*known, "quiet"], f"ccltune.{command}()")
        if value is not None:
            argv += _option_argv(command, keyword, known[keyword], value)
    missing = [k for k, a in known.items() if a.required and options.get(k) is None]
    if missing:
        raise UsageError(f"ccltune.{command}() needs {', '.join(f'{k}=...' for k in missing)}")
    return argv


def _parse(argv: list[str]) -> argparse.Namespace:
    """The CLI's parser on ``argv``; its own refusals (already checked above, as a rule) as UsageError."""
    err = io.StringIO()
    saved = sys.stderr
    sys.stderr = err
    try:
        args = _parser("").parse_args(argv)
    except SystemExit:
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        raise UsageError(lines[-1].removeprefix("ccltune: error: ") if lines else f"cannot parse {argv}") from None
    finally:
        sys.stderr = saved
    args._argv = argv
    return args


def _call(command: str, positionals: list[Any], options: dict[str, Any]) -> tuple[argparse.Namespace, int | None]:
    """Run ``command`` as ``ccltune.cli.run_command`` runs it for the command line: (its arguments, the
    run it stored). What the CLI would exit non-zero for is raised, except validate's FAIL verdict."""
    from ccltune import launch
    from ccltune.cli import run_command

    quiet = options.pop("quiet", False)
    if not isinstance(quiet, bool):
        raise UsageError(f"ccltune.{command}(quiet={quiet!r}): True or False")
    args = _parse(command_argv(command, positionals, options))
    db = getattr(args, "db", None)
    before = _last_run_id(db)
    shown, caller = sys.stdout, None
    if command in _LAUNCHING:
        caller = args._caller = launch.Caller(stdout=None if quiet else shown, stderr=sys.stderr)
    if quiet:
        sys.stdout = io.StringIO()
    try:
        code, error = run_command(args), None
    except CcltuneError as exc:
        code, error = exc.exit_code, exc
    finally:
        sys.stdout = shown  # as the caller had it (a run wraps stdout for its table)
    run_id = _new_run_id(db, command, before, caller)
    if code and not (command == "validate" and code == CheckFailed.exit_code and run_id is not None):
        if error is None:
            message = "; ".join(caller.errors) if caller and caller.errors else (
                f"ccltune {command} exited with code {code}" + (f": {caller.last_words}" if caller and caller.last_words else ""))
            error = error_for_exit_code(code, message)
        error.run_id = run_id
        raise error
    return args, run_id


def _run(command: str, positionals: list[Any], options: dict[str, Any]) -> RunResult:
    """A command that stores a run: the run, read back."""
    args, run_id = _call(command, positionals, options)
    if run_id is None:
        raise CheckFailed(f"ccltune {command} stored no run in {args.db}")
    return _result(command, args.db, run_id, args)


def _last_run_id(db: str | None) -> int:
    if not db or not Path(db).is_file():
        return 0
    try:
        with Store(db, readonly=True) as st:
            run = st.latest_run()
    except UsageError:
        return 0
    return run.id if run else 0


def _new_run_id(db: str | None, command: str, before: int, caller: Any) -> int | None:
    """The run this call stored: the one its job's rank 0 began, or (in this process) the newest run
    of its kind stored since the call began."""
    if caller is not None and caller.run_id is not None:
        return caller.run_id
    if not db or not Path(db).is_file():
        return None
    with Store(db, readonly=True) as st:
        mine = [r.id for r in st.runs(command) if r.id > before]
    return mine[-1] if mine else None


def _result(command: str, db: str, run_id: int, args: argparse.Namespace) -> RunResult:
    with Store(db, readonly=True) as st:
        run, rows = st.run(run_id), st.measurements(run_id)
        artifacts = st.artifacts(run_id) if command == "tune" else {}
    if command == "tune":
        return TuneResult(run, rows, db, rules_path=args.out, rules=artifacts.get("rules", ""))
    if command == "validate":
        return ValidateResult(run, rows, db, verdict=str(run.summary.get("status", "")),
                              sizes=list(run.summary.get("sizes") or []))
    return RunResult(run, rows, db)


# -- help(): each function's options, from the command's parser ------------------------------------------
def _document(func: Any, command: str, positionals: int) -> None:
    """Give ``func`` the command's options as its signature (real defaults) and in its docstring."""
    params = list(inspect.signature(func).parameters.values())[:positionals]
    lines = []
    for keyword, action in _options(command).items():
        default = None if action.required else action.default
        params.append(inspect.Parameter(keyword, inspect.Parameter.KEYWORD_ONLY, default=default))
        text = (action.help or "").replace("%(default)s", str(action.default)).replace("%%", "%")
        lines.append(f"    {keyword} ({_flag(action)}): {text}")
    params.append(inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=False))
    lines.append("    quiet: True leaves out the command's stdout (the table, notes); progress and warnings still go "
                 "to stderr, errors are still raised")
    func.__signature__ = inspect.Signature(params)
    func.__doc__ = f"{func.__doc__}\n\n    Options (``ccltune {command} --help``; None keeps the default):\n" + "\n".join(lines)


for _func, _command, _n in ((bench, "bench", 1), (sweep, "sweep", 1), (tune, "tune", 0), (validate, "validate", 2),
                            (report, "report", 0)):
    _document(_func, _command, _n)
