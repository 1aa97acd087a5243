"""The one atomic writer every output file goes through."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ccltune.errors import UsageError
from ccltune.files import check_name, check_output, read_text, shown, write_text


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


def test_a_device_or_pipe_is_written_in_place_never_replaced(tmp_path):
    before = os.stat("/dev/null")
    write_text("/dev/null", "nothing\n", flag="--out")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    r, w = os.pipe()  # /dev/stdout of a process whose output is piped
    try:
        write_text(f"/proc/self/fd/{w}", "to the reader\n", flag="--out")
        assert os.read(r, 100) == b"to the reader\n"
    finally:
        os.close(r)
        os.close(w)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="nobody reads that pipe"):  # no hang waiting for a reader
        write_text(fifo, "x", flag="--json")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_the_umask_is_respected_and_an_existing_files_mode_kept(tmp_path):
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "new.conf", "a\n", flag="--out")
        assert stat.S_IMODE((tmp_path / "new.conf").stat().st_mode) == 0o644
        os.umask(0o077)
        write_text(tmp_path / "private.conf", "a\n", flag="--out")
        assert stat.S_IMODE((tmp_path / "private.conf").stat().st_mode) == 0o600
        (tmp_path / "new.conf").chmod(0o664)
        write_text(tmp_path / "new.conf", "b\n", flag="--out")  # re-running tune: the mode stays
        assert stat.S_IMODE((tmp_path / "new.conf").stat().st_mode) == 0o664
    finally:
        os.umask(old)


def test_a_symbolic_link_is_followed_and_kept(tmp_path):
    real = tmp_path / "real.conf"
    real.write_text("old\n")
    link = tmp_path / "link.conf"
    link.symlink_to(real)
    write_text(link, "new\n", flag="--out")
    assert link.is_symlink() and real.read_text() == "new\n"


def test_names_no_file_system_holds_are_refused_naming_the_flag():
    with pytest.raises(UsageError, match=r"--json 'nnnn.*' \(300 bytes\): a name in it is 300 bytes long; the limit is 255"):
        check_name("n" * 300, "--json")
    with pytest.raises(UsageError, match="--out .*: the path is 4421 bytes long; the limit is 4095"):
        check_name("/".join(["d" * 200] * 22), "--out")
    assert shown(os.fsdecode(b"\xff.db")) == "'\\xff.db'"


def test_pipes_handed_to_the_process_are_read_fifos_on_disk_and_devices_refused(tmp_path):
    r, w = os.pipe()  # what <(cat rules.conf) hands over as /dev/fd/63
    os.write(w, b"allreduce,0,1,ring,ll,1,1,8\n")
    os.close(w)
    try:
        assert read_text(f"/dev/fd/{r}", "RULES") == "allreduce,0,1,ring,ll,1,1,8\n"
    finally:
        os.close(r)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="RULES: '.*fifo' is a FIFO, not a regular file"):
        read_text(fifo, "RULES")
    with pytest.raises(UsageError, match="RULES: '/dev/zero' is not a regular file"):
        read_text("/dev/zero", "RULES")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(UsageError, match="is 2000 bytes; the limit is 1000"):
        read_text(big, "RULES", limit=1000)
    (tmp_path / "bin").write_bytes(b"ok\x00\xff")
    with pytest.raises(UsageError, match="not a text file"):
        read_text(tmp_path / "bin", "--from-json")


def test_an_output_that_is_an_input_is_refused(tmp_path):
    (tmp_path / "b.json").write_text("{}")
    with pytest.raises(UsageError, match="--json '.*b.json' is the input --from-json: writing it would replace what"):
        check_output(tmp_path / "b.json", "--json", {"the input --from-json": str(tmp_path / "b.json")})
    check_output(tmp_path / "c.json", "--json", {"the input --from-json": str(tmp_path / "b.json")})


@pytest.mark.skipif(not shutil.which("setpriv") or os.geteuid() != 0, reason="needs root and setpriv to run as nobody")
def test_files_without_permission_are_clear_errors_for_another_user():
    """Tests run as root, which every permission check lets through: run ccltune as nobody."""
    tmp_path = Path(tempfile.mkdtemp(prefix="ccltune-nobody-", dir="/tmp"))  # pytest's own folder is 0700
    try:
        _as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _as_nobody(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    (tmp_path / "closed").mkdir(mode=0o700)
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    secret = tmp_path / "secret.db"
    secret.write_bytes(b"")
    secret.chmod(0o600)
    (tmp_path / "rules.conf").write_text("# none\n")
    (tmp_path / "rules.conf").chmod(0o600)
    src = str(Path(__file__).resolve().parents[2] / "src")
    cmds = [(["runs", "--db", str(secret)], f"--db '{secret}': no permission to read it"),
            (["plugin", "check", str(tmp_path / "rules.conf")], "no permission to read"),
            (["export", "1", "--db", str(secret), "--out", str(tmp_path / "e.json")], "no permission"),
            (["tune", "--db", str(secret), "--out", str(tmp_path / "r.conf")], "no permission"),
            (["runs", "--db", str(tmp_path / "closed" / "x.db")], "no permission to reach it"),
            (["bench", "all_reduce", "--db", str(tmp_path / "new.db")], "no permission to create a file in"),
            (["doctor", "--no-run", "--json", str(tmp_path / "d.json"), "--db", str(tmp_path / "open" / "d.db")],
             "no permission to write in")]
    procs = [subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                               "-m", "ccltune", *argv], env={**os.environ, "PYTHONPATH": src}, cwd="/",
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv, _ in cmds]
    for (argv, needle), p in zip(cmds, procs):
        out, err = p.communicate(timeout=20)
        if "Permission denied" in err and "ccltune" not in err:
            pytest.skip(f"nobody cannot run this Python: {err.strip()[:200]}")
        assert p.returncode == 2 and needle in err and "Traceback" not in err, (argv, err)
