"""Repeats until precise: a suite's (or --precision's) target for the width of the throughput median's interval.

With `precision = "3%"`, a run first measures `repeat` rounds (the minimum, at least MIN_REPEATS), interleaved as
always; then it measures further rounds, still interleaved, of only the groups (contestant, scenario, level)
whose interval (stats.median_interval, the one every output shows) reaches beyond ±3% of their median, until
each is precise, has had `repeat_max` attempts, or the run has spent `precision_budget_s` measuring. Why each
group stopped is derived from what is stored by ``stopped_because``, the one rule the runner follows and the
report shows.
"""

from __future__ import annotations

import re

from .errors import ConfigError

MIN_REPEATS = 3  # fewer repeats give an interval that says little: the minimum a precision target measures
DEFAULT_REPEAT_MAX = 20

STOPPED_PRECISE = "precise"
STOPPED_REPEATS = "repeat budget"
STOPPED_TIME = "time budget"
STOPPED_NO_RESULT = "no result"
STOPPED_UNFINISHED = "run not finished"

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def parse_precision(text: object) -> float:
    """"3%" -> 0.03. A bare number is refused: "3" could mean 3% or 300%, and the difference matters."""
    match = _PERCENT.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a percentage: give the interval's half-width as a percentage of the "
                         "median, e.g. \"3%\"")
    fraction = float(match.group(1)) / 100
    if not 0 < fraction < 1:
        raise ValueError(f"{text!r} is outside 0%–100% (exclusive): give e.g. \"3%\"")
    return fraction


def precision_option(text: str) -> str:
    """--precision's value, checked; the suite stores it as given ("3%")."""
    try:
        parse_precision(text)
    except ValueError as exc:
        raise ConfigError(str(exc), path="--precision") from None
    return text.strip()


def stopped_because(relative_half_width: float | None, attempts: int, target: float, repeat_max: int,
                    run_complete: bool = True) -> str:
    """Why a group's repeats stopped, from what is stored: `relative_half_width` is
    stats.MedianInterval.relative_half_width of its ok repeats' throughput (None without a result), `attempts`
    its measurements, failed ones included; `run_complete` whether the run ended (else an imprecise group below
    its repeat budget was cut short, not stopped by the time budget). The runner's own test is ``wants_more``,
    the same comparisons."""
    if relative_half_width is not None and relative_half_width <= target:
        return STOPPED_PRECISE
    if attempts >= repeat_max:
        return STOPPED_REPEATS
    if relative_half_width is None:
        return STOPPED_NO_RESULT
    return STOPPED_TIME if run_complete else STOPPED_UNFINISHED


def wants_more(relative_half_width: float | None, attempts: int, target: float, repeat_max: int) -> bool:
    """Whether the runner measures another round of a group (the time budget is the runner's to check)."""
    return relative_half_width is not None and relative_half_width > target and attempts < repeat_max


def settings(suite) -> tuple[float, int, float | None] | None:
    """(target, repeat_max, budget_s) of a suite (config.Suite, or its stored JSON as a dict) with a precision
    target, else None."""
    get = suite.get if isinstance(suite, dict) else lambda name: getattr(suite, name)
    if not get("precision"):
        return None
    repeat = int(get("repeat") or MIN_REPEATS)
    return parse_precision(get("precision")), int(get("repeat_max") or max(DEFAULT_REPEAT_MAX, repeat)), \
        get("precision_budget_s")
