"""The report's records and the terminal summary, from hand-built runs in a real SQLite store."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner
import click

from netarena.cli_report import register
from netarena.report import ReportError, load_report
from netarena.report.model import ranks
from netarena.report.terminal import render_text
from netarena.store import Store
from report_fixtures import (DISCARDED_REASON, ENVIRONMENT, INSTALL_LOG_TAIL, _record, generator_doc, histogram,
                             monitor_doc, populate_run)


@pytest.fixture()
def stored(tmp_path):
    store = Store(tmp_path)
    run_id = populate_run(store)
    yield tmp_path, run_id
    store.close()


def group(report, contestant, scenario="hello", level="c=10,w=1"):
    return next(g for g in report.groups if (g.contestant, g.scenario, g.level_key) == (contestant, scenario, level))


def test_groups_rank_by_median_throughput_within_each_level(stored):
    report = load_report(*stored)
    rank = ranks(report.groups)
    assert [g.contestant for g in report.groups_for("hello") if g.level_key == "c=10,w=1"] == \
        ["alpha", "gamma", "beta", "delta"]
    assert rank[("alpha", "hello", "c=10,w=1")] == 1
    assert rank[("beta", "hello", "c=100,w=1")] == 3
    assert ("delta", "hello", "c=10,w=1") not in rank  # no result, no rank
    alpha = group(report, "alpha")
    assert alpha.requests_per_s_median == pytest.approx(20000)
    assert (alpha.requests_per_s_min, alpha.requests_per_s_max) == (pytest.approx(19800), pytest.approx(20200))
    # Completed requests of one repeat (2 s each): the median repeat's, not the sum of the three.
    assert alpha.requests_completed_median == 40000 and alpha.requests_total == 39600 + 40000 + 40400


def test_every_figure_names_the_measurements_it_came_from(stored):
    results, run_id = stored
    report = load_report(results, run_id)
    db = sqlite3.connect(results / "netarena.sqlite")
    for g in report.groups:
        rows = db.execute("SELECT id, status, discarded FROM measurements WHERE run_id=? AND contestant=? AND "
                          "scenario=? AND level_key=? ORDER BY repeat_index",
                          (run_id, g.contestant, g.scenario, g.level_key)).fetchall()
        assert g.measurement_ids == [r[0] for r in rows]
        assert g.ok_ids == [r[0] for r in rows if r[1] == "ok" and r[2] is None]
        if g.median_measurement_id is not None:
            assert g.median_measurement_id in g.ok_ids
    # gamma's crashed repeat is not behind its figures
    gamma = group(report, "gamma")
    assert len(gamma.measurement_ids) == 3 and len(gamma.ok_ids) == 2
    # nor is alpha's discarded fourth measurement (1,000 req/s): listed, counted, said why, in no figure
    alpha = group(report, "alpha")
    assert len(alpha.measurement_ids) == 4 and len(alpha.ok_ids) == 3 and alpha.repeats_ok == 3
    assert alpha.discarded == 1 and alpha.discarded_reasons == [f"#4: {DISCARDED_REASON}"]
    assert alpha.requests_per_s_min == pytest.approx(19800) and "NOISY" not in alpha.badges


def test_cost_per_request_is_the_median_of_the_counted_repeats(stored):
    """The fixture's alpha at c=10: server CPU at 95% of a core over the 1.75 s its monitor samples span (60% user,
    40% system), 3,500 voluntary and 280 involuntary switches there; the generator's 0.2 + 0.8 s of CPU over its
    2 s window; 19,800, 20,000 and 20,200 req/s. Per request, median: the 20,000 req/s repeat's."""
    results, run_id = stored
    alpha = group(load_report(results, run_id), "alpha")
    in_span = 20_000 * 2.0 * 1.75 / 2.0
    assert alpha.cost_unit == "request"
    assert alpha.server_cpu_us_median == pytest.approx(1e6 * 0.95 * 1.75 / in_span, rel=1e-2)
    assert alpha.server_cpu_user_us_median == pytest.approx(0.6 * alpha.server_cpu_us_median, rel=1e-2)
    assert alpha.server_cpu_sys_us_median == pytest.approx(0.4 * alpha.server_cpu_us_median, rel=1e-2)
    assert alpha.server_ctx_voluntary_median == pytest.approx(3500 / in_span, rel=1e-3)
    assert alpha.server_ctx_involuntary_median == pytest.approx(280 / in_span, rel=1e-3)
    assert alpha.generator_cpu_us_median == pytest.approx(1e6 * 1.0 / (20_000 * 2.0), rel=1e-3)
    assert alpha.server_cpu_us_cv is not None
    # The Markdown export's table has the same figures in its own columns, and names the discarded measurement.
    from netarena.report import fmt
    from netarena.report.markdown import render_markdown

    markdown = render_markdown(load_report(results, run_id))
    header = next(line for line in markdown.splitlines() if line.startswith("| rank"))
    assert "server CPU/req (user+sys)" in header and "generator CPU/req" in header
    row = next(line for line in markdown.splitlines() if line.startswith("| 1 | alpha"))
    assert (f"| {fmt.cpu_us(alpha.server_cpu_us_median)} ({fmt.cpu_us(alpha.server_cpu_user_us_median)}+"
            f"{fmt.cpu_us(alpha.server_cpu_sys_us_median)}) |") in row
    assert f"- discarded: alpha hello c=10,w=1: 1 measurement(s) kept out of the figures: #4: {DISCARDED_REASON}" \
        in markdown
    assert alpha.steal_pct_max == 0.0 and alpha.server_wait_share_max is not None


