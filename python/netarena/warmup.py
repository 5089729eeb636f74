"""Warm-up until steady: a suite with `warmup_until_steady = TOL` warms each closed-loop measurement up in
windows until successive windows agree, instead of for a fixed time (docs/suites.md, "Warm-up until steady").

A fixed warm-up is a figure of one machine: a JVM server that is warm after 20 s on one host may still be
compiling after 20 s on a host five times slower. So the warm-up runs the measurement's own load in windows
of WINDOW_S (each one netarena-load run, no warm-up of its own) and ends once

- at least `min_s` have passed (the suite's warm-up raised to the contestant's start.warmup_min_s), and
- the last STEADY_WINDOWS windows' requests/s agree: (highest - lowest) <= TOL x highest,

or, never steady, once `max_s` (the suite's warmup_max_s, never below `min_s`) have passed: that
measurement's warm-up did not settle, and the report badges it WARMUP. The measurement then runs with a
warm-up of one window (its connections are new).
"""

from __future__ import annotations

import time
from collections.abc import Callable

# One window of the warm-up: long enough to hold many requests even on a slow server, short enough that a
# steady server is found steady within a few seconds.
WINDOW_S = 1.0
# Windows that must agree: two could agree by chance on the way up; three in a row rarely do.
STEADY_WINDOWS = 3


def steady(window_rps: list[float], tolerance: float, windows: int = STEADY_WINDOWS) -> bool:
    """Whether the last `windows` windows' requests/s agree within `tolerance` (a fraction of the highest).
    A window without a figure (None) or without a response (0) is never steady: a server that answers
    nothing has not warmed up."""
    last = window_rps[-windows:]
    if len(last) < windows or any(not rps for rps in last):
        return False
    return max(last) - min(last) <= tolerance * max(last)


def warm_up(run_window: Callable[[], tuple[float | None, str | None]], *, tolerance: float, min_s: float,
            max_s: float, clock: Callable[[], float] = time.monotonic) -> dict:
    """Run windows (`run_window()` -> (requests/s, error or None)) until steady after `min_s`, or `max_s`.
    Returns what the measurement records as its `warmup`: the rule, each window's requests/s, the time it
    took, whether it settled, and the error that ended it early (the measurement will meet it too)."""
    max_s = max(max_s, min_s)
    started = clock()
    window_rps: list[float | None] = []
    error = None
    settled = False
    while True:
        rps, error = run_window()
        window_rps.append(rps)
        elapsed = clock() - started
        if error is not None:
            break
        if elapsed >= min_s and steady(window_rps, tolerance):
            settled = True
            break
        if elapsed >= max_s:
            break
    return {"mode": "until_steady", "tolerance": tolerance, "window_s": WINDOW_S, "steady_windows": STEADY_WINDOWS,
            "min_s": min_s, "max_s": max_s, "used_s": round(clock() - started, 3), "settled": settled,
            "window_rps": [None if r is None else round(r, 1) for r in window_rps], "error": error}


def applies(level) -> bool:
    """Warm-up until steady is for closed-loop levels measured for a time: an open loop's rate is fixed by
    the level (its windows would always agree), a fixed-size echo flood or a -n count has no warm-up, and a
    find-max search or a connection sweep warms up as it goes."""
    return (level.offered_rate_per_s is None and level.find_max_slo is None and level.requests is None
            and not level.param("bytes") and not level.param("conn_rate_steps"))
