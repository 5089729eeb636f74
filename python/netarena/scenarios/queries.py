"""queries: N World rows per request, each read by its own query (TechEmpower's multiple queries;
docs/techempower.md)."""

from __future__ import annotations

from .techempower import (DEFAULT_QUERIES, QUERIES_PARAM, TechEmpowerScenario, check_world_lists, queries_path,
                          same_as_database)


class Queries(TechEmpowerScenario):
    """GET /queries?queries=N answers 200, application/json, an array of N rows of table world picked at
    random, each read by its own query (N clamped to 1..500; a missing or bad value is 1); suite `queries`
    gives N, one level per value."""

    name = "queries"
    order = 100
    nagle_path = queries_path("queries", str(DEFAULT_QUERIES))
    params = {"queries": QUERIES_PARAM}

    def load(self, level, base, static_dir, http_args):
        return self.expect_status_load(base + queries_path("queries", str(level.param("queries", DEFAULT_QUERIES))),
                                       http_args)

    def check_responses(self, http, static_dir):
        check_world_lists(http, "queries",
                          lambda rows: http.service_url is not None and same_as_database(http.service_url, rows))


SCENARIO = Queries()
