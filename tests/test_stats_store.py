"""Statistics over repeats (hand-built results) and the store's resume bookkeeping."""

from __future__ import annotations

import sqlite3

import pytest
from hdrh.histogram import HdrHistogram

from netarena import stats
from netarena.store import Store, row_to_dict


def generator(rps: float, latencies_us: list[int], errors: int = 0, saturated: bool = False) -> dict:
    hist = HdrHistogram(1, 3_600_000_000, 3)
    for value in latencies_us:
        hist.record_value(value)
    return {"throughput": {"requests_per_s": rps}, "totals": {"requests": len(latencies_us), "errors": errors},
            "errors": {"total": errors}, "generator_saturated": saturated, "generator": {"saturated": saturated},
            "latency": {"histogram": {"lowest_trackable": 1, "highest_trackable": 3_600_000_000,
                                      "significant_digits": 3, "data": hist.encode().decode()}}}


def row(rps, latencies, repeat, status="ok", flags=(), **gen):
    """A stored measurement; its flags are given by hand (as the run would have stored them), not computed
    with the code under test."""
    g = generator(rps, latencies, **gen) if status == "ok" else None
    return {"contestant": "a", "scenario": "hello", "level_key": "c=1,w=1", "repeat_index": repeat,
            "status": status, "generator": g, "flags": list(flags),
            "failure_kind": None if status == "ok" else "crashed", "error": None if status == "ok" else "boom"}


def test_median_min_max_and_merged_percentiles():
    rows = [row(100, [10] * 90, 0), row(300, [1000] * 10, 1), row(200, [10] * 100, 2)]
    [summary] = stats.summarize(rows)
    assert (summary.requests_per_s_median, summary.requests_per_s_min, summary.requests_per_s_max) == (200, 100, 300)
    assert summary.cv == pytest.approx(0.5)
    assert "cv_above_5pct" in summary.flags
    # 200 samples of 10 us and 10 of 1000 us: merged p50 is 10, p99 is 1000. Averaging each repeat's p99
    # (10, 1000, 10) would give 340: the merge is what makes this right.
    assert summary.latency_p50_us == 10
    assert summary.latency_p99_us == pytest.approx(1000, rel=0.001)


def test_stable_results_are_not_flagged_and_failures_are_counted():
    rows = [row(1000, [5], 0), row(1010, [5], 1), row(0, [], 2, status="failed")]
    [summary] = stats.summarize(rows)
    assert summary.repeats_ok == 2 and summary.repeats_failed == 1
    assert summary.flags == ["failed_repeats"]
    assert summary.failures == ["#3: crashed: boom"]


def test_cv_is_flagged_above_five_percent_only():
    # Three repeats m - d, m, m + d: sample stdev d, mean m, CV d / m.
    below = [row(1000 - 49, [5], 0), row(1000, [5], 1), row(1000 + 49, [5], 2)]
    above = [row(1000 - 51, [5], 0), row(1000, [5], 1), row(1000 + 51, [5], 2)]
    [summary] = stats.summarize(below)
    assert summary.cv == pytest.approx(0.049) and summary.flags == []
    [summary] = stats.summarize(above)
    assert summary.cv == pytest.approx(0.051) and summary.flags == ["cv_above_5pct"]


def test_stored_flags_carry_into_the_summary():
    rows = [row(1000, [5], 0), row(1000, [5], 1, flags=["generator_saturated"]), row(1000, [5], 2)]
    [summary] = stats.summarize(rows)
    assert summary.flags == ["generator_saturated"]


def test_measurement_flags():
    assert stats.measurement_flags(generator(1, [1] * 98, errors=2)) == ["error_rate_above_1pct"]
    assert stats.measurement_flags(generator(1, [1] * 99, errors=1)) == []
    # Around the 1% threshold: 101 errors of 10,000 (1.01%) is flagged, 99 (0.99%) is not.
    assert stats.error_rate(generator(1, [1] * 9899, errors=101)) == 0.0101
    assert stats.measurement_flags(generator(1, [1] * 9899, errors=101)) == ["error_rate_above_1pct"]
    assert stats.measurement_flags(generator(1, [1] * 9901, errors=99)) == []
    assert stats.measurement_flags(generator(1, [1], saturated=True)) == ["generator_saturated"]
    assert stats.measurement_flags(None, {"killed": True, "leftover": []}) == ["needed_sigkill_to_stop"]


def test_store_is_wal_and_resume_redoes_only_interrupted(tmp_path):
    store = Store(tmp_path)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run_id = store.create_run(suite_name="s", suite_path=None, suite={}, args={}, backend="mock", server_cpus=[0],
                              generator_cpus=[1], environment={"cpu": "x"}, planned=2, netarena_version="0",
                              git_sha=None, orchestrator_start_time=None)
    base = {"contestant": "a", "scenario": "hello", "level_key": "c=1,w=1", "level": {"connections": 1, "workers": 1},
            "started_at": "t0", "ended_at": "t1"}
    store.record_measurement(run_id, dict(base, repeat_index=0, status="ok", requests_per_s=5.0))
    store.record_measurement(run_id, dict(base, repeat_index=1, status="interrupted"))
    assert store.done_keys(run_id) == {("a", "hello", "c=1,w=1", 0)}
    store.record_measurement(run_id, dict(base, repeat_index=1, status="failed", failure_kind="crashed"))
    assert len(store.measurements(run_id)) == 2
    # Committed as written: another connection sees it without any close/flush.
    other = sqlite3.connect(tmp_path / "netarena.sqlite")
    assert other.execute("SELECT count(*) FROM measurements WHERE status='failed'").fetchone()[0] == 1
    assert row_to_dict(store.run(run_id))["environment"] == {"cpu": "x"}
