"""The `protocol` axis (h1, h1-tls): the run's certificate, manifests and suites, servers started over TLS,
verification over TLS, and real runs (docs/protocols.md).

The TLS load itself needs a netarena-load that speaks https (`http --help` lists --cacert): until it does, the
tests that run one skip with that reason, asked of the binary.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import stat
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS, db_rows, run_cli, write_suite
from netarena.config import load_manifest, load_suite
from netarena.errors import ConfigError
from netarena.scenarios import levels_for
from netarena.scenarios.checks import verify
from netarena.tls import make_run_certificate

GOOD = (FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml").read_text()


def generator_speaks_https(binary: Path) -> bool:
    """Asked of the binary itself: its http mode takes --cacert once it speaks https."""
    out = subprocess.run([str(binary), "http", "--help"], capture_output=True, text=True, timeout=30)
    return "--cacert" in out.stdout


def manifest_at(tmp_path: Path, text: str, name: str = "fx-good") -> Path:
    folder = tmp_path / "contestants" / name
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text(text)
    return folder / "contestant.toml"


# ----------------------------------------------------------------------------- the run's certificate


def test_run_certificate_names_loopback_is_short_lived_and_its_key_is_private(tmp_path):
    from cryptography import x509

    made = make_run_certificate(tmp_path / "run-1" / "tls")
    cert = x509.load_pem_x509_certificate(made.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert cert.issuer == cert.subject  # self-signed
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime <= datetime.timedelta(days=3)
    assert stat.S_IMODE(made.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.folder.stat().st_mode) == 0o700
    assert b"PRIVATE KEY" in made.key.read_bytes()
    made.remove()
    assert not made.folder.exists() and (tmp_path / "run-1").is_dir()


def test_each_run_certificate_has_its_own_key(tmp_path):
    one, two = make_run_certificate(tmp_path / "a"), make_run_certificate(tmp_path / "b")
    assert one.key.read_bytes() != two.key.read_bytes()


# ----------------------------------------------------------------------------- manifests and suites


@pytest.mark.parametrize("protocols, message", [
    ('["h1", "h3"]', "unknown protocol 'h3'; known: h1, h1-tls, h2, h2c"),
    ('["h1-tls"]', 'leaves out "h1"'),
    ('["h1", "h1"]', "listed twice"),
])
def test_manifest_protocols_are_checked(tmp_path, protocols, message):
    text = GOOD.replace('scenarios = ["echo"', f'protocols = {protocols}\nscenarios = ["echo"')
    path = manifest_at(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert message in err.value.render()
    assert err.value.field == "protocols"
    assert err.value.line == next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("protocols"))


def test_manifest_using_the_tls_placeholders_must_list_h1_tls(tmp_path):
    text = GOOD.replace('"--port", "{port}"]', '"--port", "{port}", "--cert", "{tls_cert}"]', 1)
    with pytest.raises(ConfigError) as err:
        load_manifest(manifest_at(tmp_path, text))
    assert "{tls_cert}" in err.value.render() and 'add "h1-tls" to protocols' in err.value.render()
    fine = text.replace('scenarios = ["echo"', 'protocols = ["h1", "h1-tls"]\nscenarios = ["echo"')
    assert load_manifest(manifest_at(tmp_path / "b", fine)).protocols == ["h1", "h1-tls"]


def test_manifest_protocols_default_to_h1():
    assert load_manifest(FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml").protocols == ["h1"]


SUITE = """name = "p"
[[measure]]
scenario = "{scenario}"
connections = [4]
protocol = {protocol}
"""


def test_suite_protocol_on_a_scenario_without_tls_is_refused(tmp_path):
    path = write_suite(tmp_path / "s.toml", SUITE.format(scenario="sleep", protocol='["h1", "h1-tls"]'))
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert "protocol applies to the scenarios hello, bytes, json, static, not sleep" in err.value.render()
    assert err.value.field == "measure[0].protocol" and err.value.line == 5
    # h1 alone is what every scenario is measured over: accepted anywhere.
    load_suite(write_suite(tmp_path / "h1.toml", SUITE.format(scenario="sleep", protocol='["h1"]')))


def test_protocol_is_in_the_level_key_only_when_not_h1(tmp_path):
    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.format(scenario="hello",
                                                                        protocol='["h1", "h1-tls"]')))
    assert [level.key for level in levels_for(suite.measure[0])] == ["c=4,w=1", "c=4,w=1,protocol=h1-tls"]
    assert [level.series for level in levels_for(suite.measure[0])] == ["", "protocol=h1-tls"]


def test_tls_resume_is_an_axis_of_the_tls_levels_only_and_refused_without_one(tmp_path):
    entry = SUITE.format(scenario="hello", protocol='["h1", "h1-tls"]') + "tls_resume = [false, true]\n"
    suite, _ = load_suite(write_suite(tmp_path / "s.toml", entry))
    # h1 has no session to resume: one level; h1-tls one per value, the resumed one named in its key.
    assert [level.key for level in levels_for(suite.measure[0])] == [
        "c=4,w=1", "c=4,w=1,protocol=h1-tls", "c=4,w=1,protocol=h1-tls,tls_resume"]
    for protocol, extra, message in (
            ('["h1"]', "tls_resume = [true]\n", "tls_resume applies to levels over TLS, and protocol ['h1'] has none"),
            ('["h1-tls"]', "tls_resume = [true, true]\n", "a value is listed twice: [True, True]")):
        path = write_suite(tmp_path / "bad.toml", SUITE.format(scenario="hello", protocol=protocol) + extra)
        with pytest.raises(ConfigError) as err:
            load_suite(path)
        assert message in err.value.render() and err.value.field == "measure[0].tls_resume", err.value.render()


# ----------------------------------------------------------------------------- verification over TLS


class _Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"Hello, World!"

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def _serve(body: bytes, cert=None):
    """A real HTTP server on a loopback port (HTTPS with `cert`, a RunCertificate): (server, port)."""
    handler = type("Handler", (_Hello,), {"body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if cert is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert.cert, cert.key)
        context.set_alpn_protocols(["http/1.1"])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def _verified(tmp_path, body: bytes, served, trusted):
    """verify("hello") trusting only `trusted` (a RunCertificate) against a real server answering `body` over
    HTTPS with `served` (None: cleartext): (the verification, the server's port)."""
    server, port = _serve(body, served)
    try:
        return verify("hello", port, tmp_path, timeout_s=5, responses_only=True, cafile=trusted.cert), port
    finally:
        server.shutdown()


def test_verification_over_tls_passes_the_right_answer_and_says_what_was_negotiated(tmp_path):
    cert = make_run_certificate(tmp_path / "tls")
    result, _ = _verified(tmp_path, b"Hello, World!", cert, cert)
    assert result.ok, result.reason
    handshake = result.checks[0]
    assert handshake.request == "TLS handshake" and "TLSv1." in handshake.detail and "ALPN http/1.1" in handshake.detail


def test_verification_over_tls_catches_a_wrong_body(tmp_path):
    cert = make_run_certificate(tmp_path / "tls")
    result, _ = _verified(tmp_path, b"Hello, World?", cert, cert)
    assert not result.ok and not result.retryable
    assert "Hello, World?" in result.reason


def test_verification_over_tls_refuses_cleartext_and_a_certificate_other_than_the_runs(tmp_path):
    cert = make_run_certificate(tmp_path / "tls")
    cleartext, plain_port = _verified(tmp_path, b"Hello, World!", None, cert)
    foreign, _ = _verified(tmp_path, b"Hello, World!", make_run_certificate(tmp_path / "other"), cert)
    assert not cleartext.ok and f"no TLS on port {plain_port}" in cleartext.reason
    assert not foreign.ok and "not the run's" in foreign.reason


# ----------------------------------------------------------------------------- servers started over TLS


def _rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in stdout.splitlines() if line.count("│") >= 5]


