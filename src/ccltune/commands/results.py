"""What a command returns: the run it stored, read back from the results database by the id the
run itself reported (never guessed from the database afterwards)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ccltune.errors import UsageError
from ccltune.store import Measurement, Run, Store

MEASUREMENT_COLUMNS = list(Measurement.__dataclass_fields__)


def pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise UsageError("to_pandas() needs pandas, which is not installed here: pip install pandas "
                         "(or pip install 'ccltune[pandas]')") from None
    return pandas


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
        return pandas().DataFrame([m.to_record() for m in self.rows], columns=MEASUREMENT_COLUMNS)

    @classmethod
    def read(cls, db: str, run_id: int, **extra: Any) -> Any:
        """The run ``run_id`` of ``db`` and its rows, as this class."""
        with Store(db, readonly=True) as st:
            return cls(st.run(run_id), st.measurements(run_id), db, **extra)


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

    @classmethod
    def read(cls, db: str, run_id: int, **extra: Any) -> Any:
        res = RunResult.read(db, run_id)
        return cls(res.run, res.rows, db, verdict=str(res.run.summary.get("status", "")),
                   sizes=list(res.run.summary.get("sizes") or []), **extra)


@dataclass(frozen=True)
class Outcome:
    """How a command that may start a job ended where it was called: ``exit_code`` (0, or the job's:
    what the CLI exits with), ``run_id`` (the run this call stored: rank 0's own, or the one the job's
    rank 0 reported to the launcher; None on the other ranks or when none began), and what the job's
    ranks said when it failed (``errors``: their 'ccltune: error:' messages, ``last_words``: their
    last line)."""

    db: str
    run_id: int | None
    exit_code: int = 0
    errors: tuple[str, ...] = ()
    last_words: str = ""

    @classmethod
    def of_job(cls, db: str, exit_code: int, caller: Any = None) -> Outcome:
        """How a job this process started (``launching.relaunch``) ended: its exit code, and what
        ``caller`` (the Python API's ``launch.Caller``, None from the command line) learnt of it."""
        if caller is None:
            return cls(db, None, exit_code)
        return cls(db, caller.run_id, exit_code, tuple(caller.errors), caller.last_words)
