"""The cost of a protocol: each contestant's figures over TLS against its own at the same level over cleartext
HTTP/1.1, as ratios, in the model, the Markdown export and the HTML page (read back in a real headless Chromium),
from a hand-built run in a real SQLite store."""

from __future__ import annotations

import shutil

import pytest

from netarena.report import load_report, write_run_report
from netarena.report.markdown import render_markdown
from netarena.report.protocols import protocol_costs
from netarena.store import Store
from report_fixtures import ENVIRONMENT, _record, generator_doc, monitor_doc
from test_report_html import _browser, _check_charts, _open_offline, chart_traces, tables

TLS = {"protocol": "h1-tls"}
# (contestant, protocol) -> the three repeats' req/s; the server at 90% of a core in every repeat, so its CPU per
# request goes as 1 / req/s.
# alpha: TLS halves its throughput (intervals far apart); beta: TLS within its repeats' spread; gamma: no TLS
# level (no pair); delta: TLS at c=10 but h1 only at c=50 (another level: no pair).
REPEATS = {("alpha", "h1"): (10_000.0, 10_100.0, 10_200.0), ("alpha", "h1-tls"): (5_000.0, 5_050.0, 5_100.0),
           ("beta", "h1"): (8_000.0, 8_100.0, 8_300.0), ("beta", "h1-tls"): (7_900.0, 8_050.0, 8_200.0),
           ("gamma", "h1"): (3_000.0, 3_000.0, 3_000.0)}


@pytest.fixture(scope="module")
def tls_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    store = Store(results)
    run_id = store.create_run(suite_name="protocols", suite_path=None, suite={"name": "protocols", "repeat": 3},
                              args={"argv": ["netarena", "run", "protocols"]}, backend="real", server_cpus=[0],
                              generator_cpus=[1], environment=ENVIRONMENT, planned=18, netarena_version="0.1.0",
                              git_sha="abc123", orchestrator_start_time=None)
    for name in ("alpha", "beta", "gamma", "delta"):
        store.record_contestant(run_id, name, {"name": name}, None, "ready")
    runs = {**REPEATS, ("delta", "h1-tls"): (900.0, 910.0, 920.0)}
    for (name, protocol), figures in runs.items():
        connections = 10
        for repeat, rps in enumerate(figures):
            _record(store, run_id, contestant=name, scenario="hello", connections=connections, repeat=repeat,
                    level_extra=TLS if protocol == "h1-tls" else None,
                    generator=generator_doc(rps=rps, latency_us={1000 if protocol == "h1" else 3000: 100}),
                    monitor=monitor_doc(cpu_pct=90, rss_bytes=10 << 20), error_rate=0.0)
    for repeat in range(3):
        _record(store, run_id, contestant="delta", scenario="hello", connections=50, repeat=repeat,
                generator=generator_doc(rps=1000.0, latency_us={1000: 100}),
                monitor=monitor_doc(cpu_pct=90, rss_bytes=10 << 20), error_rate=0.0)
    store.set_run_status(run_id, "complete")
    report = load_report(store, run_id)
    page = write_run_report(store, run_id, results / "report.html")
    store.close()
    return report, page


def test_each_tls_level_is_set_against_the_same_level_over_h1(tls_run):
    report, _ = tls_run
    costs = {c.contestant: c for c in protocol_costs(report.groups)}
    assert set(costs) == {"alpha", "beta"}  # gamma has no TLS level, delta no h1 twin at c=10
    alpha, beta = costs["alpha"], costs["beta"]
    assert (alpha.level_key, alpha.base_key, alpha.protocol) == ("c=10,w=1,protocol=h1-tls", "c=10,w=1", "h1-tls")
    assert alpha.throughput_ratio == pytest.approx(5_050 / 10_100)
    # The same CPU share for half the requests: each costs twice the CPU, the server's and the generator's.
    assert alpha.server_cpu_ratio == pytest.approx(10_100 / 5_050, rel=1e-2)
    assert alpha.generator_cpu_ratio == pytest.approx(10_100 / 5_050, rel=1e-2)
    assert alpha.p99_ratio == pytest.approx(3.0, rel=1e-2)
    groups = {(g.contestant, g.level_key): g for g in report.groups}
    assert alpha.ids == groups[("alpha", "c=10,w=1,protocol=h1-tls")].ok_ids
    assert alpha.base_ids == groups[("alpha", "c=10,w=1")].ok_ids
    # alpha's intervals are far apart; beta's overlap: its repeats cannot tell the protocols apart.
    assert not alpha.within_noise and beta.within_noise


