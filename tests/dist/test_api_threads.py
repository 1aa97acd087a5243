"""Two threads calling ``ccltune.bench`` at once, each into a database of its own, each get their own
result: the run that call stored, by the id its job's rank 0 reported, not the newest run of a
database (issue 33: the API's old guess raced, and its stdout swap crossed between threads)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import ccltune

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "h200x2-flow.sqlite"  # one sweep run


def test_two_threads_bench_into_two_databases_at_once(tmp_path, capsys):
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    shutil.copy(FIXTURE, first)  # a run there already: this call's run comes after it, the other call's is 1
    before = ccltune.open_db(first).latest().id
    results: dict[str, object] = {}

    def call(name: str, db: Path, size: str) -> None:
        try:
            results[name] = ccltune.bench("all_reduce", engine="gloo", nproc=2, min_bytes=size, max_bytes=size,
                                          iters=2, warmup_iters=1, db=str(db))
        except Exception as exc:  # noqa: BLE001 - said by the assertion below
            results[name] = exc

    threads = [threading.Thread(target=call, args=("first", first, "16")),
               threading.Thread(target=call, args=("second", second, "64"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    a, b = results["first"], results["second"]
    assert isinstance(a, ccltune.RunResult), a
    assert isinstance(b, ccltune.RunResult), b
    assert (a.db, a.run.kind, a.status) == (str(first), "bench", "complete") and a.run_id > before
    assert [r.id for r in ccltune.open_db(first).runs("bench")] == [a.run_id]  # the fixture's ids run on from 3
    assert (b.db, b.run_id, b.run.kind, b.status) == (str(second), 1, "bench", "complete")
    assert {m.size_bytes for m in a.rows} == {16} and {m.size_bytes for m in b.rows} == {64}
    assert capsys.readouterr().out == ""  # nothing printed without verbose=True
