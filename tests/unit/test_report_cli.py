"""``ccltune report`` end to end on a synthetic database (no browser): sections, errors,
escaping, atomic write, --png."""

from __future__ import annotations

import builtins
import os
import re
from html.parser import HTMLParser

import pytest

from ccltune.cli import main
from ccltune.commands.common import parse_run_ids
from ccltune.errors import UsageError
from ccltune.report import load, write_report
from ccltune.report.model import Heatmap, LineChart, ZoneChart
from ccltune.report.sections import SECTION_IDS, build_sections
from ccltune.store import Store
from test_report_synthetic import MARKUP, SLOW_LINK, fill_store


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "results.db"
    with Store(path) as store:
        fill_store(store)
    return path


def sections_of(db, **kw):
    with Store(db, create=False) as store:
        return {s.id: s for s in build_sections(load(store, **kw))}


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.ids += [v for k, v in attrs if k == "id"]


def test_every_section_from_a_full_database(db):
    s = sections_of(db)
    assert tuple(s) == SECTION_IDS
    assert [f.title for f in s["bench"].figures()] == ["all_gather: bus bandwidth", "all_reduce: bus bandwidth",
                                                       "all_gather: time", "all_reduce: time"]
    sweep = [f for f in s["sweep"].figures() if isinstance(f, LineChart)]
    assert len(sweep) == 4 and sum(x.emphasis for x in sweep[0].series) == 1
    assert len(sweep[0].series) == 13  # 12 candidates + NCCL's default
    (zones,) = s["rules"].figures()
    assert isinstance(zones, ZoneChart) and len(zones.rows) == 2
    assert any("line 8" in getattr(b, "text", "") for b in s["rules"].blocks)
    (val,) = s["validate"].figures()
    assert val.ref_y == 1.0 and any(any(x.marked) for x in val.series)
    ce, sm = s["links"].figures()
    assert isinstance(sm, Heatmap) and sm.mark == SLOW_LINK and ce.mark == SLOW_LINK  # CE's own slowest too
    assert "1 FAIL, 1 PASS, 1 WAIVED, 1 WARN" in s["doctor"].blocks[0].text
    assert "--compare" in s["compare"].blocks[0].text


def test_compare_section(db):
    s = sections_of(db, compare=(1, 2))
    assert [r.id for r in load_runs(db, compare=(1, 2))] == [1, 2]
    texts = [getattr(b, "text", "") for b in s["compare"].blocks]
    assert "10 of 56 points regress by more than 3%" in texts
    figs = s["compare"].figures()
    assert [f.ref_band for f in figs] == [(0.97, 1.03)] * 2
    assert sum(sum(x.marked) for f in figs for x in f.series) == 10


def load_runs(db, **kw):
    with Store(db, create=False) as store:
        return load(store, **kw).runs


