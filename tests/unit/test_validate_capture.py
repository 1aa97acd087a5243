"""validate --best-from: the sweep's best candidate as a third arm, and the capture it gives."""

from __future__ import annotations

import pytest

from ccltune.cli import main
from ccltune.commconfig import CommConfig
from ccltune.errors import DataError, UsageError
from ccltune.store import Measurement, Store
from ccltune.tune.derive import derive
from ccltune.validate import capture

MB = 1 << 20
SIZES = [1 * MB, 2 * MB, 4 * MB, 8 * MB]


def _sweep_db(path, *, fast_at=(4 * MB,), twin_at=()):
    """all_gather on 4 H200s: ring/simple 20% faster at ``fast_at``; the twin as fast as it at
    ``twin_at`` (a slow default communicator there, not a better choice)."""
    with Store(path) as st:
        run = st.begin_run("sweep", command="ccltune sweep", env={"gpus": [{"name": "NVIDIA H200"}] * 4})
        rows = []
        for size in SIZES:
            for rep in range(3):
                j = 1 + 0.005 * (rep - 1)
                m = dict(collective="all_gather", size_bytes=size, count=size // 4, dtype="float", op=None,
                         root=None, in_place=False, n_ranks=4, rep=rep)
                rows.append(Measurement(**m, time_us=100.0 * j))
                rows.append(Measurement(**m, time_us=(80.0 if size in twin_at else 100.5) * j, config="default-twin"))
                rows.append(Measurement(**m, time_us=(80.0 if size in fast_at else 101.0) * j, algo="ring",
                                        proto="simple", config="ring/simple/default"))
        st.add_measurements(run, rows)
        st.finish_run(run, "complete")


def _arms_rows(size, default, rules, best, best_cand=("ring", "simple", None)):
    out = []
    for rep, times in enumerate(zip(default, rules, best)):
        for (cfg, extra), t in zip((("default", {}), ("rules", {}),
                                    ("best", dict(zip(("algo", "proto", "channels"), best_cand)))), times):
            out.append(dict(collective="all_gather", n_ranks=4, n_nodes=1, size_bytes=size, config=cfg, rep=rep,
                            time_us=t, status="ok", in_place=False, **extra))
    return out


def test_best_arms_where_the_sweep_beat_nccls_own_choice(tmp_path):
    db = tmp_path / "s.db"
    _sweep_db(db, fast_at=(4 * MB, 8 * MB), twin_at=(8 * MB,))
    arms = capture.arms_from_db(str(db), 4, 1, "NVIDIA H200")
    # 8 MB: the twin was as fast as ring/simple, so NCCL's own choice was not beaten there
    assert arms == {("all_gather", 4, 1, 4 * MB): CommConfig("ring", "simple", None)}
    assert capture.arms_from_db(str(db), 2, 1, "NVIDIA H200") == {}          # other communicator size
    assert capture.arms_from_db(str(db), 4, 1, "NVIDIA H100 80GB HBM3") == {}  # other GPU
    assert capture.arms_from_db(str(db), 4, 2, None) == {}                    # other node count


def test_best_arms_take_the_fastest_candidate():
    rows = []
    for size in SIZES:
        for rep in range(3):
            base = dict(collective="all_reduce", size_bytes=size, n_ranks=2, n_nodes=1, rep=rep, status="ok",
                        in_place=False, gpu="H200")
            rows += [{**base, "config": "default", "time_us": 50.0 + rep * 0.1},
                     {**base, "config": "default/default/8", "channels": 8, "time_us": 40.0 + rep * 0.1},
                     {**base, "config": "default/default/16", "channels": 16, "time_us": 45.0 + rep * 0.1}]
    arms = capture.best_arms(derive(rows), 2, 1)
    assert set(arms) == {("all_reduce", 2, 1, s) for s in SIZES}
    assert set(arms.values()) == {CommConfig(None, None, 8)}


def test_capture_counts_sizes_where_the_best_arm_beats_the_default_in_validate():
    rows = _arms_rows(1 * MB, [100, 101, 99], [90, 91, 89], [80, 81, 79])          # 20% there, rules take 10
    rows += _arms_rows(2 * MB, [100, 101, 99], [80, 81, 79], [80, 80.5, 79.5])     # all of it
    rows += _arms_rows(4 * MB, [100, 104, 96], [100, 104, 96], [99, 103, 95])      # within noise: not counted
    rows += [r for r in _arms_rows(8 * MB, [100] * 3, [90] * 3, [80] * 3) if r["config"] != "best"]  # no arm
    cap = capture.capture(rows)
    assert [s.size_bytes for s in cap.sizes] == [1 * MB, 2 * MB, 4 * MB]
    assert [s.size_bytes for s in cap.counted] == [1 * MB, 2 * MB]
    assert cap.sizes[0].available == pytest.approx(0.2) and cap.sizes[0].captured == pytest.approx(0.1)
    assert cap.ratio == pytest.approx((0.1 + 0.2) / (0.2 + 0.2))
    assert cap.sizes[0].candidate == "ring/simple/default"
    d = cap.to_dict()
    assert d["sizes_counted"] == 2 and d["sizes"][2]["counts"] is False


def test_capture_is_none_when_no_size_counts():
    assert capture.capture(_arms_rows(1 * MB, [100, 101, 99], [100, 101, 99], [100, 101, 99])).ratio is None
    assert capture.capture([]).sizes == []


def test_best_from_errors_name_the_flag(tmp_path):
    with pytest.raises(UsageError, match="--best-from .*no such database"):
        capture.arms_from_db(str(tmp_path / "missing.db"), 4, 1, None)
    empty = tmp_path / "empty.db"
    Store(empty).close()
    with pytest.raises(DataError, match="--best-from .*no sweep or import runs"):
        capture.arms_from_db(str(empty), 4, 1, None)
    (tmp_path / "junk.db").write_text("not sqlite at all, " * 100)
    with pytest.raises(UsageError, match="--best-from"):
        capture.arms_from_db(str(tmp_path / "junk.db"), 4, 1, None)


def test_validate_cli_refuses_a_bad_best_from_before_any_gpu_work(tmp_path, capsys):
    rules = tmp_path / "r.conf"
    rules.write_text("platform,gpu=h200,nvlranks=4\nallgather,1M,2M,ring,simple,-1,1,4\n")
    rc = main(["validate", str(rules), "--best-from", str(tmp_path / "nope.db"), "--db", str(tmp_path / "v.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "--best-from" in err and "nope.db" in err and "Traceback" not in err
    assert not (tmp_path / "v.db").exists()
