"""The plugin's capture (CCLTUNE_CAPTURE) driven as NCCL drives it, plain and under
ASan/UBSan: several communicators (v6, v4, v3) from several threads at once, one never
finalized; the files it writes are read back by the workload reader with exact counts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccltune.workload import capture
from ccltune.workload.model import Key, merge
from plugin_build import LIB, run

SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
THREADS_A, SIZES_A, DISTINCT_B, SLOTS = 4, 100, 5000, 4096


@pytest.fixture(params=["plain", "sanitizers"])
def build(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("c_build" if request.param == "plain" else "san_build")


def _run(build: Path, tmp_path: Path) -> dict[str, capture.RankRecord]:
    rules = tmp_path / "rules.conf"
    rules.write_text("allreduce,0,1K,ring,ll,-1,-1,-1\n")
    out = tmp_path / "cap"  # created by the plugin
    env = {**os.environ, **SAN_ENV, "CCLTUNE_CAPTURE": str(out), "NCCL_TUNER_CONFIG_FILE": str(rules)}
    proc = run([build / "test_capture", build / LIB], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 0 of" in proc.stdout
    assert "runtime error" not in proc.stderr  # UBSan
    files = sorted(out.iterdir())
    assert not [f for f in files if f.name.startswith(".")], "a temp file was left behind"
    assert len(files) == 4, [f.name for f in files]
    by_comm = {}
    for f in files:
        text = f.read_text()
        assert f".{os.getpid()}." not in f.name  # named by the harness's pid, not pytest's
        rec = capture.parse(text, str(f))
        head = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        by_comm[head["comm_id"] if head["comm_id"] != "unknown" else "seq" + head["comm_seq"]] = (rec, text)
    return by_comm


def test_capture_counts_exactly(build: Path, tmp_path: Path) -> None:
    comms = _run(build, tmp_path)
    a, text_a = comms["0x00000000000a11ce"]
    want = {Key("all_reduce", 4096 * (k + 1), 4, nnodes=1): THREADS_A * (k + 1) for k in range(SIZES_A)}
    want[Key("all_reduce", 512, 4, nnodes=1)] = 1  # the call that checks rules still apply
    assert dict(a.calls) == want
    assert "closed_by=finalize" in text_a and a.overflow_calls == 0
    assert set(a.variants[Key("all_reduce", 4096, 4, nnodes=1)]) == {(1, 0)}

    b, text_b = comms["0x0000000000000b0b"]
    assert b.calls[Key("all_gather", 1 << 20, 8, nnodes=2)] == 1000
    assert b.variants[Key("all_gather", 1 << 20, 8, nnodes=2)] == {(1, 1): 1000}
    assert b.variants[Key("reduce_scatter", 65536, 8, nnodes=2)] == {(2, 0): 10}
    bcast = {k: n for k, n in b.calls.items() if k.collective == "broadcast"}
    assert set(bcast.values()) == {1}
    assert len(b.calls) <= SLOTS
    # what did not fit is counted, with its bytes: every call is accounted for
    assert b.overflow_calls == DISTINCT_B - len(bcast) + 1
    assert sum(b.calls.values()) + b.overflow_calls == 1000 + 10 + DISTINCT_B + 1
    missing = set(range(1000000, 1000000 + DISTINCT_B)) - {k.size_bytes for k in bcast}
    assert b.overflow_bytes == sum(missing) + (1 << 50)

    c, text_c = comms["seq2"]  # v4: no commId; never finalized, written at exit
    assert "closed_by=exit" in text_c and "comm_id=unknown" in text_c
    assert dict(c.calls) == {Key("reduce", 100, 2, nnodes=1): 7}
    assert c.variants[Key("reduce", 100, 2, nnodes=1)] == {(1, 0): 7}
    d, _ = comms["seq3"]  # v3: regBuff unknown
    assert d.variants[Key("all_reduce", 64, 2, nnodes=1)] == {(1, -1): 3}

    # one process: its four files are one rank of the workload
    wl = merge([rec for rec, _ in comms.values()])
    assert len(wl.sources) == 1 and wl.sources[0]["calls"] == sum(sum(r.calls.values()) for r, _ in comms.values())


def test_no_capture_without_the_variable(c_build: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CCLTUNE_CAPTURE"}
    rules = tmp_path / "rules.conf"
    rules.write_text("allreduce,0,1K,ring,ll,-1,-1,-1\n")
    proc = run([c_build / "test_capture", c_build / LIB], env={**env, "NCCL_TUNER_CONFIG_FILE": str(rules)},
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(tmp_path.glob("**/ccltune-capture.*"))
