"""updates: N World rows read, given new random numbers and written back per request (TechEmpower's data
updates; docs/techempower.md)."""

from __future__ import annotations

from .checks import _expect
from .techempower import (DEFAULT_QUERIES, QUERIES_PARAM, TechEmpowerScenario, check_world_lists,
                          database_numbers, queries_path)


class Updates(TechEmpowerScenario):
    """GET /updates?queries=N answers 200, application/json, an array of N rows of table world picked at
    random, each read by its own query, given a new randomNumber (1..10000) and written back before the answer
    (the writes may be one batched UPDATE); the answer is the rows as updated. N as in queries; suite `queries`
    gives N, one level per value."""

    name = "updates"
    order = 120
    nagle_path = queries_path("updates", str(DEFAULT_QUERIES))
    params = {"queries": QUERIES_PARAM}

    def load(self, level, base, static_dir, http_args):
        return self.expect_status_load(base + queries_path("updates", str(level.param("queries", DEFAULT_QUERIES))),
                                       http_args)

    def check_responses(self, http, static_dir):
        def written(rows):
            if http.service_url is None:
                return
            held = database_numbers(http.service_url, [i for i, _ in rows])
            answered: dict[int, set[int]] = {}
            for row_id, number in rows:
                answered.setdefault(row_id, set()).add(number)
            for row_id, numbers in answered.items():
                # An id drawn twice in one request keeps one of its new numbers, whichever was written last.
                _expect(held.get(row_id) in numbers,
                        f"row id {row_id}: the answer says randomNumber {sorted(numbers)[0]}, the database holds "
                        f"{held.get(row_id)}: the updates were not written")
        check_world_lists(http, "updates", written)


SCENARIO = Updates()
