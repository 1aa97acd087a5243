"""ccltune ab's comm metric: the profiler files' summed GPU time of a run (ab/commtime.py)."""

from __future__ import annotations


def test_comm_time_sums_every_timed_entry_of_every_profiler_file(tmp_path) -> None:
    """A real two-rank DDP capture (profile-ddp-2, README there): the sum of every entry's sum_us in both files;
    the hand-written files' ReduceScatter entry timed no call and adds nothing (no real file has such an
    entry). A file cut short fails the run, named."""
    from pathlib import Path

    import pytest

    from ccltune.ab import commtime as profsum

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
    folder = fixtures / "profile-ddp-2"
    sums = [float(line.split()[11]) for f in sorted(folder.glob("*.txt")) for line in f.read_text().splitlines()
            if line.startswith("coll ")]
    assert len(sums) == 22 and profsum.comm_time_us(folder) == (pytest.approx(sum(sums)), "")
    assert profsum.comm_time_us(fixtures / "profile") == (2 * (272 + 468 + 138 + 110), "")
    cut = tmp_path / folder.joinpath("x").name
    cut.mkdir()
    src = sorted(folder.glob("ccltune-profile.*.txt"))[0]
    (cut / src.name).write_text(src.read_text().replace("# end\n", ""))
    value, why = profsum.comm_time_us(cut)
    assert value is None and src.name in why
    assert profsum.comm_time_us(tmp_path)[0] is None


def test_comm_time_refuses_host_times_and_runs_with_dropped_entries(tmp_path) -> None:
    """Issue 39 item 5: profiler ABI v1-v3 times are the host's (launch), not GPU time, and a table that
    overflowed left calls in no sum (a run of an arm with more keys would look faster): either run is kept
    out of the comparison with its file named. Both folders are the profiler's own output (its C harness,
    tests/fixtures/workload/README.md)."""
    from pathlib import Path

    from ccltune.ab import commtime as profsum

    harness = Path(__file__).resolve().parents[1] / "fixtures" / "workload" / "profile-harness"
    value, why = profsum.comm_time_us(harness / "v1")
    assert value is None and "ccltune-profile.vm.11819.0123456789abcdef.2.txt: host timing (profiler ABI v1" in why
    assert "not GPU time" in why
    value, why = profsum.comm_time_us(harness / "overflow")
    assert value is None and "000000000000000b.0.txt: 44 key(s) (88 call(s)) found no room" in why
    assert "kept out of the comparison" in why
    assert profsum.comm_time_us(harness / "v5") == (1471.0, "")
    assert profsum.comm_time_us(harness / "arms_steps") == (7200.0 + 5760.0 + 4320.0, "")
