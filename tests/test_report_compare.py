"""compare on two small runs in one temporary SQLite store, and the report on a run made by `netarena run`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from netarena.cli_report import register
from netarena.report import load_report, write_run_report
from netarena.report.compare import compare, render_html, render_text
from netarena.store import Store
from report_fixtures import populate_run

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two runs of six repeats (enough for a verdict); then the same with the default three repeats."""
    results = tmp_path_factory.mktemp("results")
    store = Store(results)
    a = populate_run(store, repeats=6)
    b = populate_run(store, speedup=1.3, repeats=6)  # alpha 30% faster in B; everyone else unchanged
    store.close()
    return results, a, b


def rows_by_key(comparison):
    return {(r.contestant, r.scenario, r.level_key): r for r in comparison.rows}


def test_ratios_and_significance(two_runs):
    results, a, b = two_runs
    c = compare(load_report(results, a), load_report(results, b))
    rows = rows_by_key(c)
    alpha = rows[("alpha", "hello", "c=10,w=1")]
    assert alpha.throughput.ratio == pytest.approx(1.3)
    assert alpha.throughput.verdict == "higher" and alpha.throughput.significant
    # the bootstrap interval of B/A lies within what the repeats allow (B min / A max .. B max / A min), around
    # the ratio of the medians, and above 1
    assert 20000 * 1.3 * 0.99 / (20000 * 1.01) <= alpha.throughput.ratio_low <= 1.3 <= alpha.throughput.ratio_high
    assert alpha.throughput.ratio_high <= 1.3 * 1.01 / 0.99 and alpha.throughput.ratio_low > 1
    assert alpha.p99.verdict == "lower" and alpha.p99.ratio < 0.8
    beta = rows[("beta", "hello", "c=10,w=1")]
    # beta is the same in both runs (repeats 6,000-10,000 req/s): its interval includes 1
    assert beta.throughput.ratio == pytest.approx(1.0) and beta.throughput.verdict == "no significant change"
    assert beta.throughput.ratio_low < 1 < beta.throughput.ratio_high and not beta.throughput.significant
    assert rows[("delta", "hello", "c=10,w=1")].throughput.verdict == "missing"
    assert c.only_in_a == [] and c.only_in_b == []


def test_a_run_against_itself_changes_nothing(two_runs):
    results, a, _ = two_runs
    report = load_report(results, a)
    c = compare(report, report)
    for row in c.rows:
        assert not row.throughput.significant and not row.p99.significant


def test_compare_outputs_say_how_significance_is_decided(two_runs, tmp_path):
    results, a, b = two_runs
    c = compare(load_report(results, a), load_report(results, b))
    text = render_text(c)
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = " ".join(text.split())
    assert "95% bootstrap interval of B/A (ratio of medians, 2000 resamples of the repeats) excludes 1" in flat
    alpha_line = next(l for l in text.splitlines() if l.startswith("alpha") and "req" not in l and "20.0k" in l)
    assert "higher*" in alpha_line and "lower*" in alpha_line
    page = render_html(c).decode()
    # alpha: throughput and p99 at 2 connection counts, for hello and for each of the 2 echo sizes; and its hello
    # server CPU per request at both (1.3x the requests for the same CPU: 1/1.3; echo's has no bytes to divide)
    assert page.count('data-significant="1"') == 14
    cpu = {r.level_key: r.server_cpu_us for r in c.rows if r.contestant == "alpha" and r.scenario == "hello"}
    assert all(m.verdict == "lower" and m.ratio == pytest.approx(1 / 1.3, rel=0.01) for m in cpu.values()), cpu
    beta = next(r for r in c.rows if r.contestant == "beta" and r.scenario == "hello")
    assert beta.server_cpu_us.ratio == pytest.approx(1.0) and not beta.server_cpu_us.significant
    assert [r.level_key for r in c.rows if r.contestant == "alpha" and r.scenario == "echo"] == \
        ["c=10,w=1,bytes=32768", "c=10,w=1,bytes=524288", "c=100,w=1,bytes=32768", "c=100,w=1,bytes=524288"]
    assert "bootstrap interval of B/A" in page

    group = click.Group()
    register(group)
    out_file = tmp_path / "cmp.html"
    out = CliRunner().invoke(group, ["compare", str(a), str(b), "--results", str(results), "-o", str(out_file)])
    assert out.exit_code == 0, out.output
    assert "higher*" in out.output and out_file.read_bytes().startswith(b"<!DOCTYPE html>")