def test_verify_starts_a_server_per_protocol_and_checks_it_over_tls(tmp_path, cache_dir, no_leftover_processes):
    result = run_cli(["verify", "fx-tls", "fx-good", "--contestants-dir", FIXTURE_CONTESTANTS, "--scenario", "hello"],
                     cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {(r[0], r[1], r[2]): r for r in _rows(result.stdout) if r[0]}
    assert set(rows) == {("fx-tls", "hello", "h1"), ("fx-tls", "hello", "h1-tls"), ("fx-good", "hello", "h1")}
    assert all(r[3] == "pass" for r in rows.values()), result.stdout
    # The certificate verify made for its TLS servers is gone with them.
    assert not list((cache_dir / "verify-logs").glob("tls*"))


def test_verify_fails_a_wrong_body_over_tls_and_a_server_that_ignores_the_certificate(tmp_path, cache_dir,
                                                                                      no_leftover_processes):
    result = run_cli(["verify", "fx-tls-wrong", "fx-tls-plain", "--contestants-dir", FIXTURE_CONTESTANTS],
                     cache_dir)
    assert result.returncode != 0
    text = " ".join(result.stdout.split())
    assert "Hello, World?" in text
    assert "no TLS on port" in text, result.stdout
    assert [r[3] for r in _rows(result.stdout) if r[0] == "fx-tls-plain"] == ["pass", "FAIL"], result.stdout


# ----------------------------------------------------------------------------- real runs

RUN_SUITE = """name = "tls-tiny"
contestants = {contestants}
repeat = 1
warmup_s = 0.3
duration_s = 0.7
timeout_s = 2

[[measure]]
scenario = "hello"
connections = [4]
protocol = ["h1", "h1-tls"]
"""


def test_a_contestant_without_h1_tls_is_skipped_with_the_reason_in_a_real_run(tmp_path, cache_dir, generator_binary,
                                                                             no_leftover_processes):
    path = write_suite(tmp_path / "suite.toml", RUN_SUITE.format(contestants='["fx-good"]'))
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--quiet"],
                     cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    measured = db_rows(results, "SELECT level_key, status FROM measurements")
    assert [(r["level_key"], r["status"]) for r in measured] == [("c=4,w=1", "ok")]
    skipped = db_rows(results, "SELECT scenario, level_key, reason FROM skipped WHERE contestant = 'fx-good'")
    assert [(r["scenario"], r["level_key"], r["reason"]) for r in skipped] == [
        ("hello", "c=4,w=1,protocol=h1-tls", "does not serve h1-tls (its protocols: h1)")]
    # No TLS level was planned: no certificate was made.
    assert not list(results.glob("logs/run-*/tls"))


def test_a_run_over_tls_is_refused_by_a_generator_without_https(tmp_path, cache_dir, generator_binary):
    """A netarena-load whose http mode has no --cacert (this wrapper hides it from the real one's help) cannot
    measure a TLS level: the run is refused before anything starts."""
    wrapper = tmp_path / "old-netarena-load"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1 $2" = "http --help" ]; then "{generator_binary}" "$@" | grep -v -- '
                       f'--cacert; exit 0; fi\nexec "{generator_binary}" "$@"\n')
    wrapper.chmod(0o755)
    path = write_suite(tmp_path / "suite.toml", RUN_SUITE.format(contestants='["fx-tls"]'))
    result = run_cli(["run", path, "--results", tmp_path / "results", "--contestants-dir", FIXTURE_CONTESTANTS],
                     cache_dir, NETARENA_LOAD=str(wrapper))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "does not speak https" in result.stderr and "measure.protocol" in result.stderr


