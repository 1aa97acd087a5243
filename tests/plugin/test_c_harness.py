"""The C harnesses: white-box parser/matcher tests, the dlopen loader test and the RCCL-shaped
harness, each built plain and with sanitizers; plus the exported symbol table."""

from __future__ import annotations

import os
import shutil

import pytest

from plugin_build import LIB, REPO, run

EXPORTS = {f"ncclTunerPlugin_v{v}" for v in (2, 3, 4, 5, 6)} | {"ccltuneArmShare_v1"}  # arm share: docs/plugin.md
TOOLCHAIN_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}


@pytest.fixture(params=["plain", "sanitizers"])
def build(request: pytest.FixtureRequest):
    return request.getfixturevalue("c_build" if request.param == "plain" else "san_build")


def test_white_box(build) -> None:
    proc = run([build / "test_rules"], env={**os.environ, **SAN_ENV})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout
    assert "runtime error" not in proc.stderr  # UBSan


def test_harness_runs_tests_by_name(c_build) -> None:
    """Every harness shares plugin/tests/check.h: names after its arguments pick tests, --list prints
    them, an unknown name is an error that lists them."""
    listed = run([c_build / "test_rules", "--list"]).stdout.split()
    assert listed == ["parser", "parser_file_shape", "matcher", "huge_table", "file_kinds", "platform"]
    one = run([c_build / "test_rules", "huge_table"])
    assert one.returncode == 0 and "OK: 0 of" in one.stdout, one.stdout + one.stderr
    every = run([c_build / "test_rules"])
    assert int(one.stdout.split()[3]) < int(every.stdout.split()[3])  # "OK: 0 of N checks failed"
    bad = run([c_build / "test_loader", c_build / LIB, "v6_v5", "nope"])
    assert bad.returncode == 2 and bad.stdout == ""
    assert "unknown test 'nope'; the tests are: exports v6_v5 v4_v3 v2 unusable_file many_bad_lines" in bad.stderr


def test_loader(build) -> None:
    proc = run([build / "test_loader", build / LIB], env={**os.environ, **SAN_ENV})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout
    for version in ("ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "v4", "v3"):
        assert f"-- {version} cost-table calls" in proc.stdout


def test_rccl_shaped(build, amd_cpx_root) -> None:
    """The plugin called as RCCL calls it (plugin/tests/test_rccl.c names the RCCL sources):
    loader order, 7- and 8-column tables with RCCL's IGNORE cells, CPX/NPS4 sections."""
    fixtures = REPO / "tests" / "fixtures" / "sysfs"
    proc = run([build / "test_rccl", build / LIB, fixtures / "amd-mi300x", amd_cpx_root],
               env={**os.environ, **SAN_ENV})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout
    assert "runtime error" not in proc.stderr  # UBSan
    for line in ("RCCL loader picks ncclTunerPlugin_v6", "MI300X CPX/NPS4, 64 ranks, 8 algorithms",
                 "RCCL 2.21.5: ncclTunerPlugin_v2"):
        assert line in proc.stdout


def test_exports_exactly_the_tuner_structs(c_build) -> None:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not installed")
    proc = run(["nm", "-D", "--defined-only", c_build / LIB])
    assert proc.returncode == 0, proc.stderr
    symbols = {line.split()[-1]: line.split()[-2] for line in proc.stdout.splitlines() if line.strip()}
    assert EXPORTS <= set(symbols), symbols
    assert set(symbols) - EXPORTS <= TOOLCHAIN_SYMBOLS, f"unexpected exports: {set(symbols) - EXPORTS}"
    for name in EXPORTS:  # const data: read-only section ('R'), or 'D' with RELRO
        assert symbols[name] in {"R", "D"}, (name, symbols[name])


def test_links_only_libc(c_build) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) not installed")
    proc = run(["readelf", "-d", c_build / LIB])
    needed = {line.split("[")[1].rstrip("]") for line in proc.stdout.splitlines() if "(NEEDED)" in line}
    assert needed <= {"libc.so.6", "libpthread.so.0", "libdl.so.2"}, needed
    assert not any("cuda" in n or "nccl" in n or "rccl" in n for n in needed)
