"""The HTML report: structure from hand-built runs, then the page in a real headless Chromium, offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from netarena.report import load_report, write_run_report
from netarena.report.model import ranks
from netarena.store import Store
from conftest import under_ci
from netarena.report import fmt
from report_fixtures import DISCARDED_REASON, INSTALL_LOG_TAIL, populate_hostile_run, populate_run

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    store = Store(results)
    run_id = populate_run(store)
    path = write_run_report(store, run_id, results / "report.html")
    store.close()
    return results, run_id, path


class _Rows(HTMLParser):
    """Collects summary table rows (data-contestant/data-level) in order, plus every id= and href=#."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[str, str, str]] = []  # (table class, contestant, level)
        self.ids: set[str] = set()
        self.links: set[str] = set()
        self.table_class = ""
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table_class = a.get("class") or ""
        if tag == "tr" and "data-contestant" in a and "data-level" in a:
            self.rows.append((self.table_class, a["data-contestant"], a["data-level"]))
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.links.add(a["href"][1:])
        for attr in ("src", "href"):
            if tag in ("script", "link", "img", "iframe") and a.get(attr):
                self.external.append(a[attr])


def test_summary_tables_rank_by_median_throughput(written):
    results, run_id, path = written
    parser = _Rows()
    parser.feed(path.read_text())
    hello = [(c, l) for cls, c, l in parser.rows if "scenario-hello" in cls]
    assert hello == [("alpha", "c=10,w=1"), ("gamma", "c=10,w=1"), ("beta", "c=10,w=1"), ("delta", "c=10,w=1"),
                     ("alpha", "c=100,w=1"), ("gamma", "c=100,w=1"), ("beta", "c=100,w=1"), ("delta", "c=100,w=1")]
    report = load_report(results, run_id)
    assert ranks(report.groups)[("gamma", "hello", "c=100,w=1")] == 2


def test_every_measurement_link_resolves_and_every_measurement_is_listed(written):
    results, run_id, path = written
    parser = _Rows()
    parser.feed(path.read_text())
    report = load_report(results, run_id)
    assert {f"m{m.id}" for m in report.measurements} <= parser.ids
    assert parser.links <= parser.ids  # no dangling #anchor
    assert {f"m{i}" for g in report.groups for i in g.measurement_ids} <= parser.links


def test_badges_and_sections_present(written):
    _, _, path = written
    text = path.read_text()
    for badge in ("GEN", "CV", "ERR", "VERIFY", "CRASH", "FAIL"):
        assert f'data-badge="{badge}"' in text
    beta_row = re.search(r'<tr[^>]*data-contestant="beta" data-level="c=10,w=1">.*?</tr>', text).group(0)
    assert 'data-badge="CV"' in beta_row and 'data-badge="ERR"' in beta_row and "GEN" not in beta_row
    for section in ("summary", "throughput", "latency", "errors", "resources", "echo", "probe", "environment",
                    "skipped", "measurements"):
        assert f'id="{section}"' in text
    assert "does not implement echo: it only speaks HTTP" in text
    assert "data-partial" not in text  # a complete run is not marked partial
    assert "Test CPU 3000" in text and "6.1.0-test" in text  # environment
    assert "netarena-load http 127.0.0.1:1 -c 10 --json" in text  # exact generator command line