def test_markdown_has_a_row_per_pair_ranked_as_over_the_protocol(tls_run):
    report, _ = tls_run
    md = render_markdown(report)
    assert "## Cost of the protocol" in md
    rows = [line.split(" | ") for line in md.split("## Cost of the protocol")[1].splitlines()
            if line.startswith(("| alpha", "| beta"))]
    assert [(r[0].lstrip("| "), r[5], r[10]) for r in rows] == [("beta", "0.994×", "yes"), ("alpha", "0.5×", "no")]


def test_html_table_and_chart_in_chromium(tls_run):
    report, page = tls_run
    text = page.read_text()
    [table] = tables(text, "protocol-cost")
    assert [(row[0], row[2], row[5], row[10]) for row in table[1:]] == [
        ("beta", "c=10,w=1,protocol=h1-tls", "0.994×", "yes"), ("alpha", "c=10,w=1,protocol=h1-tls", "0.5×", "no")]
    title = "hello: cost of the protocol against cleartext HTTP/1.1"
    throughput, cpu = chart_traces(text, title)
    costs = protocol_costs(report.groups)
    assert throughput["x"] == [f"{c.contestant} {c.level_key}" for c in costs]
    assert throughput["y"] == pytest.approx([c.throughput_ratio for c in costs])
    assert cpu["y"] == pytest.approx([c.server_cpu_ratio for c in costs])
    driver, profile = _browser()
    try:
        _open_offline(driver, page.as_uri())
        charts = {c["title"]: c for c in _check_charts(driver)}
        assert charts[title]["bars"] == 4  # two ratios for each of alpha and beta
        assert driver.execute_script("return document.querySelector('nav a[href=\"#protocols\"]') !== null")
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_http2_groups_are_set_against_h1_too(tmp_path):
    """h2 and h2c levels pair with the same level over h1 as h1-tls does: every protocol but h1 has a row."""
    store = Store(tmp_path)
    run_id = store.create_run(suite_name="protocols", suite_path=None, suite={"name": "protocols", "repeat": 2},
                              args={"argv": ["netarena", "run", "protocols"]}, backend="real", server_cpus=[0],
                              generator_cpus=[1], environment=ENVIRONMENT, planned=6, netarena_version="0.1.0",
                              git_sha="abc123", orchestrator_start_time=None)
    store.record_contestant(run_id, "alpha", {"name": "alpha"}, None, "ready")
    for protocol, rps in (("h1", 10_000.0), ("h2", 6_000.0), ("h2c", 8_000.0)):
        for repeat in range(2):
            _record(store, run_id, contestant="alpha", scenario="hello", connections=10, repeat=repeat,
                    level_extra={"protocol": protocol} if protocol != "h1" else None,
                    generator=generator_doc(rps=rps + repeat, latency_us={1000: 100}),
                    monitor=monitor_doc(cpu_pct=90, rss_bytes=10 << 20), error_rate=0.0)
    store.set_run_status(run_id, "complete")
    report = load_report(store, run_id)
    store.close()
    costs = {c.protocol: c for c in protocol_costs(report.groups)}
    assert set(costs) == {"h2", "h2c"}
    assert costs["h2"].level_key == "c=10,w=1,protocol=h2" and costs["h2"].base_key == "c=10,w=1"
    assert costs["h2"].throughput_ratio == pytest.approx(6_000.5 / 10_000.5)
    assert costs["h2c"].throughput_ratio == pytest.approx(8_000.5 / 10_000.5)
    md = render_markdown(report).split("## Cost of the protocol")[1]
    assert "c=10,w=1,protocol=h2 " in md and "c=10,w=1,protocol=h2c " in md
