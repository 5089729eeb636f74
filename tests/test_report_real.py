"""The report of a small REAL run: two fixture contestants measured by the real netarena-load at one closed-loop
level, at three constant rates and in a find-max search; its page opened in headless Chromium, its summary
shown as JSON and exported as Markdown."""

from __future__ import annotations

import html
import json
import re
import shutil

import pytest

from conftest import FIXTURE_CONTESTANTS, db_rows, run_cli, write_suite
from test_report_html import ARTIFACTS, _browser, _check_charts, _full_page_screenshot, _open_offline, chart_traces

RATES = [100, 200, 400]
SUITE = f"""name = "rates"
contestants = ["fx-good", "fx-other"]
repeat = 1
warmup_s = 0.3
duration_s = 1.0
timeout_s = 2

[[measure]]
scenario = "hello"
connections = [4]

[[measure]]
scenario = "hello"
connections = [4]
rate = {RATES}

[[measure]]
scenario = "hello"
connections = [2]
find_max = {{ slo = "p99<=200ms", max_errors = "1%" }}
duration_s = 0.5
"""
RATE_LEVELS = [f"c=4,w=1,rate={r}" for r in RATES]
FIND_MAX_LEVEL = "c=2,w=1,rate=100,d=0.5s,find_max=p99<=200ms/errors<=1%"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-report")
    cache = tmp / "cache"
    results = tmp / "results"
    path = write_suite(tmp / "suite.toml", SUITE)
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--json"], cache,
                     timeout_s=600)
    assert result.returncode == 0, result.stderr
    shown = run_cli(["show", "--results", results, "--json"], cache)
    assert shown.returncode == 0, shown.stderr
    return results, cache, json.loads(shown.stdout)


def _rows(results):
    return {(r["contestant"], r["level_key"]): r for r in db_rows(results, "SELECT * FROM measurements")}


def test_levels_are_structured_and_open_loop_groups_rank_by_p99(real_run):
    results, _, shown = real_run
    groups = {(g["contestant"], g["level_key"]): g for g in shown["groups"]}
    assert set(groups) == {(c, level) for c in ("fx-good", "fx-other")
                           for level in ["c=4,w=1", *RATE_LEVELS, FIND_MAX_LEVEL]}
    for contestant in ("fx-good", "fx-other"):
        for rate, level in zip(RATES, RATE_LEVELS):
            g = groups[(contestant, level)]
            assert g["offered_rate_per_s"] == rate and g["level"]["params"] == {"rate": rate}
            assert g["latency_from"] == "intended send time" and g["ranked_by"].startswith("p99")
        closed = groups[(contestant, "c=4,w=1")]
        assert closed["offered_rate_per_s"] is None and closed["ranked_by"] == "median throughput"
    for level in RATE_LEVELS:
        pair = sorted((groups[(c, level)] for c in ("fx-good", "fx-other")), key=lambda g: g["rank"])
        assert pair[0]["latency_p99_us"] <= pair[1]["latency_p99_us"]
    # Absolute counts are the generator documents' own, summed.
    rows = _rows(results)
    for (contestant, level), g in groups.items():
        doc = json.loads(rows[(contestant, level)]["generator_json"])
        assert g["requests_total"] == doc["totals"]["requests"] and g["errors_total"] == doc["errors"]["total"]
        assert g["bytes_per_s_median"] == doc["throughput"]["bytes_per_s"]
        # The server was pinned to one CPU: its CPU reads against that CPU, never above it.
        assert g["server_cpus"] == [0] and 0 <= g["server_cpu_capacity_pct_median"] <= 100


