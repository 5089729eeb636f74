"""hello: the smallest HTTP response (docs/scenarios.md)."""

from __future__ import annotations

from .checks import _expect, _show, ok_status
from .load import body_load
from .registry import Scenario

HELLO_BODY = b"Hello, World!"
HELLO_CONTENT_TYPE = "text/plain"


class Hello(Scenario):
    """GET /hello answers 200, Content-Type text/plain, body "Hello, World!", on a kept-alive connection."""

    name = "hello"
    tls = True
    order = 20
    nagle_path = "/hello"

    def load(self, level, base, static_dir, http_args):
        return body_load(base + "/hello", http_args, HELLO_BODY)

    def check_responses(self, http, static_dir):
        def hello(status, headers, body, _):
            ok_status(status)
            ctype = headers.get("content-type", "")
            _expect(ctype.split(";")[0].strip().lower() == HELLO_CONTENT_TYPE,
                    f"Content-Type {ctype!r}, expected {HELLO_CONTENT_TYPE}")
            _expect(body == HELLO_BODY, f"body {_show(body)}, expected {HELLO_BODY!r}")
            _expect(http.closes_connections or headers.get("connection", "").lower() != "close",
                    "server sent 'Connection: close'; HTTP/1.1 keep-alive is required (a server that closes "
                    "every connection by design declares closes_connections with the reason)")
        http.run("/hello", hello, len(HELLO_BODY))
        http.run("/hello", hello, len(HELLO_BODY))  # the same connection again: keep-alive works


SCENARIO = Hello()
