"""netarena HTTP contestant: raw asyncio.Protocol with hand-written HTTP/1.1 parsing.

Shared by python-asyncio and python-uvloop (`--loop uvloop`), so the two differ only in the event loop.
/mongo/{name} is served when NETARENA_MONGO_URL is set, and TechEmpower's database routes (/db, /queries,
/updates, /cached-queries, /fortunes) when NETARENA_POSTGRESQL_URL is (python-uvloop's manifest, which installs
pymongo and asyncpg and puts netarena_shared on the path).
HTTPS instead of cleartext when NETARENA_TLS_CERT and NETARENA_TLS_KEY name a PEM certificate and key (the
h1-tls protocol): the standard library's ssl module (OpenSSL) on the same protocol code, ALPN http/1.1.
"""

import argparse
import asyncio
import email.utils
import json
import mimetypes
import os
import signal
import socket
import stat
import sys
import time
from urllib.parse import parse_qs

from netarena_shared.tls import server_context
from supervisor import run_workers

# The catalog asks for >= 1024; asyncio's default of 100 resets bursts of simultaneous connects.
LISTEN_BACKLOG = 4096
# A request head larger than this is refused rather than buffered without bound.
MAX_HEAD_BYTES = 64 * 1024
MAX_BYTES_N = 64 * 1024 * 1024
MAX_SLEEP_MS = 60_000
SENDFILE_FALLBACK_CHUNK_BYTES = 256 * 1024
# Set once the loop is chosen: whether loop.sendfile is implemented (asyncio: yes; uvloop: no).
LOOP_HAS_SENDFILE = True

REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed",
           431: b"Request Header Fields Too Large", 501: b"Not Implemented"}

HELLO_BODY = b"Hello, World!"
# Built once per n on first use (catalog: not per request).
bytes_bodies: dict[int, bytes] = {}
# The mongo scenario, where the manifest asks for it (it sets the URL and installs pymongo).
MONGO_ENABLED = bool(os.environ.get("NETARENA_MONGO_URL"))
# TechEmpower's database scenarios, where the manifest asks for them: this process's asyncpg pool and its copy of
# World for cached-queries, set by serve() before it listens (netarena_shared.pg).
DATABASE_PATHS = {b"/db", b"/queries", b"/updates", b"/cached-queries", b"/fortunes"}
database_pool = None
world_cache: dict[int, int] = {}


class DateHeader:
    """RFC 9110 wants a Date header from origin servers; formatting it per request would dominate
    a hello response, so it is refreshed once a second like nginx does."""

    def __init__(self) -> None:
        self.value = b""
        self.refresh()

    def refresh(self) -> None:
        self.value = email.utils.formatdate(usegmt=True).encode()
        asyncio.get_running_loop().call_at(
            asyncio.get_running_loop().time() + 1.0 - (time.time() % 1.0), self.refresh)


