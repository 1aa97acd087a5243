"""Typed errors and exit codes. Library code raises these; only ``ccltune.cli.main`` turns them into
messages and exit codes (one table, EXIT_CODES; a verdict's status maps through ``verdict_exit_code``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ccltune.status import failing


class CcltuneError(Exception):
    """Base class: a failure the user can act on. ``exit_code`` is what the CLI returns; ``run_id``,
    when the Python API knows it, the run the failure left in the results database (its rows kept)."""

    exit_code = 1
    run_id: int | None = None


class UsageError(CcltuneError):
    """Bad input from the user: a flag value, a name, a file. Nothing was measured."""

    exit_code = 2


class RuleFileError(CcltuneError):
    """A rule file has lines that were rejected (``ccltune plugin check``)."""

    exit_code = 1


class DataError(CcltuneError):
    """The results database lacks what an analysis needs (no defaults, mixed platforms...)."""

    exit_code = 1


class DistError(CcltuneError):
    """A distributed failure: a rank died, hung or disagreed. Names rank and host."""

    exit_code = 3


class EngineUnavailable(CcltuneError):
    """An engine cannot run here (no GPU, no NCCL library...)."""

    exit_code = 4


class StoreError(CcltuneError):
    """The results database could not be written mid-run (disk full, locked by another process past the
    30 s wait): one line naming the file, the cause and the rows of the run kept."""

    exit_code = 5


class Interrupted(CcltuneError):
    """Ctrl-C: what was measured is kept, the run is marked interrupted."""

    exit_code = 130


class CheckFailed(CcltuneError):
    """Measured results are wrong or a gate failed (``#wrong`` > 0, a FAIL verdict)."""

    exit_code = 1


class MinBandwidthFailed(CheckFailed):
    """NCCL_TESTS_MIN_BW not met. Exit status 7, as nccl-tests exits (testNumResults: its main
    returns run()'s result, and run() returns testNumResults when the average bus bandwidth is below
    0.9 x NCCL_TESTS_MIN_BW or any value was wrong; the real 2.19.6 capture exited 7)."""

    exit_code = 7


# Every command's exit codes, in one table (scripts/gen_cli_docs.py prints it in docs/cli.md)
EXIT_CODES = {
    0: "success: the command ran and every check passed (PASS, WARN or WAIVED)",
    CheckFailed.exit_code: "a check failed (a FAIL or ERROR verdict, #wrong > 0, rejected rule lines), "
                           "or the data needed is missing",
    UsageError.exit_code: "bad input (a flag, a name, a file); nothing was measured",
    DistError.exit_code: "a rank died, hung or could not join (the message names the rank and host)",
    EngineUnavailable.exit_code: "the engine cannot run here (no GPU, no NCCL library, no plugin)",
    StoreError.exit_code: "the results database could not be written (disk full, locked by another process "
                          "for more than 30 s); the rows stored before are kept",
    MinBandwidthFailed.exit_code: "NCCL_TESTS_MIN_BW not met by the average bus bandwidth (as nccl-tests exits)",
    Interrupted.exit_code: "interrupted (Ctrl-C, SIGTERM, SIGHUP): every row measured is kept, "
                           "the run is marked interrupted",
}

def error_for_exit_code(code: int, message: str) -> CcltuneError:
    """The error a command's exit code stands for (a job's, read by the Python API), saying ``message``."""
    classes = (MinBandwidthFailed, Interrupted, EngineUnavailable, StoreError, DistError, UsageError, CheckFailed)
    cls = next((c for c in classes if c.exit_code == code), DistError)  # another code: a rank died
    return cls(message)


def verdict_exit_code(statuses: Iterable[str]) -> int:
    """The exit code of a command whose result is a verdict (``status.Verdict``s, or ``plugin verify``'s
    ``status.RuleCheck``s): 1 when any status failed, else 0."""
    return CheckFailed.exit_code if failing(statuses) else 0


def did_you_mean(value: str, valid: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix for an unknown name, or '' when nothing is close."""
    close = difflib.get_close_matches(value, list(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(kind: str, value: str, valid: Iterable[str], where: str = "") -> UsageError:
    """UsageError for an unknown collective/datatype/op/...: names the value and the valid ones."""
    valid = list(valid)
    place = f" in {where}" if where else ""
    return UsageError(
        f"unknown {kind} {value!r}{place}{did_you_mean(value, valid)}; valid: {', '.join(valid)}"
    )