def test_latency_comes_from_the_merged_histograms(stored):
    report = load_report(*stored)
    beta = group(report, "beta")
    # Each repeat recorded 90% at 1200 us and 10% at 9000 us: merged p50 ~1200, p99 ~9000 (3 significant digits).
    merged = histogram({1200: 27000, 9000: 3000})
    assert beta.latency_p50_us == merged.get_value_at_percentile(50)
    assert beta.latency_p99_us == merged.get_value_at_percentile(99)
    assert len(beta.p99_us_by_repeat) == 3
    percentiles = [p for p, _ in beta.percentile_curve]
    assert percentiles == sorted(percentiles) and percentiles[-1] == 100.0
    assert beta.percentile_curve[-1][1] == merged.get_max_value()


def test_badges(stored):
    report = load_report(*stored)
    assert group(report, "alpha").badges == []
    assert set(group(report, "beta").badges) == {"CV", "ERR"}
    assert group(report, "gamma", level="c=100,w=1").badges == ["GEN"]
    assert group(report, "gamma").badges == ["CRASH"]
    assert set(group(report, "delta").badges) == {"VERIFY", "FAIL"}  # verify_failed, then not attempted


def test_skips_keep_their_detail(stored):
    report = load_report(*stored)
    skips = {s.contestant: s for s in report.skipped}
    assert skips["epsilon"].scenario == "echo" and skips["epsilon"].detail is None
    assert skips["zeta"].reason == "install failed: pip install exited with status 1"
    assert skips["zeta"].detail == INSTALL_LOG_TAIL and skips["zeta"].scenario is None


def test_errors_by_class_and_echo(stored):
    report = load_report(*stored)
    beta = group(report, "beta")
    assert beta.errors_by_class["reset"] == 9  # 3 per repeat
    assert beta.errors_by_class["status"] > 0
    alpha_echo = group(report, "alpha", "echo", "c=100,w=1,bytes=32768")
    assert sorted(alpha_echo.echo_completion_s) == pytest.approx([0.49, 0.5, 0.51])
    assert alpha_echo.echo_bytes_per_connection == 32768
    assert alpha_echo.probe["attempts"] == 15 and alpha_echo.probe["p99_us"] == pytest.approx(250000, rel=0.01)
    big = group(report, "alpha", "echo", "c=100,w=1,bytes=524288")
    assert sorted(big.echo_completion_s) == pytest.approx([7.84, 8.0, 8.16])
    assert big.echo_bytes_per_connection == 524288


