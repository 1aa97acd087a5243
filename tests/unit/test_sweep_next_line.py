"""The line a sweep ends with names the tune command that reads the run (issue 28): a sweep made under load
(what `sweep --workload` does by default when the job is far slower than idle) is read by tune only with
--under-load M, so the line says it; on the 4 x H200 loop (2026-11-27) a plain `tune` read the idle run only.
The sweep under load needs a GPU; the line and tune's parsing of it do not."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

from ccltune.commands.sweep import _next
from ccltune.commands.sweep_options import SweepOptions
from ccltune.commands.tune import TuneOptions
from cli_options import parsed


def _tune_argv(line: str) -> list[str]:
    command = line.split("next: ", 1)[1]
    argv = shlex.split(command.strip("` "))
    assert argv[0] == "ccltune"
    return argv[1:]


def test_a_sweep_under_load_names_the_load_and_the_workload_in_its_tune_line() -> None:
    o = parsed(SweepOptions, ["sweep", "--workload", "w.json", "--under-load", "8192", "--db", "s.db"])
    line = _next(o, SimpleNamespace(timed=3, rows=12, run_id=2), "nccl", workload=object())
    assert line == "; next: ccltune tune --db s.db --runs 2 --under-load 8192 --workload w.json --out rules.conf"
    t = parsed(TuneOptions, _tune_argv(line))   # tune's own parser takes the line as written
    assert (t.db, t.runs, t.under_load, t.workload, t.out) == ("s.db", "2", 8192, "w.json", "rules.conf")


def test_an_idle_sweep_names_neither() -> None:
    o = parsed(SweepOptions, ["sweep", "all_reduce", "--db", "s.db"])
    line = _next(o, SimpleNamespace(timed=3, rows=12, run_id=5), "nccl", workload=None)
    assert line == "; next: ccltune tune --db s.db --runs 5 --out rules.conf"
    assert parsed(TuneOptions, _tune_argv(line)).under_load is None