def test_find_max_ranks_by_the_rate_found_and_keeps_the_steps(real_run):
    results, _, shown = real_run
    rows = _rows(results)
    found = {}
    for g in shown["groups"]:
        if g["level_key"] != FIND_MAX_LEVEL:
            continue
        doc = json.loads(rows[(g["contestant"], FIND_MAX_LEVEL)]["generator_json"])
        argv = json.loads(rows[(g["contestant"], FIND_MAX_LEVEL)]["generator_argv_json"])
        assert argv[argv.index("--slo") + 1] == "p99<=200ms" and "--step-duration" in argv and "--duration" not in argv
        assert g["find_max"]["found_rate_per_s_median"] == doc["find_max"]["found_rate_per_s"]
        assert g["find_max"]["unit"] == "req/s"  # a rate search (a conn_rate search finds conn/s)
        assert [s["rate_per_s"] for s in g["find_max"]["steps"]] == [v["rate_per_s"] for v in doc["find_max"]["verdicts"]]
        assert [s["passed"] for s in g["find_max"]["steps"]] == [v["passed"] for v in doc["find_max"]["verdicts"]]
        found[g["contestant"]] = (g["rank"], g["find_max"]["found_rate_per_s_median"], g["tied"])
    assert sorted(found) == ["fx-good", "fx-other"], found
    # A search whose first step already failed found no rate and has no rank. (Under a CPU quota of 35% beside
    # the other tests, fx-good's first 0.5 s step at 100 req/s once started 48 of its 50 requests on time: "rate
    # not met"; a host's stall decides whether that happens, so both outcomes are checked.)
    assert all((rank is None) == (rate is None) for rank, rate, _ in found.values()), found
    ranked = sorted((rank, rate, tied) for rank, rate, tied in found.values() if rank is not None)
    if len(ranked) == 2:
        (first, a, a_tied), (second, b, b_tied) = ranked
        # One repeat each: the intervals are single rates, which overlap only when both searches found the same
        # rate; then they share rank 1, marked tied (the report's tie rule), else the higher rate is 1.
        if a == b:
            assert (first, second, a_tied, b_tied) == (1, 1, True, True)
        else:
            assert (first, second, a_tied, b_tied) == (1, 2, False, False) and a > b
    else:
        assert [(rank, tied) for rank, _, tied in ranked] in ([(1, False)], []), found


def test_markdown_export_has_the_medians_of_show(real_run, tmp_path):
    results, cache, shown = real_run
    out = tmp_path / "summary.md"
    result = run_cli(["export", "--markdown", "--results", results, "-o", out], cache)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and out.is_file()
    tables = _markdown_tables(out.read_text())
    medians = {(g["contestant"], g["level_key"]): g["requests_per_s_median"] for g in shown["groups"]}
    seen = set()
    for level, header, rows in tables:
        assert header[:4] == ["rank", "contestant", "req/s (median)", "interval"]
        for row in rows:
            cells = dict(zip(header, row))
            key = (cells["contestant"], level)
            assert int(cells["req/s (median)"].replace(",", "")) == round(medians[key]), key
            seen.add(key)
    assert seen == set(medians)
    for level in RATE_LEVELS:
        assert f"## hello · {level}" in out.read_text()
    assert "latency from the intended send time" in out.read_text()
    # Bad input: a folder that does not exist is one message and exit 2, nothing written.
    bad = run_cli(["export", "--markdown", "--results", results, "-o", tmp_path / "nope" / "x.md"], cache)
    assert bad.returncode == 2 and "nope" in bad.stderr and not (tmp_path / "nope").exists()


def chart_layout(text: str, title: str) -> dict:
    """The layout of the chart titled ``title`` (the argument after its traces in Plotly.newPlot)."""
    start = text.index(f'data-chart="{title}"')
    call = text.index("Plotly.newPlot(", start) + len("Plotly.newPlot(")
    decoder, space = json.JSONDecoder(), re.compile(r"[\s,]*")
    _, end = decoder.raw_decode(text, space.match(text, call).end())
    _, end = decoder.raw_decode(text, space.match(text, end).end())
    layout, _ = decoder.raw_decode(text, space.match(text, end).end())
    return layout


