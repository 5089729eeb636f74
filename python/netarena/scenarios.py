"""The scenario catalog (docs/scenarios.md) as code: verification, the static file set, and the load.

Verification uses only the standard library (http.client, socket) so that it shares no code with the
load generator it double-checks.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import random
import select
import shutil
import socket
import statistics
import struct
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from .config import BYTES_SIZES, SCENARIOS, SERVICE_SCENARIOS, Request, conn_rate_steps
from .fixtures import GRIDFS_DEFAULT_FILES, GRIDFS_MISSING_FILE, GRIDFS_VERIFY_FILES

HELLO_BODY = b"Hello, World!"
HELLO_CONTENT_TYPE = "text/plain"
JSON_BODY = {"message": "Hello, World!"}
JSON_CONTENT_TYPE = "application/json"
BYTES_FILL = b"*"
SLEEP_BODY = "slept {ms}"  # .format(ms=...)

# The static file set (seed 003's product images). Changing any of these changes every file, so the
# cache folder name carries STATIC_SET_VERSION.
STATIC_SET_VERSION = 1
STATIC_SEED = 3
STATIC_FILE_COUNT = 10_000
STATIC_MEDIAN_BYTES = 24 * 1024
STATIC_SIGMA = 0.8  # log-normal shape; with the median above the mean file is about 33 KiB
STATIC_MIN_BYTES = 1024
STATIC_MAX_BYTES = 1024 * 1024
# Files verified before a static measurement: the first, last and one in the middle, plus one bytes file.
STATIC_VERIFY_PATHS = ("img/00000.jpg", "img/04242.jpg", "img/09999.jpg", "bytes/10000")

DEFAULT_BYTES_SIZE = 40
DEFAULT_SLEEP_MS = 100
DEFAULT_STATIC_PATH = "bytes/10000"
DEFAULT_MONGO_DOC = "small"
DEFAULT_GRIDFS_PATH = "img/00000.jpg"
VERIFY_SLEEP_MS = 50
ECHO_VERIFY_BYTES = 64 * 1024

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
# The request each HTTP scenario's Nagle check repeats (sleep has none: it waits on purpose).
NAGLE_CHECK_PATHS = {"hello": "/hello", "bytes": "/bytes/10000", "json": "/json", "static": "/static/bytes/10000",
                     "mongo": "/mongo/small", "gridfs": "/gridfs/img/00000.jpg"}
# Seed 002's lesson, checked: SLEEP_OVERLAP_CONNECTIONS concurrent /sleep/SLEEP_OVERLAP_MS on separate
# connections. Event loops, greenlets, goroutines and actors must overlap them (the whole batch in under
# SLEEP_OVERLAP_MAX_BATCHES x the sleep, not one sleep after another: 8 x 200 ms); threaded servers overlap
# up to their pool, so they must overlap at least two and the observed concurrency is recorded. An event
# loop either yields in the sleep (all overlap) or blocks (none do), so the bound sits halfway: 600 ms for
# the server's own work on 8 requests, which a cold JIT on a busy machine may need, and still 800 ms short
# of a blocking one.
SLEEP_OVERLAP_CONNECTIONS = 8
SLEEP_OVERLAP_MS = 200
SLEEP_OVERLAP_MAX_BATCHES = 4
SLEEP_OVERLAP_ROUNDS = 2
THREADED_MODELS = ("threads", "processes")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- static file set


def static_file_sizes(count: int = STATIC_FILE_COUNT, seed: int = STATIC_SEED) -> list[int]:
    rng = random.Random(seed)
    mu = math.log(STATIC_MEDIAN_BYTES)
    return [min(STATIC_MAX_BYTES, max(STATIC_MIN_BYTES, int(round(math.exp(rng.gauss(mu, STATIC_SIGMA))))))
            for _ in range(count)]


def build_static_files(dest: Path, count: int = STATIC_FILE_COUNT, seed: int = STATIC_SEED) -> Path:
    """Generate the static file set into dest (idempotent: a complete set is reused as it is).

    Sizes come first from Random(seed), then the contents of file i are Random(seed + 1 + i) bytes, so
    any one file can be regenerated (and checked) without producing the others.
    """
    marker = dest / ".netarena-static-complete"
    stamp = json.dumps({"version": STATIC_SET_VERSION, "count": count, "seed": seed})
    if marker.is_file() and marker.read_text() == stamp:
        return dest
    tmp = dest.with_name(dest.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "img").mkdir(parents=True)
    (tmp / "bytes").mkdir()
    for index, size in enumerate(static_file_sizes(count, seed)):
        (tmp / "img" / f"{index:05d}.jpg").write_bytes(static_file_bytes(index, size, seed))
    for size in BYTES_SIZES:
        (tmp / "bytes" / str(size)).write_bytes(BYTES_FILL * size)
    (tmp / ".netarena-static-complete").write_text(stamp)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest


def url_list(static_dir: Path, folder: str, route: str = "static", count: int | None = None) -> Path:
    """A --urls file naming the files of one folder of the static set under /{route}/ (static: from the file
    system; gridfs: the same files out of the database), the first `count` of them (None: all), each line with
    its file's size for the generator to check (beside the set, never inside it)."""
    files = sorted(p for p in (static_dir / folder).iterdir() if p.is_file())[:count]
    if not files:
        raise ValueError(f"no files in {static_dir / folder}")
    tail = "" if count is None else f"-{count}"
    out = static_dir.parent / f"urls-{static_dir.name}-{route}-{folder.strip('/').replace('/', '_')}{tail}.txt"
    text = "".join(f"/{route}/{folder}{p.name} {p.stat().st_size}\n" for p in files)
    if not out.is_file() or out.read_text() != text:
        tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, out)
    return out


