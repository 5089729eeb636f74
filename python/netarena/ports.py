"""Which port a server may listen on: the one definition for the orchestrator, the tests and the benches.

Standard library only, so that `bench/benchlib.py` (which runs without the project's virtualenv) imports it
from this checkout as well.
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

UNPRIVILEGED_PORT_FLOOR = 1024  # a port below needs privileges to listen on
FREE_PORT_TRIES = 64
EPHEMERAL_RANGE_SYSCTL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_port_range() -> tuple[int, int] | None:
    """The ports the kernel hands out on its own (bind to port 0, connect without bind), lowest and highest
    (net.ipv4.ip_local_port_range), or None if unreadable."""
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE_SYSCTL.read_text().split())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return (low, high) if 0 < low <= high <= 65535 else None


def free_port(ephemeral: tuple[int, int] | None = None) -> int:
    """A port no socket is bound to right now on any IPv4 address, for a server to listen on (on 127.0.0.1,
    or on every address in a run across hosts): outside the kernel's ephemeral range whenever there is room.

    Why outside: between this check and the server's own bind, any socket the kernel numbers itself (a
    bind to port 0, a connect without bind) may be handed the same port from the ephemeral range, and the
    server then fails to start with "address already in use". uWSGI's --http does such a bind: its internal
    worker socket goes to 127.0.0.1:0 just before the router binds its port, and a CI run failed with the
    router's port taken (an odd port, as the kernel gives for port 0). A port outside the range is also one
    a client's connect never takes as its own source port, so a connect to it while nothing listens is
    refused and never connects the socket to itself (TCP simultaneous open). The kernel
    never hands out a port outside the range on its own. Only if the range covers every unprivileged port
    (ip_local_port_range "1024 65535") is the kernel's choice taken.

    `ephemeral` is the range to stay out of, by default the kernel's (ephemeral_port_range)."""
    ports = ephemeral or ephemeral_port_range()
    low, high = ports if ports else (UNPRIVILEGED_PORT_FLOOR, 65535)
    below, above = max(0, low - UNPRIVILEGED_PORT_FLOOR), max(0, 65535 - high)
    for _ in range(FREE_PORT_TRIES if below + above else 0):
        pick = secrets.randbelow(below + above)
        port = UNPRIVILEGED_PORT_FLOOR + pick if pick < below else high + 1 + (pick - below)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                # Without SO_REUSEADDR: a port still in TIME_WAIT from an earlier server counts as taken.
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
