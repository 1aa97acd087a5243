"""The report in a real browser: headless Chromium loads it without console messages or
requests, shows every section, and a script appended to a copy of the page (the report
itself has none) reads what a person sees: the verdict cards and their numbers, a legend
entry hiding and showing its series, the run picker, legend entries that fit. Screenshots
are copied to /tmp/ccltune-report*.png for a person to look at. Skipped only when Chromium
is not installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.report.sections import SECTION_IDS
from ccltune.store import Measurement, Store
from report_db import mixed_store
from test_report_synthetic import fill_store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package 'chromium')")
SCREENSHOT_COPY = Path("/tmp/ccltune-report.png")
# Chromium logs every console message and uncaught exception of the page, with
# --enable-logging=stderr, as '...:INFO:CONSOLE:<line>] "<message>", source: ...'.
_CONSOLE = re.compile(r":CONSOLE[:(]|Uncaught")


def chromium(tmp_path: Path, page: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,4000", *flags,
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE.search(line)]


class _SectionText(HTMLParser):
    """Text inside each <section id=...>, by id."""

    def __init__(self) -> None:
        super().__init__()
        self.text: dict[str, str] = {}
        self.current: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "section":
            self.current = dict(attrs).get("id")
            self.text[self.current] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.current = None

    def handle_data(self, data: str) -> None:
        if self.current:
            self.text[self.current] += data


def test_console_capture_works(tmp_path):
    """The check below means something: a page with errors is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); notDefined();</script></body></html>')
    lines = console_lines(chromium(tmp_path, bad, "--dump-dom").stderr)
    assert any("boom" in line for line in lines) and any("Uncaught" in line for line in lines)


FAKE_JOB = str(Path(__file__).resolve().parents[1] / "jobs" / "fake_step_job.py")