def static_file_bytes(index: int, size: int, seed: int = STATIC_SEED) -> bytes:
    return random.Random(seed + 1 + index).randbytes(size)


def static_set_ready(dest: Path) -> bool:
    return (dest / ".netarena-static-complete").is_file()


# ----------------------------------------------------------------------------- load levels


@dataclass(frozen=True)
class Level:
    """One point of a suite's load matrix for one scenario."""

    connections: int
    workers: int = 1
    # {threads}, the thread pool per worker of a contestant with one (suite `threads`); None: its default.
    threads: int | None = None
    params: tuple = ()  # sorted (name, value) pairs: size / sleep_ms / static_path
    generator_threads: int = 1
    # The suite's generator_threads when it was more than the generator's CPUs and capped to them
    # (runner.cap_generator_threads); None: run as asked. Not part of the key: the key says what ran.
    generator_threads_asked: int | None = None
    generator_io: str = "auto"
    # Closed loop: stop after this many responses (netarena-load -n), duration_s being the time limit.
    requests: int | None = None
    pipeline: int = 1
    close: bool = False
    echo_chunk_bytes: int = 32768
    probe_interval_s: float | None = None
    warmup_s: float | None = None  # None: the suite's
    duration_s: float | None = None
    arrival: str = "uniform"
    generator_spin_us: int | None = None  # None: netarena-load's default
    # netarena-load --threshold expressions (pass/fail verdicts on the result); not part of the key: a gate on a
    # level does not change what is measured, so runs with and without one stay comparable.
    thresholds: tuple[str, ...] = ()
    # find_max: search the highest rate meeting this objective (netarena-load --find-max --slo), from the
    # rate / conn_rate of params; None: measure the level as it is.
    find_max_slo: str | None = None
    find_max_errors: str | None = None  # --max-errors, e.g. "0.1%"

    # Parameters that set the load's rate: a line against the offered rate runs along them.
    RATE_PARAMS = ("rate", "conn_rate")

    def _key_parts(self) -> list[tuple[str, str]]:
        """(name, text) of every part of the key, in the key's order."""
        parts = [("c", f"c={self.connections}"), ("w", f"w={self.workers}")]
        if self.threads is not None:
            parts.append(("threads", f"threads={self.threads}"))
        parts += [(k, f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}") for k, v in self.params]
        if self.generator_threads != 1:
            parts.append(("t", f"t={self.generator_threads}"))
        if self.generator_io != "auto":
            parts.append(("io", f"io={self.generator_io}"))
        if self.requests is not None:
            parts.append(("n", f"n={self.requests}"))
        if self.pipeline != 1:
            parts.append(("pipeline", f"pipeline={self.pipeline}"))
        if self.close:
            parts.append(("close", "close"))
        if self.duration_s is not None:
            parts.append(("d", f"d={self.duration_s:g}s"))
        if self.arrival != "uniform":
            parts.append(("arrival", self.arrival))
        if self.generator_spin_us is not None:
            parts.append(("spin", f"spin={self.generator_spin_us}us"))
        if self.find_max_slo is not None:
            parts.append(("find_max", f"find_max={self.find_max_slo}/errors<={self.find_max_errors}"))
        return parts

    @property
    def key(self) -> str:
        return ",".join(text for _, text in self._key_parts())

    @property
    def series(self) -> str:
        """The key without what a chart puts on its x axis (connections, the rate) and without the default
        single worker: what one line of a chart keeps constant, e.g. "w=2,size=40" or ""."""
        skip = {"c", *self.RATE_PARAMS} | ({"w"} if self.workers == 1 else set())
        return ",".join(text for name, text in self._key_parts() if name not in skip)

    @property
    def offered_rate_per_s(self) -> float | None:
        """Open loop: requests offered per second (conn_rate x requests per connection); None: closed loop, or a
        find-max search (its rate is only where the search starts)."""
        if self.find_max_slo is not None:
            return None
        if self.param("rate"):
            return float(self.param("rate"))
        if self.param("conn_rate"):
            return float(self.param("conn_rate")) * int(self.param("per_conn", 1))
        return None

    @classmethod
    def from_dict(cls, data: dict) -> "Level":
        """The inverse of to_dict, for a level read back from the store (level_json); keys this version does
        not know are left out, so older and newer stores both load."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["params"] = tuple((data.get("params") or {}).items())  # in stored order: the key's order
        return cls(**values)

    def param(self, name: str, default=None):
        return dict(self.params).get(name, default)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["params"] = dict(self.params)
        return out


def levels_for(measure) -> list[Level]:
    """Expand one suite [[measure]] entry into its levels (every combination, in a stable order)."""
    if measure.scenario == "bytes":
        params = [(("size", s),) for s in (measure.sizes or [DEFAULT_BYTES_SIZE])]
    elif measure.scenario == "sleep":
        params = [(("sleep_ms", s),) for s in (measure.sleep_ms or [DEFAULT_SLEEP_MS])]
    elif measure.scenario == "static":
        params = [(("static_path", measure.static_path or DEFAULT_STATIC_PATH),)]
    elif measure.scenario == "mongo":
        params = [(("doc", d),) for d in (measure.doc or [DEFAULT_MONGO_DOC])]
    elif measure.scenario == "gridfs":
        params = [(("gridfs_files", measure.gridfs_files or GRIDFS_DEFAULT_FILES),
                   ("gridfs_path", measure.gridfs_path or DEFAULT_GRIDFS_PATH))]
    elif measure.scenario == "echo" and measure.echo_bytes:
        params = [(("bytes", b),) for b in measure.echo_bytes]
    else:
        params = [()]
    # Open-loop rates multiply the levels like any other parameter. A find-max search starts at its one rate
    # (validated in config.check_suite), by default netarena-load's own start: --rate 100.
    find_max = getattr(measure, "find_max", None)
    if find_max is not None and not (measure.rate or measure.conn_rate):
        params = [p + (("rate", FIND_MAX_DEFAULT_START_RATE),) for p in params]
    elif measure.rate:
        params = [p + (("rate", r),) for p in params for r in measure.rate]
    elif measure.conn_rate and getattr(measure, "connections_per_step", None):
        # One sweep of the rates on one server start (netarena-load --steps LOW:HIGH:STEP --conns-per-step N),
        # evenly spaced as config.check_suite made sure.
        low, high, step = conn_rate_steps(measure.conn_rate)
        params = [p + (("conn_rate_steps", f"{low:g}:{high:g}:{step:g}"), ("per_conn", measure.requests_per_conn),
                       ("conns_per_step", measure.connections_per_step)) for p in params]
    elif measure.conn_rate:
        params = [p + (("conn_rate", r), ("per_conn", measure.requests_per_conn)) for p in params
                  for r in measure.conn_rate]
    return [
        Level(connections=c, workers=w, threads=th, params=p, generator_threads=measure.generator_threads,
              generator_io=measure.generator_io,
              pipeline=measure.pipeline, close=measure.close, echo_chunk_bytes=measure.echo_chunk_bytes,
              probe_interval_s=measure.probe_interval_s, warmup_s=measure.warmup_s, duration_s=measure.duration_s,
              arrival=measure.arrival, generator_spin_us=measure.generator_spin_us,
              find_max_slo=find_max.slo if find_max else None, find_max_errors=find_max.max_errors if find_max else None,
              thresholds=tuple(measure.thresholds), requests=getattr(measure, "requests", None))
        for p in params for w in measure.workers for th in (getattr(measure, "threads", None) or [None])
        for c in measure.connections
    ]


def sweep_rates(steps: str) -> list[float]:
    """The rates of netarena-load --steps LOW:HIGH:STEP, as it computes them (schedule::parse_steps)."""
    low, high, step = (float(x) for x in steps.split(":"))
    return [low + i * step for i in range(int((high - low) / step + 1e-9) + 1)]


# Where a find-max search starts without a rate in its suite entry (netarena-load's DEFAULT_FIND_MAX_START).
FIND_MAX_DEFAULT_START_RATE = 100

# netarena-load options for each `generator_io` of a suite entry.
GENERATOR_IO_ARGS = {
    "auto": [],  # netarena-load's default; the engine it chose and why are in the result's config
    "epoll": ["--io", "epoll"],
    "uring": ["--io", "uring"],
    "uring-auto": ["--io", "uring", "--coalesce-us", "auto"],
}


@dataclass
class LoadSpec:
    """What netarena-load is asked to do for one scenario at one level (everything but timing/CPUs)."""

    mode: str  # "http" | "echo"
    target: str
    args: list[str]
    expectation: dict


# netarena-load --spin-us for open-loop levels of scenarios that read a database (see load_spec).
SERVICE_LEVEL_SPIN_US = 20


def _level_args(level: Level) -> list[str]:
    out = ["-c", str(level.connections), "-t", str(level.generator_threads)]
    for expression in level.thresholds:
        out += ["--threshold", expression]
    return out


def _http_level_args(level: Level) -> list[str]:
    """The netarena-load http options a level sets, whatever the request (catalog scenario or custom)."""
    http_args = _level_args(level) + GENERATOR_IO_ARGS[level.generator_io]
    if level.pipeline != 1:
        http_args += ["--pipeline", str(level.pipeline)]
    if level.close:
        http_args.append("--close")
    if level.param("rate"):
        http_args += ["--rate", f"{level.param('rate'):g}", "--arrival", level.arrival]
    elif level.param("conn_rate"):
        http_args += ["--conn-rate", f"{level.param('conn_rate'):g}", "--requests-per-conn",
                      str(level.param("per_conn")), "--arrival", level.arrival]
    elif level.param("conn_rate_steps"):
        # The first rate is also the warm-up's (netarena-load warms up at --conn-rate before the sweep).
        steps = level.param("conn_rate_steps")
        http_args += ["--conn-rate", steps.split(":")[0], "--steps", steps, "--conns-per-step",
                      str(level.param("conns_per_step")), "--requests-per-conn", str(level.param("per_conn")),
                      "--arrival", level.arrival]
    if level.requests is not None:
        http_args += ["-n", str(level.requests)]
    if level.generator_spin_us is not None:
        http_args += ["--spin-us", str(level.generator_spin_us)]
    if level.find_max_slo is not None:
        http_args += ["--find-max", "--slo", level.find_max_slo, "--max-errors", level.find_max_errors]
    return http_args


def load_spec(scenario: str, level: Level, port: int, static_dir: Path, host: str = "127.0.0.1",
              base_url: str | None = None) -> LoadSpec:
    """The load for a catalog scenario on a server at host:port (127.0.0.1 on one machine, the server host's
    address across hosts), or at `base_url` (scheme://host:port and an optional path prefix) for a server
    netarena did not start."""
    base = base_url.rstrip("/") if base_url else f"http://{host}:{port}"
    if scenario == "echo":
        args = _level_args(level) + GENERATOR_IO_ARGS[level.generator_io] + ["--chunk", str(level.echo_chunk_bytes)]
        if level.param("bytes"):
            args += ["--bytes", str(level.param("bytes"))]
        if level.probe_interval_s:
            args += ["--probe-interval", f"{level.probe_interval_s}"]
        target = urlsplit(base_url).netloc if base_url else f"{host}:{port}"
        return LoadSpec("echo", target, args, {"echo": "byte-for-byte"})
    http_args = _http_level_args(level)
    if scenario in SERVICE_SCENARIOS and level.generator_spin_us is None and (
            level.param("rate") or level.param("conn_rate")):
        # The database shares the generator's CPU on small machines ([cpus] services): netarena-load's
        # default (--spin-us auto) may busy-poll a whole core at high rates, which would be taken from the
        # database and show as its slowness. The sleeping window here; a suite's generator_spin_us wins.
        http_args += ["--spin-us", str(SERVICE_LEVEL_SPIN_US)]
    if scenario == "json":
        # Serializations differ between frameworks (spacing, key order); scenarios.py checked the
        # parsed value once, the generator then holds every response to that first one.
        return LoadSpec("http", base + "/json", http_args + ["--expect-status", "200", "--verify-learn"],
                        {"status": 200, "learned": True})
    if scenario == "mongo":
        # One database read per request; serializations differ (spacing, key order), so the value was
        # compared with the fixture before the load and the generator holds every response to the first one:
        # a server caching the response stays correct, a wrong or partial document is an error.
        doc = level.param("doc", DEFAULT_MONGO_DOC)
        return LoadSpec("http", f"{base}/mongo/{doc}", http_args + ["--expect-status", "200", "--verify-learn"],
                        {"status": 200, "learned": True, "doc": doc})
    if scenario == "hello":
        path, body = "/hello", HELLO_BODY
    elif scenario == "bytes":
        size = level.param("size", DEFAULT_BYTES_SIZE)
        path, body = f"/bytes/{size}", BYTES_FILL * size
    elif scenario == "sleep":
        ms = level.param("sleep_ms", DEFAULT_SLEEP_MS)
        path, body = f"/sleep/{ms}", SLEEP_BODY.format(ms=ms).encode()
    elif scenario in ("static", "gridfs"):
        # static serves the set from the file system, gridfs the same files from the database's bucket.
        if scenario == "static":
            rel, files = level.param("static_path", DEFAULT_STATIC_PATH), None
        else:
            rel, files = level.param("gridfs_path", DEFAULT_GRIDFS_PATH), level.param("gridfs_files")
        if rel.endswith("/"):
            # Seed 003: files picked at random (seeded, repeatable) from a folder of the set. Each URL's line
            # carries its file's size, so every response is held to its own file's length; the contents
            # were verified byte for byte before the load (scenarios.verify).
            urls = url_list(static_dir, rel, scenario, files)
            return LoadSpec("http", f"{base}/{scenario}/{rel}", http_args + [
                "--urls", str(urls), "--url-order", "random", "--seed", str(STATIC_SEED), "--expect-status", "200"],
                {"status": 200, "urls": str(urls), "body_size": "per URL"})
        path, body = f"/{scenario}/{rel}", (static_dir / rel).read_bytes()
    else:
        raise ValueError(f"unknown scenario {scenario!r}")
    expectation = {"status": 200, "body_size": len(body), "body_sha256": sha256_hex(body)}
    return LoadSpec("http", base + path, http_args + [
        "--expect-status", "200", "--expect-body-size", str(len(body)), "--expect-body-sha256", sha256_hex(body)],
        expectation)


def request_load_spec(request: Request, level: Level, origin: str) -> LoadSpec:
    """The load for a custom request (an endpoint outside the catalog) on the server at `origin`
    (scheme://host:port): its method, headers and body, and what a success is (status, body) if it says."""
    args = _http_level_args(level) + ["--method", request.method]
    for header in request.headers:
        args += ["--header", header]
    if request.body is not None:
        args += ["--body", request.body]
    expectation: dict = {}
    if request.expect_status is not None:
        args += ["--expect-status", str(request.expect_status)]
        expectation["status"] = request.expect_status
    if request.expect_body is not None:
        body = request.expect_body.encode()
        args += ["--expect-body-size", str(len(body)), "--expect-body-sha256", sha256_hex(body)]
        expectation.update(body_size=len(body), body_sha256=sha256_hex(body))
    return LoadSpec("http", origin.rstrip("/") + request.path, args, expectation)


# ----------------------------------------------------------------------------- verification


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
        raise _Wrong(f"not valid HTTP/1.1: {type(error).__name__}: {error}")
    promised = resp.length or 0  # body bytes the head announced and that were not read
    if len(body) < max_body and resp.length != 0 and (expired.is_set() or error is not None or promised):
        conn.close()
        of = f" of {len(body) + promised}" if resp.length is not None else ""
        if expired.is_set():
            raise _Wrong(f"status {resp.status}, then {len(body)}{of} body bytes within timeout_s={timeout_s:g} s: "
                         f"the whole response must arrive by then (received {_show(bytes(body))})")
        why = f" ({type(error).__name__}: {error})" if error is not None else ""
        raise _Wrong(f"status {resp.status}, then the connection ended after {len(body)}{of} body bytes{why}")
    if not resp.isclosed() or expired.is_set():  # cut at max_body, or shut by a late watchdog: done with it
        conn.close()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    if resp.status >= 500:
        raise _Retryable(f"status {resp.status}")
    if resp.version != 11:
        raise _Wrong(f"answered HTTP/{resp.version / 10:.1f}, expected HTTP/1.1")
    return resp.status, headers, bytes(body), time.monotonic() - started


def _expect(cond: bool, detail: str) -> None:
    if not cond:
        raise _Wrong(detail)


def _show(body: bytes, limit: int = 60) -> str:
    text = repr(body[:limit])
    return text + (f"... ({len(body)} bytes)" if len(body) > limit else f" ({len(body)} bytes)")


def _check_http(scenario: str, conn, static_dir: Path, checks: list[Check], prefix: str = "",
                closes_connections: bool = False) -> None:
    def run(path: str, fn, expected_bytes: int) -> None:
        path = prefix + path
        try:
            status, headers, body, elapsed_s = _get(conn, path, max_body=expected_bytes + 1)
            fn(status, headers, body, elapsed_s)
        except _Retryable as exc:
            raise _Retryable(f"GET {path}: {exc}") from None
        except _Wrong as exc:
            checks.append(Check(f"GET {path}", False, str(exc)))
            raise
        checks.append(Check(f"GET {path}", True))

    def ok_status(status):
        _expect(status == 200, f"status {status}, expected 200")

    def json_value(status, headers, body):
        """The parsed body of a 200 application/json response."""
        ok_status(status)
        ctype = headers.get("content-type", "")
        _expect(ctype.split(";")[0].strip().lower() == JSON_CONTENT_TYPE,
                f"Content-Type {ctype!r}, expected {JSON_CONTENT_TYPE}")
        try:
            return json.loads(body)
        except ValueError:
            raise _Wrong(f"body is not JSON: {_show(body)}") from None

    if scenario == "hello":
        def hello(status, headers, body, _):
            ok_status(status)
            ctype = headers.get("content-type", "")
            _expect(ctype.split(";")[0].strip().lower() == HELLO_CONTENT_TYPE,
                    f"Content-Type {ctype!r}, expected {HELLO_CONTENT_TYPE}")
            _expect(body == HELLO_BODY, f"body {_show(body)}, expected {HELLO_BODY!r}")
            _expect(closes_connections or headers.get("connection", "").lower() != "close",
                    "server sent 'Connection: close'; HTTP/1.1 keep-alive is required (a server that closes "
                    "every connection by design declares closes_connections with the reason)")
        run("/hello", hello, len(HELLO_BODY))
        run("/hello", hello, len(HELLO_BODY))  # the same connection again: keep-alive works
    elif scenario == "bytes":
        for size in BYTES_SIZES:
            def sized(status, headers, body, _, size=size):
                ok_status(status)
                _expect(len(body) == size, f"body of {len(body)} bytes, expected {size}")
                _expect(body == BYTES_FILL * size, "body is not all '*' (0x2A)")
            run(f"/bytes/{size}", sized, size)
    elif scenario == "json":
        def js(status, headers, body, _):
            value = json_value(status, headers, body)
            _expect(value == JSON_BODY, f"body parses to {value!r}, expected {JSON_BODY!r}")
        run("/json", js, FETCH_MAX_BODY_BYTES - 1)
    elif scenario == "mongo":
        from .fixtures import mongo_documents

        for name, expected in mongo_documents().items():
            def same_doc(status, headers, body, _, expected=expected):
                value = json_value(status, headers, body)
                if value != expected:
                    wrong = sorted(k for k in set(value) | set(expected) if value.get(k) != expected.get(k)) \
                        if isinstance(value, dict) else ["(not an object)"]
                    raise _Wrong(f"the document differs from the fixture's '{expected['_id']}' in "
                                 f"{', '.join(map(str, wrong[:5]))}: {_show(body)}")
            run(f"/mongo/{name}", same_doc, FETCH_MAX_BODY_BYTES - 1)
    elif scenario in ("static", "gridfs"):
        for rel in STATIC_VERIFY_PATHS if scenario == "static" else GRIDFS_VERIFY_FILES:
            expected = (static_dir / rel).read_bytes()

            def same(status, headers, body, _, expected=expected):
                ok_status(status)
                _expect(body == expected, f"body of {len(body)} bytes (sha256 {sha256_hex(body)[:12]}) differs "
                        f"from the file ({len(expected)} bytes, sha256 {sha256_hex(expected)[:12]})")
            run(f"/{scenario}/{rel}", same, len(expected))
        if scenario == "gridfs":
            def absent(status, headers, body, _):
                _expect(status == 404, f"status {status} for a file the bucket does not hold, expected 404")
            run(f"/gridfs/{GRIDFS_MISSING_FILE}", absent, FETCH_MAX_BODY_BYTES - 1)
    elif scenario == "sleep":
        want = SLEEP_BODY.format(ms=VERIFY_SLEEP_MS).encode()

        def slept(status, headers, body, elapsed_s):
            ok_status(status)
            _expect(body == want, f"body {_show(body)}, expected {want!r}")
            _expect(elapsed_s >= VERIFY_SLEEP_MS / 1000 * 0.9,
                    f"answered after {elapsed_s * 1000:.0f} ms, expected at least {VERIFY_SLEEP_MS} ms")
        run(f"/sleep/{VERIFY_SLEEP_MS}", slept, len(want))


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


# ----------------------------------------------------------------------------- socket-level checks

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10


def listen_backlogs(port: int) -> list[int]:
    """The backlog of every listening TCP socket (IPv4 and IPv6) on `port`, as the kernel enforces it.

    Read from the kernel's sock_diag netlink interface (what `ss -ltn` shows as Send-Q for a listening
    socket: sk_max_ack_backlog, the server's listen() argument capped at net.core.somaxconn), so no tool
    needs to be installed. One entry per socket: SO_REUSEPORT workers each have their own.
    """
    return [backlog for _, backlog in _listening_queues(port)]


def accept_queue(port: int) -> tuple[int, int]:
    """(connections waiting to be accepted, how many may wait) on `port`, summed over its listening sockets
    (`ss -ltn`'s Recv-Q and Send-Q)."""
    queues = _listening_queues(port)
    return sum(waiting for waiting, _ in queues), sum(backlog for _, backlog in queues)


def _listening_queues(port: int) -> list[tuple[int, int]]:
    """(connections waiting to be accepted, backlog) of every listening TCP socket on `port`, from sock_diag."""
    found = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            # struct inet_diag_req_v2: family, protocol, ext, pad, states bitmask, then a zeroed sockid.
            req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN) + bytes(48)
            nl.send(struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP,
                                seq, 0) + req)
            done = False
            while not done:
                data = nl.recv(1 << 16)
                offset = 0
                while offset + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if kind == _NLMSG_DONE or length < 16:
                        done = True
                        break
                    if kind == _NLMSG_ERROR:
                        errno_ = -struct.unpack_from("=i", data, offset + 16)[0]
                        raise OSError(errno_, f"sock_diag: {os.strerror(errno_)}")
                    # struct inet_diag_msg: 4 bytes, sockid (source port first, big-endian; 48 bytes),
                    # expires, rqueue (= the accept queue), wqueue (= the backlog for a listening socket), uid, inode.
                    sport = struct.unpack_from("!H", data, offset + 20)[0]
                    if sport == port:
                        found.append(struct.unpack_from("=II", data, offset + 16 + 4 + 48 + 4))
                    offset += (length + 3) & ~3
    return found


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


def _check_nagle(scenario: str, conn: http.client.HTTPConnection, checks: list[Check],
                 declared_stall: str | None = None) -> None:
    path = NAGLE_CHECK_PATHS[scenario]
    name = f"{NAGLE_CHECK_REQUESTS} x 2 GET {path} on one connection"
    # spread_ms[quick_ack]: from each response's first byte to its last; whole_ms: from each request to its last
    # byte, with delayed ACKs (what any client sees).
    spread_ms: dict[bool, list[float]] = {False: [], True: []}
    whole_ms = []
    for _ in range(NAGLE_CHECK_REQUESTS):
        # Alternating, so that a change in the host's load during the check falls on both kinds alike.
        for quick_ack in (False, True):
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
    delayed_ms, quick_ms = (statistics.median(spread_ms[quick]) for quick in (False, True))
    stall_ms = delayed_ms - quick_ms
    measured = (f"median {delayed_ms:.1f} ms from a response's first byte to its last with delayed ACKs, "
                f"{quick_ms:.1f} ms with immediate ACKs ({statistics.median(whole_ms):.1f} ms from the request)")
    if stall_ms >= NAGLE_MIN_STALL_MS and declared_stall:
        # The manifest says the framework offers no way to avoid it (manifest `nagle_stall`): measured and kept,
        # because that stall is what its users get.
        checks.append(Check(name, True, f"{measured}: the declared Nagle stall ({declared_stall})"))
        return
    if stall_ms >= NAGLE_MIN_STALL_MS:
        checks.append(Check(name, False, f"{measured}: the rest of each response waits {stall_ms:.0f} ms for the "
                            f"client's delayed ACK (Nagle; a stall from {NAGLE_MIN_STALL_MS} ms); set TCP_NODELAY "
                            "on accepted connections"))
        raise _Wrong("")
    checks.append(Check(name, True, measured))


def _sleep_round(port: int, path: str, count: int, timeout_s: float) -> tuple[list, float]:
    """`count` GET `path` at once on `count` fresh connections: (per-request results, when they were sent)."""
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s) for _ in range(count)]
    results: list = [None] * count
    try:
        for conn in conns:
            try:
                conn.connect()
            except OSError as exc:
                raise _Retryable(f"connect: {exc}") from None
        barrier = threading.Barrier(count + 1)

        def one(index: int) -> None:
            barrier.wait()
            try:
                status, _, body, _ = _get(conns[index], path)
                results[index] = (time.monotonic(), status, body)
            except (_Retryable, _Wrong) as exc:
                results[index] = exc
            finally:
                # Closed as soon as it is answered: a thread pool smaller than `count` (uWSGI --threads 2) keeps a
                # thread on each open keep-alive connection, and would otherwise never reach the rest.
                conns[index].close()

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(count)]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.monotonic()
        for thread in threads:
            thread.join()
    finally:
        for conn in conns:
            conn.close()
    return results, started


