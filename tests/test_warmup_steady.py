"""Warm-up until steady: the rule as a pure function, and the mechanism in a real run (a fixture server, the real
netarena-load, the real store). Mechanism only: which windows agree depends on the machine, so the real runs use
tolerances that settle (any three answered windows agree within 99%) or cannot (no three windows agree exactly)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURE_CONTESTANTS, db_rows, run_cli, write_suite
from netarena import warmup


@pytest.mark.parametrize("windows, tolerance, expected", [
    ([100, 200, 300], 0.05, False),             # still rising
    ([100, 200, 300, 295, 301, 298], 0.05, True),  # the last three within 5% of the highest
    ([300, 298], 0.05, False),                  # fewer than STEADY_WINDOWS windows
    ([300, 0, 300, 300], 0.05, False),          # a window without responses among the last three...
    ([300, 0, 300, 300, 300], 0.05, True),      # ...does not count once three good ones follow it
    ([300, None, 300], 0.5, False),             # nor one without a figure
    ([100, 104, 95], 0.10, True),               # (104 - 95) / 104 = 8.7%: within 10%...
    ([100, 104, 95], 0.08, False),              # ...not within 8%
])
def test_steady_rule(windows, tolerance, expected):
    assert warmup.steady(windows, tolerance) is expected


class FakeClock:
    """Time that moves one window per window run: the loop's bounds without waiting for them."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def windows_from(values: list[float], clock: FakeClock):
    it = iter(values)

    def run_window():
        clock.now += warmup.WINDOW_S
        return next(it), None
    return run_window


def test_warm_up_waits_for_the_minimum_then_ends_when_steady():
    clock = FakeClock()
    result = warmup.warm_up(windows_from([100, 100, 100, 100, 100, 100, 100], clock), tolerance=0.05, min_s=5,
                            max_s=60, clock=clock)
    assert result["settled"] is True and result["used_s"] == 5 and len(result["window_rps"]) == 5


def test_warm_up_that_never_settles_stops_at_the_maximum():
    clock = FakeClock()
    rising = [100 * 2 ** i for i in range(100)]
    result = warmup.warm_up(windows_from(rising, clock), tolerance=0.05, min_s=1, max_s=4, clock=clock)
    assert result["settled"] is False and result["used_s"] == 4 and len(result["window_rps"]) == 4


def test_the_maximum_never_cuts_the_minimum():
    clock = FakeClock()
    result = warmup.warm_up(windows_from([1, 2, 3, 4, 5, 6, 7], clock), tolerance=0.05, min_s=6, max_s=2,
                            clock=clock)
    assert result["max_s"] == 6 and result["used_s"] == 6


def test_a_failed_window_ends_the_warm_up_with_its_error():
    clock = FakeClock()

    def failing():
        clock.now += 1
        return None, "a warm-up window failed: boom"
    result = warmup.warm_up(failing, tolerance=0.05, min_s=0, max_s=10, clock=clock)
    assert result["settled"] is False and result["error"].endswith("boom") and result["window_rps"] == [None]


SUITE = """name = "steady"
contestants = ["fx-good"]
repeat = 1
warmup_s = 0
duration_s = 0.5
timeout_s = 1
warmup_until_steady = {tolerance}
warmup_max_s = {max_s}

[[measure]]
scenario = "hello"
connections = [2]
"""


def run_steady(tmp_path, cache_dir, tolerance: float, max_s: float):
    suite = write_suite(tmp_path / "suite.toml", SUITE.format(tolerance=tolerance, max_s=max_s))
    results = tmp_path / "results"
    done = run_cli(["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--quiet"],
                   cache_dir)
    assert done.returncode == 0, done.stderr
    [row] = db_rows(results, "SELECT * FROM measurements")
    return results, row


def test_a_real_warm_up_settles_and_records_its_windows(tmp_path, cache_dir, generator_binary,
                                                        no_leftover_processes):
    results, row = run_steady(tmp_path, cache_dir, tolerance=0.99, max_s=60)
    assert row["status"] == "ok", row["error"]
    warm = json.loads(row["warmup_json"])
    assert warm["settled"] is True and warm["error"] is None
    assert len(warm["window_rps"]) == warmup.STEADY_WINDOWS and all(r > 0 for r in warm["window_rps"])
    assert warm["used_s"] >= warmup.STEADY_WINDOWS * warmup.WINDOW_S
    assert "warmup_unsettled" not in json.loads(row["flags_json"])
    # The measurement itself warmed its fresh connections for one window.
    assert json.loads(row["generator_json"])["warmup_s"] == pytest.approx(warmup.WINDOW_S, abs=0.05)


def test_a_real_warm_up_that_never_settles_is_bounded_and_badged(tmp_path, cache_dir, generator_binary,
                                                                 no_leftover_processes):
    # No three windows of real traffic agree to a billionth: never steady, so bounded by warmup_max_s.
    results, row = run_steady(tmp_path, cache_dir, tolerance=1e-9, max_s=2)
    warm = json.loads(row["warmup_json"])
    assert warm["settled"] is False and warm["used_s"] >= 2 and len(warm["window_rps"]) >= 2
    assert "warmup_unsettled" in json.loads(row["flags_json"])
    shown = run_cli(["show", "--results", results], cache_dir)
    assert "WARMUP" in shown.stdout and "(never settled)" in shown.stdout, shown.stdout