def test_terminal_summary_fits_100_columns_with_badges_and_ids(stored):
    report = load_report(*stored)
    text = render_text(report)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "…" not in text  # nothing truncated
    lines = text.splitlines()
    beta_line = next(l for l in lines if l.split()[1:2] == ["beta"])
    assert "CV" in beta_line and "ERR" in beta_line
    assert f"#{group(report, 'beta').measurement_ids[0]}" in beta_line
    assert "GEN = generator-bound" in text
    flat = " ".join(text.split())
    assert "skipped: epsilon echo: does not implement echo" in flat
    assert "failed: gamma hello c=10,w=1:" in flat
    assert "crashed: the contestant exited with code 3" in flat
    # One table per echo level: the two sizes sent per connection are never folded into one.
    for size in (32768, 524288):
        for connections in (10, 100):
            title = f"echo · c={connections},w=1,bytes={size}"
            assert title in text
            table = text.split(title, 1)[1].split(" · c=", 1)[0]
            ranked = [l.split()[:2] for l in table.splitlines() if l.split()[:1] in (["1"], ["2"])]
            assert ranked == [["1", "alpha"], ["2", "gamma"]]


def test_terminal_leads_with_failures_and_flags_then_tables(stored):
    """What needs attention (failures, skips, flagged groups) stands above the first table, not below them all."""
    lines = render_text(load_report(*stored)).splitlines()
    first_table = next(i for i, l in enumerate(lines) if l.startswith("hello · "))
    for start in ("failed: gamma hello c=10,w=1:", "skipped: epsilon echo:", "flagged CV (CV > 5%)",
                  "flagged GEN (generator-bound), 1 group(s): gamma hello c=100,w=1"):
        at = next((i for i, l in enumerate(lines) if l.startswith(start)), None)
        assert at is not None and at < first_table, (start, lines[:first_table + 1])


def test_only_notable_unfinished_requests_get_a_line(tmp_path):
    """A closed loop's one request in flight per connection at the end is healthy and says nothing, even for a
    slow server where those are several % of its requests; a closed loop with more in flight than its
    connections hold, and an open loop with more than UNFINISHED_NOTABLE_SHARE of its requests in flight (its
    backlog), get their line."""
    store = Store(tmp_path)
    run_id = store.create_run(suite_name="u", suite_path=None, suite={"name": "u", "repeat": 1}, args={},
                              backend="real", server_cpus=[0], generator_cpus=[1], environment=ENVIRONMENT,
                              planned=2, netarena_version="0.1.0", git_sha=None, orchestrator_start_time=None)
    # (name, requests/s over the 2 s measured, unfinished, open-loop rate): "slow" has 10 of its 110 requests
    # (9%) in flight, one per connection, as any closed loop; "backlog" 100 of 2,100 at an offered rate.
    for name, rps, unfinished, rate in (("steady", 1000, 10, None), ("slow", 50, 10, None),
                                        ("stalled", 1000, 900, None), ("backlog", 1000, 100, 1000)):
        _record(store, run_id, contestant=name, scenario="hello", connections=10, repeat=0, error_rate=0.0,
                generator=generator_doc(rps=rps, connections=10, latency_us={500: 100}, unfinished=unfinished),
                monitor=monitor_doc(cpu_pct=50, rss_bytes=1 << 20), params={"rate": rate} if rate else None)
    store.set_run_status(run_id, "complete")
    report = load_report(tmp_path, run_id)
    text = " ".join(render_text(report).split())
    store.close()
    assert next(g for g in report.groups if g.contestant == "backlog").open_loop
    assert "unfinished: stalled hello c=10,w=1: 900 request(s) still in flight" in text, text
    assert "unfinished: backlog hello" in text, text
    assert "unfinished: steady" not in text and "unfinished: slow" not in text, text


def test_an_unfinished_run_is_marked_partial(tmp_path):
    store = Store(tmp_path)
    run_id = populate_run(store)
    store.set_run_status(run_id, "interrupted")
    text = " ".join(render_text(load_report(store, run_id)).split())
    store.close()
    # 3 repeats of: hello x 2 levels x 4 contestants, echo x 2 sizes x 2 levels x 2; and alpha's discarded one
    made = 3 * (2 * 4 + 2 * 2 * 2) + 1
    assert f"partial: the run is interrupted; {made} of 40 planned measurements made" in text
    assert "netarena run --resume 1 finishes it" in text


def cli():
    group = click.Group()
    register(group)
    return group


