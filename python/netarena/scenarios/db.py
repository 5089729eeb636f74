"""db: one random World row read from PostgreSQL per request (TechEmpower's single query; docs/techempower.md)."""

from __future__ import annotations

from .checks import FETCH_MAX_BODY_BYTES
from .techempower import TechEmpowerScenario, counted, same_as_database, world_json, world_row


class Db(TechEmpowerScenario):
    """GET /db answers 200, application/json, one row of table world picked at random, read by one query:
    {"id": N, "randomNumber": M} (integers; TechEmpower's headers: Server, Date, Content-Type, a length)."""

    name = "db"
    order = 90
    nagle_path = "/db"

    def load(self, level, base, static_dir, http_args):
        return self.expect_status_load(f"{base}/db", http_args)

    def check_responses(self, http, static_dir):
        def one_row(status, headers, body, _):
            row = world_row(world_json(status, headers, body), "the object")
            if http.service_url is not None:
                same_as_database(http.service_url, [row])
        counted(http, "/db", one_row, FETCH_MAX_BODY_BYTES - 1, "world", 1)


SCENARIO = Db()