def test_compare_across_two_stores(two_runs, tmp_path):
    results, a, _ = two_runs
    other = tmp_path / "other"
    store = Store(other)
    b = populate_run(store, speedup=0.5, repeats=6)
    store.close()
    group = click.Group()
    register(group)
    out = CliRunner().invoke(group, ["compare", str(a), str(b), "--results", str(results), "--results-b",
                                     str(other)], terminal_width=100)
    assert out.exit_code == 0, out.output
    assert "lower*" in out.output  # alpha halved: throughput significantly lower


def test_report_of_a_run_made_by_netarena_run(tmp_path):
    """The orchestrator's real code path with its mock measuring backend: the records it stores render."""
    results = tmp_path / "results"
    env = dict(os.environ, NETARENA_BACKEND="mock")
    argv = [sys.executable, "-m", "netarena.cli", "run", str(REPO / "suites" / "quick.toml"), "--contestants-dir",
            str(REPO / "tests" / "fixtures" / "contestants"), "--only", "fx-good,fx-other", "--repeat", "2",
            "--results", str(results), "--quiet"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    if done.returncode != 0:
        pytest.fail(f"netarena run (mock backend) failed: {done.stderr[-2000:]}")
    report = load_report(results, 1)
    assert {g.contestant for g in report.groups} == {"fx-good", "fx-other"}
    assert all(g.requests_per_s_median and g.ok_ids for g in report.groups)
    page = write_run_report(results, 1, tmp_path / "r.html").read_text()
    for g in report.groups:
        assert f'data-contestant="{g.contestant}" data-level="{g.level_key}"' in page


def test_three_repeats_are_too_few_for_a_verdict(tmp_path):
    """With three repeats, the bootstrap can only reproduce the ranges, which two runs of the same thing fail
    to overlap one time in ten: compare declines to call it (and says so) rather than raise false alarms."""
    store = Store(tmp_path)
    a, b = populate_run(store), populate_run(store, speedup=1.3)
    store.close()
    c = compare(load_report(tmp_path, a), load_report(tmp_path, b))
    alpha = rows_by_key(c)[("alpha", "hello", "c=10,w=1")]
    assert alpha.throughput.verdict == "too few repeats" and not alpha.throughput.significant
    # the interval is still shown: with three repeats it is B min / A max – B max / A min
    assert alpha.throughput.ratio_low == pytest.approx(20000 * 1.3 * 0.99 / (20000 * 1.01))
    assert alpha.throughput.ratio_high == pytest.approx(20000 * 1.3 * 1.01 / (20000 * 0.99))
    text = render_text(c)
    assert re.search(r"^alpha .* few .* few\s*$", text, re.M) and "few = too few repeats" in " ".join(text.split())


def test_bootstrap_interval_is_reproducible_and_narrows_with_confidence():
    from netarena.report.compare import bootstrap_ratio_interval

    a = [100.0, 103.0, 97.0, 101.0, 99.0, 104.0, 96.0]
    b = [v * 1.2 for v in reversed(a)]  # a true 20% difference, the same spread
    low95, high95 = bootstrap_ratio_interval(a, b, 0.95)
    assert (low95, high95) == bootstrap_ratio_interval(a, b, 0.95)  # seeded: the same verdict every time
    low99, high99 = bootstrap_ratio_interval(a, b, 0.99)
    assert low99 <= low95 < 1.2 < high95 <= high99 and low95 > 1
    same = bootstrap_ratio_interval(a, list(reversed(a)), 0.95)
    assert same[0] < 1 < same[1]
