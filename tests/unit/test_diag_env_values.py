"""Every NCCL variable ccltune knows, judged as NCCL reads it (issue 17's bad day: NCCL_NTHREADS=-5,
NCCL_MIN_NCHANNELS=abc and a control byte in NCCL_DEBUG passed, NCCL_TUNER_CONFIG_FILE naming a
binary file passed), and what doctor prints is printable text whatever it read."""

from __future__ import annotations

import pytest

from ccltune.diagnose.checks.envrules import VARS, check_env
from ccltune.diagnose.findings import Finding, format_findings


def _one(env, **kw):
    found = [f for f in check_env(env, source="this environment", **kw) if f.status != "PASS"]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("var, value, words", [
    ("NCCL_NTHREADS", "-5", "a multiple of 32 from 64 to 640 is what NCCL accepts"),
    ("NCCL_NTHREADS", "100", "a multiple of 32"),
    ("NCCL_NTHREADS", "4096", "a multiple of 32 from 64 to 640"),
    ("NCCL_MIN_NCHANNELS", "abc", "not an integer; NCCL's strtoll reads no digits, so NCCL uses 0"),
    ("NCCL_MIN_NCHANNELS", "0", "a count from 1 to 64"),
    ("NCCL_MIN_CTAS", "999", "a count from 1 to 64"),
    ("NCCL_BUFFSIZE", "-1", "a number of bytes > 0"),
    ("NCCL_CUMEM_ENABLE", "yes", "not an integer"),
    ("NCCL_DEBUG", "\x01INFO", "not a level NCCL knows (VERSION, WARN, INFO, ABORT, TRACE)"),
    ("NCCL_DEBUG", "verbose", "NCCL prints nothing"),
    ("NCCL_DEBUG_SUBSYS", "INIT\x1b[31m", "holds the control character '\\x1b'"),
    ("NCCL_SOCKET_IFNAME", "eth0\x00", "control character"),
])
def test_values_nccl_cannot_read_or_refuses_are_warned(var, value, words):
    f = _one({var: value})
    assert f.status == "WARN" and f.name == f"env:{var}" and words in f.evidence, f.evidence
    assert repr(value) in f.evidence and f"set {var} to" in f.fix


@pytest.mark.parametrize("var, value", [("NCCL_NTHREADS", "256"), ("NCCL_MIN_NCHANNELS", "0x10"),
                                        ("NCCL_DEBUG", "warn"), ("NCCL_SOCKET_IFNAME", "^lo,docker"),
                                        ("NCCL_DEBUG", "WARN")])
def test_values_nccl_reads_are_left_alone(var, value):
    assert [f.status for f in check_env({var: value}, source="x")] == ["PASS"]


def test_every_known_variable_is_judged_once():
    names = [v.var for v in VARS]
    assert len(names) == len(set(names))
    for var in names:  # a control byte is never a value NCCL reads well
        found = check_env({var: "1\x07"}, source="x")
        assert [f.name for f in found if f.status != "PASS"] == [f"env:{var}"], (var, found)


def test_the_tuner_config_file_is_read_as_the_plugin_reads_it(tmp_path):
    binary = tmp_path / "b.bin"
    binary.write_bytes(bytes(range(256)) * 40)
    f = _one({"NCCL_TUNER_CONFIG_FILE": str(binary)}, files_here=True)
    assert "is a binary file (a NUL byte at offset 0)" in f.evidence
    f = _one({"NCCL_TUNER_CONFIG_FILE": str(tmp_path / "none.conf")}, files_here=True)
    assert "does not exist" in f.evidence and "NCCL runs untuned" in f.evidence
    f = _one({"NCCL_TUNER_CONFIG_FILE": "/dev/zero"}, files_here=True)
    assert "not a regular file" in f.evidence
    bad = tmp_path / "bad.conf"
    bad.write_text("allreduce,0,1K,ring,ll,1,-1,-1\nbogus,0,1,ring,ll,1,-1,-1\n")
    f = _one({"NCCL_TUNER_CONFIG_FILE": str(bad)}, files_here=True)
    assert "1 lines the plugin rejects" in f.evidence and "unknown collective 'bogus'" in f.evidence
    good = tmp_path / "good.conf"
    good.write_text("allreduce,0,1K,ring,ll,1,-1,-1\n")
    assert [f.status for f in check_env({"NCCL_TUNER_CONFIG_FILE": str(good)}, source="x", files_here=True)] == ["PASS"]
    # a log's variables name files on the host that wrote it: not read here
    assert [f.status for f in check_env({"NCCL_TUNER_CONFIG_FILE": str(binary)}, source="the log")] == ["PASS"]


def test_findings_print_only_printable_text():
    raw = "vendor \x1b[2J\x00\x7f\udcff"  # what a sysfs file or a log can hold
    text = format_findings([Finding("host:\x1bx", "WARN", raw, fix="see \x07")], title="doctor \x1b]0;x\x07")
    assert all(c.isprintable() or c == "\n" for c in text), repr(text)
    assert "vendor \\x1b[2J\\x00\\x7f\\udcff" in text and "fix: see \\x07" in text