def _markdown_tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(level of the heading above, header cells, body rows) of every pipe table."""
    out, level, lines = [], None, text.splitlines()
    i = 0
    while i < len(lines):
        heading = re.match(r"## \S+ · (\S+)", lines[i])
        if heading:
            level = heading.group(1)
        if lines[i].startswith("| ") and i + 1 < len(lines) and re.fullmatch(r"\|(-+:?\|)+", lines[i + 1]):
            header = _cells(lines[i])
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(_cells(lines[i]))
                assert len(rows[-1]) == len(header), lines[i]
                i += 1
            out.append((level, header, rows))
            continue
        i += 1
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_terminal_says_open_loop_latency_counts_from_the_intended_send(real_run):
    results, cache, _ = real_run
    shown = run_cli(["show", "--results", results], cache)
    assert shown.returncode == 0, shown.stderr
    for rate in RATES:
        assert re.search(rf"hello · c=4,w=1,rate={rate} · offered {rate} req/s · latency from the intended send\s+time",
                         shown.stdout), shown.stdout


def test_page_in_headless_chromium(real_run, tmp_path):
    results, cache, shown = real_run
    page = tmp_path / "report.html"
    result = run_cli(["report", "--results", results, "-o", page], cache)
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    rows = _rows(results)

    # Rate axis: one line per contestant at x = the offered rates, y = the achieved medians.
    traces = {t["name"]: t for t in chart_traces(text, "hello: against the offered rate")}
    medians = {(g["contestant"], g["level_key"]): g for g in shown["groups"]}
    for contestant in ("fx-good", "fx-other"):
        achieved = traces[contestant]
        assert achieved["x"] == RATES
        assert achieved["y"] == [medians[(contestant, level)]["requests_per_s_median"] for level in RATE_LEVELS]
        p99 = traces[f"{contestant} p99"]
        assert p99["x"] == RATES and p99["line"]["dash"] == "solid"
        assert traces[f"{contestant} p99 from the send"]["line"]["dash"] == "dash"
        # One colour per contestant on the whole page.
        assert achieved["line"]["color"] == p99["line"]["color"]
    assert traces["fx-good"]["line"]["color"] != traces["fx-other"]["line"]["color"]
    assert "latency from the intended send time" in text

    # One closed-loop level: bars, throughput and p99 per contestant.
    bars = chart_traces(text, "hello c=4,w=1: throughput and p99 by contestant")
    assert [t["type"] for t in bars] == ["bar", "bar"]
    by_name = dict(zip(bars[0]["x"], bars[0]["y"]))
    assert by_name == {c: medians[(c, "c=4,w=1")]["requests_per_s_median"] for c in ("fx-good", "fx-other")}

    # Over time: the generator's per-interval requests/s and p99 of a closed-loop measurement, picked in the menu.
    title = re.search(r'data-chart="(hello: [^"]+)"[^>]*>(?:(?!data-chart).)*?"updatemenus"', text, re.S).group(1)
    series, layout = chart_traces(text, title), chart_layout(text, title)
    button = next(b for b in layout["updatemenus"][0]["buttons"] if re.match(r"fx-good c=4,w=1 \(#\d+\)", b["label"]))
    series = [t for t, shown_ in zip(series, button["args"][0]["visible"]) if shown_]
    measurement = next(r for r in rows.values() if f"(#{r['id']})" in button["label"])
    doc = json.loads(measurement["generator_json"])
    entries, length = doc["intervals"]["entries"], doc["intervals"]["interval_s"]
    requests = next(t for t in series if t["name"] == "requests/s")
    counts, covered = [e["count"] for e in entries], [length] * len(entries)
    covered[-1] = min(length, doc["duration_s"] - entries[-1]["t_s"])  # the phase's end cuts the last interval
    if covered[-1] < length / 2:  # a sliver joins the interval before it
        counts[-2:], covered[-2:] = [counts[-2] + counts[-1]], [covered[-2] + covered[-1]]
    assert requests["y"] == pytest.approx([n / c for n, c in zip(counts, covered)])
    steps = [b - a for a, b in zip(requests["x"], requests["x"][1:])]
    assert steps == pytest.approx([length] * len(steps))
    p99 = next(t for t in series if t["name"] == "p99")
    assert p99["y"][:len(counts) - 1] == pytest.approx([e["p99_us"] / 1000 for e in entries[:len(counts) - 1]])
    server_cpu = next(t for t in series if t["name"] == "server CPU")
    assert max(server_cpu["y"]) <= 100  # pinned to one CPU: never more than it

    driver, profile = _browser()
    try:
        requested = _open_offline(driver, page.as_uri())
        assert [u for u in requested if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
        charts = {c["title"]: c for c in _check_charts(driver)}
        rate_chart = charts["hello: against the offered rate"]
        assert rate_chart["points"] >= 2 * len(RATES) and rate_chart["lines"] >= 2
        assert charts["hello c=4,w=1: throughput and p99 by contestant"]["bars"] == 4
        # Seed 003's five graphs for the find-max search's steps, drawn (the checks above) with each contestant's
        # replies/s, mean, p99 and errors at the steps' rates; CPU and RSS too where a 0.5 s step held two of the
        # monitor's samples.
        steps_title = f"hello {FIND_MAX_LEVEL}: find-max search, step by step against the rate"
        assert steps_title in charts
        per_contestant: dict[str, int] = {}
        for trace in chart_traces(text, html.escape(steps_title)):
            contestant = trace["meta"]["contestant"]
            group = medians[(contestant, FIND_MAX_LEVEL)]
            assert trace["x"] == sorted(s["rate_per_s"] for s in group["find_max"]["steps"])
            per_contestant[contestant] = per_contestant.get(contestant, 0) + 1
        assert set(per_contestant) == {"fx-good", "fx-other"} and min(per_contestant.values()) >= 4, per_contestant
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
        ARTIFACTS.mkdir(exist_ok=True)
        _full_page_screenshot(driver, ARTIFACTS / "report-real-rates.png")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
