"""Rankings that declare ties: contestants whose intervals overlap share a rank, marked "=", in the terminal,
the Markdown export and the HTML page (read back in a real headless Chromium)."""

from __future__ import annotations

import re
import shutil

import pytest

from netarena.report import load_report, write_run_report
from netarena.report.markdown import render_markdown
from netarena.report.model import Rank, ranking
from netarena.report.terminal import render_text
from netarena.store import Store
from report_fixtures import ENVIRONMENT, _record, generator_doc, monitor_doc
from test_report_html import _browser, _open_offline, chart_traces, tables

# Three repeats each (so each interval is the repeats' min–max), chosen so that:
# a and b overlap (b's 2,150 reaches a's 2,000); c overlaps b (1,950 >= 1,900) but not a (1,950 < 2,000);
# d overlaps nobody.
REPEATS = {"a": (2000.0, 2100.0, 2200.0), "b": (1900.0, 2000.0, 2150.0), "c": (1700.0, 1800.0, 1950.0),
           "d": (500.0, 520.0, 540.0)}
# The rule: each takes the place of the best-placed contestant it overlaps; "=" where it overlaps anyone.
EXPECTED = {"a": "1=", "b": "1=", "c": "2=", "d": "4"}


@pytest.fixture(scope="module")
def tied_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    store = Store(results)
    run_id = store.create_run(suite_name="ties", suite_path=None, suite={"name": "ties", "repeat": 3},
                              args={"argv": ["netarena", "run", "ties"]}, backend="real", server_cpus=[0],
                              generator_cpus=[1], environment=ENVIRONMENT, planned=12, netarena_version="0.1.0",
                              git_sha="abc123", orchestrator_start_time=None)
    for name, figures in REPEATS.items():
        store.record_contestant(run_id, name, {"name": name}, None, "ready")
        for repeat, rps in enumerate(figures):
            _record(store, run_id, contestant=name, scenario="hello", connections=10, repeat=repeat,
                    generator=generator_doc(rps=rps, latency_us={4000: 99, 9000: 1}),
                    monitor=monitor_doc(cpu_pct=50, rss_bytes=10 << 20), error_rate=0.0)
    store.set_run_status(run_id, "complete")
    report = load_report(store, run_id)
    page = write_run_report(store, run_id, results / "report.html")
    store.close()
    return report, page


def test_ranking_follows_the_tie_rule(tied_run):
    report, _ = tied_run
    rank = ranking(report.groups)
    assert {key[0]: r for key, r in rank.items()} == {"a": Rank(1, True), "b": Rank(1, True), "c": Rank(2, True),
                                                      "d": Rank(4, False)}


def test_terminal_shows_tied_ranks(tied_run):
    report, _ = tied_run
    text = render_text(report)
    shown = {m.group(2): m.group(1) for m in re.finditer(r"^\s*(\d+=?)\s+([abcd])\s", text, re.M)}
    assert shown == EXPECTED, text
    flat = " ".join(text.split())
    assert "interval = 95% CI of the median" in flat and "= = tied: its interval overlaps another's" in flat


def test_markdown_shows_tied_ranks(tied_run):
    report, _ = tied_run
    md = render_markdown(report)
    rows = [line.split(" | ") for line in md.splitlines() if re.match(r"^\| \d", line)]
    assert {cells[1]: cells[0].lstrip("| ") for cells in rows} == EXPECTED, md
    assert "| rank | contestant | req/s (median) | interval |" in md
    # the interval of three repeats is their min–max
    assert next(cells for cells in rows if cells[1] == "c")[3] == "1,700–1,950"


def test_html_shows_tied_ranks_in_chromium(tied_run):
    _, page = tied_run
    text = page.read_text()
    rows = tables(text, "summary")[0]
    assert {row[1]: row[0] for row in rows[1:]} == EXPECTED
    # the level's chart labels each throughput bar with the same rank
    bars = chart_traces(text, "hello c=10,w=1: throughput and p99 by contestant")[0]
    assert dict(zip(bars["x"], bars["text"])) == {name: f"rank {shown}" for name, shown in EXPECTED.items()}
    driver, profile = _browser()
    try:
        _open_offline(driver, page.as_uri())
        shown = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.summary tr[data-contestant]')).map(tr => "
            "[tr.dataset.contestant, tr.querySelector('td[data-field=rank]').innerText.trim(), "
            "tr.querySelector('td[data-field=rank]').dataset.tied || '']);")
        assert {name: text for name, text, _ in shown} == EXPECTED
        assert {name for name, _, tied in shown if tied == "1"} == {"a", "b", "c"}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
