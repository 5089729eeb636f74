"""Verification over HTTP/2: one connection with the part of http.client's HTTPConnection the checks use
(`request`, `getresponse`, `close`, `sock`, `host`, `timeout`, `_http_vsn`), so that every catalog check (each
scenario's check_responses, the Nagle check) stays one definition for HTTP/1.1 and HTTP/2 (checks._get).

The protocol is the `h2` package's, a state machine without I/O: this module owns the socket, feeds it what the
server sends and writes what it answers. h2c is spoken with prior knowledge (the preface at once, no Upgrade),
h2 over TLS with ALPN `h2` alone, as netarena-load --h2 does. Requests go one at a time, each on a new stream;
a response's DATA is acknowledged (WINDOW_UPDATE) as it is read, so no server waits on the window.
"""

from __future__ import annotations

import http.client
import socket
import ssl

import h2.config
import h2.connection
import h2.events
import h2.exceptions

# HTTP/1.1 headers that HTTP/2 has no place for (RFC 9113 8.2.2): left out of a request, as netarena-load does.
CONNECTION_HEADERS = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host")
READ_BYTES = 65536


class NotHttp2(http.client.HTTPException):
    """The server does not speak HTTP/2 on this connection: ALPN chose another protocol, or the preface got no
    HTTP/2 answer. The message says which."""


def _shown(data: bytes, limit: int = 40) -> str:
    return repr(data[:limit]) + ("..." if len(data) > limit else "")


class _Stream:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.data = bytearray()
        self.ended = False
        self.reset: int | None = None  # the RST_STREAM error code


class Http2Response:
    """One stream's response as http.client's HTTPResponse shows it to the checks: status, version (20),
    getheaders(), read1(), length (body bytes the Content-Length announced that were not read yet, None without
    one), isclosed() (the whole body read) and close()."""

    version = 20

    def __init__(self, conn: Http2Connection, stream_id: int, stream: _Stream):
        self._conn, self._id, self._stream = conn, stream_id, stream
        self.status = stream.status
        self._headers = stream.headers
        announced = next((v for k, v in stream.headers if k == "content-length"), None)
        self.length = int(announced) if announced is not None and announced.isdigit() else None
        self._closed = False

    def getheaders(self) -> list[tuple[str, str]]:
        return list(self._headers)

    def read1(self, amount: int) -> bytes:
        """Up to `amount` body bytes, waiting for the server only when none are buffered; b"" at the stream's end."""
        stream = self._stream
        while not stream.data and not stream.ended:
            self._conn._pump(self._id)
        chunk = bytes(stream.data[:amount])
        del stream.data[:amount]
        if self.length is not None:
            self.length = max(0, self.length - len(chunk))
        if stream.ended and not stream.data:
            self._closed = True
        return chunk

    def isclosed(self) -> bool:
        return self._closed or (self._stream.ended and not self._stream.data)

    def close(self) -> None:
        self._closed = True