def test_show_and_report_commands(stored, tmp_path):
    results, run_id = stored
    # Piped (no terminal, no COLUMNS) and on a wide terminal: 100 columns, the width the tables are laid out for.
    for columns in (None, "200"):
        out = CliRunner().invoke(cli(), ["show", "--results", str(results)], env={"COLUMNS": columns})
        assert out.exit_code == 0, out.output
        assert "hello · c=10,w=1" in out.output and "alpha" in out.output
        assert 90 < max(len(line) for line in out.output.splitlines()) <= 100, columns
    # A narrower terminal: nothing wider than it.
    out = CliRunner().invoke(cli(), ["show", "--results", str(results)], env={"COLUMNS": "70"})
    assert out.exit_code == 0, out.output
    assert max(len(line) for line in out.output.splitlines()) <= 70
    target = tmp_path / "sub" / "r.html"
    out = CliRunner().invoke(cli(), ["report", str(run_id), "--results", str(results), "-o", str(target)])
    assert out.exit_code == 0, out.output
    assert target.read_bytes().startswith(b"<!DOCTYPE html>")
    out = CliRunner().invoke(cli(), ["report", "--results", str(results)])
    assert out.exit_code == 0 and (results / f"report-run-{run_id}.html").is_file()


@pytest.mark.parametrize("args, message", [
    (["show", "7"], "no run 7 in"),
    (["show", "seven"], "RUN 'seven' is not a run id"),
    (["compare", "1", "9"], "RUN_B: no run 9 in"),
])
def test_bad_run_ids_are_one_clear_error(stored, args, message):
    results, _ = stored
    out = CliRunner().invoke(cli(), [*args, "--results", str(results)])
    assert out.exit_code == 2
    assert message in out.output and "runs: 1" in out.output


def test_missing_store_is_one_clear_error_and_creates_nothing(tmp_path):
    missing = tmp_path / "nothing-here"
    out = CliRunner().invoke(cli(), ["show", "--results", str(missing)])
    assert out.exit_code == 2
    assert f"no results store at {missing}/netarena.sqlite" in out.output
    assert not missing.exists()
    with pytest.raises(ReportError, match="no results store"):
        load_report(missing, 1)


def test_every_failure_kind_maps_to_one_badge():
    """A repeat that failed gets its own badge when the kind has one (VERIFY, CRASH, HUNG), else FAIL."""
    from netarena.report.model import badges_for

    def failed(kind):
        return [{"status": "failed", "failure_kind": kind}]

    assert badges_for([], failed("hung"), {}) == ["HUNG"]
    assert badges_for([], failed("crashed"), {}) == ["CRASH"]
    assert badges_for([], failed("verify_failed"), {}) == ["VERIFY"]
    assert badges_for([], failed("internal_error"), {}) == ["FAIL"]
    assert badges_for([], [{"status": "ok", "failure_kind": None}], {}) == []


def test_saturated_side_from_the_measured_processes_own_cpu():
    from netarena.report.model import saturated_side

    def monitor(server_pct, db_pct, generator_pct=5.0):
        return {"cpus_allowed": {"server": [0], "generator": [1], "services": {"ferretdb": [1], "postgresql": [1]}},
                "summary": {"server": {"cpu_pct_mean": server_pct}, "generator": {"cpu_pct_mean": generator_pct},
                            "services": {"ferretdb": {"cpu_pct_mean": db_pct * 0.6},
                                         "postgresql": {"cpu_pct_mean": db_pct * 0.4}},
                            "system": {"per_cpu_busy_pct_mean": [100.0, 100.0]}}}

    assert saturated_side(monitor(97, 40)) == "server"
    assert saturated_side(monitor(30, 90)) == "database"  # 90 + the generator's 5 on the shared CPU
    # Both CPUs 100% busy, but by other programs: neither side's own processes filled them.
    assert saturated_side(monitor(30, 20)) is None
    assert saturated_side({"summary": {"server": {"cpu_pct_mean": 99}}}) is None  # no database: not judged

    # The cluster mode's server host: the server and the database on the same CPUs, the generator elsewhere.
    def shared_host(server_pct, db_pct):
        return {"cpus_allowed": {"server": [0, 1], "generator": None, "services": {"postgresql": [0, 1]}},
                "summary": {"server": {"cpu_pct_mean": server_pct}, "services": {"postgresql": {"cpu_pct_mean": db_pct}}}}

    assert saturated_side(shared_host(185, 10)) == "server"
    assert saturated_side(shared_host(20, 185)) == "database"
    assert saturated_side(shared_host(100, 85)) == "host"  # together 185% of 200%: neither alone
    assert saturated_side(shared_host(60, 50)) is None
    # Separate CPUs (one machine): the two sides' sum is not a verdict.
    assert saturated_side(monitor(60, 60)) is None