def test_cost_per_request_has_a_section_a_column_and_a_chart_of_its_own(written):
    results, run_id, path = written
    text = path.read_text()
    report = load_report(results, run_id)
    alpha = next(g for g in report.groups if (g.contestant, g.scenario, g.level_key) == ("alpha", "hello", "c=10,w=1"))
    # In the summary, beside the throughput: the server's CPU per request, its CV and the generator's.
    summary = tables(text, "summary")[0]
    column = summary[0].index("server CPU per request")
    alpha_row = next(r for r in summary if r[1:3] == ["alpha", "c=10,w=1"])
    assert alpha_row[column].startswith(fmt.cpu_us(alpha.server_cpu_us_median))
    assert f"generator {fmt.cpu_us(alpha.generator_cpu_us_median)}" in alpha_row[column]
    # Its own section: user + system, context switches, generator, steal and waits, and the discarded measurement.
    assert 'id="cost"' in text and 'href="#cost"' in text
    cost = tables(text, "cost")[0]
    row = next(r for r in cost if r[:3] == ["alpha", "hello", "c=10,w=1"])
    assert row[4].startswith(f"{fmt.cpu_us(alpha.server_cpu_us_median)}/req")
    assert row[5] == f"{fmt.cpu_us(alpha.server_cpu_user_us_median)} + {fmt.cpu_us(alpha.server_cpu_sys_us_median)}"
    assert row[7] == f"{fmt.cpu_us(alpha.generator_cpu_us_median)}/req"
    assert row[11].startswith("1") and row[11].endswith(f"#4: {DISCARDED_REASON}")
    # The chart: per contestant and level, the server's user and system stacked, the generator's beside.
    traces = chart_traces(text, "hello: CPU per request")
    assert [t["name"] for t in traces] == ["server user", "server system", "generator"]
    at = traces[0]["x"].index("alpha c=10,w=1")
    assert traces[0]["y"][at] == pytest.approx(alpha.server_cpu_user_us_median)
    assert traces[2]["y"][at] == pytest.approx(alpha.generator_cpu_us_median)
    # The discarded measurement is listed with why, and the page's header counts it.
    assert f'data-discarded="{alpha.measurement_ids[-1]}"' in text and "1 discarded as noisy" in text


def chart_traces(text: str, title: str) -> list[dict]:
    """The traces of the chart titled ``title``, read back from the Plotly.newPlot call in the page."""
    start = text.index(f'data-chart="{title}"')
    call = text.index("Plotly.newPlot(", start) + len("Plotly.newPlot(")
    decoder, space = json.JSONDecoder(), re.compile(r"[\s,]*")
    _, end = decoder.raw_decode(text, space.match(text, call).end())  # the div id
    traces, _ = decoder.raw_decode(text, space.match(text, end).end())
    return traces