def test_the_handshake_rate_sweep_makes_full_handshakes_or_resumes_sessions_as_its_level_says(
        tmp_path, cache_dir, generator_binary, no_leftover_processes):
    """A connection-rate sweep over h1-tls, one request per connection, tls_resume false and true (the
    handshake-rate experiment of suites/tls-handshakes.toml): every connection is a handshake; resumed ones only
    at the level that asks, and there never a generator thread's first."""
    path = write_suite(tmp_path / "suite.toml", """name = "handshakes"
contestants = ["fx-tls"]
repeat = 1
warmup_s = 0
timeout_s = 5

[[measure]]
scenario = "hello"
protocol = ["h1-tls"]
tls_resume = [false, true]
connections = [4]
conn_rate = [20, 40]
requests_per_conn = 1
connections_per_step = 20
""")
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--quiet"],
                     cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["level_key"]: r for r in db_rows(results, "SELECT * FROM measurements")}
    base = "c=4,w=1,conn_rate_steps=20:40:20,per_conn=1,conns_per_step=20,protocol=h1-tls"
    assert sorted(rows) == [base, base + ",tls_resume"], sorted(rows)
    for key, resume in ((base, False), (base + ",tls_resume", True)):
        row = rows[key]
        assert row["status"] == "ok", row["error"]
        document = json.loads(row["generator_json"])
        tls = document["tls"]
        # 2 steps of 20 arrivals: each one a connection and its handshake, or dropped and counted as such (a slow
        # host's full handshakes can keep all 4 connections busy when the next arrival is due: 4 of 40 were).
        schedules = [step["open_loop"] for step in document["steps"]]
        assert [s["intended"] for s in schedules] == [20, 20], schedules
        started = sum(s["started"] for s in schedules)
        assert started + sum(s["dropped"] for s in schedules) == 40 and started > 0, schedules
        assert tls["resume"] is resume and tls["handshakes"] == document["totals"]["connections_opened"] == started, \
            (tls, schedules)
        # Resumed: never without tls_resume; with it, some, and never a thread's first connection (it has no
        # session yet). Not all the others: on a slow host a connection may start before the previous one's
        # ticket arrived, and then makes a full handshake.
        threads = document["config"]["threads"]
        if resume:
            assert 0 < tls["resumed"] <= tls["handshakes"] - threads, tls
        else:
            assert tls["resumed"] == 0, tls
        assert ("--tls-resume" in json.loads(row["generator_argv_json"])) is resume

    # The report sets the two sweeps side by side, step by step (report.protocols.handshake_costs).
    from netarena.report import load_report
    from netarena.report.markdown import render_markdown
    from netarena.report.protocols import handshake_costs
    from netarena.store import Store
    from test_report_html import chart_traces, tables
    store = Store(results)
    report = load_report(store, 1)
    store.close()
    [cost] = handshake_costs(report.groups)
    assert (cost.contestant, cost.level_key, cost.resumed_key) == ("fx-tls", base, base + ",tls_resume")
    assert [st.rate_per_s for st in cost.steps] == [20, 40]
    sweeps = {g.level_key: g.sweep for g in report.groups}
    assert [st.server_cpu_us for st in cost.steps] == [st["server_cpu_us"] for st in sweeps[base]["steps"]]
    assert [st.resumed_server_cpu_us for st in cost.steps] == [
        st["server_cpu_us"] for st in sweeps[base + ",tls_resume"]["steps"]]
    html = (results / "report-run-1.html").read_text()
    [table] = tables(html, "handshake-cost")
    assert [row[:4] for row in table[1:]] == [["fx-tls", "hello", base, "2"]]
    # Sessions resumed: the resumed sweep's, summed over its steps, as its document counted them (of its handshakes,
    # which are 40 less the arrivals a slow host dropped).
    resumed_tls = json.loads(rows[base + ",tls_resume"]["generator_json"])["tls"]
    assert table[0][7] == "sessions resumed" \
        and table[1][7] == f"{resumed_tls['resumed']} of {resumed_tls['handshakes']}", table
    assert cost.sessions_resumed == table[1][7]
    traces = chart_traces(html, "hello: TLS handshakes, full against resumed, against the connection rate")
    # server CPU per request and p99, each full and resumed
    assert sorted((t["name"], t["line"]["dash"]) for t in traces) == sorted(
        [("fx-tls (full)", "solid"), ("fx-tls (resumed)", "dash")] * 2)
    assert all(t["x"] == [20, 40] for t in traces)
    assert "## TLS handshakes: full against resumed" in render_markdown(report)


