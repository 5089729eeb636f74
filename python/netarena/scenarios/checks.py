"""Verification before the load: the catalog's responses (each scenario module's check_responses), the listen
backlog, the Nagle check, and a custom request's answer.

Verification uses the standard library (http.client, socket, ssl) and, over HTTP/2, the `h2` package (http2.py),
so that it shares no code with the load generator it double-checks.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..tls import H1, H1_TLS, H2, is_http2, is_tls
from . import registry
from .http2 import Http2Connection, NotHttp2
from .socket_diag import listen_backlogs, peer_tcp_nodelay
from .static_set import STATIC_MAX_BYTES

if TYPE_CHECKING:
    from ..config import Request

# The catalog's listen-backlog rule: 1000 simultaneous connects must not be reset or stalled (asyncio's
# default is 100, Twisted's 50). The kernel caps the backlog at net.core.somaxconn.
MIN_LISTEN_BACKLOG = 1024
# Nagle check: NAGLE_CHECK_REQUESTS pairs of sequential requests on one keep-alive connection, each pair one
# request with this client's ACKs delayed (as usual for request/response traffic) and one with them sent at once
# (TCP_QUICKACK), each timed from the response's first byte to its last. A response written in pieces without
# TCP_NODELAY (gevent.pywsgi as shipped) holds its later pieces until the first is acknowledged (Nagle): with
# delayed ACKs that is about 40 ms on Linux (its minimum delayed-ACK timeout), with immediate ones no wait. So the
# stall is the difference of the two medians, and NAGLE_MIN_STALL_MS (half of those 40 ms) or more of it is Nagle.
# A same-run reference, not a bound on the time itself: a slow or busy host (or a server that writes its pieces
# slowly) makes both halves of each pair slow alike, and only the ACK's timing differs between them. Timed from
# the first byte, not from the request: a server slow to start answering (a JIT still compiling) is slow, not stalled.
NAGLE_CHECK_REQUESTS = 20
NAGLE_MIN_STALL_MS = 20
# The request each HTTP scenario's Nagle check repeats is its module's `nagle_path` (NAGLE_CHECK_PATHS).
JSON_CONTENT_TYPE = "application/json"


@dataclass
class Check:
    request: str
    ok: bool
    detail: str = ""


@dataclass
class Verification:
    scenario: str
    ok: bool
    checks: list[Check] = field(default_factory=list)
    # Connection-level failures and 5xx may just mean "not ready yet"; a wrong answer is final.
    retryable: bool = False

    @property
    def observed(self) -> str:
        """What the passing checks measured (backlog, Nagle median, sleep overlap), for verify's output."""
        return "; ".join(f"{c.request}: {c.detail}" for c in self.checks if c.ok and c.detail)

    @property
    def reason(self) -> str:
        bad = [c for c in self.checks if not c.ok]
        return "; ".join(f"{c.request}: {c.detail}" for c in bad) if bad else "all checks passed"

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "ok": self.ok, "reason": self.reason, "observed": self.observed,
                "checks": [asdict(c) for c in self.checks]}


class _Retryable(Exception):
    pass


class _Wrong(Exception):
    pass


# The most body a verification request reads when the caller names no expected size: one byte more than the
# largest file of the static set. A response's Content-Length is the server's claim, never an allocation.
FETCH_MAX_BODY_BYTES = STATIC_MAX_BYTES + 1


def client_context(cafile: Path | None, alpn: tuple[str, ...] = ("http/1.1",)) -> ssl.SSLContext:
    """The checks' TLS client: trusts only `cafile` (the run's certificate, or --cacert's for a server of one's
    own) and checks the server's name or address against it; `cafile` None trusts any certificate (--insecure), as
    netarena-load does then. ALPN offers `alpn`: http/1.1 as the generator does, h2 alone over HTTP/2."""
    context = ssl.create_default_context(cafile=str(cafile)) if cafile is not None else ssl.create_default_context()
    if cafile is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(list(alpn))
    return context


