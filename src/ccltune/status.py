"""Every status word ccltune writes, one Enum per concept, their text here and nowhere else.

The members are strings (``Verdict.PASS == "PASS"``): the database and JSON files hold the same text
as before the words were types, so files written by any ccltune read back as members
(``RowStatus("ok")``), and a member prints, formats and serialises (json, sqlite3) as its text.

- :class:`Verdict`: a check's or a comparison's outcome (doctor, check, links, validate, replay, the
  JUnit file): PASS / WARN / FAIL / WAIVED / ERROR; FAIL and ERROR fail the command.
- :class:`RowStatus`: one measured row (``measurements.status``): ok, or why it holds no time.
- :class:`RunStatus`: a run (``runs.status``): running until it ends complete, interrupted or failed.
- :class:`RuleCheck`: ``plugin verify``'s word per call: did NCCL run what the rule says.
- :class:`PointStatus`: a point of ``tune --workload``: a rule, default kept, or why neither.
- :class:`ArmStatus`: an arm of ``ccltune ab`` against default: faster, slower, no difference...
- :class:`SampleStatus`: one run of the user's job under ``ccltune ab`` (``ab_samples.status``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TypeVar

W = TypeVar("W", bound="Word")


class Word(str, enum.Enum):
    """A status word: a ``str`` whose ``str()`` and ``format()`` are its text (as Python 3.11's
    ``enum.StrEnum``; ccltune still runs on 3.10)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)

    @classmethod
    def parse(cls: type[W], text: object, where: str) -> W:
        """The member spelled ``text``; a ValueError naming the text, ``where`` it came from and the
        valid words otherwise (a file written by hand or by another program)."""
        try:
            return cls(text)
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise ValueError(f"{where}: {cls.__name__.lower()} {text!r} is not one of {valid}") from None


class Verdict(Word):
    """The outcome of a check or a comparison, the same in text, JSON, the database and exit codes:

    ======== ================================================ =========
    status   meaning                                          exit code
    ======== ================================================ =========
    PASS     checked, nothing to change                       0
    WARN     checked, worth changing; results still valid     0
    FAIL     checked, wrong: a gate missed, a link broken     1
    WAIVED   could not be checked here (no GPU, no access)    0
    ERROR    the check itself broke (a crash, bad input)      1
    ======== ================================================ =========
    """

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    WAIVED = "WAIVED"
    ERROR = "ERROR"

    @property
    def failing(self) -> bool:
        """Whether this verdict fails the command (exit code 1)."""
        return self in (Verdict.FAIL, Verdict.ERROR)


# worst first: the overall verdict of a list is the first of these it holds
VERDICT_SEVERITY = (Verdict.ERROR, Verdict.FAIL, Verdict.WARN, Verdict.PASS, Verdict.WAIVED)


class RowStatus(Word):
    """One measured row: ``OK`` holds a time; the others say why it holds none (``note`` says more)."""

    OK = "ok"
    SKIPPED = "skipped"          # could not run here this time (out of memory)
    WAIVED = "waived"            # not asked of this configuration (a placement not requested, a size it cannot do)
    ERROR = "error"              # ran, but its figure is no measurement (nccl-tests' N/A, 0 or #wrong)
    UNAVAILABLE = "unavailable"  # the engine cannot run it


class RunStatus(Word):
    """A run's status: ``RUNNING`` while its command runs, then one of the three ends. ``ABANDONED``
    is never stored: it is how a run stored as running reads when its processes are all gone."""

    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    ABANDONED = "abandoned"


# the statuses a run is stored with (ABANDONED is only ever shown)
STORED_RUN_STATUSES = (RunStatus.RUNNING, RunStatus.COMPLETE, RunStatus.INTERRUPTED, RunStatus.FAILED)


class RuleCheck(Word):
    """``plugin verify``: for one call of the log, whether NCCL ran what the rule file says; per rule from
    the profiler's record (ab.fired), also whether any call fell to it."""

    APPLIED = "APPLIED"
    NOT_APPLIED = "NOT APPLIED"   # fails the command
    NO_RULE = "NO RULE"
    NEVER_FIRED = "NEVER FIRED"   # the profiler saw no call the rule decided (ab.fired)


class PointStatus(Word):
    """``tune --workload``: what became of one point of the workload (``tune.weighted``, whose docstring
    says when each applies)."""

    RULE = "rule"
    DEFAULT_KEPT = "default"
    SMALL = "small"
    IN_NOISE = "in-noise"
    UNMEASURED = "unmeasured"
    UNTUNABLE = "untunable"
    ONE_RANK = "one-rank"
    AMBIGUOUS = "ambiguous"
    JOB_SLOW = "job-slow"


class ArmStatus(Word):
    """``ccltune ab``: an arm's verdict against default (``ab.judge``)."""

    FASTER = "faster"
    NO_DIFFERENCE = "no difference"
    SLOWER = "slower"
    FAILED = "failed"        # every run of the arm failed
    NOT_RUN = "not run"      # no run of the arm finished before ab stopped (Ctrl-C, --budget)
    BASELINE = "baseline"    # the default arm itself


class SampleStatus(Word):
    """One run of the user's job under ``ccltune ab``: its metric was read, or it failed."""

    OK = "ok"
    FAILED = "failed"


_FAILING = frozenset({Verdict.FAIL, Verdict.ERROR, RuleCheck.NOT_APPLIED})


def failing(statuses: Iterable[str]) -> bool:
    """Whether any of ``statuses`` (verdicts or rule checks) fails the command."""
    return any(s in _FAILING for s in statuses)