class Http2Connection:
    """An HTTP/2 connection to host:port (`context`: over TLS with it, ALPN h2 alone; None: h2c), opened by the
    first request or connect(). A server that does not speak HTTP/2 on it raises NotHttp2 naming why."""

    # http.client's names for the protocol version a response must carry (checks._get compares).
    _http_vsn = 20
    _http_vsn_str = "HTTP/2"

    def __init__(self, host: str, port: int, timeout: float | None = None, context: ssl.SSLContext | None = None):
        self.host, self.port, self.timeout = host, port, timeout
        self._context = context
        self.sock: socket.socket | None = None
        self._h2: h2.connection.H2Connection | None = None
        self._streams: dict[int, _Stream] = {}
        self._current: int | None = None
        self._ended: str | None = None  # why the connection cannot carry another request (GOAWAY)
        self._last_stream = 0  # the last stream the GOAWAY's server still answers

    def connect(self) -> None:
        """Open the connection: TCP, TLS with ALPN h2 (when over TLS), both prefaces. The server's SETTINGS frame
        must be the first thing it sends, or it does not speak HTTP/2 here (NotHttp2)."""
        raw = socket.create_connection((self.host, self.port), timeout=self.timeout)
        try:
            # As http.client's connect does: this end's small writes (WINDOW_UPDATE, the next request's HEADERS)
            # must not wait for the server's delayed ACK, or the Nagle check would time this client's stall.
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(raw, server_hostname=self.host)
                chosen = sock.selected_alpn_protocol()
                if chosen != "h2":
                    sock.close()
                    raise NotHttp2(f"ALPN chose {chosen or 'no protocol'}, not h2")
            else:
                sock = raw
        except BaseException:
            raw.close()
            raise
        self.sock = sock
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self._h2.initiate_connection()
        self._flush()
        try:
            first = b""
            while len(first) < 9:  # a frame header
                more = self.sock.recv(READ_BYTES)
                if not more:
                    break
                first += more
            # A frame header's type is byte 3: a SETTINGS frame (4) opens every server's preface.
            if len(first) < 9 or first[3] != 0x4:
                sent = f"it sent {_shown(first)}" if first else "it sent nothing and closed the connection"
                over = "over TLS" if self._context is not None else "in cleartext (h2c, prior knowledge)"
                raise NotHttp2(f"no HTTP/2 preface answer on port {self.port} ({sent}): does it speak HTTP/2 {over}?")
            self._receive(first)
        except BaseException:
            self.close()
            raise

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> None:
        """Send one request on a new stream (http.client's `request`): `headers` as http.client takes them, Host
        becoming :authority."""
        if self.sock is None:
            self.connect()
        if self._ended is not None:
            raise http.client.HTTPException(self._ended)
        given = {k.lower(): str(v) for k, v in (headers or {}).items()}
        scheme = "https" if self._context is not None else "http"
        fields = [(":method", method), (":scheme", scheme), (":authority", given.get("host", self.host)),
                  (":path", path)]
        fields += [(k, v) for k, v in given.items() if k not in CONNECTION_HEADERS]
        if body:
            fields.append(("content-length", str(len(body))))
        stream_id = self._h2.get_next_available_stream_id()
        self._streams[stream_id] = _Stream()
        self._current = stream_id
        self._h2.send_headers(stream_id, fields, end_stream=not body)
        if body:
            self._h2.send_data(stream_id, body, end_stream=True)
        self._flush()

    def getresponse(self) -> Http2Response:
        """The response of the last request, once its (final) HEADERS arrived."""
        stream_id = self._current
        stream = self._streams[stream_id]
        while stream.status is None:
            self._pump(stream_id)
        return Http2Response(self, stream_id, stream)

    def close(self) -> None:
        if self.sock is not None:
            try:
                if self._h2 is not None and self._ended is None:
                    self._h2.close_connection()
                    self.sock.sendall(self._h2.data_to_send())
            except (OSError, h2.exceptions.ProtocolError):
                pass
            self.sock.close()
        self.sock, self._h2, self._streams, self._current, self._ended = None, None, {}, None, None
        self._last_stream = 0

    def _pump(self, stream_id: int) -> None:
        """Read once from the server and apply what it sent; raise when `stream_id` cannot get an answer."""
        stream = self._streams[stream_id]
        if stream.reset is not None:
            raise http.client.HTTPException(f"the server reset stream {stream_id} (RST_STREAM, error code "
                                            f"{stream.reset})")
        if self._ended is not None and stream_id > self._last_stream:
            raise http.client.HTTPException(self._ended)
        data = self.sock.recv(READ_BYTES)
        if not data:
            raise http.client.RemoteDisconnected("the server closed the connection")
        self._receive(data)

    def _receive(self, data: bytes) -> None:
        try:
            events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            raise http.client.HTTPException(f"HTTP/2 protocol error: {type(exc).__name__}: {exc}") from None
        for event in events:
            stream = self._streams.get(getattr(event, "stream_id", 0) or 0)
            if isinstance(event, h2.events.ResponseReceived) and stream is not None:
                headers = [(str(k), str(v)) for k, v in event.headers]
                stream.status = int(dict(headers)[":status"])
                stream.headers = [(k, v) for k, v in headers if not k.startswith(":")]
            elif isinstance(event, h2.events.DataReceived):
                if stream is not None:
                    stream.data += event.data
                # Given back at once: the checks read every body whole, and a window never holds the server.
                self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded) and stream is not None:
                stream.ended = True
            elif isinstance(event, h2.events.StreamReset) and stream is not None:
                stream.reset = int(event.error_code)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self._ended = (f"the server ended the connection (GOAWAY, error code {int(event.error_code)}, "
                               f"last stream {event.last_stream_id})")
                self._last_stream = event.last_stream_id or 0
        self._flush()

    def _flush(self) -> None:
        out = self._h2.data_to_send()
        if out:
            self.sock.sendall(out)
