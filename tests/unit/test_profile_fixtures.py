"""Every real profiler fixture (tests/fixtures/workload/profile-<job>-<ranks>/, README there: the plugin's own
files from a real NCCL job, one per rank) read and imported, with checks that hold for any such job. A new
capture is tested by copying its folder in under that name: nothing here names a job or a figure of one.

Per folder: the files are one communicator per rank, ranks 0..N-1 with N the folder's rank count; GPU
times (ABI v4+); each entry's call lines are its timed calls (every call timed, nothing dropped) and their
sum, maximum and percentiles are the entry's (percentiles within the histogram's 1/64, docs/profiler.md);
every collective call (op, seq) is on every rank of its communicator; the import finds steps and keeps,
per entry, what NCCL ran and the time from the profiler, waiting + transfer adding up to that time where
every call was split."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

from ccltune.workload import importer, profile_file

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
FOLDER = re.compile(r"^profile-[a-z0-9-]+-([0-9]+)$")   # profile-ddp-4, profile-ddp-2 (not profile-harness)
FOLDERS = sorted(p for p in FIX.iterdir() if p.is_dir() and FOLDER.match(p.name))


def test_the_real_fixtures_are_found():
    assert len(FOLDERS) >= 2, [p.name for p in FOLDERS]


def _nearest_rank(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1]


@pytest.fixture(params=FOLDERS, ids=[p.name for p in FOLDERS])
def folder(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_one_file_per_rank_of_each_communicator(folder: Path):
    n = int(FOLDER.match(folder.name).group(1))
    files = profile_file.read_dir(folder, strict=True)
    by_comm: dict[str, list[int]] = defaultdict(list)
    for f in files:
        assert (f.nranks, f.timing, f.complete) == (n, "gpu-kernel-channels", True), f.path
        assert f.abi >= 4 and f.every == 1 and not f.warnings, f.path
        by_comm[f.comm].append(f.rank)
    assert all(sorted(ranks) == list(range(n)) for ranks in by_comm.values()), dict(by_comm)


def test_call_lines_are_the_entries_timed_calls(folder: Path):
    for f in profile_file.read_dir(folder, strict=True):
        assert f.dropped_entries == f.dropped_calls == 0, f.path
        per_entry: dict[int, list[float]] = defaultdict(list)
        for _, entry, start, end in f.calls:
            per_entry[entry].append((end - start) / 1000)
        for i, e in enumerate(f.entries):
            got = per_entry[i]
            assert e.calls == e.timed == len(got), (f.path, i)
            assert e.sum_us == pytest.approx(sum(got), abs=1e-3 * len(got)), (f.path, i)
            assert e.max_us == pytest.approx(max(got), abs=1e-3), (f.path, i)
            for p, shown in ((10, e.p10_us), (50, e.p50_us), (90, e.p90_us)):
                exact = _nearest_rank(got, p)
                assert abs(shown - exact) <= exact / 64 + 1e-3, (f.path, i, p, shown, exact)


def test_every_collective_call_is_on_every_rank(folder: Path):
    files = profile_file.read_dir(folder, strict=True)
    seen: dict[str, dict[int, set[tuple[str, int]]]] = defaultdict(dict)
    for f in files:
        seen[f.comm][f.rank] = {(f.entries[e].op, seq) for seq, e, _, _ in f.calls if f.entries[e].kind == "coll"}
    for comm, ranks in seen.items():
        first = next(iter(ranks.values()))
        assert first and all(calls == first for calls in ranks.values()), comm


def test_imports_with_steps_what_ran_and_the_time_split(folder: Path):
    n = int(FOLDER.match(folder.name).group(1))
    wl = importer.import_files([folder])
    assert wl.steps and wl.entries
    for e in wl.entries:
        assert e.key.nranks == n and e.time_from == "ccltune-profile" and e.timing.median_us > 0, e.key
        assert sum(e.ran.values()) == n * e.calls, e.key       # every rank's calls, each with what ran
        if e.key.collective in ("broadcast", "reduce"):   # a root may finish before the others start
            assert e.wait is None, e.key
            continue
        # every call of a collective without a root is split, on timers lined up by the RING calls' ends
        assert e.wait is not None and e.wait.calls == e.transfer.calls == e.timing.calls, e.key
        assert e.wait.total_us + e.transfer.total_us == pytest.approx(e.timing.total_us), e.key