class HttpProtocol(asyncio.Protocol):
    """One connection. Requests are answered strictly in order: while a response is being produced
    asynchronously (sleep, sendfile), later pipelined requests stay in the buffer."""

    def __init__(self, static_dir: str | None, date: DateHeader) -> None:
        self.static_dir = static_dir
        self.date = date
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False
        self.closing = False
        self.drained: asyncio.Future | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self.drained is not None:
            self.drained.set_result(None)
            self.drained = None

    # A client that pipelines requests without reading the answers must not grow our write
    # buffer without bound: stop reading its requests until it catches up.
    def pause_writing(self) -> None:
        self.transport.pause_reading()
        self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self.transport.resume_reading()
        if self.drained is not None:
            self.drained.set_result(None)
            self.drained = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self.process_buffer()

    def process_buffer(self) -> None:
        while not self.busy and not self.closing:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    self.send_error(431)
                return
            request = self.parse_head(bytes(self.buffer[:head_end]))
            if request is None:
                return
            method, target, keep_alive, body_length = request
            if len(self.buffer) < head_end + 4 + body_length:
                return  # request body still arriving
            del self.buffer[:head_end + 4 + body_length]
            self.dispatch(method, target, keep_alive)

    def parse_head(self, head: bytes):
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self.send_error(400)
            return None
        method, target, version = parts
        connection = b""
        body_length = 0
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                self.send_error(400)
                return None
            name = name.strip().lower()
            if name == b"connection":
                connection = value.strip().lower()
            elif name == b"content-length":
                value = value.strip()
                if not value.isdigit():
                    self.send_error(400)
                    return None
                body_length = int(value)
            elif name == b"transfer-encoding":
                # No contestant route takes a body; refusing chunked bodies keeps framing unambiguous.
                self.send_error(501)
                return None
        if version == b"HTTP/1.1":
            keep_alive = connection != b"close"
        else:
            keep_alive = connection == b"keep-alive"
        return method, target, keep_alive, body_length

    def dispatch(self, method: bytes, target: bytes, keep_alive: bool) -> None:
        if method != b"GET":
            self.send_error(405, keep_alive)
            return
        path, _, query = target.partition(b"?")
        if path == b"/hello":
            self.send(200, b"text/plain", HELLO_BODY, keep_alive)
        elif path == b"/json":
            body = json.dumps({"message": "Hello, World!"}).encode()
            self.send(200, b"application/json", body, keep_alive)
        elif path.startswith(b"/bytes/"):
            n = parse_int(path[7:], MAX_BYTES_N)
            if n is None:
                self.send_error(404, keep_alive)
                return
            body = bytes_bodies.get(n)
            if body is None:
                body = bytes_bodies[n] = b"*" * n
            self.send(200, b"application/octet-stream", body, keep_alive)
        elif path.startswith(b"/sleep/"):
            ms = parse_int(path[7:], MAX_SLEEP_MS)
            if ms is None:
                self.send_error(404, keep_alive)
                return
            self.run_async(self.sleep(ms, keep_alive))
        elif path.startswith(b"/mongo/") and MONGO_ENABLED:
            self.run_async(self.mongo(path[7:].decode("ascii", "replace"), keep_alive))
        elif path.startswith(b"/static/") and self.static_dir is not None:
            self.serve_static(path[8:], keep_alive)
        elif path in DATABASE_PATHS and database_pool is not None:
            # ?queries= or ?count= as it came (None when absent or empty); netarena_shared.world clamps it.
            params = parse_qs(query.decode("latin-1"))
            raw_count = (params.get("queries") or params.get("count") or [None])[0]
            self.run_async(self.database(path, raw_count, keep_alive))
        else:
            self.send_error(404, keep_alive)

    def run_async(self, coro) -> None:
        self.busy = True
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(self.async_done)

    def async_done(self, task: asyncio.Task) -> None:
        self.busy = False
        if not task.cancelled() and task.exception() is not None:
            self.abort()
            return
        if not self.closing:
            self.process_buffer()

    async def sleep(self, ms: int, keep_alive: bool) -> None:
        await asyncio.sleep(ms / 1000)
        if not self.closing:
            self.send(200, b"text/plain", b"slept %d" % ms, keep_alive)

    async def mongo(self, name: str, keep_alive: bool) -> None:
        # One query by _id with PyMongo's asyncio client on this loop (netarena_shared.mongo: one client per
        # worker process); the document as json.dumps gives it. Requests behind it on this connection wait
        # (self.busy), so pipelined answers stay in order, as with /sleep.
        from netarena_shared.mongo import docs_collection

        doc = await docs_collection().find_one({"_id": name})
        if self.closing:
            return
        if doc is None:
            self.send_error(404, keep_alive)
        else:
            self.send(200, b"application/json", json.dumps(doc).encode(), keep_alive)

    async def database(self, path: bytes, raw_count: str | None, keep_alive: bool) -> None:
        # The queries of netarena_shared.pg on this process's pool; requests behind it on this connection wait
        # (self.busy), so pipelined answers stay in order, as with /mongo.
        from netarena_shared import pg, world

        if path == b"/fortunes":
            # No template engine here: the page built by hand, every message escaped (netarena_shared.world).
            page = world.fortunes_page(await pg.fortunes(database_pool))
            content_type, body = b"text/html; charset=utf-8", page.encode()
        else:
            if path == b"/db":
                rows = await pg.one_world(database_pool)
            elif path == b"/queries":
                rows = await pg.some_worlds(database_pool, raw_count)
            elif path == b"/updates":
                rows = await pg.update_worlds(database_pool, raw_count)
            else:
                rows = pg.cached_worlds(world_cache, raw_count)
            content_type, body = b"application/json", json.dumps(rows).encode()
        if not self.closing:
            self.send(200, content_type, body, keep_alive)

    def serve_static(self, relative: bytes, keep_alive: bool) -> None:
        # asyncio has no static-file handler: resolving the path is ours, moving the bytes is
        # loop.sendfile's (os.sendfile, zero-copy, where the loop supports it).
        try:
            relative_path = os.fsdecode(relative)
        except UnicodeDecodeError:
            self.send_error(404, keep_alive)
            return
        root = self.static_dir
        full = os.path.realpath(os.path.join(root, relative_path))
        if not full.startswith(root + os.sep):
            self.send_error(404, keep_alive)
            return
        try:
            f = open(full, "rb")
        except OSError:
            self.send_error(404, keep_alive)
            return
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            f.close()
            self.send_error(404, keep_alive)
            return
        size = info.st_size
        content_type = (mimetypes.guess_type(full)[0] or "application/octet-stream").encode()
        self.transport.write(self.head(200, content_type, size, keep_alive))
        self.run_async(self.sendfile(f, keep_alive))

    async def sendfile(self, f, keep_alive: bool) -> None:
        with f:
            if LOOP_HAS_SENDFILE:
                await asyncio.get_running_loop().sendfile(self.transport, f)
            else:
                await self.copy_file(f)
        if not keep_alive:
            self.close()

    async def copy_file(self, f) -> None:
        # uvloop (0.23) leaves loop.sendfile unimplemented, so the file goes through user space,
        # paced by the transport's flow control like asyncio's own sendfile fallback.
        while chunk := f.read(SENDFILE_FALLBACK_CHUNK_BYTES):
            self.transport.write(chunk)
            if self.drained is not None:
                await self.drained
            if self.closing:
                return

    def head(self, status: int, content_type: bytes, length: int, keep_alive: bool) -> bytes:
        connection = b"" if keep_alive else b"Connection: close\r\n"
        return (b"HTTP/1.1 %d %s\r\nServer: netarena-asyncio\r\nDate: %s\r\n"
                b"Content-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
                % (status, REASONS[status], self.date.value, content_type, length, connection))

    def send(self, status: int, content_type: bytes, body: bytes, keep_alive: bool) -> None:
        head = self.head(status, content_type, len(body), keep_alive)
        # One write for small responses (one segment); two for large ones, to avoid copying the body.
        if len(body) <= 16384:
            self.transport.write(head + body)
        else:
            self.transport.writelines((head, body))
        if not keep_alive:
            self.close()

    def send_error(self, status: int, keep_alive: bool = False) -> None:
        self.send(status, b"text/plain", REASONS[status], keep_alive)

    def close(self) -> None:
        self.closing = True
        self.transport.close()

    def abort(self) -> None:
        self.closing = True
        self.transport.abort()


