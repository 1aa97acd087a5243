"""The report's ab section: a real ab run (the fake job) stored, then drawn."""

from __future__ import annotations

import sys
from pathlib import Path

from ccltune.cli import main
from ccltune.report import load
from ccltune.report.model import StripChart, Table
from ccltune.report.sections import ab_section
from ccltune.store import Store

JOB = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_step_job.py")


def test_report_draws_each_arm_as_a_strip_with_its_effect_and_interval(tmp_path, capsys) -> None:
    db = tmp_path / "ab.db"
    main(["ab", "--db", str(db), "--env", "FAKE_SLOW=1", "--metric", r"step +[0-9]+ +([0-9.]+) ms",
          "--rounds", "7", "--seed", "9", "--", sys.executable, JOB])
    capsys.readouterr()
    with Store(db, readonly=True) as st:
        section = ab_section(load(st))
    (chart,) = [b for b in section.blocks if isinstance(b, StripChart)]
    rows = {r.label: r for r in chart.rows}
    assert list(rows) == ["default", "default-2", "FAKE_SLOW=1"]
    assert all(len(r.values) == 7 for r in rows.values())
    assert rows["FAKE_SLOW=1"].level == "bad" and rows["FAKE_SLOW=1"].effect.startswith("x1.0")
    assert "slower" in rows["FAKE_SLOW=1"].effect and "(A/A)" in rows["default-2"].effect
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert "Wilcoxon signed-rank" in table.caption and table.row_class[2] == "bad"
    assert "slower: FAKE_SLOW=1" in section.blocks[0].text  # type: ignore[union-attr]
    out = tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    html = out.read_text()
    assert 'id="ab"' in html and html.count("<circle") >= 12 and "FAKE_SLOW=1 run 4" in html


def test_an_in_run_ab_is_drawn_as_blocks_of_one_run(tmp_path, capsys) -> None:
    """ab --in-run stores each arm's blocks of the one run: the report calls them blocks (the strip's dots, its
    axis, the table's count), not runs with a 'failed' column that an in-run verdict has no value for."""
    db = tmp_path / "ab.db"
    rules = tmp_path / "slow.conf"
    rules.write_text("# slow (the fake job reads this word)\nallreduce,0,1K,ring,simple,-1,-1,-1\n")
    job = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_inrun_job.py")
    main(["ab", "--in-run", "--db", str(db), "--rules", str(rules), "--metric", r"step +[0-9]+ +([0-9.]+) ms",
          "--block-steps", "6", "--warmup-blocks", "1", "--seed", "5", "--", sys.executable, job])
    capsys.readouterr()
    with Store(db, readonly=True) as st:
        section = ab_section(load(st))
    (chart,) = [b for b in section.blocks if isinstance(b, StripChart)]
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert chart.item == "block" and "blocks inside one run of the job" in chart.title
    assert table.columns[:2] == ["arm", "blocks"] and "failed" not in table.columns
    assert all(row[1].isdigit() and int(row[1]) >= 6 for row in table.rows)
    assert "round(s) of blocks inside one run of the job" in section.blocks[0].text  # type: ignore[union-attr]
    out = tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    html = out.read_text()
    assert "slow block 3" in html and "value per block" in html