def test_report_in_headless_chromium(tmp_path):
    db, page = tmp_path / "results.db", tmp_path / "report.html"
    with Store(db) as store:
        fill_store(store)
    # every section has data: an ab run of the fake job too (its own section, strips and intervals)
    assert main(["ab", "--db", str(db), "--env", "FAKE_SLOW=1", "--metric", r"step +[0-9]+ +([0-9.]+) ms",
                 "--rounds", "7", "--seed", "9", "--", sys.executable, FAKE_JOB]) == 1   # the slower arm: exit 1
    with Store(db, readonly=True) as store:
        last = store.runs("ab")[-1].id
    assert main(["report", "--db", str(db), "--out", str(page), "--runs", f"1-7,{last}", "--compare", "1", "2"]) == 0

    dom = chromium(tmp_path, page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_lines(dom.stderr) == []
    sections = _SectionText()
    sections.feed(dom.stdout)
    assert list(sections.text) == list(SECTION_IDS)
    for sid, text in sections.text.items():
        assert len(text.strip()) > 40, f"section {sid!r} is empty"
        assert "No " not in text[:80] or sid == "compare", f"section {sid!r} shows no data: {text[:120]!r}"
    assert "10 of 56 points regress" in sections.text["compare"]
    assert dom.stdout.count("<svg") == page.read_text().count("<svg")  # every plot parsed


# Appended to a copy of the page: what a reader sees, as JSON in <body data-probe>.
_PROBE = """<script>
const out = {};
out.cards = [...document.querySelectorAll('.card')].map(c => c.innerText);
const shown = el => getComputedStyle(el).display !== 'none';
const fig = [...document.querySelectorAll('#bench figure')].find(f => f.querySelector('svg g.s1'));
const g = fig.querySelector('svg g.s1'), label = fig.querySelector('.legend label.l1');
// a keyboard reaches the toggles (hidden from sight, not display:none) and sees which one it is on
const boxes = [...document.querySelectorAll('input.tg, input.pick')];
out.unreachable = boxes.filter(b => getComputedStyle(b).display === 'none' || b.tabIndex < 0).length;
const box = document.getElementById(label.htmlFor);
box.focus();
out.focused = document.activeElement === box;
out.outline = getComputedStyle(label).outlineStyle;
box.blur();
out.before = shown(g); label.click(); out.after = shown(g); label.click(); out.again = shown(g);
const pick = document.querySelector('.picker label');
const run = document.getElementById(pick.htmlFor).id.replace('pick-', '');
pick.click();
out.picked = [...document.querySelectorAll('#bench g.' + run)].map(shown);
pick.click();
out.cut = [...document.querySelectorAll('.legend label')].filter(l => l.scrollWidth > l.clientWidth + 1
    || l.getBoundingClientRect().right > l.closest('figure').getBoundingClientRect().right + 1).map(l => l.innerText);
out.resources = performance.getEntriesByType('resource').map(e => e.name);
document.body.dataset.probe = JSON.stringify(out);
</script>"""


@pytest.fixture(scope="module")
def mixed_db(tmp_path_factory) -> Path:
    """The 13-run mixed database, built once for the pages below."""
    db = tmp_path_factory.mktemp("mixed") / "mixed.db"
    mixed_store(db)
    return db


def probe(tmp_path: Path, page: Path) -> dict:
    """What a reader sees of ``page`` (``_PROBE``), after checking it fetches nothing and loads
    without a console message."""
    html = page.read_text()
    assert "<script" not in html and not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing to fetch
    copy = tmp_path / f"probe-{page.name}"
    copy.write_text(html.replace("</body>", _PROBE + "</body>"))
    dom = chromium(tmp_path, copy, "--dump-dom")
    assert dom.returncode == 0 and console_lines(dom.stderr) == []
    found = json.loads(re.search(r'data-probe="([^"]*)"', dom.stdout).group(1).replace("&quot;", '"')
                       .replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert (found["before"], found["after"], found["again"]) == (True, False, True)  # a legend entry toggles
    assert found["picked"] and not any(found["picked"])  # the picker hides that run on every plot
    assert found["cut"] == [] and found["resources"] == []
    assert found["unreachable"] == 0 and found["focused"] and found["outline"] == "solid"
    return found


def test_mixed_database_reads_in_chromium(tmp_path, mixed_db):
    page = tmp_path / "report.html"
    assert main(["report", "--db", str(mixed_db), "--out", str(page), "--latest", "13"]) == 0  # every run drawn
    found = probe(tmp_path, page)
    node_a = next(c for c in found["cards"] if c.startswith("node-a"))
    assert "Not healthy" in node_a and "400.00 GB/s" in node_a and "90%" in node_a and "1.079x" in node_a
    assert "26.3 → 24.8 us" in node_a and "default ± 0.3" in node_a and "-> rules ± 0.8" in node_a and "replay run 13 PASS" in node_a
    mi300x = next(c for c in found["cards"] if "MI300X" in c)
    assert "316.47 GB/s" in mi300x  # the imported TransferBench matrix's ceiling, 45.21 x 7

    shot = tmp_path / "report.png"
    run = chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1400,9000")
    assert run.returncode == 0 and console_lines(run.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copyfile(shot, SCREENSHOT_COPY)


def test_default_report_reads_in_chromium(tmp_path, mixed_db):
    """``ccltune report`` as a user first runs it: the latest 12 of 13 runs drawn, run 1 summarised."""
    page = tmp_path / "default.html"
    assert main(["report", "--db", str(mixed_db), "--out", str(page)]) == 0
    assert "the latest 12 drawn in full" in page.read_text()
    found = probe(tmp_path, page)
    assert len(found["cards"]) == 6 and any("Not healthy" in c and "400.00 GB/s" in c for c in found["cards"])


# TEST DATA, shaped as `ccltune bench all` on the CPU engine stores it (gloo, 2 ranks: all_reduce in place,
# its out-of-place rows waived with this note), then ten later runs of three sizes each.
GLOO_WAIVED = "torch.distributed's API is in-place only for this collective"


def _gloo_bench(store: Store, sizes: list[int]) -> int:
    env = {"host": "vm", "gpus": [], "world_size": 2, "n_nodes": 1, "engine": "gloo", "platform": "cpu x2"}
    rid = store.begin_run("bench", command="ccltune bench all", env=env, engine="gloo")
    rows = []
    for size in sizes:
        t = 20.0 + size / 2e3
        rows.append(Measurement("all_reduce", size, size // 4, "float", "sum", None, True, 2, time_us=t,
                                algbw_gbps=size / t / 1e3, busbw_gbps=size / t / 1e3, wrong=0))
        rows.append(Measurement("all_reduce", size, size // 4, "float", "sum", None, False, 2, status="waived",
                                note=GLOO_WAIVED))
        # all_gather of 8 B on 2 ranks is stored as 0 B (no whole float per rank), busbw 0: a gap at 0 B on a
        # log axis, which crashed the report ('math domain error') before
        stored = size if size > 8 else 0
        rows.append(Measurement("all_gather", stored, stored // 8, "float", None, None, False, 2, time_us=t,
                                algbw_gbps=stored / t / 1e3, busbw_gbps=stored / t / 2e3, wrong=0))
    store.add_measurements(rid, rows)
    store.finish_run(rid, "complete", {"rows": len(rows)})
    return rid


def test_a_bench_only_database_of_many_runs_shows_its_main_result(tmp_path):
    """Issue 32: a README run over 8 B-32 MB, then ten small runs. The page showed the newest small curves and
    put the big one among the hidden series, said 'waived' once per run under each plot, and had seven sections
    saying 'No ...'. Now the widest run is shown, the waived series are one line, and the empty sections are
    one table at the end."""
    db, page = tmp_path / "b.db", tmp_path / "b.html"
    with Store(db) as store:
        main_run = _gloo_bench(store, [8 << i for i in range(23)])   # 8 B .. 32 MB
        for _ in range(10):
            _gloo_bench(store, [1024, 2048, 4096])
    assert main(["report", "--db", str(db), "--out", str(page)]) == 0
    dom = chromium(tmp_path, page, "--dump-dom")
    assert dom.returncode == 0 and console_lines(dom.stderr) == []
    sections = _SectionText()
    sections.feed(dom.stdout)
    assert list(sections.text) == ["verdict", "bench", "runs", "env", "left-out"]
    assert all("No " not in text[:80] for sid, text in sections.text.items() if sid != "left-out")
    for sid in ("links", "rules", "validate", "ab", "sweep", "doctor", "compare"):
        assert f'href="#{sid}"' not in dom.stdout
    left = sections.text["left-out"]
    assert "No sweep runs among the runs in this report (1-11)" in left and "No comparison requested" in left

    figure = dom.stdout.split("all_reduce: bus bandwidth", 1)[1].split("</figure>", 1)[0]
    hidden = set(re.findall(r'<input type="checkbox" class="tg" id="(f\d+s\d+)" checked', dom.stdout))
    first = re.search(r'<label for="(f\d+s\d+)"[^>]*>.*?</svg>([^<]*)</label>', figure)
    assert first.group(2) == f"run {main_run}, in-place" and first.group(1) not in hidden  # the 23-size run, shown
    assert "3 more series hidden" in figure
    waived = re.findall(r'<p class="fignote">([^<]*waived[^<]*)</p>', figure)
    assert waived == [f"out-of-place of runs 1-11: waived, {GLOO_WAIVED}"]  # one line, not eleven
    gather = dom.stdout.split("all_gather: bus bandwidth", 1)[1].split("</figure>", 1)[0]
    assert f"run {main_run}: not drawn at 0B (0, below a log axis)" in gather