def _check_sleep_overlap(port: int, concurrency_model: str | None, timeout_s: float, checks: list[Check],
                         pool: int | None = None) -> None:
    count, ms = SLEEP_OVERLAP_CONNECTIONS, SLEEP_OVERLAP_MS
    path = f"/sleep/{ms}"
    name = f"{count} concurrent GET {path} on {count} connections"
    threaded = concurrency_model in THREADED_MODELS or concurrency_model is None
    # A pool of one thread (or one process) serves one sleep at a time by design: correct answers are all it owes.
    # A pool of two overlaps two at best, less the server's own work: the bound sits halfway, at 1.5.
    serial = threaded and pool == 1
    need = min(2.0, (1 + pool) / 2) if threaded and pool else 2.0
    # A server that serves them one after another needs count x ms: wait for that, then judge.
    request_timeout_s = max(timeout_s, count * ms / 1000 + 2)
    # A server whose sleep blocks fails every round the same way; one that yields but is still cold (a JVM's
    # first requests on a busy machine) may miss the bound once, so it gets SLEEP_OVERLAP_ROUNDS rounds.
    for round_index in range(SLEEP_OVERLAP_ROUNDS):
        try:
            results, started = _sleep_round(port, path, count, request_timeout_s)
        except _Retryable as exc:
            raise _Retryable(f"{name}: {exc}") from None
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            if all(isinstance(r, _Retryable) for r in failed):
                raise _Retryable(f"{name}: {failed[0]}")
            checks.append(Check(name, False, f"{len(failed)} of {count} failed: {failed[0]}"))
            raise _Wrong("")
        want = SLEEP_BODY.format(ms=ms).encode()
        wrong = [(status, body) for _, status, body in results if status != 200 or body != want]
        if wrong:
            checks.append(Check(name, False, f"status {wrong[0][0]}, body {_show(wrong[0][1])}; expected 200, "
                                f"{want!r}"))
            raise _Wrong("")
        elapsed_ms = (max(finished for finished, _, _ in results) - started) * 1000
        overlapped = min(count, count * ms / elapsed_ms)
        observed = f"all {count} done after {elapsed_ms:.0f} ms: {overlapped:.1f} sleeps overlapped"
        if round_index:
            observed += f" (round {round_index + 1} of {SLEEP_OVERLAP_ROUNDS})"
        passed = serial or (overlapped >= need if threaded else elapsed_ms < SLEEP_OVERLAP_MAX_BATCHES * ms)
        if passed:
            model = f"{concurrency_model}, a pool of 1: one at a time" if serial else concurrency_model
            checks.append(Check(name, True, observed + (f" ({model})" if model else "")))
            return
    if threaded:
        checks.append(Check(name, False, f"{observed}; a threaded server must overlap at least {need:g} (one "
                            "sleeping thread per request): the sleep seems to block the whole server"))
    else:
        checks.append(Check(name, False, f"{observed}; a {concurrency_model} server must overlap them all "
                            f"(under {SLEEP_OVERLAP_MAX_BATCHES * ms} ms): the sleep blocks the server instead "
                            "of yielding (asyncio.sleep, gevent.sleep, callLater, setTimeout, a goroutine)"))
    raise _Wrong("")