def test_a_database_bound_level_says_it_does_not_rank_the_frameworks(tmp_path):
    """Every output names the side that held each figure of a level with a database, and says that a level the
    database held does not rank the frameworks: all contestants held (big), or some (small)."""
    from netarena.report.html import render
    from netarena.report.markdown import render_markdown
    from report_fixtures import ENVIRONMENT, generator_doc, monitor_doc

    def monitor(server_pct, db_pct):
        doc = monitor_doc(cpu_pct=server_pct, rss_bytes=30 << 20)
        doc["cpus_allowed"]["services"] = {"ferretdb": [1], "postgresql": [1]}
        doc["summary"]["generator"] = {"cpu_pct_mean": 4.0}
        doc["summary"]["services"] = {"ferretdb": {"cpu_pct_mean": db_pct * 0.6},
                                      "postgresql": {"cpu_pct_mean": db_pct * 0.4}}
        return doc

    store = Store(tmp_path)
    run_id = store.create_run(suite_name="db", suite_path=None, suite={"name": "db", "repeat": 2}, args={},
                              backend="real", server_cpus=[0], generator_cpus=[1], environment=ENVIRONMENT,
                              planned=8, netarena_version="0.1.0", git_sha=None, orchestrator_start_time=None)
    # (contestant, doc) -> (req/s, server CPU %, database CPU %)
    figures = {("alpha", "big"): (400, 30, 97), ("beta", "big"): (390, 25, 98),
               ("alpha", "small"): (3000, 98, 70), ("beta", "small"): (2900, 40, 95)}
    for (name, doc), (rps, server_pct, db_pct) in figures.items():
        store.record_contestant(run_id, name, {"name": name, "display_name": name}, {}, "ready")
        for repeat in range(2):
            _record(store, run_id, contestant=name, scenario="mongo", connections=200, repeat=repeat,
                    params={"doc": doc}, generator=generator_doc(rps=rps, connections=200, latency_us={5000: 100}),
                    monitor=monitor(server_pct, db_pct), error_rate=0.0)
    store.set_run_status(run_id, "complete")
    report = load_report(tmp_path, run_id)
    bound = {(g.contestant, g.level_key): g.bound_by for g in report.groups}
    assert bound == {("alpha", "c=200,w=1,doc=big"): "database", ("beta", "c=200,w=1,doc=big"): "database",
                     ("alpha", "c=200,w=1,doc=small"): "server", ("beta", "c=200,w=1,doc=small"): "database"}
    every = "every contestant at this level was held by the database"
    some = "beta (1 of 2) were held by the database"
    text = render_text(report, width=200)
    assert text.count(every) == 1 and text.count(some) == 1, text
    assert text.index(every) > text.index("doc=big") and text.index(some) > text.index("doc=small"), text
    markdown = render_markdown(report)
    assert markdown.count(every) == 1 and markdown.count(some) == 1, markdown
    assert "bound (server / database / host / neither): alpha server, beta database" in markdown, markdown
    page = render(report).decode()
    assert page.count('class="note database-bound" data-level="c=200,w=1,doc=big"') == 1
    assert page.count('class="note database-bound" data-level="c=200,w=1,doc=small"') == 1
    assert page.count('<td data-field="bound">database</td>') == 3 and page.count(
        '<td data-field="bound">server</td>') == 1
    store.close()