def test_cli_writes_a_page_with_every_section_escaped_and_offline(db, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    page = out.read_text()
    p = _Ids()
    p.feed(page)
    # every section with something to show; the others (no ab run, no comparison asked for) only in one table
    empty = [i for i, x in sections_of(db).items() if x.empty]
    assert empty == ["ab", "compare"]
    assert [i for i in p.ids if i in SECTION_IDS] == [i for i in SECTION_IDS if i not in empty]
    left = page.split('id="left-out"')[1]
    assert p.ids[-1] == "left-out" and "No comparison requested" in left and "No ab runs" in left
    assert "script" not in p.tags and "img" not in p.tags and "link" not in p.tags
    assert MARKUP not in page and "&lt;script&gt;alert(" in page
    # nothing fetched from anywhere: the only URL is the SVG namespace
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {"http://www.w3.org/2000/svg"}
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")] == []
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # as any file the user makes (0644 under umask 022)


def test_cli_run_selection(db, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--out", str(out), "--runs", "6-7"]) == 0
    assert "run 6 (links" in out.read_text() and "run 1 (bench" not in out.read_text()
    assert main(["report", "--db", str(db), "--out", str(out), "--run", "3"]) == 0
    page = out.read_text()
    assert "No links runs (measured or imported) among the runs in this report (3)" in page.split('id="left-out"')[1]
    assert 'id="links"' not in page and 'href="#links"' not in page


@pytest.mark.parametrize("argv, message", [
    (["--runs", "1,99"], "no run 99; runs in"),
    (["--compare", "1", "1"], "--compare needs two different runs"),
    (["--compare", "1", "42"], "no run 42"),
    (["--runs", "a"], "--runs: 'a' is not a run id"),
    (["--tolerance", "-1", "--compare", "1", "2"], "--tolerance must be >= 0"),
])
def test_cli_errors_are_messages(db, tmp_path, capsys, argv, message):
    rc = main(["report", "--db", str(db), "--out", str(tmp_path / "r.html"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_cli_missing_and_empty_database(tmp_path, capsys):
    assert main(["report", "--db", str(tmp_path / "nope.db"), "--out", str(tmp_path / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with Store(tmp_path / "empty.db"):
        pass
    assert main(["report", "--db", str(tmp_path / "empty.db"), "--out", str(tmp_path / "r.html")]) == 2
    assert "has no runs yet" in capsys.readouterr().err
    assert main(["report", "--db", str(tmp_path / "empty.db"), "--out", str(tmp_path / "no/dir/r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_parse_run_ids():
    assert parse_run_ids("3,4") == [(3, 3), (4, 4)] and parse_run_ids("2-4, 9") == [(2, 4), (9, 9)]
    with pytest.raises(UsageError, match="backwards"):
        parse_run_ids("5-2")
    for bad in ("3-", "-", "a-b", ","):
        with pytest.raises(UsageError, match="--runs"):
            parse_run_ids(bad)


def test_png_without_matplotlib_is_a_clear_error(db, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_mpl(name, *args, **kw):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    needs = r"--png needs matplotlib.*pip install .ccltune\[png\]."
    with Store(db, create=False) as store, pytest.raises(UsageError, match=needs):
        write_report(store, tmp_path / "r.html", png_dir=tmp_path / "png")
    assert not (tmp_path / "r.html").exists()


def test_png_writes_every_figure(db, tmp_path):
    pytest.importorskip("matplotlib", reason="--png needs matplotlib (in the test extra)")
    with Store(db, create=False) as store:
        result = write_report(store, tmp_path / "r.html", png_dir=tmp_path / "png")
    n_figs = sum(len(s.figures()) for s in result.sections)
    assert len(result.pngs) == n_figs == 12
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in result.pngs)
    assert result.pngs[0].name == "bench-01-all-gather-bus-bandwidth.png"


def test_sweep_and_validate_sections_show_where_the_time_went(tmp_path):
    from ccltune.report.model import Table

    path = tmp_path / "t.db"
    phases = {"timed": {"seconds": 9.1, "count": 268}, "warm-up": {"seconds": 8.4, "count": 5},
              "communicator init": {"seconds": 2.1, "count": 61, "part_of": "first call and warm-up"}}
    with Store(path) as store:
        for kind in ("sweep", "validate"):
            rid = store.begin_run(kind, command=f"ccltune {kind} (test data)", env={"host": "node-a"})
            store.finish_run(rid, "complete", {"wall_s": 43.2, "time": phases})
        rid = store.begin_run("sweep", command="ccltune sweep (before 2026-11-22)", env={"host": "node-a"})
        store.finish_run(rid, "complete", {"rows": 0})
    secs = sections_of(path)
    for sid, run_id in (("sweep", 1), ("validate", 2)):
        (t,) = [b for b in secs[sid].blocks if isinstance(b, Table) and "time on rank 0" in b.caption]
        assert t.caption == f"run {run_id}: time on rank 0, 43.2 s in all"
        assert t.rows[0] == ["timed", "9.1", "268", "21%"]
        assert t.rows[2][0] == "communicator init (in first call and warm-up)"
    # a run without the record (older runs) shows no such table
    assert sum("time on rank 0" in getattr(b, "caption", "") for b in secs["sweep"].blocks) == 1
