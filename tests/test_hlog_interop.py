"""netarena-load's --hlog interval log, read by a third-party HdrHistogram implementation.

The Rust tests read the .hlog back with the same crate that wrote it; this reads it with the Python
``hdrhistogram`` package (``hdrh.log.HistogramLogReader``), an independent implementation of the
HistogramLogWriter format, and checks it against the JSON result of the same run: one histogram
per interval, with the same count and the same values (microseconds) as the JSON's interval entries.
"""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

RUN_TIMEOUT_S = 60
# The generator's histogram bounds (crates/loadgen/src/stats.rs: HIST_LOWEST_US, HIST_HIGHEST_US).
HIST_LOWEST_US = 1
HIST_HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3


class _Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the generator's pool expects
    # Head and body go out in two writes: without TCP_NODELAY, Nagle holds the body until the
    # generator's delayed ACK (~40 ms), and the server falls far behind 200 req/s.
    disable_nagle_algorithm = True

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        self.send_response(200)
        self.send_header("Content-Length", "13")
        self.end_headers()
        self.wfile.write(b"Hello, World!")

    def log_message(self, *args):
        pass


@pytest.fixture
def hello_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_hlog_matches_the_json_intervals_when_read_by_python_hdrh(generator_binary, hello_server, tmp_path):
    hlog = tmp_path / "run.hlog"
    run = subprocess.run(
        [str(generator_binary), "http", hello_server, "--rate", "200", "-c", "4", "-d", "1s",
         "--interval", "250ms", "--hlog", str(hlog), "--json"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["errors"]["total"] == 0, doc["errors"]
    intervals = doc["intervals"]
    assert intervals["unit"] == "us" and intervals["interval_s"] == 0.25
    entries = intervals["entries"]
    assert 4 <= len(entries) <= 5, entries

    reader = HistogramLogReader(
        str(hlog), HdrHistogram(HIST_LOWEST_US, HIST_HIGHEST_US, SIGNIFICANT_DIGITS))
    read = []
    while (h := reader.get_next_interval_histogram()) is not None:
        read.append(h)
    assert len(read) == len(entries), (len(read), entries)

    for k, (h, e) in enumerate(zip(read, entries)):
        assert h.get_total_count() == e["count"], (k, e)
        # Start offsets and lengths (ms since the log's start time) follow --interval.
        start_ms = h.get_start_time_stamp() - reader.get_start_time_sec() * 1000
        assert start_ms == pytest.approx(e["t_s"] * 1000, abs=1), (k, start_ms, e)
        assert h.get_end_time_stamp() - h.get_start_time_stamp() == pytest.approx(250, abs=1)
        if e["count"]:
            # Same values in the same unit (microseconds): equal up to the 3-digit bucket width.
            assert h.get_max_value() == pytest.approx(e["max_us"], rel=2e-3), (k, e)
            assert h.get_value_at_percentile(50) == pytest.approx(e["p50_us"], rel=2e-3), (k, e)
    assert sum(h.get_total_count() for h in read) == doc["latency"]["count"]
    # The log's start time is the measured phase's start, as wall-clock seconds.
    assert reader.get_start_time_sec() > 1e9