def test_database_pools_are_stated_and_pipelining_drivers_badged_on_database_scenarios_only(tmp_path):
    """A contestant's [database] table, as stored with the run: its pool in the contestants' table, and PIPE on
    its groups of a database scenario when it declares a pipelining driver (never on hello)."""
    from report_fixtures import MANIFEST, _record, generator_doc, monitor_doc

    from netarena.report.html import render

    store = Store(tmp_path)
    run_id = store.create_run(suite_name="db", suite_path=None, suite={"name": "db", "repeat": 1},
                              args={"argv": ["netarena", "run"]}, backend="real", server_cpus=[0], generator_cpus=[1],
                              environment={}, planned=4, netarena_version="0.1.0", git_sha="abc",
                              orchestrator_start_time=None)
    databases = {"piped": {"pool": 8, "pipelining": True, "how": "per worker"},
                 "plain": {"pool": 16, "pipelining": False, "how": "per process"}}
    for name, database in databases.items():
        store.record_contestant(run_id, name, {"name": name, **MANIFEST, "display_name": name, "database": database},
                                {}, "ready")
        for scenario in ("db", "hello"):
            _record(store, run_id, contestant=name, scenario=scenario, connections=10, repeat=0,
                    generator=generator_doc(rps=1000, latency_us={500: 100}, connections=10),
                    monitor=monitor_doc(cpu_pct=90, rss_bytes=10 << 20), error_rate=0.0)
    # TechEmpower's plaintext: hello with HTTP pipelining 16 deep, badged apart from the drivers' pipelining.
    _record(store, run_id, contestant="plain", scenario="hello", connections=64, repeat=0,
            level_extra={"pipeline": 16}, generator=generator_doc(rps=9000, latency_us={500: 100}, connections=64),
            monitor=monitor_doc(cpu_pct=90, rss_bytes=10 << 20), error_rate=0.0)
    store.close()
    report = load_report(tmp_path, run_id)
    badges = {(g.contestant, g.scenario, g.connections): g.badges for g in report.groups}
    assert "PIPE" in badges[("piped", "db", 10)], badges
    assert "PIPE" not in badges[("piped", "hello", 10)] and "PIPE" not in badges[("plain", "db", 10)], badges
    assert badges[("plain", "hello", 64)] == ["PIPELINED"], badges
    assert not any("PIPELINED" in b for key, b in badges.items() if key[2] == 10), badges
    page = render(report).decode()
    assert "pool of 8 (per worker); pipelines queries (PIPE)" in page and "pool of 16 (per process)" in page
    assert "no browser or common HTTP client pipelines" in page


def test_a_contestant_built_unoptimized_has_every_figure_badged_unopt(tmp_path):
    """An install record with quick_build (NETARENA_QUICK_BUILDS, the tests' cargo builds at opt-level 0) or
    quick_jit (a JVM server's JIT at its first tier alone): UNOPT on each of that contestant's groups, none on the
    others', and the page says what it means."""
    from report_fixtures import MANIFEST, _record, generator_doc, monitor_doc

    from netarena.contestants import QUICK_CARGO_ENV, QUICK_JIT_OPTIONS
    from netarena.report.html import render

    store = Store(tmp_path)
    run_id = store.create_run(suite_name="q", suite_path=None, suite={"name": "q", "repeat": 1},
                              args={"argv": ["netarena", "run"]}, backend="real", server_cpus=[0], generator_cpus=[1],
                              environment={}, planned=4, netarena_version="0.1.0", git_sha="abc",
                              orchestrator_start_time=None)
    for name, install in (("quick", {"quick_build": QUICK_CARGO_ENV}), ("optimized", {"steps": []}),
                          ("quick-jit", {"quick_jit": QUICK_JIT_OPTIONS})):
        store.record_contestant(run_id, name, {"name": name, **MANIFEST, "display_name": name}, install, "ready")
        for scenario in ("hello", "json"):
            _record(store, run_id, contestant=name, scenario=scenario, connections=10, repeat=0,
                    generator=generator_doc(rps=1000, latency_us={500: 100}, connections=10),
                    monitor=monitor_doc(cpu_pct=90, rss_bytes=10 << 20), error_rate=0.0)
    store.close()
    report = load_report(tmp_path, run_id)
    badges = {(g.contestant, g.scenario): g.badges for g in report.groups}
    assert badges[("quick", "hello")] == ["UNOPT"] and badges[("quick", "json")] == ["UNOPT"], badges
    assert badges[("quick-jit", "hello")] == ["UNOPT"] and badges[("quick-jit", "json")] == ["UNOPT"], badges
    assert not badges[("optimized", "hello")] and not badges[("optimized", "json")], badges
    page = render(report).decode()
    assert "built or run unoptimized for the tests" in page and "-XX:TieredStopAtLevel=1" in page
