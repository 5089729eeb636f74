"""Every suite shipped in suites/ validates and names only contestants that exist."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from netarena.config import load_suite  # noqa: E402
from netarena.contestants import select  # noqa: E402

SUITES = sorted((REPO / "suites").rglob("*.toml"))


def test_there_are_suites():
    assert REPO / "suites" / "quick.toml" in SUITES and len(SUITES) >= 5


@pytest.mark.parametrize("path", SUITES, ids=lambda p: str(p.relative_to(REPO / "suites")))
def test_suite_validates_and_names_real_contestants(path):
    suite, _ = load_suite(path)
    names = select(REPO / "contestants", list(suite.contestants), list(suite.exclude), str(path))
    assert names, f"{path} selects no contestant"
    for index, entry in enumerate(suite.measure):
        if entry.contestants is not None:  # an entry of its own for some contestants must measure one of the suite's
            own = select(REPO / "contestants", list(entry.contestants), list(entry.exclude), str(path))
            assert set(own) & set(names), f"{path}: measure[{index}] measures none of the suite's contestants"


@pytest.mark.parametrize("path", SUITES, ids=lambda p: str(p.relative_to(REPO / "suites")))
def test_every_shipped_suite_repeats_at_least_three_times(path):
    """The README's promise: a median of three repeats or more, from the default suite and every seed."""
    suite, _ = load_suite(path)
    assert suite.repeat >= 3, f"{path}: repeat = {suite.repeat}"


def test_quick_suite_fits_its_time_budget_with_every_contestant():
    """The default suite runs every contestant in about 6 minutes of measuring on 2 cores, so that a first `make
    run` (build, installs, measuring) ends in about 12. The planner's estimate must stay inside the suite's
    time_budget_s, at most 8 minutes, when contestants or measurements are added."""
    from netarena.contestants import load
    from netarena.plan.suite import build_plan

    path = REPO / "suites" / "quick.toml"
    suite, _ = load_suite(path)
    assert suite.time_budget_s is not None and suite.time_budget_s <= 480
    names = select(REPO / "contestants", list(suite.contestants), list(suite.exclude), str(path))
    assert names == sorted(p.parent.name for p in (REPO / "contestants").glob("*/contestant.toml"))
    plan = build_plan(suite, load(REPO / "contestants", names))
    assert plan.estimate_s() <= suite.time_budget_s, plan.estimate_s()


def test_one_server_per_level_measures_an_items_repeats_back_to_back_and_counts_one_start():
    """server_per = "level" (the quick suite's): each item's repeats follow each other (A A A B B B) instead of
    interleaved rounds, and the estimate counts one start and one warm-up to start.warmup_min_s per item, the
    other repeats with the suite's warm-up and no start."""
    from netarena.contestants import load
    from netarena.plan.suite import (ESTIMATED_OVERHEAD_S, ESTIMATED_REUSED_OVERHEAD_S, REUSED_WARMUP_SHARE,
                                     build_plan)

    path = REPO / "suites" / "quick.toml"
    suite, _ = load_suite(path)
    assert suite.server_per == "level"
    contestants = load(REPO / "contestants", ["play-scala", "go-net", "python-asyncio"])
    one_server = build_plan(suite, contestants)
    per_repeat = build_plan(suite.model_copy(update={"server_per": "repeat"}), contestants)
    items = one_server.items
    assert list(one_server.rounds()) == [(r, i) for i in items for r in range(suite.repeat)]
    assert list(per_repeat.rounds()) == [(r, i) for r in range(suite.repeat) for i in items]
    play = next(i for i in items if i.contestant == "play-scala")
    warmup_min = one_server.warmup_min_s("play-scala")
    assert warmup_min > suite.warmup_s
    assert one_server.item_estimate_s(play) == warmup_min + suite.duration_s + ESTIMATED_OVERHEAD_S
    # A repeat on the kept server warms up for a share of the first repeat's warm-up (the JIT recompiles what
    # the previous repeat's closing connections invalidated), never less than the suite's.
    assert one_server.reused_warmup_s(play) == REUSED_WARMUP_SHARE * warmup_min > suite.warmup_s
    assert one_server.item_estimate_s(play, reused=True) == \
        REUSED_WARMUP_SHARE * warmup_min + suite.duration_s + ESTIMATED_REUSED_OVERHEAD_S
    go = next(i for i in items if i.contestant == "go-net")
    assert one_server.reused_warmup_s(go) == suite.warmup_s
    saved = sum((per_repeat.item_estimate_s(i) - one_server.item_estimate_s(i, reused=True)) * (suite.repeat - 1)
                for i in items)
    assert abs(per_repeat.estimate_s() - one_server.estimate_s() - saved) < 1e-9