def connect(host: str, port: int, timeout_s: float, cafile: Path | None = None,
            tls: bool | None = None, http2: bool = False) -> http.client.HTTPConnection | Http2Connection:
    """The one way verification opens an HTTP connection: cleartext, or HTTPS (`tls`, which `cafile` implies)
    trusting only `cafile`, or any certificate without one; `http2`: HTTP/2 instead of HTTP/1.1 (h2 over TLS by
    ALPN, h2c in cleartext with prior knowledge), a connection with the same interface (http2.Http2Connection)."""
    over_tls = bool(tls or cafile is not None)
    if http2:
        return Http2Connection(host, port, timeout_s, client_context(cafile, ("h2",)) if over_tls else None)
    if not over_tls:
        return http.client.HTTPConnection(host, port, timeout=timeout_s)
    return http.client.HTTPSConnection(host, port, timeout=timeout_s, context=client_context(cafile))


# What a failed handshake means, by whose server it is: a contestant started with the run's certificate, or a
# server of one's own at an https:// URL (netarena run --url, trusting --cacert's certificate or any).
_TLS_MISMATCH = {"run": ("the server's certificate is not the run's: {why}",
                         "no TLS on port {port} ({why}): it must serve HTTPS with NETARENA_TLS_CERT / "
                         "NETARENA_TLS_KEY ({{tls_cert}}, {{tls_key}})"),
                 "own": ("the server's certificate is not one --cacert {cafile} vouches for: {why}",
                         "no TLS on port {port} ({why}): is the URL's server an https:// one?")}


# What a server offers by ALPN, by the protocol it was started for (a contestant's level; a server of one's own at
# an https:// URL is h1-tls and offered http/1.1 alone, as the generator does): over h2, h2 alone, which it must
# choose; over h1-tls, h2 beside http/1.1, and choosing h2 fails it (started for HTTP/1.1, it must not offer h2).
_ALPN_OFFERED = {H2: ("h2",), H1_TLS: ("h2", "http/1.1")}


