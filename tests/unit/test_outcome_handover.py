"""A worker started by `--nproc` hands a failed check's exit code to the parent instead of exiting
non-zero, so torchrun prints no failure report of its own under the check's message."""

from ccltune import launch


def test_a_worker_of_ccltunes_torchrun_writes_the_code_and_exits_0(tmp_path, monkeypatch):
    path = tmp_path / "outcome"
    monkeypatch.setenv(launch.OUTCOME_ENV, str(path))
    assert launch.hand_over(1) == 0
    assert path.read_text() == "1"
    assert launch.outcome_code(str(path), 0) == 1


def test_without_the_parent_the_code_is_the_exit_status(monkeypatch):
    monkeypatch.delenv(launch.OUTCOME_ENV, raising=False)
    assert launch.hand_over(1) == 1


def test_a_failing_worker_or_an_empty_outcome_keeps_torchruns_code(tmp_path):
    path = tmp_path / "outcome"
    path.write_text("")
    assert launch.outcome_code(str(path), 0) == 0  # nobody handed a code over: the job passed
    path.write_text("1")
    assert launch.outcome_code(str(path), 3) == 3  # a worker failed for real: torchrun's code wins
    assert launch.outcome_code(str(tmp_path / "missing"), 0) == 0


def test_main_hands_over_a_failed_check(tmp_path, monkeypatch, capsys):
    from ccltune import cli
    from ccltune.errors import CheckFailed

    def failing(args):
        raise CheckFailed("validate: FAIL: rules in r.conf made some size slower (see above)")

    from ccltune.cli import runs

    monkeypatch.setattr(runs, "main", failing)  # a command whose check fails
    path = tmp_path / "outcome"
    monkeypatch.setenv(launch.OUTCOME_ENV, str(path))
    assert cli.main(["runs"]) == 0 and path.read_text() == "1"
    assert "FAIL" in capsys.readouterr().err
    monkeypatch.delenv(launch.OUTCOME_ENV)
    assert cli.main(["runs"]) == 1
