"""ccltune ab's guard around each run of the user's job (measure/guard.py): the job gets the arm's
environment exactly and ends as it ended; kill -9 of ab is tested in test_ab_cli.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ccltune.ab import guard

SHOW = "import json, os; print(json.dumps([os.environ.get(k) for k in ('PYTHONPATH', 'LD_PRELOAD', 'ARM')]))"


def _guarded(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv, guard_env = guard.command(os.getpid(), [sys.executable, "-c", code], env)
    return subprocess.run(argv, env=guard_env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("extra", [{}, {"PYTHONPATH": "/nowhere"}, {"LD_PRELOAD": "libc.so.6", "PYTHONPATH": ""}])
def test_the_job_gets_the_arms_environment_exactly(extra):
    env = {k: v for k, v in os.environ.items() if k not in guard.HELD} | {"ARM": "a"} | extra
    _, guard_env = guard.command(os.getpid(), ["true"], env)
    assert guard.job_env(guard_env) == env
    assert "LD_PRELOAD" not in guard_env  # the guard's own interpreter: not the arm's library
    # the real guard: it starts whatever the arm's PYTHONPATH, and the job sees the arm's values
    run = _guarded(SHOW, env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [extra.get("PYTHONPATH"), extra.get("LD_PRELOAD"), "a"]


def test_the_guard_ends_as_the_job_ended():
    env = dict(os.environ)
    assert _guarded("import sys; sys.exit(7)", env).returncode == 7
    assert _guarded("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", env).returncode == -11
    bad = subprocess.run([sys.executable, "-m", "ccltune.ab.guard", "x"], capture_output=True, text=True,
                         env=guard.command(os.getpid(), [], env)[1])
    assert bad.returncode == 2 and "usage:" in bad.stderr


def test_the_guard_ends_what_the_job_left_running_when_its_top_process_exits():
    """The job's top process exits 0 and leaves a process in a session of its own holding the output: the guard
    (its subreaper) ends it and exits at once, as the job did (before: the process ran on under PID 1, and ab
    read the pipe until it ended)."""
    marker = f"ccltune-guard-leftover-{os.getpid()}"
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', "
            f"'{marker}'], start_new_session=True)")
    start = time.monotonic()
    try:
        run = _guarded(code, dict(os.environ))
        assert run.returncode == 0 and "what it left running was ended" in run.stderr
        assert time.monotonic() - start < 10
        assert not subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    finally:
        for p in subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split():
            with contextlib.suppress(OSError):
                os.kill(int(p), signal.SIGKILL)
