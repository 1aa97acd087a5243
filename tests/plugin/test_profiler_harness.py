"""The profiler plugin's C harnesses (profiler/tests): the histogram white-box test, the ABI
layout against NCCL's headers, and the dlopen harness that drives every ABI version as NCCL
does and checks the written files exactly; each plain, under ASan + UBSan and under TSan.
Plus the exported symbol table and the library's dependencies."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from plugin_build import PROFILER, PROFILER_LIB, REPO, make, run, sanitizer_works

EXPORTS = {f"ncclProfiler_v{v}" for v in range(1, 7)}
TOOLCHAIN_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=1"}
SANITIZERS = {"plain": ({}, None), "asan-ubsan": ({"SAN": "1", "OPT": "-O1"}, "address,undefined"),
              "tsan": ({"TSAN": "1", "OPT": "-O1"}, "thread")}
TARGETS = ("all", "build/test_profiler", "build/test_hist", "build/abi_layout")


def _build(kind: str, tmp_path_factory: pytest.TempPathFactory, *targets: str) -> Path:
    variables, flag = SANITIZERS[kind]
    tmp = tmp_path_factory.mktemp(f"profiler-{kind}")
    if flag and not sanitizer_works(flag, tmp):
        pytest.skip(f"gcc here cannot build and run a program with -fsanitize={flag}")
    build = tmp / "build"
    return make(build, "-j2", *(t.replace("build/", f"{build}/") for t in targets), folder=PROFILER, **variables)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("plain", tmp_path_factory, *TARGETS)


@pytest.fixture(scope="module", params=list(SANITIZERS))
def build(request: pytest.FixtureRequest, plain: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The library and the dlopen harness, plain and under each sanitizer."""
    if request.param == "plain":
        return plain
    return _build(request.param, tmp_path_factory, "all", "build/test_profiler")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCLTUNE_PROFILE")}
    return {**env, **SAN_ENV}