def parse_int(text: bytes, maximum: int) -> int | None:
    if not text.isdigit() or len(text) > 9:
        return None
    value = int(text)
    return value if value <= maximum else None


async def serve(args) -> None:
    global LOOP_HAS_SENDFILE, database_pool
    loop = asyncio.get_running_loop()
    if os.environ.get("NETARENA_POSTGRESQL_URL"):
        # This process's pool, opened in its loop, and cached-queries' copy of World, both before it listens:
        # each worker binds its own socket (SO_REUSEPORT), so none is sent a request while it reads World.
        from netarena_shared import pg

        database_pool = await pg.open_pool()
        world_cache.update(await pg.read_world_table(database_pool))
    LOOP_HAS_SENDFILE = type(loop).sendfile is not asyncio.AbstractEventLoop.sendfile
    date = DateHeader()
    static_dir = os.path.realpath(args.static_dir) if args.static_dir else None
    server = await loop.create_server(
        lambda: HttpProtocol(static_dir, date), args.host, args.port,
        backlog=LISTEN_BACKLOG, reuse_port=args.workers > 1 or args.reuse_port, ssl=server_context())
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()


def install_loop(name: str) -> None:
    if name == "uvloop":
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every address)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--static-dir")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.static_dir is not None and not os.path.isdir(args.static_dir):
        parser.error(f"--static-dir {args.static_dir!r} is not a directory; pass the folder holding the static file set")
    if args.workers > 1:
        return run_workers(worker_argv(args), args.workers)
    install_loop(args.loop)
    asyncio.run(serve(args))
    return 0


def worker_argv(args) -> list[str]:
    argv = [sys.executable, os.path.abspath(__file__), "--host", args.host, "--port", str(args.port), "--workers", "1",
            "--loop", args.loop, "--reuse-port"]
    if args.static_dir:
        argv += ["--static-dir", args.static_dir]
    return argv


if __name__ == "__main__":
    sys.exit(main())