class _Tables(HTMLParser):
    """Every table as (class, [rows of cell texts]); the header row included."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1][1]:
            self.tables[-1][1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables(text: str, cls: str) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(text)
    return [rows for table_class, rows in parser.tables if cls in table_class.split()]


def test_echo_flood_has_a_table_per_size_and_a_line_per_contestant_and_size(written):
    """Seed 000 sends 32 KiB and 512 KiB per connection: neither size may hide the other."""
    _, _, path = written
    text = path.read_text()
    floods = tables(text, "echo-flood")
    assert len(floods) == 2
    # Medians of the fixture's repeats (x0.98, x1, x1.02): alpha 0.05 s per 32 KiB at 10 connections, gamma
    # 0.12 s; x10 at 100 connections; x16 for 512 KiB.
    expected = {"32KiB": {"alpha": ("0.050 s", "0.500 s"), "gamma": ("0.120 s", "1.200 s")},
                "512KiB": {"alpha": ("0.800 s", "8.000 s"), "gamma": ("1.920 s", "19.200 s")}}
    for size, table in zip(("32KiB", "512KiB"), floods):
        assert f"{size} per connection" in text
        header, *rows = table
        assert header == ["contestant", "10 connections", "100 connections"]
        assert [r[0] for r in rows] == ["alpha", "gamma"]
        for row in rows:
            assert (row[1].split("[")[0].strip(), row[2].split("[")[0].strip()) == expected[size][row[0]], (size, row)
    traces = chart_traces(text, "echo flood: completion time vs connections")
    assert sorted(t["name"] for t in traces) == ["alpha (32KiB)", "alpha (512KiB)", "gamma (32KiB)",
                                                 "gamma (512KiB)"]
    for t in traces:
        assert t["x"] == [10, 100]  # one size per line: never a zig-zag between sizes
        assert t["y"][1] == pytest.approx(10 * t["y"][0])
    probes = tables(text, "probe")
    [probe_table] = probes
    assert len(probe_table) - 1 == 8  # alpha and gamma x 2 sizes x 2 connection counts


def test_skipped_table_shows_the_reason_and_the_detail(written):
    _, _, path = written
    text = path.read_text()
    [skipped] = tables(text, "skipped")
    assert skipped[0] == ["contestant", "scenario", "level", "why"]
    rows = {r[0]: r for r in skipped[1:]}
    assert rows["epsilon"] == ["epsilon", "echo", "all", "does not implement echo: it only speaks HTTP"]
    assert rows["zeta"][:3] == ["zeta", "all", "all"]
    # The install log's tail, escaped, folded under the reason.
    zeta = re.search(r"<tr[^>]*><td>zeta</td>.*?</tr>", text, re.S).group(0)
    assert '<details class="skip-detail"><summary>details</summary><pre>' in zeta
    assert html_escape(INSTALL_LOG_TAIL) in zeta and "<not markup>" not in zeta


def test_vmstat_tables_have_a_row_per_system_sample(written):
    _, _, path = written
    text = path.read_text()
    vmstat = tables(text, "vmstat")
    # The median repeat of each contestant x level with monitor samples: hello alpha, beta, gamma at 2 levels;
    # echo alpha, gamma at 2 sizes x 2 levels.
    assert len(vmstat) == 3 * 2 + 2 * 4
    for header, *rows in vmstat:
        assert header == ["t (s)", "cs/s", "in/s", "us %", "sy %", "id %", "wa %", "st %", "cpu0 busy %",
                          "cpu1 busy %"]
        assert len(rows) == 7  # the fixture's 8 monitor samples give 7 system intervals
        assert rows[0][:8] == ["0.25", "12,100", "3,000", "45.0", "40.0", "15.0", "0.0", "0.0"]
        assert [r[0] for r in rows] == [f"{0.25 * i:.2f}" for i in range(1, 8)]
    assert "menu at the top right of each chart" in text


def test_probe_table_has_a_row_per_contestant_and_level(written):
    _, _, path = written
    [probe] = tables(path.read_text(), "probe")
    header, *rows = probe
    assert header == ["contestant", "level", "completed/attempts", "errors", "p50", "p99", "max", "from"]
    by_key = {(r[0], r[1]): r for r in rows}
    # Each repeat's probe: 4 at a quarter and 1 at half the flood's nominal time (alpha 32 KiB at 10
    # connections: 50 ms), merged over 3 repeats.
    assert by_key[("alpha", "c=10,w=1,bytes=32768")][2:7] == ["15/15", "0", "12.5ms", "25.0ms", "25.0ms"]
    # gamma 512 KiB at 100 connections: 19.2 s nominal; 4.8 s and 9.6 s land in HdrHistogram buckets (3
    # significant digits) whose highest equivalent values are 4,801 ms and 9,601 ms.
    assert by_key[("gamma", "c=100,w=1,bytes=524288")][2:7] == ["15/15", "0", "4801ms", "9601ms", "9601ms"]
    assert all(r[7].count("#") == 3 for r in rows)  # the 3 repeats behind each row


def test_page_is_self_contained(written):
    _, _, path = written
    parser = _Rows()
    parser.feed(path.read_text())
    assert parser.external == []  # no <script src>, <link href>, <img src>: everything inline


def _browser():
    if under_ci():
        # CI installs selenium (the test extra) and chromium: missing is a failure naming what is missing.
        if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
            pytest.fail(f"{CHROMIUM} / {CHROMEDRIVER} missing: .ci/debian-packages.txt lists chromium and "
                        "chromium-driver")
        from selenium import webdriver
    else:
        webdriver = pytest.importorskip("selenium.webdriver")
        if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
            pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="netarena-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # An explicit chromedriver path: selenium-manager never looks for (or downloads) a driver.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    return driver, profile


def _open_offline(driver, url: str) -> list[str]:
    """Load url with the network emulated offline; returns every URL the page requested."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions",
                           {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    driver.get("about:blank")
    driver.get_log("performance")  # drop the browser's own start-up requests
    driver.get(url)
    requested = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    return requested


# Per chart: its visible traces (plotly's resolved g._fullData), how many carry data, how many of the page's
# traces (g.data) plotly hid for want of data, the marks that data calls for (a marker per finite point of a
# "markers" trace, a line per "lines" trace with two or more points, a bar per non-zero value) and the marks
# actually drawn in the SVG (paths with a real "d").
_CHART_STATE_JS = """
const finite = v => v !== null && v !== undefined && v !== '' && Number.isFinite(Number(v));
return Array.from(document.querySelectorAll('.plotly-graph-div')).map(g => {
  const visible = (g._fullData || []).filter(t => t.visible === true);
  let withData = 0, wantPoints = 0, wantLines = 0, wantBars = 0;
  for (const t of visible) {
    const xs = Array.from(t.x || []), ys = Array.from(t.y || []);
    const n = ys.filter((y, i) => finite(y) && xs[i] !== undefined && xs[i] !== null).length;
    if (n > 0) withData += 1;
    if (t.type === 'bar') {
      wantBars += ys.filter(y => finite(y) && Number(y) !== 0).length;
    } else {
      if ((t.mode || '').includes('markers')) wantPoints += n;
      if ((t.mode || '').includes('lines') && n > 1) wantLines += 1;
    }
  }
  // A trace the page meant to show but plotly hid (it does that to traces without data).
  const dropped = (g.data || []).filter((t, i) => t.visible !== false && !(g._fullData[i] || {}).visible).length;
  const drawn = sel => Array.from(g.querySelectorAll(sel)).filter(p => (p.getAttribute('d') || '').length > 4).length;
  return {id: g.id, title: (g.closest('.chart') || g).getAttribute('data-chart'),
          svg: !!g.querySelector('svg.main-svg'), visible: visible.length, withData, dropped,
          wantPoints, wantLines, wantBars, points: drawn('.scatterlayer path.point'),
          lines: drawn('.scatterlayer path.js-line'), bars: drawn('.barlayer .point path')};
});
"""


def _check_charts(driver) -> list[dict]:
    """Every chart drawn from data: each visible trace has non-empty x and y, and the SVG holds the markers,
    lines and bars that data calls for (an empty trace, or data plotly failed to draw, fails)."""
    charts = driver.execute_script(_CHART_STATE_JS)
    assert charts, "no chart on the page"
    for c in charts:
        assert c["svg"] and c["visible"] >= 1 and c["withData"] == c["visible"] and c["dropped"] == 0, c
        assert c["points"] >= c["wantPoints"] and c["lines"] >= c["wantLines"] and c["bars"] >= c["wantBars"], c
        assert c["points"] + c["lines"] + c["bars"] >= 1, c
    return charts


def _full_page_screenshot(driver, path: Path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(height, 16000))
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))