def verify(scenario: str, port: int, static_dir: Path, timeout_s: float = 5.0,
           concurrency_model: str | None = None, nagle_stall: str | None = None,
           responses_only: bool = False, host: str = "127.0.0.1", prefix: str = "",
           pool: int | None = None, closes_connections: bool = False) -> Verification:
    """Check the contestant on `port` against the catalog definition of `scenario`.

    After the scenario's responses: the listen backlog (MIN_LISTEN_BACKLOG), a Nagle check for the HTTP
    scenarios (NAGLE_CHECK_PATHS; a stall the manifest declares with its reason in `nagle_stall` passes and is
    shown) and, for sleep, that concurrent sleeps overlap as the manifest's `concurrency_model` says they must
    (threaded models: at least two; with `pool`, the most requests its set-up serves at once, known: 1.5 for a
    pool of two, none for a pool of one; every other model: all of them). `closes_connections`: the manifest
    declares that the server closes every connection after one response, so 'Connection: close' passes.
    `responses_only` checks the responses
    and nothing else: "does it still answer correctly?" after a load, when the server's set-up was already
    checked before it, or for a server netarena did not start (`netarena run --url`), whose set-up is its own.
    `host` and `prefix` (a path put before the catalog's paths) locate such a server.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}")
    checks: list[Check] = []
    try:
        if scenario == "echo":
            _check_echo(port, timeout_s, checks, host)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
            try:
                _check_http(scenario, conn, static_dir, checks, prefix, closes_connections)
                if scenario in NAGLE_CHECK_PATHS and not responses_only:
                    _check_nagle(scenario, conn, checks, nagle_stall)
            finally:
                conn.close()
            if scenario == "sleep" and not responses_only:
                _check_sleep_overlap(port, concurrency_model, timeout_s, checks, pool)
        if not responses_only:
            _check_backlog(port, checks)
    except _Retryable as exc:
        checks.append(Check(scenario, False, str(exc)))
        return Verification(scenario, False, checks, retryable=True)
    except _Wrong as exc:
        if str(exc) and not any(not c.ok for c in checks):
            checks.append(Check(scenario, False, str(exc)))
        return Verification(scenario, False, checks)
    return Verification(scenario, True, checks)


def verify_request(request: Request, host: str, port: int, timeout_s: float = 5.0) -> Verification:
    """Send a custom request once and hold its answer to what it expects: `expect_status` (else any 2xx/3xx,
    what netarena-load counts as a success without one) and `expect_body` when given."""
    name = f"{request.method} {request.path}"
    checks: list[Check] = []
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
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
        checks.append(Check(name, False, str(exc)))
        return Verification(request.name, False, checks)
    finally:
        conn.close()
    checks.append(Check(name, True, f"status {status}, {len(answer)} bytes"))
    return Verification(request.name, True, checks)
