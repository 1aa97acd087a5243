"""The report in a real browser: headless Chromium loads it without console messages,
shows every section, and takes a screenshot (also copied to /tmp/ccltune-report.png for a
person to look at). Skipped only when Chromium is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ccltune.cli import main
from ccltune.report.sections import SECTION_IDS
from ccltune.store import Store
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


def test_report_in_headless_chromium(tmp_path):
    db, page = tmp_path / "results.db", tmp_path / "report.html"
    with Store(db) as store:
        fill_store(store)
    assert main(["report", "--db", str(db), "--out", str(page), "--runs", "1-7", "--compare", "1", "2"]) == 0

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

    shot = tmp_path / "report.png"
    run = chromium(tmp_path, page, f"--screenshot={shot}")
    assert run.returncode == 0 and console_lines(run.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a blank page compresses far smaller
    shutil.copyfile(shot, SCREENSHOT_COPY)