def test_histogram(plain: Path) -> None:
    proc = run([plain / "test_hist"], env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout
    assert "worst-case relative error 1/64" in proc.stdout


def test_abi_layout_matches_nccl_headers(plain: Path) -> None:
    proc = run([plain / "abi_layout"], env=_env())
    assert proc.returncode == 0, proc.stderr
    expected = [ln for ln in (PROFILER / "tests" / "abi_layout.txt").read_text().splitlines() if not ln.startswith("#")]
    assert proc.stdout.splitlines() == expected


def test_driven_as_nccl_drives_it(build: Path, tmp_path: Path) -> None:
    proc = run([build / "test_profiler", build / PROFILER_LIB, tmp_path], env=_env())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "OK: 0 of" in proc.stdout
    for case in [f"-- ncclProfiler_v{v}" for v in range(1, 7)] + [
            "-- profiling off", "-- bad environment values", "-- sampling", "-- table overflow",
            "-- partial and stale events", "-- TREE call, channels out of order", "-- v6 copy-engine collectives", "-- relative folder", "-- 6 communicators, user and proxy threads", "-- exit writer",
            "-- arms from the tuner's share", "-- arms, steps of known GPU period"]:
        assert case in proc.stdout, case
    assert "runtime error" not in out and "Sanitizer" not in out, out


def test_a_v5_file_as_written(plain: Path, tmp_path: Path) -> None:
    """One file read here too, so the format is checked outside C: tokens, units, `# end`."""
    run([plain / "test_profiler", plain / PROFILER_LIB, tmp_path], env=_env())
    files = list((tmp_path / "v5").glob("ccltune-profile.*.0123456789abcdef.2.txt"))
    assert len(files) == 1, files
    lines = files[0].read_text().splitlines()
    assert lines[0] == "# ccltune-profile 2"
    assert lines[1].startswith("# host ") and lines[1].endswith(" comm 0123456789abcdef rank 2 nranks 4 nnodes 1 abi 5 every 1")
    assert lines[2] == "# timing gpu-kernel-channels"
    assert lines[3] == "# arms none NCCL_TUNER_PLUGIN is unset"
    rows = [ln.split() for ln in lines if ln.startswith(("coll ", "p2p "))]
    assert [r[:11] for r in rows] == [
        ["coll", "AllReduce", "65536", "ncclBfloat16", "RING", "LL", "2", "16", "-", "10", "10"],
        ["p2p", "Send", "1048576", "ncclInt8", "-", "-", "1", "-", "3", "3", "3"]]
    assert rows[0][11] == "1450.000" and rows[0][15] == "1000.000" and len(rows[0]) == 16  # sum and exact max, in us
    assert lines[lines.index("# sums arm calls timed sum_us no_entry") + 1] == "arm -1 13 13 1471.000 0"
    assert "call 100 0 -1 1732661234000000000 1732661234000010000" in lines
    assert lines[-2:] == ["# dropped entries 0 calls 0 arms 0", "# end"]
    assert not list((tmp_path / "v5").glob(".ccltune-profile*"))  # no temporary file left


def test_a_v6_file_with_copy_engine_collectives_imports(plain: Path, tmp_path: Path) -> None:
    """ABI v6's copy-engine collectives as the plugin writes them (harness case `ce`): read by the
    reader and imported, counted, with what NCCL ran (CE) and no time."""
    from ccltune.workload import importer, profile_file
    run([plain / "test_profiler", plain / PROFILER_LIB, tmp_path, "ce"], env=_env())
    (f,) = profile_file.read_dir(tmp_path / "ce", strict=True)
    ce = [e for e in f.entries if e.algo == "CE"]
    assert [(e.op, e.count, e.calls, e.timed, e.p50_us, e.nchannels) for e in ce] == [
        ("all_gather", 1048576, 3, 0, None, None), ("alltoall", 4096, 1, 0, None, None)]
    wl = importer.import_files([tmp_path / "ce"])
    ag = next(e for e in wl.entries if e.key.collective == "all_gather")
    assert ag.calls == 3 and dict(ag.ran) == {("CE", "-", 0): 3} and ag.timing is None


def test_the_armed_fixture_is_the_harness_output(plain: Path, tmp_path: Path) -> None:
    """tests/fixtures/workload/profile-harness/arms_steps (ccltune.ab.gpu_period's armed file) is what
    the harness's case arms_steps writes today, but for the host and pid of the run that wrote it."""
    proc = run([plain / "test_profiler", plain / PROFILER_LIB, tmp_path, "arms_steps"], env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (got,) = (tmp_path / "arms_steps").glob("ccltune-profile.*.00000000000000ab.0.txt")
    (kept,) = (REPO / "tests" / "fixtures" / "workload" / "profile-harness" / "arms_steps").glob("*.txt")
    got_lines, kept_lines = got.read_text().splitlines(), kept.read_text().splitlines()
    assert got_lines[1].split()[5:] == kept_lines[1].split()[5:]  # after '# host <h> pid <p>'
    assert got_lines[:1] + got_lines[2:] == kept_lines[:1] + kept_lines[2:]


def test_exports_exactly_the_profiler_structs(plain: Path) -> None:
    if shutil.which("nm") is None or shutil.which("readelf") is None:
        pytest.skip("nm and readelf (binutils) not installed")
    build = plain
    proc = run(["nm", "-D", "--defined-only", build / PROFILER_LIB])
    symbols = {ln.split()[-1]: ln.split()[-2] for ln in proc.stdout.splitlines() if ln.strip()}
    assert EXPORTS <= set(symbols), symbols
    assert set(symbols) - EXPORTS <= TOOLCHAIN_SYMBOLS, f"unexpected exports: {set(symbols) - EXPORTS}"
    proc = run(["readelf", "-d", build / PROFILER_LIB])
    needed = {ln.split("[")[1].rstrip("]") for ln in proc.stdout.splitlines() if "(NEEDED)" in ln}
    assert needed <= {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2"}, needed  # libdl: glibc < 2.34


def test_cost_microbenchmark_prints_its_table(plain: Path) -> None:
    """bench/profiler_cost.py's driver (built here once, with the library): it runs and prints one
    row per call NCCL makes, in three columns; no figure is asserted."""
    make(plain.parent / "build", f"{plain}/profiler_cost", folder=PROFILER)
    proc = run([plain / "profiler_cost", plain / PROFILER_LIB, "2"], env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "call on_ns every100_ns off_ns" in " ".join(lines[5].split())
    rows = [ln.rsplit(None, 3)[0] for ln in lines[6:]]
    assert rows == ["task startEvent (coll)", "KernelCh startEvent", "recordEventState (KernelChStop)",
                    "KernelCh stopEvent", "task stopEvent", "whole call (sum)"]
    assert "activation mask to 0" in proc.stdout