def test_a_real_run_at_h1_tls_on_python_asyncio_and_nginx(tmp_path, cache_dir, generator_binary,
                                                          no_leftover_processes):
    assert generator_speaks_https(generator_binary), "the netarena-load built from this checkout takes --cacert"
    listed = run_cli(["list", "--json"], cache_dir)
    runnable = {row["name"]: row for row in json.loads(listed.stdout)["contestants"]}
    for name in ("python-asyncio", "nginx"):
        if not runnable[name]["runnable"]:
            pytest.skip(f"{name} cannot run here: {'; '.join(runnable[name]['reasons'])}")
    path = write_suite(tmp_path / "suite.toml", RUN_SUITE.format(contestants='["python-asyncio", "nginx"]'))
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--quiet"], cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = db_rows(results, "SELECT contestant, level_key, status, error, generator_argv_json, generator_json "
                            "FROM measurements")
    tls_rows = [r for r in rows if r["level_key"] == "c=4,w=1,protocol=h1-tls"]
    assert sorted(r["contestant"] for r in tls_rows) == ["nginx", "python-asyncio"]
    for row in tls_rows:
        assert row["status"] == "ok", row["error"]
        argv = json.loads(row["generator_argv_json"])
        assert any(a.startswith("https://127.0.0.1:") for a in argv) and "--cacert" in argv
        document = json.loads(row["generator_json"])
        # What netarena-load negotiated (docs/load-generator.md owns the object's other fields).
        assert document["tls"]["version"].startswith("TLS") and document["tls"]["alpn"] == "http/1.1", document["tls"]
        assert document["errors"]["total"] == 0
    assert all(r["status"] == "ok" for r in rows if r["level_key"] == "c=4,w=1")
    # The run's certificate went with the run.
    assert not list(results.glob("logs/run-*/tls"))


