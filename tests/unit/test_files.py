"""The one atomic writer every output file goes through."""

from __future__ import annotations

import stat

import pytest

from ccltune.errors import UsageError
from ccltune.files import write_text


def test_replaces_whole_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old old old old\n")
    write_text(target, "new\n", flag="--json")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_mode_is_applied(tmp_path):
    target = tmp_path / "r.html"
    write_text(target, "<html></html>", flag="--out", mode=0o644)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_missing_folder_names_the_flag_and_the_path(tmp_path):
    with pytest.raises(UsageError, match=r"--junit: folder of '.*/nope/v.xml' does not exist"):
        write_text(tmp_path / "nope" / "v.xml", "x", flag="--junit")


def test_an_unwritable_target_is_a_clear_error_and_the_old_file_survives(tmp_path):
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    with pytest.raises(UsageError, match="--out: .*dir-in-the-way. is a folder"):
        write_text(target, "x", flag="--out")
    assert target.is_dir() and [p.name for p in tmp_path.iterdir()] == ["dir-in-the-way"]