def test_report_in_headless_chromium_offline(written):
    _, _, path = written
    driver, profile = _browser()
    try:
        requested = _open_offline(driver, path.as_uri())
        assert [u for u in requested if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
        assert driver.execute_script("return typeof Plotly") == "object"
        charts = _check_charts(driver)
        # cost per request (hello), throughput x2 (hello, echo), completed/mean latency/errors vs connections
        # (hello), server CPU/RSS/MB/s vs connections x2, latency x6 (hello x2 levels, echo x2 sizes x2 levels),
        # errors, over time x2, echo flood
        assert len(charts) == 16
        by_title = {c["title"]: c for c in charts}
        # server user, server system and generator, each for alpha, beta and gamma at 2 levels
        assert by_title["hello: CPU per request"]["bars"] == 3 * 3 * 2
        flood = by_title["echo flood: completion time vs connections"]
        assert (flood["visible"], flood["points"], flood["lines"]) == (4, 8, 4)  # contestant x size, 2 points each
        assert by_title["hello: errors by class"]["bars"] == 4  # beta's reset and status at 2 levels
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
        # The resources chart's menu switches to another measurement.
        switched = driver.execute_script(
            "const g = Array.from(document.querySelectorAll('.plotly-graph-div')).find(g => g.layout.updatemenus);"
            "const b = g.layout.updatemenus[0].buttons[1];"
            "return Plotly.update(g, b.args[0], b.args[1]).then(() => g.data.filter(t => t.visible === true)"
            ".length)")
        assert switched == 5  # generator requests/s and p99; server CPU, RSS and context switches
        _check_charts(driver)  # the other measurement's series are drawn too
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "report-top.png"))
        _full_page_screenshot(driver, ARTIFACTS / "report.png")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    from netarena.report.compare import compare, render_html

    results = tmp_path_factory.mktemp("compare")
    store = Store(results)
    a, b = populate_run(store), populate_run(store, speedup=1.3)
    comparison = compare(load_report(store, a), load_report(store, b))
    store.close()
    path = results / "compare.html"
    path.write_bytes(render_html(comparison))
    return path, comparison