def test_a_certificate_left_by_a_kill_9_is_removed_by_the_next_run_and_verify(tmp_path, cache_dir, generator_binary,
                                                                            no_leftover_processes):
    """kill -9 skips a run's removal of its certificate and key: the next run in the same results folder removes
    them, saying so; a verify's left by a verify process that is gone, the next verify. A live run's is kept."""
    import signal
    import time

    from conftest import start_cli

    long_suite = RUN_SUITE.format(contestants='["fx-tls"]').replace("duration_s = 0.7", "duration_s = 30") \
        .replace('protocol = ["h1", "h1-tls"]', 'protocol = ["h1-tls"]')
    results = tmp_path / "results"
    proc = start_cli(["run", write_suite(tmp_path / "long.toml", long_suite), "--results", results,
                      "--contestants-dir", FIXTURE_CONTESTANTS, "--quiet"], cache_dir)
    key = results / "logs" / "run-1" / "tls" / "server.key"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (key.exists() and db_rows(
            results, "SELECT 1 FROM live_processes WHERE role = 'generator'")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert key.exists(), "the run never reached its TLS measurement"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert key.exists()  # nothing removed it

    # A verify that died the same way (a process that has exited: its pid is no longer running).
    gone = subprocess.Popen(["true"])
    gone.wait()
    verify_left = cache_dir / "verify-logs" / f"tls-{gone.pid}"
    verify_left.mkdir(parents=True)
    (verify_left / "server.key").write_text("left behind")

    # The next run here (nothing over TLS) cleans up the killed run's processes and its certificate.
    again = run_cli(["run", write_suite(tmp_path / "tiny.toml", RUN_SUITE.format(contestants='["fx-good"]')),
                     "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--quiet"], cache_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "removed the TLS certificate and key left by an interrupted run" in again.stderr, again.stderr
    assert not (results / "logs" / "run-1" / "tls").exists()
    assert (results / "logs" / "run-1").is_dir()  # the killed run's server logs stay

    checked = run_cli(["verify", "fx-good", "--contestants-dir", FIXTURE_CONTESTANTS, "--scenario", "hello"],
                      cache_dir)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "left by an interrupted verify" in " ".join(checked.stdout.split()), checked.stdout
    assert not verify_left.exists()
