"""json: a small object serialized per request (docs/scenarios.md)."""

from __future__ import annotations

from .checks import FETCH_MAX_BODY_BYTES, JSON_CONTENT_TYPE, _expect, json_value
from .load import learned_load
from .registry import Scenario

JSON_BODY = {"message": "Hello, World!"}

__all__ = ["JSON_BODY", "JSON_CONTENT_TYPE", "SCENARIO"]


class Json(Scenario):
    """GET /json answers 200, Content-Type application/json, a body that parses to {"message": "Hello, World!"}."""

    name = "json"
    tls = True
    order = 40
    nagle_path = "/json"

    def load(self, level, base, static_dir, http_args):
        # Serializations differ between frameworks (spacing, key order); the parsed value was checked once before
        # the load, the generator then holds every response to that first one.
        return learned_load(base + "/json", http_args)

    def check_responses(self, http, static_dir):
        def js(status, headers, body, _):
            value = json_value(status, headers, body)
            _expect(value == JSON_BODY, f"body parses to {value!r}, expected {JSON_BODY!r}")
        http.run("/json", js, FETCH_MAX_BODY_BYTES - 1)


SCENARIO = Json()