def test_compare_page_in_headless_chromium_offline(compared):
    path, comparison = compared
    parser = _Rows()
    parser.feed(path.read_text())
    assert parser.external == []
    assert len(parser.rows) == len(comparison.rows)  # one row per contestant x scenario x level
    driver, profile = _browser()
    try:
        requested = _open_offline(driver, path.as_uri())
        assert [u for u in requested if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
        charts = _check_charts(driver)
        assert len(charts) == 2  # hello and echo: ratio bars
        # hello: alpha, beta, gamma have ratios (delta none) at 2 levels -> 6 bars per metric, of throughput, p99
        # and server CPU per request; echo: alpha, gamma x 2 sizes x 2 levels -> 8 per metric, of throughput and
        # p99 (no bytes received in these documents: no cost per MiB).
        assert sorted(c["bars"] for c in charts) == [2 * 8, 3 * 3 * 2]
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
        _full_page_screenshot(driver, ARTIFACTS / "compare.png")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# Markup, a script, an event handler and a javascript: link, each closing what it may be inside of (an
# attribute, a <script> holding the charts' JSON, plotly's pseudo-HTML in titles and legends).
HOSTILE = ('x"\'></title></script><script>window.__pwned = "script"</script>'
           '<img src=x onerror="window.__pwned = 1"><a href="javascript:window.__pwned = 2">link</a><b>bold</b>')


def test_hostile_names_errors_logs_and_environment_are_shown_never_run(tmp_path):
    """Names, errors, an install log, the environment and chart titles come from contestants, suites and the
    machine: the page shows each as the text it is. Checked in the browser, which is what would run it."""
    store = Store(tmp_path)
    run_id = populate_hostile_run(store, HOSTILE)
    path = write_run_report(store, run_id, tmp_path / "report.html")
    store.close()
    driver, profile = _browser()
    try:
        _open_offline(driver, path.as_uri())
        assert driver.execute_script("return window.__pwned === undefined"), "the page ran injected code"
        # Nothing was parsed into an element: no image, no handler, no bold of ours, no link to javascript: (SVG
        # links included).
        assert driver.execute_script("return document.querySelectorAll('img, [onerror]').length") == 0
        assert driver.execute_script(
            "return Array.from(document.querySelectorAll('b')).filter(b => b.textContent === 'bold').length") == 0
        links = driver.execute_script(
            "return Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href') "
            "|| a.getAttribute('xlink:href') || '')")
        assert not [h for h in links if h.strip().lower().startswith("javascript")], links
        # Shown as text: the page title, and the string in the page's text once per place it was put.
        assert driver.title.startswith("netarena run 1: " + HOSTILE[:10])
        shown = driver.execute_script("return document.body.innerText").count("window.__pwned = \"script\"")
        assert shown >= 6, shown  # title, contestant, failure, skip reason and log, hostname, runtime
        # The charts keep the text as data: their titles name the contestant verbatim.
        titles = driver.execute_script(
            "return Array.from(document.querySelectorAll('.plotly-graph-div')).map(g => (g.layout.title || {}).text || '')")
        assert any(HOSTILE in t for t in titles), titles
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_closed_loop_levels_chart_completed_requests_mean_latency_and_errors_against_connections(written):
    """Siege's figures per concurrency (seed 003's file test): beside throughput, and CPU, RSS and MB/s, one
    chart holds completed requests, mean latency and errors of each contestant against connections."""
    results, run_id, path = written
    report = load_report(results, run_id)
    traces = chart_traces(path.read_text(), "hello: completed requests, mean latency and errors vs connections")
    by_axis: dict[str, dict[str, dict]] = {}
    for t in traces:
        by_axis.setdefault(t.get("yaxis", "y"), {})[t["name"]] = t
    completed, mean_latency, errors = (by_axis[axis] for axis in ("y", "y2", "y3"))
    assert set(completed) == set(mean_latency) == set(errors) == {"alpha", "beta", "gamma"}  # delta: no result
    for name in ("alpha", "beta", "gamma"):
        groups = sorted((g for g in report.groups_for("hello") if g.contestant == name), key=lambda g: g.connections)
        assert completed[name]["x"] == [10, 100] == errors[name]["x"]
        assert completed[name]["y"] == [g.requests_completed_median for g in groups]
        assert mean_latency[name]["y"] == pytest.approx([g.latency_mean_us / 1000 for g in groups])
        assert errors[name]["y"] == [g.errors_total for g in groups]
    # beta's 503s and resets are there, by class on hover; alpha has none.
    assert all(n > 0 for n in errors["beta"]["y"]) and "status" in errors["beta"]["text"][0]
    assert errors["alpha"]["y"] == [0, 0] and errors["alpha"]["text"] == ["none", "none"]
    # Only for request/response scenarios: echo floods have their own section.
    assert 'data-chart="echo: completed requests' not in path.read_text()


def test_one_colour_per_contestant_across_charts(written):
    from netarena.report.html import colour_for

    _, _, path = written
    text = path.read_text()
    colours: dict[str, set[str]] = {}
    for title in re.findall(r'data-chart="([^"]+)"', text):
        for trace in chart_traces(text, title):
            name = (trace.get("name") or "").split(" (")[0]
            colour = (trace.get("line") or {}).get("color")
            if name in ("alpha", "beta", "gamma") and colour:
                colours.setdefault(name, set()).add(colour)
    assert colours and all(found == {colour_for(name)} for name, found in colours.items()), colours
    # Derived from the name alone: the same in every report, distinct here.
    assert len({colour_for(n) for n in ("alpha", "beta", "gamma", "delta")}) == 4
    assert colour_for("alpha") == colour_for("alpha") and colour_for("alpha").startswith("#")


def test_seed_000_table_and_readable_environment(written):
    _, _, path = written
    parser = _Tables()
    parser.feed(path.read_text())
    [(_, rows)] = [t for t in parser.tables if t[0] == "seed-000"]
    header = rows[0]
    assert header[:5] == ["server", "32KiB × 10 (s)", "32KiB × 100 (s)", "512KiB × 10 (s)", "512KiB × 100 (s)"]
    assert header[-6:] == ["us %", "sy %", "cs/s", "in/s", "client delay p50", "client delay max"]
    assert [r[0] for r in rows[1:]] == ["alpha", "gamma"]
    # The environment is tables, not a JSON dump: the limits and sysctls are key/value rows.
    text = path.read_text()
    env = text[text.index('id="environment"'):text.index('id="skipped"')]
    assert "<th>net.core.somaxconn</th><td>4096</td>" in env and "<th>soft</th><td>20000</td>" in env


def test_many_contestants_latency_chart_starts_with_the_best_and_has_a_menu(tmp_path):
    from netarena.report.html import LATENCY_CHART_FIRST_SHOWN, render
    from report_fixtures import _record, generator_doc

    store = Store(tmp_path)
    run_id = store.create_run(suite_name="many", suite_path=None, suite={"name": "many"}, args={}, backend="real",
                              server_cpus=[0], generator_cpus=[1], environment={}, planned=8,
                              netarena_version="0.1.0", git_sha=None, orchestrator_start_time=None)
    names = [f"c{i}" for i in range(8)]
    for i, name in enumerate(names):  # c0 fastest
        _record(store, run_id, contestant=name, scenario="hello", connections=10, repeat=0,
                generator=generator_doc(rps=10_000 - 1000 * i, latency_us={100 + 10 * i: 90, 1000 + 100 * i: 10}))
    text = render(load_report(store, run_id)).decode()
    store.close()
    traces = chart_traces(text, "hello c=10,w=1: latency by percentile")
    assert [t["name"] for t in traces] == names
    assert [t.get("visible", True) for t in traces] == [True] * LATENCY_CHART_FIRST_SHOWN + ["legendonly"] * 3
    # One level, closed loop: bars instead of a column of single points.
    bars = chart_traces(text, "hello c=10,w=1: throughput and p99 by contestant")
    assert bars[0]["x"] == names and bars[0]["type"] == "bar"


def test_over_time_takes_every_monitored_process_group_and_no_end_dip(tmp_path):
    """A service monitored beside the server (e.g. a database) gets its own CPU/RSS lines on the same axis; the
    monitor's final sample, a few ms after the one before, does not draw a dip; CPU reads against the pinned
    CPUs and never above them."""
    from netarena.report.html import _rate_series, process_groups, render
    from report_fixtures import _record, generator_doc, monitor_doc

    monitor = monitor_doc(cpu_pct=100, rss_bytes=30 << 20, samples=9)
    monitor["cpus_allowed"] = {"server": [0], "db": [0], "generator": [1]}
    monitor["db"] = [dict(s, rss_bytes=80 << 20) for s in monitor["server"]]
    # The final sample, 10 ms after the one before: no clock tick (10 ms of CPU) fell in between, so a rate over
    # those 10 ms alone would read 0% for a server that was busy all along.
    last = monitor["server"][-1]
    monitor["server"].append(dict(last, t_s=last["t_s"] + 0.01))
    assert process_groups(monitor) == ["server", "db"]
    ts, rates = _rate_series(monitor["server"], lambda s: s["cpu_user_s"] + s["cpu_sys_s"], 0.25 / 2)
    assert ts[-1] == monitor["server"][-1]["t_s"] and min(rates) > 0.9  # no interval of a few ms, no dip

    store = Store(tmp_path)
    run_id = store.create_run(suite_name="svc", suite_path=None, suite={"name": "svc"}, args={}, backend="real",
                              server_cpus=[0], generator_cpus=[1], environment={}, planned=1,
                              netarena_version="0.1.0", git_sha=None, orchestrator_start_time=None)
    _record(store, run_id, contestant="alpha", scenario="hello", connections=10, repeat=0,
            generator=generator_doc(rps=1000, latency_us={100: 99, 900: 1}), monitor=monitor)
    text = render(load_report(store, run_id)).decode()
    store.close()
    title = re.search(r'data-chart="(hello: alpha c=10,w=1 \(#\d+\))"', text).group(1)
    names = [t["name"] for t in chart_traces(text, title)]
    assert names == ["requests/s", "p99", "server CPU", "server RSS", "server context switches/s", "db CPU",
                     "db RSS", "db context switches/s"]
    cpu = next(t for t in chart_traces(text, title) if t["name"] == "server CPU")
    assert max(cpu["y"]) <= 100


_FILTER_STATE_JS = """
const visibleRows = Array.from(document.querySelectorAll('table.summary tr[data-contestant]'))
  .filter(r => r.offsetParent !== null).map(r => r.dataset.contestant);
const charts = {};
document.querySelectorAll('.plotly-graph-div').forEach(g => {
  const title = (g.closest('.chart') || g).getAttribute('data-chart');
  charts[title] = g.data.map(t => ({meta: t.meta || null, visible: t.visible === undefined ? true : t.visible,
                                    x: Array.from(t.x || [])}));
});
return {rows: Array.from(new Set(visibleRows)).sort(), charts: charts,
        count: document.getElementById('filter-count').textContent};
"""


def _choose(driver, language: str, model: str) -> dict:
    driver.execute_script(
        "for (const [id, v] of [['filter-language', arguments[0]], ['filter-model', arguments[1]]]) {"
        "  const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event('change')); }",
        language, model)
    return driver.execute_script(_FILTER_STATE_JS)


def _line_visibility(state: dict, title: str) -> dict:
    return {t["meta"]["contestant"]: t["visible"] for t in state["charts"][title] if t["meta"]}


def test_filter_by_language_and_model_hides_rows_lines_and_bars_in_chromium(written):
    """The filter bar (two languages, three models in the fixture run): choosing one hides the other contestants'
    summary rows, their lines, and their bars (a bar chart keeps only the chosen contestants' points); "all"
    restores everything as drawn first."""
    _, _, path = written
    text = path.read_text()
    assert 'id="filter-language"' in text and '<option value="go">go</option>' in text
    assert '<option value="green threads">green threads</option>' in text
    driver, profile = _browser()
    try:
        _open_offline(driver, path.as_uri())
        everything = driver.execute_script(_FILTER_STATE_JS)
        assert everything["rows"] == ["alpha", "beta", "delta", "gamma"]
        assert everything["count"] == "all 5 contestants"
        cost = "hello: CPU per request"
        assert [len(t["x"]) for t in everything["charts"][cost]] == [6, 6, 6]  # 3 contestants x 2 levels

        go_only = _choose(driver, "go", "")
        assert go_only["rows"] == ["beta"] and go_only["count"] == "1 of 5 contestants"
        assert _line_visibility(go_only, "hello: throughput vs connections") == \
            {"alpha": False, "beta": True, "gamma": False}
        assert [len(t["x"]) for t in go_only["charts"][cost]] == [2, 2, 2]
        assert all(x.startswith("beta ") for t in go_only["charts"][cost] for x in t["x"])

        threads = _choose(driver, "", "threads")
        assert threads["rows"] == ["gamma"]
        assert _line_visibility(threads, "hello: throughput vs connections") == \
            {"alpha": False, "beta": False, "gamma": True}
        assert _choose(driver, "go", "threads")["rows"] == []  # no go contestant runs threads

        restored = _choose(driver, "", "")
        assert restored["rows"] == ["alpha", "beta", "delta", "gamma"]
        assert restored["charts"][cost] == everything["charts"][cost]
        assert _line_visibility(restored, "hello: throughput vs connections") == \
            _line_visibility(everything, "hello: throughput vs connections")
        _check_charts(driver)
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_no_filter_for_a_run_of_one_language_and_model(tmp_path):
    store = Store(tmp_path)
    run_id = store.create_run(suite_name="one", suite_path=None, suite={"name": "one"}, args={}, backend="real",
                              server_cpus=[0], generator_cpus=[1], environment={}, planned=0,
                              netarena_version="0.1.0", git_sha=None, orchestrator_start_time=None)
    for name in ("a", "b"):
        store.record_contestant(run_id, name, {"name": name, "language": "python", "concurrency_model": "event-loop"},
                                {}, "ready")
    text = write_run_report(store, run_id, tmp_path / "r.html").read_text()
    store.close()
    assert 'id="filter"' not in text and "contestant-groups" not in text
