"""`ccltune plugin check` and `ccltune plugin path`, called in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccltune import tuner_plugin
from ccltune.cli import main
from ccltune.errors import EngineUnavailable
from plugin_build import LIB, REPO, make

FIXTURES = REPO / "tests" / "fixtures" / "rules"


def test_check_clean_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugin", "check", str(FIXTURES / "basic.conf")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["8 rules loaded, 0 lines rejected"]


def test_check_bad_lines(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "bad_lines.conf")
    assert main(["plugin", "check", path]) == 1  # RuleFileError, through cli.main's one exit point
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["4 rules loaded, 19 lines rejected"]
    lines = captured.err.splitlines()  # the rejected lines go to stderr, one FILE:LINE: reason each
    assert len(lines) == 20
    assert lines[0] == (f"{path}:3: unknown collective 'alltoall' "
                        "(valid: broadcast, reduce, allgather, reducescatter, allreduce)")
    assert f"{path}:6: line longer than 1024 bytes" in lines
    assert f"{path}:20: embedded NUL byte" in lines
    assert lines[-1] == f"ccltune: error: {path}: 19 lines rejected (the plugin skips them)"


def test_check_bad_lines_raises_the_typed_error() -> None:
    from ccltune.cli import build_parser, run_command
    from ccltune.errors import RuleFileError

    args = build_parser().parse_args(["plugin", "check", str(FIXTURES / "bad_lines.conf")])
    with pytest.raises(RuleFileError, match="19 lines rejected"):
        run_command(args)


def test_check_with_platform(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "platforms.conf")
    assert main(["plugin", "check", path, "--platform", "gpu=NVIDIA H100 PCIe"]) == 1  # line 13 is bad
    captured = capsys.readouterr()
    out = captured.out
    assert "platforms.conf:13: platform: unknown key 'cores'" in captured.err
    assert "10 rules loaded, 1 lines rejected" in out
    assert "5 rules apply to platform gpu=NVIDIA H100 PCIe" in out  # 1 before sections, 2 H100, 2 after "*"
    assert main(["plugin", "check", path, "--platform", "color=red"]) == 2
    assert "--platform: unknown key 'color'" in capsys.readouterr().err


@pytest.mark.parametrize("pairs, needle", [
    (["nps=NPS3"], "--platform: nps 'NPS3' is not one of NPS1, NPS2, NPS4"),
    (["partition=abc"], "--platform: partition 'abc' is not one of SPX"),
    (["gpu=a", "gpu=b"], "--platform: duplicate key 'gpu'"),
    (["nvlranks=0"], "--platform: nvlranks '0' is not a positive integer"),
    (["h200"], "--platform expects key=value, got 'h200'"),
])
def test_platform_facts_are_checked_as_a_rule_files_platform_field(capsys, pairs, needle) -> None:
    # a value the rule parser refuses can match no rule: said, not counted as "0 rules apply"
    argv = ["plugin", "check", str(FIXTURES / "platforms.conf")]
    for p in pairs:
        argv += ["--platform", p]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_check_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugin", "check", str(tmp_path / "nope.conf")]) == 2
    err = capsys.readouterr().err
    assert "FILE: '" in err and "nope.conf' does not exist" in err


def test_plugin_path_finds_make_build(capsys: pytest.CaptureFixture[str]) -> None:
    make(REPO / "plugin" / "build")  # what `make -C plugin` produces in a checkout
    try:
        lib = tuner_plugin.library_path()
    except EngineUnavailable as exc:  # an installed package without the checkout's build
        pytest.skip(str(exc))
    assert lib.is_absolute() and lib.name == LIB and lib.is_file()
    assert main(["plugin", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(lib)


def test_plugin_path_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ccltune import builtlib, profiler_plugin

    monkeypatch.setattr(builtlib, "candidates", lambda name, folder: [tmp_path / name])
    with pytest.raises(EngineUnavailable, match="make -C plugin"):
        tuner_plugin.library_path()
    assert main(["plugin", "path"]) == EngineUnavailable.exit_code
    with pytest.raises(EngineUnavailable, match="profiler plugin is not built .*make -C profiler"):
        profiler_plugin.library_path()
    assert main(["plugin", "path", "--profiler"]) == EngineUnavailable.exit_code


def test_plugin_path_profiler_finds_make_build(capsys: pytest.CaptureFixture[str]) -> None:
    from ccltune import profiler_plugin
    from plugin_build import PROFILER, PROFILER_LIB

    make(PROFILER / "build", folder=PROFILER)  # what `make -C profiler` produces in a checkout
    try:
        lib = profiler_plugin.library_path()
    except EngineUnavailable as exc:  # an installed package without the checkout's build
        pytest.skip(str(exc))
    assert lib.is_absolute() and lib.name == PROFILER_LIB and lib.is_file()
    assert main(["plugin", "path", "--profiler"]) == 0
    assert capsys.readouterr().out.strip() == str(lib)
    assert profiler_plugin.nccl_env("prof") == {"NCCL_PROFILER_PLUGIN": str(lib),
                                                "CCLTUNE_PROFILE": str(Path("prof").resolve())}
