"""cached-queries: N World rows per request from an in-process cache filled at start (TechEmpower's cached
queries; docs/techempower.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .techempower import (CACHED_TABLES, QUERIES_MAX, TechEmpowerScenario, check_world_lists, queries_path,
                          same_as_database)

# TechEmpower's levels are 1, 10, 20, 50 and 100 rows.
DEFAULT_CACHED_COUNT = 20


class CachedQueries(TechEmpowerScenario):
    """GET /cached-queries?count=N answers 200, application/json, an array of N rows of table world picked at
    random, served from an in-process cache of the table filled when the server starts (no query per request;
    N clamped to 1..500, a missing or bad value is 1); suite `count` gives N, one level per value."""

    name = "cached-queries"
    order = 130
    nagle_path = queries_path("cached-queries", str(DEFAULT_CACHED_COUNT), "count")
    params = {"count": (list[Annotated[int, Field(ge=1, le=QUERIES_MAX)]] | None, None)}

    counted_table = CACHED_TABLES

    def selects_per_request(self, level):
        return 0  # every row from the cache filled at start

    def level_params(self, measure):
        return [(("count", n),) for n in (measure.count or [DEFAULT_CACHED_COUNT])]

    def load(self, level, base, static_dir, http_args):
        count = level.param("count", DEFAULT_CACHED_COUNT)
        return self.expect_status_load(base + queries_path("cached-queries", str(count), "count"), http_args)

    def check_responses(self, http, static_dir):
        # The cache was filled from the fixture, loaded before the server started: its rows are the table's.
        check_world_lists(http, "cached-queries",
                          lambda rows: http.service_url is not None and same_as_database(http.service_url, rows),
                          param="count", cached=True)


SCENARIO = CachedQueries()
