"""mongo: one document read from the database per request (docs/scenarios.md, services.md)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field

from ..fixtures import mongo_documents
from .checks import FETCH_MAX_BODY_BYTES, _show, _Wrong, json_value
from .load import learned_load
from .registry import Scenario

# The fixture's documents (fixtures.mongo_documents), a suite's `doc` values.
MONGO_DOCS = ("small", "big")
DEFAULT_MONGO_DOC = "small"


class Mongo(Scenario):
    """GET /mongo/{doc} answers 200, application/json, the fixture's document `doc` as read from the mongo
    service (one read per request); suite `doc` picks small or big, `mongo_pool` the most connections each
    server process's client opens to the database (maxPoolSize in the URL it is given)."""

    name = "mongo"
    order = 70
    service = "mongo"
    nagle_path = "/mongo/small"
    # Which fixture document each request reads; one level per value.
    # The client's pool per server process: None keeps the contestant's driver default (100 in the official
    # drivers netarena's contestants use; the Ruby ones size it to their threads). A value is given to the
    # contestant as the standard connection-string option maxPoolSize, which every official driver reads
    # from the URL, so no contestant needs a setting of its own; one level per value.
    params = {"doc": (list[Literal[MONGO_DOCS]] | None, None),
              "mongo_pool": (list[Annotated[int, Field(ge=1, le=100_000)]] | None, None)}

    def level_params(self, measure):
        pools = measure.mongo_pool or [None]
        return [(("doc", d),) + ((("mongo_pool", p),) if p is not None else ())
                for d in (measure.doc or [DEFAULT_MONGO_DOC]) for p in pools]

    def service_url(self, level, url):
        pool = level.param("mongo_pool")
        if pool is None:
            return url
        parts = urlsplit(url)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "maxpoolsize"] + [("maxPoolSize", pool)]
        return urlunsplit(parts._replace(query=urlencode(query)))

    def load(self, level, base, static_dir, http_args):
        # One database read per request; serializations differ (spacing, key order), so the value was
        # compared with the fixture before the load and the generator holds every response to the first one:
        # a server caching the response stays correct, a wrong or partial document is an error.
        doc = level.param("doc", DEFAULT_MONGO_DOC)
        return learned_load(f"{base}/mongo/{doc}", http_args, doc=doc)

    def check_responses(self, http, static_dir):
        for name, expected in mongo_documents().items():
            def same_doc(status, headers, body, _, expected=expected):
                value = json_value(status, headers, body)
                if value != expected:
                    wrong = sorted(k for k in set(value) | set(expected) if value.get(k) != expected.get(k)) \
                        if isinstance(value, dict) else ["(not an object)"]
                    raise _Wrong(f"the document differs from the fixture's '{expected['_id']}' in "
                                 f"{', '.join(map(str, wrong[:5]))}: {_show(body)}")
            http.run(f"/mongo/{name}", same_doc, FETCH_MAX_BODY_BYTES - 1)


SCENARIO = Mongo()
