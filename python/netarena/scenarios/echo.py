"""echo: a raw TCP byte stream echoed back (docs/scenarios.md), netarena-load's echo mode."""

from __future__ import annotations

import socket
import time
from typing import Annotated

from pydantic import Field

from .checks import Check, _Retryable, _Wrong
from .load import LoadSpec
from .registry import Scenario

ECHO_VERIFY_BYTES = 64 * 1024


def echo_pattern(size: int) -> bytes:
    # Never zeros and not periodic over small spans, so a dropped or repeated chunk shows.
    return bytes((i * 7 + (i >> 8) * 13) % 251 + 1 for i in range(size))


def _check_echo(port: int, timeout_s: float, checks: list[Check], host: str = "127.0.0.1") -> None:
    payload = echo_pattern(ECHO_VERIFY_BYTES)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise _Retryable(f"connect: {exc}") from None
    # timeout_s bounds the whole exchange, not each read: a server echoing a byte a second must not hold the run.
    deadline = time.monotonic() + timeout_s
    with sock:
        received = bytearray()
        try:
            for offset in range(0, len(payload), 16384):
                sock.sendall(payload[offset:offset + 16384])
                want = offset + 16384
                while len(received) < want:
                    left_s = deadline - time.monotonic()
                    if left_s <= 0:
                        raise TimeoutError(f"the echo was not complete within timeout_s={timeout_s:g} s")
                    sock.settimeout(left_s)
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    received += chunk
                if len(received) < want:
                    break
        except (ConnectionError, socket.timeout, TimeoutError) as exc:
            if not received:
                raise _Retryable(f"{type(exc).__name__}: {exc}") from None
            checks.append(Check(f"echo {len(payload)} bytes", False,
                                f"{type(exc).__name__} after {len(received)} bytes echoed"))
            raise _Wrong("") from None
    if bytes(received) != payload:
        first = next((i for i, (a, b) in enumerate(zip(received, payload)) if a != b), min(len(received), len(payload)))
        checks.append(Check(f"echo {len(payload)} bytes", False,
                            f"got {len(received)} bytes back, first difference at byte {first}"))
        raise _Wrong("")
    checks.append(Check(f"echo {len(payload)} bytes", True))



class Echo(Scenario):
    """TCP on start.echo_command's port: every byte sent comes back, in order. Suite `echo_bytes` makes fixed-size
    floods (each connection sends that many bytes, then the measurement ends), `probe_interval_s` adds a latency
    probe; the HTTP options (rates, pipeline, close, requests, find_max) do not apply."""

    name = "echo"
    order = 10
    protocol = "tcp"
    throughput_unit = "chunks/s"  # echoed chunks, not HTTP requests (docs/load-generator.md)
    cost_unit = "MiB"
    cost_unit_short = "MiB"
    # echo_bytes: fixed-size floods (seed 000): each connection sends this many bytes, then the measurement ends
    # (no warm-up, duration_s is the time limit); one level per value. Unset: flood for duration_s.
    params = {"echo_bytes": (list[Annotated[int, Field(ge=1, le=1 << 40)]] | None, None),
              "probe_interval_s": (Annotated[float, Field(gt=0, le=3600)] | None, None)}

    def level_params(self, measure):
        if measure.echo_bytes:
            return [(("bytes", b),) for b in measure.echo_bytes]
        return [()]

    option_fields = {"--bytes": "echo_bytes", "--probe-interval": "probe_interval_s"}

    def level_options(self, level):
        args = ["--chunk", str(level.echo_chunk_bytes)]
        if level.param("bytes"):
            args += ["--bytes", str(level.param("bytes"))]
        if level.probe_interval_s:
            args += ["--probe-interval", f"{level.probe_interval_s}"]
        return args

    def load(self, level, target, static_dir, args):
        return LoadSpec("echo", target, args, {"echo": "byte-for-byte"})

    def check_stream(self, port, host, timeout_s, checks):
        _check_echo(port, timeout_s, checks, host)


SCENARIO = Echo()
