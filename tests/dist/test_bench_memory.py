"""A size that does not fit in memory is a 'skipped' row and the run goes on (gloo, CPU,
with the address space of the job's processes limited so the largest size cannot be allocated).

One run of the shared job of 2 processes (dist_helpers.SharedJobs): its address space is limited to
what each worker maps already plus HEADROOM_BYTES, so 1 MiB fits and no buffer of the large size
does; that size fails at allocation and no byte of it is filled or moved: the run takes seconds,
not minutes."""

from __future__ import annotations

from dist_helpers import only_run

HEADROOM_BYTES = 2 << 30   # 1 MiB buffers fit, no 4 GiB one does


def _bench(folder):
    return ["bench", "all_gather", "broadcast", "-b", "1M", "-e", "4G", "-f", "4096", "-n", "1", "-w", "0",
            "--db", str(folder / "m.db")]


SHARED_RUNS = {"oom": (2, _bench, {}, HEADROOM_BYTES)}


def test_size_that_does_not_fit_is_skipped_and_the_run_goes_on(shared):
    proc = shared.get(__name__, "oom")
    assert proc.rc == 0, proc.stderr[-2000:]
    run, rows = only_run(proc.folder / "m.db")
    assert run.status == "complete"
    by = {(m.collective, m.size_bytes, m.in_place): m for m in rows}
    big = by[("all_gather", 4 << 30, False)]
    assert big.status == "skipped" and "out of memory" in big.note
    assert by[("broadcast", 4 << 30, True)].status == "skipped"
    assert by[("all_gather", 1 << 20, False)].status == "ok"
    # the run went on to the next collective after the size that did not fit
    assert by[("broadcast", 1 << 20, True)].status == "ok"
    assert "SKIPPED: out of memory" in proc.stdout
