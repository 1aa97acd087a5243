"""Rule text, atomic writing, and `ccltune tune` end to end on a small database."""

from __future__ import annotations

import math

from ccltune import __version__
from ccltune.cli import main
from ccltune.rules import Platform, Rule, parse_text
from ccltune.store import Measurement, Store
from ccltune.tune.derive import derive
from ccltune.tune.emit import render

MB = 1 << 20
SIZES = [1 * MB, 2 * MB, 4 * MB, 8 * MB]


def test_render_header_and_sections():
    secs = {Platform(gpu="h200", nvl_ranks=4): [Rule("allgather", 1, 2, "ring", "simple", -1, 1, 4,
                                                     platform=Platform(gpu="h200", nvl_ranks=4))],
            Platform(gpu="h100", nvl_ranks=2): []}
    text = render(secs, source="runs 3 of x.db", settings="objective=time", date="2026-11-21")
    lines = text.splitlines()
    assert __version__ in lines[0] and "2026-11-21" in lines[0]
    assert "# Source: runs 3 of x.db" in lines
    assert lines.index("platform,gpu=h200,nvlranks=4") < lines.index("allgather,1,2,ring,simple,-1,1,4,-1,-1")
    assert "# Platform gpu=h100 nvlranks=2: no rule (nothing beat the default)" in lines
    parsed = parse_text(text)
    assert not parsed.diagnostics and len(parsed.rules) == 1


def _sweep_db(path, gpus=("NVIDIA H200",) * 4, win_at=4 * MB):
    with Store(path) as st:
        run = st.begin_run("sweep", command="ccltune sweep", env={"gpus": [{"name": g} for g in gpus],
                                                                    "platform": "NVIDIA H200 x4"})
        rows = []
        for size in SIZES:
            for rep in range(3):
                jitter = 1 + 0.01 * (rep - 1)
                rows.append(Measurement("all_gather", size, size // 4, "float", None, None, False, 4,
                                        time_us=100.0 * jitter, rep=rep))
                t = (80.0 if size == win_at else 100.0) * jitter
                rows.append(Measurement("all_gather", size, size // 4, "float", None, None, False, 4,
                                        time_us=t, rep=rep, algo="ring", proto="simple", config="ring/simple/-"))
                rows.append(Measurement("all_gather", size, size // 4, "float", None, None, False, 4,
                                        time_us=None, rep=rep, algo="pat", proto="simple",
                                        config="pat/simple/-", status="unavailable"))
        st.add_measurements(run, rows)
        st.finish_run(run, "complete")
    return run


def test_cli_tune_writes_rules_and_stores_artifact(tmp_path, capsys):
    db, out = tmp_path / "c.db", tmp_path / "rules.conf"
    src = _sweep_db(db)
    assert main(["tune", "--db", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    lo, hi = math.isqrt(2 * MB * 4 * MB) + 1, math.isqrt(4 * MB * 8 * MB)
    assert f"allgather,{lo},{hi},ring,simple,-1,1,4,-1,-1" in text.splitlines()
    assert "platform,gpu=h200,nvlranks=4" in text and f"runs {src} (sweep" in text
    assert not parse_text(text).diagnostics
    with Store(db) as st:
        tune = st.runs("tune")[-1]
        assert tune.status == "complete" and st.artifacts(tune.id)["rules"] == text
        assert tune.summary["source_runs"] == [src]
    assert "100.0" in capsys.readouterr().out  # all the available gain is captured


def test_cli_tune_isolated_margin(tmp_path, capsys):
    db = tmp_path / "c.db"
    _sweep_db(db)  # ring/simple 25% faster at 4 MB only: an isolated win
    out = tmp_path / "r.conf"
    assert main(["tune", "--db", str(db), "--out", str(out)]) == 0
    assert "ring,simple" in out.read_text() and "isolated_margin=10%" in out.read_text()
    assert main(["tune", "--db", str(db), "--out", str(out), "--isolated-margin", "30"]) == 0
    assert "ring,simple" not in out.read_text() and "isolated_margin=30%" in out.read_text()
    assert main(["tune", "--db", str(db), "--out", str(out), "--isolated-margin", "100"]) == 2
    assert "--isolated-margin" in capsys.readouterr().err


def test_cli_tune_errors(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r")]) == 2  # no database
    _sweep_db(db)
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r"), "--runs", "9"]) == 2
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r"), "--runs", "x"]) == 2
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r"), "--min-margin", "-1"]) == 2
    err = capsys.readouterr().err
    assert "no run 9" in err and "'x' is not a run id" in err and "--min-margin" in err
    assert not (tmp_path / "r").exists()


def test_cli_tune_run_without_gpu_model_is_named(tmp_path, capsys):
    db = tmp_path / "c.db"
    with Store(db) as st:
        r = st.begin_run("sweep", command="x", env={"platform": "cpu x2"})
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r")]) == 1
    assert f"run {r} (sweep)" in capsys.readouterr().err


def test_tune_output_passes_the_rule_checker():
    times = []
    for size in SIZES:
        for rep in range(3):
            for cfg, t, ch in (("default", 100.0, None), ("default/default/16", 80.0, 16)):
                times.append(dict(collective="all_reduce", size_bytes=size, n_ranks=2, n_nodes=1, channels=ch,
                                  config=cfg, time_us=t + rep, gpu="H200"))
    d = derive(times)
    text = render(d.sections(), source="test", settings="test")
    parsed = parse_text(text, "tune.conf")
    assert not parsed.diagnostics
    assert len(parsed.rules) == 1
