"""static: files of the static set served from the file system (docs/scenarios.md)."""

from __future__ import annotations

from .checks import _expect, ok_status
from .load import static_set_load
from .registry import Scenario
from .static_set import sha256_hex

DEFAULT_STATIC_PATH = "bytes/10000"
# Files verified before a static measurement: the first, last and one in the middle, plus one bytes file.
STATIC_VERIFY_PATHS = ("img/00000.jpg", "img/04242.jpg", "img/09999.jpg", "bytes/10000")


def check_files(http, route: str, static_dir, rels) -> None:
    """GET /{route}/{rel} answers 200 with the static set's file, byte for byte, for each of `rels`."""
    for rel in rels:
        expected = (static_dir / rel).read_bytes()

        def same(status, headers, body, _, expected=expected):
            ok_status(status)
            _expect(body == expected, f"body of {len(body)} bytes (sha256 {sha256_hex(body)[:12]}) differs "
                    f"from the file ({len(expected)} bytes, sha256 {sha256_hex(expected)[:12]})")
        http.run(f"/{route}/{rel}", same, len(expected))


class Static(Scenario):
    """GET /static/{path} answers 200 with the static set's file at path, byte for byte; suite `static_path`
    names one file ("img/00042.jpg") or a folder ("img/": a file of it at random per request)."""

    name = "static"
    tls = True
    order = 50
    static_set = True
    nagle_path = "/static/bytes/10000"
    params = {"static_path": (str | None, None)}

    def check_entry(self, entry, fail):
        if entry.static_path is not None and (entry.static_path.startswith("/") or ".." in entry.static_path):
            fail("static_path", "must be a relative path inside the static file set, "
                 "e.g. \"bytes/10000\" or \"img/00042.jpg\"")

    def level_params(self, measure):
        return [(("static_path", measure.static_path or DEFAULT_STATIC_PATH),)]

    def load(self, level, base, static_dir, http_args):
        return static_set_load(base, "static", level.param("static_path", DEFAULT_STATIC_PATH), static_dir, http_args)

    def check_responses(self, http, static_dir):
        check_files(http, "static", static_dir, STATIC_VERIFY_PATHS)


SCENARIO = Static()
