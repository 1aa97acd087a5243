"""What the commands share beneath both front ends: where their output goes (``Console``), the run ids a
user names, and the files a command writes, checked before it reads or measures anything."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from ccltune import files
from ccltune.errors import UsageError
from ccltune.store import check_path

LOG = logging.getLogger("ccltune")
LOG.addHandler(logging.NullHandler())  # a library says nothing unless its caller adds a handler (not even warnings)


@dataclass(frozen=True)
class Console:
    """Where a command's text goes: ``out`` its table and lines (stdout on the command line), ``err`` its
    notes and warnings (stderr). None: to the ``ccltune`` logger instead (INFO and WARNING), so the Python API
    prints nothing unless asked (``verbose=True``) and a caller may still take the lines from the logger."""

    out: TextIO | None = None
    err: TextIO | None = None

    def say(self, line: str) -> None:
        if self.out is not None:
            print(line, file=self.out, flush=True)
        else:
            LOG.info(line)

    def note(self, line: str) -> None:
        """What the user may like to know beside the output (where the run went): ``err``, or INFO."""
        if self.err is not None:
            print(line, file=self.err, flush=True)
        else:
            LOG.info(line)

    def warn(self, line: str) -> None:
        if self.err is not None:
            print(line, file=self.err, flush=True)
        else:
            LOG.warning(line)


class _Std:
    """``sys.stdout`` or ``sys.stderr`` as it is when written to, not when the console was made: a run
    replaces stdout for its table (``measure.session``: rank 0 measures on when the reader of a pipe goes)."""

    def __init__(self, name: str):
        self.name = name

    def write(self, text: str) -> int:
        return getattr(sys, self.name).write(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()

    def isatty(self) -> bool:
        return getattr(sys, self.name).isatty()


def terminal() -> Console:
    """The command line's console: this process's stdout and stderr."""
    return Console(_Std("stdout"), _Std("stderr"))  # type: ignore[arg-type]


def parse_run_ids(text: str, flag: str = "--runs") -> list[tuple[int, int]]:
    """'3,5-7' -> [(3, 3), (5, 7)]: inclusive ranges of run ids (``Store.runs_in`` resolves them)."""
    out: list[tuple[int, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise UsageError(f"{flag}: {part!r} is not a run id or a range like 5-7 (in {text!r})") from None
        if a > b:
            raise UsageError(f"{flag}: range {part!r} runs backwards")
        out.append((a, b))
    if not out:
        raise UsageError(f"{flag}: {text!r} names no run")
    return out


# Flags (option name -> spelling) through which a command writes a file of its own
OUTPUT_FLAGS = {"json": "--json", "json_path": "--json", "junit": "--junit", "out": "--out", "save_log": "--save-log",
                "prune": "--prune"}


# Flags (option name -> spelling) naming a file the command reads: no output may be one of them
INPUT_FLAGS = {"db": "--db", "from_json": "--from-json", "nccl_log": "--nccl-log", "from_log": "--from-log",
               "rules": "RULES", "file": "RULES", "files": "FILE", "exclude_failed": "--exclude-failed",
               "profile": "--profile", "best_from": "--best-from", "workload": "--workload"}


def check_outputs(options: Any) -> None:
    """Every file the command will write, checked before it reads or measures anything
    (:func:`ccltune.files.check_output`): a name the file system can hold, its folder there, not a
    folder, not a file the command reads (the results database above all: writing it would replace
    every run stored there), and no two outputs the same file. The results database itself is
    checked too (:func:`ccltune.store.check_path`): a command that measures first must not find
    out after the measurement that it cannot store it. ``options``: a command's options or parsed
    arguments (the names above are read where it has them)."""
    if getattr(options, "db", None):
        check_path(options.db)
    taken = {("the results database (--db)" if flag == "--db" else f"the input {flag}"): getattr(options, dest)
             for dest, flag in INPUT_FLAGS.items() if getattr(options, dest, None)}
    for dest, flag in OUTPUT_FLAGS.items():
        path = getattr(options, dest, None)
        if isinstance(path, str) and path:
            files.check_output(path, flag, taken)
            taken[f"the output {flag}"] = path
