"""bytes: a body of n bytes, each '*' (docs/scenarios.md)."""

from __future__ import annotations

from typing import Literal

from .checks import _expect, ok_status
from .load import body_load
from .registry import Scenario
from .static_set import BYTES_FILL, BYTES_SIZES

DEFAULT_BYTES_SIZE = 40


class Bytes(Scenario):
    """GET /bytes/{n} answers 200 with n bytes of '*' (0x2A), n one of BYTES_SIZES; suite `sizes` picks them."""

    name = "bytes"
    tls = True
    order = 30
    nagle_path = "/bytes/10000"
    params = {"sizes": (list[Literal[BYTES_SIZES]] | None, None)}

    def level_params(self, measure):
        return [(("size", s),) for s in (measure.sizes or [DEFAULT_BYTES_SIZE])]

    def load(self, level, base, static_dir, http_args):
        size = level.param("size", DEFAULT_BYTES_SIZE)
        return body_load(f"{base}/bytes/{size}", http_args, BYTES_FILL * size)

    def check_responses(self, http, static_dir):
        for size in BYTES_SIZES:
            def sized(status, headers, body, _, size=size):
                ok_status(status)
                _expect(len(body) == size, f"body of {len(body)} bytes, expected {size}")
                _expect(body == BYTES_FILL * size, "body is not all '*' (0x2A)")
            http.run(f"/bytes/{size}", sized, size)


SCENARIO = Bytes()
