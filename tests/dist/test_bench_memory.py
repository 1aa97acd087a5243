"""A size that does not fit in memory is a 'skipped' row and the run goes on (gloo, CPU,
with the address space of the job limited so the largest size cannot be allocated).

The limit sits above what a worker maps for small sizes (about 1 GiB of address space with
torch 2.13) and below any buffer of the large size, so that size fails at allocation and no
byte of it is filled or moved: the test takes seconds, not minutes."""

from __future__ import annotations

import resource
import subprocess
import sys

from dist_helpers import only_run

LIMIT = 5 << 29   # 2.5 GiB of address space per process: 1 MiB fits, no 4 GiB buffer does


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_size_that_does_not_fit_is_skipped_and_the_run_goes_on(tmp_path):
    db = tmp_path / "m.db"
    proc = subprocess.run([sys.executable, "-m", "ccltune", "bench", "all_gather", "broadcast", "-b", "1M", "-e", "4G",
                           "-f", "4096", "-n", "1", "-w", "0", "--db", str(db)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, preexec_fn=_limit)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run, rows = only_run(db)
    assert run.status == "complete"
    by = {(m.collective, m.size_bytes, m.in_place): m for m in rows}
    big = by[("all_gather", 4 << 30, False)]
    assert big.status == "skipped" and "out of memory" in big.note
    assert by[("broadcast", 4 << 30, True)].status == "skipped"
    assert by[("all_gather", 1 << 20, False)].status == "ok"
    # the run went on to the next collective after the size that did not fit
    assert by[("broadcast", 1 << 20, True)].status == "ok"
    assert "SKIPPED: out of memory" in proc.stdout