def _check_tls(host: str, port: int, timeout_s: float, cafile: Path | None, checks: list[Check],
               whose: str = "run", protocol: str = H1_TLS) -> None:
    """One TLS handshake with the trust given (the run's certificate, --cacert's, or any: None): what was
    negotiated, or why it failed (a cleartext server, a certificate not trusted, ALPN choosing another protocol
    than `protocol`'s) before any request is held to the catalog."""
    name = "TLS handshake"
    not_trusted, no_tls = _TLS_MISMATCH[whose]
    offered = _ALPN_OFFERED.get(protocol, ("http/1.1",)) if whose == "run" else ("http/1.1",)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, \
                client_context(cafile, offered).wrap_socket(raw, server_hostname=host) as tls:
            version, cipher, alpn = tls.version(), tls.cipher()[0], tls.selected_alpn_protocol()
    except ssl.SSLCertVerificationError as exc:
        checks.append(Check(name, False, not_trusted.format(why=exc.verify_message, cafile=cafile)))
        raise _Wrong("") from None
    except ssl.SSLError as exc:
        if "NO_APPLICATION_PROTOCOL" in str(exc.reason or exc).upper():
            checks.append(Check(name, False, f"the server refused every protocol offered by ALPN "
                                f"({', '.join(offered)}): {exc.reason}"))
        else:
            checks.append(Check(name, False, no_tls.format(port=port, why=exc.reason or exc)))
        raise _Wrong("") from None
    except (ConnectionError, socket.timeout, TimeoutError) as exc:
        raise _Retryable(f"{name}: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        checks.append(Check(name, False, f"{type(exc).__name__}: {exc}"))
        raise _Wrong("") from None
    if protocol == H2 and alpn != "h2":
        checks.append(Check(name, False, f"ALPN chose {alpn or 'no protocol'}, not h2: started for h2 "
                            "(NETARENA_PROTOCOL=h2) the server must offer h2 by ALPN"))
        raise _Wrong("")
    if protocol == H1_TLS and alpn == "h2":
        checks.append(Check(name, False, "ALPN chose h2 (offered beside http/1.1): started for h1-tls "
                            "(NETARENA_PROTOCOL=h1-tls) the server must serve HTTP/1.1 only and not offer h2"))
        raise _Wrong("")
    checks.append(Check(name, True, f"{version}, {cipher}, ALPN {alpn or 'none'}"))


def _check_http2(conn: Http2Connection, checks: list[Check]) -> None:
    """Open the HTTP/2 connection the catalog's checks then use: ALPN h2 (over TLS) and the server's preface, or
    why the server does not speak HTTP/2 there."""
    name = "HTTP/2 connection"
    try:
        conn.connect()
    except NotHttp2 as exc:
        checks.append(Check(name, False, str(exc)))
        raise _Wrong("") from None
    except (ConnectionError, socket.timeout, TimeoutError) as exc:
        raise _Retryable(f"{name}: {type(exc).__name__}: {exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        checks.append(Check(name, False, f"{type(exc).__name__}: {exc}"))
        raise _Wrong("") from None
    checks.append(Check(name, True, "h2 by ALPN" if isinstance(conn.sock, ssl.SSLSocket) else
                        "h2c with prior knowledge"))


def _cut(conn: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The overall deadline passed: shut the socket down so that the read blocked on it returns at once."""
    expired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _get(conn: http.client.HTTPConnection, path: str, method: str = "GET", headers: list[str] = (),
         body: bytes | None = None, timing: dict | None = None,
         max_body: int = FETCH_MAX_BODY_BYTES, quick_ack: bool | None = None) -> tuple[int, dict, bytes, float]:
    """One request on `conn` (GET unless told; `headers` as "Name: value"): (status, lower-case headers, body,
    seconds from the request to the whole body), the one bounded HTTP fetch of verification and readiness.
    With `timing`, also when the response's first byte arrived (timing["first_byte_s"], seconds after the
    request). `quick_ack` True/False: once the request is sent, this end acknowledges the response's segments at
    once / delays its ACKs as the kernel does for request/response traffic (TCP_QUICKACK; the Nagle check).

    `conn.timeout` is the whole request's deadline (monotonic), not only each read's: a watchdog shuts the
    socket down when it passes, so a server trickling its head or body a byte at a time cannot hold the run.
    At most `max_body` body bytes are read (callers pass the expected size plus one); a longer body is cut
    there and the connection closed. A deadline passed after the head is a wrong answer naming what was
    received; before the head (or a refused/reset connection) it may just mean "not ready yet".
    """
    started = time.monotonic()
    timeout_s = conn.timeout if conn.timeout is not None else 5.0
    expired = threading.Event()
    watchdog = threading.Timer(timeout_s, _cut, args=(conn, expired))
    watchdog.daemon = True
    sent = {"Host": conn.host}
    for line in headers:
        name, _, value = line.partition(":")
        sent[name.strip()] = value.strip()
    request_body = body
    resp = None
    body = bytearray()
    error = None
    try:
        watchdog.start()
        conn.request(method, path, body=request_body, headers=sent)
        if quick_ack is not None:
            # After the send: sending a request right after a response puts the kernel back into delayed ACKs.
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, int(quick_ack))
        if timing is not None:
            # Nothing of the response is read yet: the socket turns readable with its first byte.
            select.select([conn.sock], [], [], conn.timeout)
            timing["first_byte_s"] = time.monotonic() - started
        resp = conn.getresponse()
        while len(body) < max_body and resp.length != 0:
            chunk = resp.read1(min(65536, max_body - len(body)))
            if not chunk:
                break
            body += chunk
        if resp.length == 0:  # complete (read1 leaves that to the caller): the connection serves the next request
            resp.close()
    except (ConnectionError, socket.timeout, TimeoutError, http.client.HTTPException, OSError) as exc:
        error = exc
    finally:
        watchdog.cancel()
    if resp is None:
        conn.close()
        if expired.is_set():
            raise _Retryable(f"no response within timeout_s={timeout_s:g} s")
        if isinstance(error, (ConnectionError, socket.timeout, TimeoutError, http.client.RemoteDisconnected)):
            raise _Retryable(f"{type(error).__name__}: {error}")
        raise _Wrong(f"not valid {conn._http_vsn_str}: {type(error).__name__}: {error}")
    promised = resp.length or 0  # body bytes the head announced and that were not read
    # A read that timed out waited timeout_s (the socket's timeout) for its bytes, so the response did not arrive
    # within timeout_s either: on a slow host it can end the read before the watchdog's thread has run.
    timed_out = expired.is_set() or isinstance(error, (socket.timeout, TimeoutError))
    if len(body) < max_body and resp.length != 0 and (timed_out or error is not None or promised):
        conn.close()
        of = f" of {len(body) + promised}" if resp.length is not None else ""
        if timed_out:
            raise _Wrong(f"status {resp.status}, then {len(body)}{of} body bytes within timeout_s={timeout_s:g} s: "
                         f"the whole response must arrive by then (received {_show(bytes(body))})")
        why = f" ({type(error).__name__}: {error})" if error is not None else ""
        raise _Wrong(f"status {resp.status}, then the connection ended after {len(body)}{of} body bytes{why}")
    if not resp.isclosed() or expired.is_set():  # cut at max_body, or shut by a late watchdog: done with it
        conn.close()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    if resp.status >= 500:
        raise _Retryable(f"status {resp.status}")
    if resp.version != conn._http_vsn:  # http.client's name; Http2Connection's is 20
        raise _Wrong(f"answered HTTP/{resp.version / 10:.1f}, expected {conn._http_vsn_str}")
    return resp.status, headers, bytes(body), time.monotonic() - started


def _expect(cond: bool, detail: str) -> None:
    if not cond:
        raise _Wrong(detail)


def _show(body: bytes, limit: int = 60) -> str:
    text = repr(body[:limit])
    return text + (f"... ({len(body)} bytes)" if len(body) > limit else f" ({len(body)} bytes)")


class HttpChecks:
    """The requests of one scenario's response checks on one connection (Scenario.check_responses): each run()
    is a GET whose answer a function holds to the catalog, recorded as a Check."""

    def __init__(self, conn: http.client.HTTPConnection, checks: list[Check], prefix: str = "",
                 closes_connections: bool = False, service_url: str | None = None):
        self.conn = conn
        self.checks = checks
        self.prefix = prefix
        # The manifest declares that the server closes every connection after one response.
        self.closes_connections = closes_connections
        # The scenario's service as the contestant was given it ({<service>_url}), so that checks can read
        # what the server should have read or written; None for a server netarena did not start.
        self.service_url = service_url

    def run(self, path: str, fn, expected_bytes: int) -> None:
        """GET prefix + path, reading at most expected_bytes + 1 of body; fn(status, headers, body, elapsed_s)
        raises Wrong for a wrong answer."""
        path = self.prefix + path
        try:
            status, headers, body, elapsed_s = _get(self.conn, path, max_body=expected_bytes + 1)
            fn(status, headers, body, elapsed_s)
        except _Retryable as exc:
            raise _Retryable(f"GET {path}: {exc}") from None
        except _Wrong as exc:
            self.checks.append(Check(f"GET {path}", False, str(exc)))
            raise
        self.checks.append(Check(f"GET {path}", True))


def ok_status(status: int) -> None:
    _expect(status == 200, f"status {status}, expected 200")


def json_value(status: int, headers: dict, body: bytes):
    """The parsed body of a 200 application/json response."""
    import json

    ok_status(status)
    ctype = headers.get("content-type", "")
    _expect(ctype.split(";")[0].strip().lower() == JSON_CONTENT_TYPE,
            f"Content-Type {ctype!r}, expected {JSON_CONTENT_TYPE}")
    try:
        return json.loads(body)
    except ValueError:
        raise _Wrong(f"body is not JSON: {_show(body)}") from None


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _check_backlog(port: int, checks: list[Check]) -> None:
    try:
        backlogs = listen_backlogs(port)
    except OSError as exc:
        checks.append(Check("listen backlog", True, f"not checked: sock_diag netlink unavailable ({exc})"))
        return
    if not backlogs:
        checks.append(Check("listen backlog", False, f"no listening TCP socket found on port {port}"))
        raise _Wrong("")
    smallest = min(backlogs)
    shown = f"{smallest}" + (f" (smallest of {len(backlogs)} listening sockets)" if len(backlogs) > 1 else "")
    if smallest < MIN_LISTEN_BACKLOG:
        somaxconn = _read_int("/proc/sys/net/core/somaxconn")
        if somaxconn is not None and somaxconn <= smallest:
            fix = (f"net.core.somaxconn is {somaxconn} and caps every backlog: "
                   f"sysctl -w net.core.somaxconn={max(4096, MIN_LISTEN_BACKLOG)}")
        else:
            fix = f"pass a backlog of at least {MIN_LISTEN_BACKLOG} to listen()"
        checks.append(Check("listen backlog", False,
                            f"backlog {shown}, expected at least {MIN_LISTEN_BACKLOG}: {fix}"))
        raise _Wrong("")
    checks.append(Check("listen backlog", True, f"backlog {shown}"))


def _server_nodelay(conn: http.client.HTTPConnection | Http2Connection) -> tuple[bool | None, str]:
    """socket_diag.peer_tcp_nodelay of the connection's socket: (True/False, "") or (None, why it is not known)."""
    if conn.sock is None:
        return None, "the server closed the connection"
    try:
        return peer_tcp_nodelay(conn.sock)
    except OSError as exc:
        return None, str(exc)


def _check_nagle(path: str, conn: http.client.HTTPConnection | Http2Connection, checks: list[Check],
                 declared_stall: str | None = None) -> None:
    name = f"{NAGLE_CHECK_REQUESTS} x 2 GET {path} on one connection"
    if isinstance(conn, Http2Connection):
        # One stream at a time on one TCP connection: a response whose HEADERS and DATA frames leave in separate
        # writes stalls behind the delayed ACK as an HTTP/1.1 head and body do, so the check is the same one.
        # What it cannot see over HTTP/2 is several streams' frames sharing a write, which only a load makes.
        name += " (HTTP/2: one stream at a time, each its own request)"
    def one_round(order: tuple[bool, bool]) -> tuple[float, float, float]:
        """(delayed, immediate, whole): the medians of NAGLE_CHECK_REQUESTS pairs, each pair in `order`.
        spread: from each response's first byte to its last, per kind of ACK; whole: from each request to its last
        byte, with delayed ACKs (what any client sees)."""
        spread_ms: dict[bool, list[float]] = {False: [], True: []}
        whole_ms = []
        for _ in range(NAGLE_CHECK_REQUESTS):
            # Alternating, so that a change in the host's load during the check falls on both kinds alike.
            for quick_ack in order:
                timing: dict = {}
                try:
                    status, _, _, elapsed_s = _get(conn, path, timing=timing, quick_ack=quick_ack)
                except _Retryable as exc:
                    raise _Retryable(f"{name}: {exc}") from None
                if status != 200:
                    checks.append(Check(name, False, f"status {status}, expected 200"))
                    raise _Wrong("")
                spread_ms[quick_ack].append((elapsed_s - timing["first_byte_s"]) * 1000)
                if not quick_ack:
                    whole_ms.append(elapsed_s * 1000)
        return (statistics.median(spread_ms[False]), statistics.median(spread_ms[True]),
                statistics.median(whole_ms))

    delayed_ms, quick_ms, whole_median_ms = one_round((False, True))
    stall_ms = delayed_ms - quick_ms
    confirmation = ""
    if stall_ms >= NAGLE_MIN_STALL_MS:
        # A stall is confirmed by a second round with each pair's order reversed before it counts: Nagle's stall
        # comes back on every delayed-ACK response, while a host's pauses that fell on the delayed half of the
        # first round's pairs (a CPU quota's throttling every 100 ms in step with the pairs: 84 against 24 ms
        # on a server with TCP_NODELAY, seen under a 35% quota) do not keep to one half in both orders.
        delayed_2, quick_2, _ = one_round((True, False))
        if delayed_2 - quick_2 < NAGLE_MIN_STALL_MS:
            confirmation = (f"; a first round's {stall_ms:.0f} ms was not confirmed by a second in the other "
                            f"order ({delayed_2:.1f} against {quick_2:.1f} ms)")
            delayed_ms, quick_ms = delayed_2, quick_2
        else:
            delayed_ms, quick_ms = min(delayed_ms, delayed_2), max(quick_ms, quick_2)
        stall_ms = delayed_ms - quick_ms
    measured = (f"median {delayed_ms:.1f} ms from a response's first byte to its last with delayed ACKs, "
                f"{quick_ms:.1f} ms with immediate ACKs ({whole_median_ms:.1f} ms from the request){confirmation}")
    if stall_ms >= NAGLE_MIN_STALL_MS and declared_stall:
        # The manifest says the framework offers no way to avoid it (manifest `nagle_stall`): measured and kept,
        # because that stall is what its users get.
        checks.append(Check(name, True, f"{measured}: the declared Nagle stall ({declared_stall})"))
        return
    if stall_ms >= NAGLE_MIN_STALL_MS:
        # Nagle holds a piece back only on a socket without TCP_NODELAY. The server's end of this connection says
        # whether it has it: with it, a stall in both rounds is the host's (a heavily loaded host under a CPU quota
        # showed 78 against 21.5 ms in both orders on a server with TCP_NODELAY), not the server's set-up.
        nodelay, unknown = _server_nodelay(conn)
        if nodelay:
            checks.append(Check(name, True, f"{measured}: a {stall_ms:.0f} ms wait on the delayed-ACK half, yet "
                                "the server's socket has TCP_NODELAY on, so Nagle held nothing back: the host's "
                                "load, not the server's set-up"))
            return
        socket_said = ("TCP_NODELAY is off on the server's socket" if nodelay is False
                       else f"whether the server's socket has TCP_NODELAY could not be read: {unknown}")
        checks.append(Check(name, False, f"{measured}: the rest of each response waits {stall_ms:.0f} ms for the "
                            f"client's delayed ACK (Nagle; a stall from {NAGLE_MIN_STALL_MS} ms; {socket_said}); "
                            "set TCP_NODELAY on accepted connections"))
        raise _Wrong("")
    checks.append(Check(name, True, measured))



def verify(scenario: str, port: int, static_dir: Path, timeout_s: float = 5.0,
           concurrency_model: str | None = None, nagle_stall: str | None = None,
           responses_only: bool = False, host: str = "127.0.0.1", prefix: str = "",
           pool: int | None = None, closes_connections: bool = False,
           service_urls: dict[str, str] | None = None, cafile: Path | None = None,
           tls: bool | None = None, protocol: str | None = None) -> Verification:
    """Check the contestant on `port` against the catalog definition of `scenario`.

    After the scenario's responses: the listen backlog (MIN_LISTEN_BACKLOG), a Nagle check for the HTTP
    scenarios (NAGLE_CHECK_PATHS; a stall the manifest declares with its reason in `nagle_stall` passes and is
    shown) and the scenario's own checks of the server (Scenario.check_server; sleep: that concurrent sleeps
    overlap as the manifest's `concurrency_model` says they must: threaded models at least two; with `pool`, the
    most requests its set-up serves at once, known: 1.5 for a pool of two, none for a pool of one; every other
    model: all of them). `closes_connections`: the manifest declares that the server closes every connection after
    one response, so 'Connection: close' passes.
    `responses_only` checks the responses
    and nothing else: "does it still answer correctly?" after a load, when the server's set-up was already
    checked before it, or for a server netarena did not start (`netarena run --url`), whose set-up is its own.
    `host` and `prefix` (a path put before the catalog's paths) locate such a server. `service_urls`: the
    placeholders the server was started with ({"<service>_url": address}), for the checks of a scenario that
    reads a service (the TechEmpower ones hold the answers to the database's rows and count its queries).
    `cafile`: the server serves HTTPS with this certificate (an h1-tls level): one handshake is checked first,
    then every request goes over TLS trusting only it. `tls` True without `cafile`: a server of one's own at an
    https:// URL, trusted whatever its certificate (--insecure); with `cafile`, one's own trusted through it.
    `protocol`: the level's (tls.PROTOCOLS; None: h1-tls with `cafile` or `tls`, else h1). Over h2 the handshake
    must choose h2 by ALPN, over h1-tls it must not; over h2 and h2c every check runs on one HTTP/2 connection
    (http2.Http2Connection), opened first so that a server not speaking HTTP/2 fails with why.
    """
    definition = registry.get(scenario)
    checks: list[Check] = []
    if protocol is None:
        protocol = H1_TLS if (tls or cafile is not None) else H1
    try:
        if definition.is_http:
            if is_tls(protocol):
                _check_tls(host, port, timeout_s, cafile, checks, "run" if tls is None else "own", protocol)
            conn = connect(host, port, timeout_s, cafile, tls or is_tls(protocol), http2=is_http2(protocol))
            try:
                if isinstance(conn, Http2Connection):
                    _check_http2(conn, checks)
                service_url = (service_urls or {}).get(f"{definition.service}_url") or None
                definition.check_responses(HttpChecks(conn, checks, prefix, closes_connections, service_url),
                                           static_dir)
                if definition.nagle_path is not None and not responses_only:
                    _check_nagle(definition.nagle_path, conn, checks, nagle_stall)
            finally:
                conn.close()
        else:
            definition.check_stream(port, host, timeout_s, checks)
        if not responses_only:
            definition.check_server(port, host, timeout_s, checks, concurrency_model=concurrency_model, pool=pool)
            _check_backlog(port, checks)
    except _Retryable as exc:
        checks.append(Check(scenario, False, str(exc)))
        return Verification(scenario, False, checks, retryable=True)
    except _Wrong as exc:
        if str(exc) and not any(not c.ok for c in checks):
            checks.append(Check(scenario, False, str(exc)))
        return Verification(scenario, False, checks)
    return Verification(scenario, True, checks)


def verify_request(request: Request, host: str, port: int, timeout_s: float = 5.0, tls: bool = False,
                   cafile: Path | None = None) -> Verification:
    """Send a custom request once and hold its answer to what it expects: `expect_status` (else any 2xx/3xx,
    what netarena-load counts as a success without one) and `expect_body` when given. `tls`: over HTTPS, trusting
    `cafile` or, without one, any certificate (a server of one's own at an https:// URL)."""
    name = f"{request.method} {request.path}"
    checks: list[Check] = []
    conn = connect(host, port, timeout_s, cafile, tls)
    try:
        if tls:
            _check_tls(host, port, timeout_s, cafile, checks, "own")
        body = request.body.encode() if request.body is not None else None
        status, _, answer, _ = _get(conn, request.path, request.method, request.headers, body)
        if request.expect_status is not None:
            _expect(status == request.expect_status, f"status {status}, expected {request.expect_status}")
        else:
            _expect(200 <= status < 400, f"status {status}; without expect_status only 2xx and 3xx count as "
                    "a success (give expect_status to expect another)")
        if request.expect_body is not None:
            want = request.expect_body.encode()
            _expect(answer == want, f"body {_show(answer)}, expected {_show(want)}")
    except _Retryable as exc:
        checks.append(Check(name, False, str(exc)))
        return Verification(request.name, False, checks, retryable=True)
    except _Wrong as exc:
        if str(exc):  # empty: the handshake's check already says what is wrong
            checks.append(Check(name, False, str(exc)))
        return Verification(request.name, False, checks)
    finally:
        conn.close()
    checks.append(Check(name, True, f"status {status}, {len(answer)} bytes"))
    return Verification(request.name, True, checks)
