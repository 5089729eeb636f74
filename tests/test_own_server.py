"""`netarena run --url`: a server the test starts itself, measured, monitored, stored and reported; bad input
refused before anything is stored; `compare --fail-on-regression` on two stored runs of it.

The server is tests/fixtures/contestants/_fixture-shared/fixture_server.py run directly (not as a contestant): netarena must neither start
nor stop it, and it must still be running afterwards.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import TESTS, db_rows, run_cli
from netarena.ports import free_port

FIXTURE_SERVER = TESTS / "fixtures" / "contestants" / "_fixture-shared" / "fixture_server.py"
SHORT = ["--repeat", "1", "--duration", "1s", "--warmup", "0.2s"]


def start_server(*args: str, interpreter: str = sys.executable, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([interpreter, str(FIXTURE_SERVER), "--port", str(port), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=dict(os.environ, **(env or {})))
    deadline = time.monotonic() + 15
    import socket

    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("the fixture server did not listen within 15 s")


@pytest.fixture
def server():
    started: list[subprocess.Popen] = []

    def start(*args: str, **kwargs) -> tuple[subprocess.Popen, int]:
        proc, port = start_server(*args, **kwargs)
        started.append(proc)
        return proc, port

    yield start
    for proc in started:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_url_run_measures_monitors_stores_and_reports(server, cache_dir, tmp_path, generator_binary):
    proc, port = server()
    url = f"http://127.0.0.1:{port}"
    results = tmp_path / "results"
    result = run_cli(["run", "--url", url, "--scenario", "hello,json", "--pid", proc.pid, *SHORT,
                      "--results", results], cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert proc.poll() is None, "netarena stopped a server it did not start"
    run = db_rows(results, "SELECT * FROM runs")[0]
    assert run["backend"] == "external"
    external = json.loads(run["args_json"])["external"]
    assert external["url"] == url and external["pid"] == proc.pid
    rows = db_rows(results, "SELECT * FROM measurements ORDER BY id")
    assert [(r["contestant"], r["scenario"], r["status"]) for r in rows] == [("external", "hello", "ok"),
                                                                              ("external", "json", "ok")]
    for row in rows:
        assert json.loads(row["verification_json"])["ok"]
        argv = json.loads(row["generator_argv_json"])
        assert argv[2].startswith(url + "/")
        monitor = json.loads(row["monitor_json"])
        series = monitor["server"]
        assert len(series) >= 2, monitor
        # The server's own CPU, sampled from its process tree while the load ran.
        assert series[-1]["cpu_user_s"] + series[-1]["cpu_sys_s"] > series[0]["cpu_user_s"] + series[0]["cpu_sys_s"]
        assert monitor["summary"]["server"]["ctx_voluntary"] + monitor["summary"]["server"]["ctx_involuntary"] > 0
        generator_cpus = json.loads(run["generator_cpus_json"])
        assert json.loads(row["generator_json"])["config"]["cpus"] == generator_cpus
    shown = run_cli(["show", "--results", results], cache_dir)
    assert shown.returncode == 0 and f"external server {url}" in shown.stdout, shown.stdout + shown.stderr
    page = run_cli(["report", "--results", results, "-o", tmp_path / "r.html"], cache_dir)
    assert page.returncode == 0, page.stderr
    assert f'data-url="{url}"' in (tmp_path / "r.html").read_text()
    exported = run_cli(["export", "--json", "--results", results], cache_dir)
    assert json.loads(exported.stdout)["run"]["args"]["external"]["url"] == url


def test_url_run_finds_the_listening_process_and_measures_a_custom_request(server, cache_dir, tmp_path,
                                                                          generator_binary):
    proc, port = server()
    results = tmp_path / "results"
    result = run_cli(["run", "--url", f"http://127.0.0.1:{port}/login", "--method", "POST", "--body", "user=a",
                      "--header", "Content-Type: application/x-www-form-urlencoded", "--expect-status", "201",
                      "--expect-body", '{"ok":true}', "--connections", "4", *SHORT, "--results", results], cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    row = db_rows(results, "SELECT * FROM measurements")[0]
    assert (row["scenario"], row["status"], row["level_key"]) == ("custom", "ok", "c=4,w=1")
    generator = json.loads(row["generator_json"])
    assert generator["config"]["method"] == "POST" and generator["totals"]["requests"] > 0
    assert generator["errors"]["total"] == 0
    # No --pid: the process listening on the URL's port was found and monitored.
    assert json.loads(db_rows(results, "SELECT args_json FROM runs")[0][0])["external"]["pid"] == proc.pid
    assert json.loads(row["monitor_json"])["server"]

    request = tmp_path / "login.toml"
    request.write_text('name = "login"\nmethod = "POST"\npath = "/login"\nbody = "user=a"\nexpect_status = 201\n')
    result = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--request", request, "--connections", "4",
                      *SHORT, "--results", results], cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["scenario"] for r in db_rows(results, "SELECT scenario FROM measurements ORDER BY id")] == \
        ["custom", "login"]


def test_process_name_finds_the_server(server, cache_dir, tmp_path, generator_binary):
    """--process-name: the server runs under a name of its own (a symlink to the interpreter, which the kernel
    takes as the process name), found and monitored without a PID."""
    named = tmp_path / "fx-named-srv"
    named.symlink_to(sys.executable)
    proc, port = server(interpreter=str(named))
    results = tmp_path / "results"
    result = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--scenario", "hello", "--process-name",
                      "fx-named-srv", "--connections", "4", *SHORT, "--results", results], cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    external = json.loads(db_rows(results, "SELECT args_json FROM runs")[0][0])["external"]
    assert (external["pid"], external["found_by"]) == (proc.pid, "--process-name fx-named-srv")
    missing = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--scenario", "hello", "--process-name",
                       "fx-nobody-srv", *SHORT, "--results", tmp_path / "none"], cache_dir)
    assert missing.returncode == 2 and "no process named 'fx-nobody-srv'" in missing.stderr, missing.stderr


def test_echo_floods_the_urls_host_and_port(server, cache_dir, tmp_path, generator_binary):
    proc, port = server("--echo")
    results = tmp_path / "results"
    result = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--scenario", "echo", "--pid", proc.pid,
                      "--connections", "2", *SHORT, "--results", results], cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    row = db_rows(results, "SELECT * FROM measurements")[0]
    assert row["status"] == "ok" and json.loads(row["generator_argv_json"])[1:3] == ["echo", f"127.0.0.1:{port}"]


BAD_INPUT = [
    # (extra arguments; {port} is the running server's, {free} a port nothing listens on), the message
    (["--url", "http://127.0.0.1:{port}", "--scenario", "helo"], "did you mean 'hello'"),
    (["--url", "ftp://127.0.0.1:{port}", "--scenario", "hello"], "only http:// and https://"),
    (["--url", "https://127.0.0.1:{port}", "--scenario", "hello"], "say whom to trust"),
    (["--url", "http://127.0.0.1:{port}", "--scenario", "hello", "--insecure"], "applies to https:// URLs only"),
    (["--url", "https://127.0.0.1:{port}", "--insecure", "--cacert", "/etc/hostname"], "together"),
    (["--url", "https://127.0.0.1:{port}", "--cacert", "/nonexistent.pem"], "/nonexistent.pem: no such file"),
    (["--url", "https://127.0.0.1:{port}", "--cacert", "/etc/hostname"], "not a PEM certificate file"),
    (["--url", "https://127.0.0.1:{port}", "--insecure", "--scenario", "sleep"], "over TLS netarena measures"),
    # The fixture server here speaks cleartext: the handshake before the run says so.
    (["--url", "https://127.0.0.1:{port}", "--insecure", "--scenario", "hello"], "no TLS on port"),
    (["--url", "http://127.0.0.1:{port}/search?q=x"], "no query or fragment"),
    (["--url", "http://127.0.0.1:{port}", "--header", "no colon"], "--header"),
    (["--url", "http://127.0.0.1:{port}", "--scenario", "hello", "--pid", "999999999"], "no process 999999999"),
    (["--url", "http://10.255.255.1:{port}", "--scenario", "hello"], "--allow-target 10.255.255.1"),
    (["--url", "http://127.0.0.1:{free}", "--scenario", "hello"], "does not answer"),
    (["--url", "http://127.0.0.1:{port}", "--scenario", "echo"], "echo"),
    (["--url", "http://127.0.0.1:{port}", "--scenario", "hello", "--only", "go-net"], "cannot be combined"),
    (["quick", "--url", "http://127.0.0.1:{port}"], "cannot be combined"),
    (["--pid", "1"], "add --url"),
    (["--cacert", "/etc/hostname"], "add --url"),
    (["--url", "http://127.0.0.1:{port}", "--method", "post"], "--method"),
    (["--url", "http://127.0.0.1:{port}", "--connections", "many"], "--connections"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_exits_2_and_stores_nothing(server, cache_dir, tmp_path, args, message):
    _, port = server()
    results = tmp_path / "results"
    argv = [a.format(port=port, free=free_port()) for a in args]
    result = run_cli(["run", *argv, *SHORT, "--results", results], cache_dir, timeout_s=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr, result.stderr
    assert result.stderr.count("error:") == 1, result.stderr
    assert not (results / "netarena.sqlite").exists()


def test_a_wrong_answer_is_refused_before_the_run(server, cache_dir, tmp_path):
    _, port = server("--wrong")
    result = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--scenario", "hello", *SHORT,
                      "--results", tmp_path], cache_dir)
    assert result.returncode == 2 and "answers hello wrongly" in result.stderr, result.stderr
    assert not (tmp_path / "netarena.sqlite").exists()


def test_compare_fail_on_regression(server, cache_dir, tmp_path, generator_binary):
    """Run 1: the server as it is; run 2: the same server slower per response by more than run 1's own spread. 2
    against 1 is a regression in both metrics (exit 1); 1 against 2 is an improvement (exit 0). Five repeats each:
    the fewest compare gives a verdict on (compare.MIN_REPEATS_FOR_SIGNIFICANCE).

    The added delay comes from run 1's figures, not a fixed 20 ms, which a slow or busy host's own latency can
    exceed: the bootstrap calls a change only when run 1's values lie below run 2's, and a closed loop of
    `connections` cannot exceed connections / delay requests per second, nor answer faster than the delay. So twice
    the larger of run 1's worst p99 and connections / its lowest rate puts both of run 2's ranges clear of run 1's
    on any host."""
    results = tmp_path / "results"
    connections = 4

    def run(delay_ms: float, duration_s: int) -> None:
        proc, port = server("--delay-ms", f"{delay_ms:g}")
        result = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--scenario", "hello", "--pid", proc.pid,
                          "--connections", str(connections), "--repeat", "5", "--duration", f"{duration_s}s",
                          "--warmup", "0.2s", "--results", results], cache_dir)
        assert result.returncode == 0, result.stdout + result.stderr

    run(0, 1)
    first = db_rows(results, "SELECT requests_per_s, latency_p99_us FROM measurements WHERE run_id = 1")
    worst_p99_ms = max(r["latency_p99_us"] for r in first) / 1000
    slowest_request_ms = connections / min(r["requests_per_s"] for r in first) * 1000
    delay_ms = max(20.0, 2 * max(worst_p99_ms, slowest_request_ms))
    # At least 20 requests per connection in each repeat of run 2, so that its p99 is measured, not one request.
    run(delay_ms, max(1, math.ceil(20 * delay_ms / 1000)))
    slower = run_cli(["compare", "1", "2", "--fail-on-regression", "--results", results], cache_dir)
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "regression: external hello c=4,w=1: rps lower" in slower.stdout
    assert "regression: external hello c=4,w=1: p99 higher" in slower.stdout
    as_json = run_cli(["compare", "1", "2", "--fail-on-regression", "--metric", "p99", "--json",
                       "--results", results], cache_dir)
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    assert [(r["metric"], r["scenario"]) for r in document["regressions"]] == [("p99", "hello")]
    assert document["rows"][0]["p99_us"]["verdict"] == "higher"
    faster = run_cli(["compare", "2", "1", "--fail-on-regression", "--results", results], cache_dir)
    assert faster.returncode == 0, faster.stdout + faster.stderr
    assert "no significant change for the worse" in faster.stdout
    # Without the flag compare only reports, whatever it finds.
    assert run_cli(["compare", "1", "2", "--results", results], cache_dir).returncode == 0
    bad = run_cli(["compare", "1", "2", "--fail-on-regression", "--metric", "p95", "--results", results], cache_dir)
    assert bad.returncode == 2 and "choose from rps, p99" in bad.stderr
    # The test's confidence: 99% still calls a 200 ms difference; a bare number is refused.
    strict = run_cli(["compare", "1", "2", "--fail-on-regression", "--confidence", "99%", "--json",
                      "--results", results], cache_dir)
    assert strict.returncode == 1 and json.loads(strict.stdout)["confidence"] == 0.99
    for value in ("99", "20%", "abc"):
        bad = run_cli(["compare", "1", "2", "--confidence", value, "--results", results], cache_dir)
        assert bad.returncode == 2 and "--confidence" in bad.stderr and "between 50% and 99.9%" in bad.stderr


# A threshold that holds in any run that answered at all, and one that no run can meet (a count below zero):
# the mechanism, not this machine's speed.
HOLDS = "requests>=1"
CANNOT_HOLD = "error_count<0"


def test_thresholds_on_the_command_line_exit_0_or_99(server, cache_dir, tmp_path, generator_binary):
    proc, port = server()
    url = f"http://127.0.0.1:{port}"
    results = tmp_path / "results"
    held = run_cli(["run", "--url", url, "--scenario", "hello", "--threshold", HOLDS, "--connections", "4", *SHORT,
                    "--results", results], cache_dir)
    assert held.returncode == 0, held.stdout + held.stderr
    failed = run_cli(["run", "--url", url, "--scenario", "hello,json", "--threshold", HOLDS, "--threshold",
                      CANNOT_HOLD, "--connections", "4", *SHORT, "--results", results], cache_dir)
    assert failed.returncode == 99, failed.stdout + failed.stderr
    assert "2 measurement(s) failed a threshold (exit 99)" in failed.stderr
    run = db_rows(results, "SELECT * FROM runs WHERE id = 2")[0]
    assert run["status"] == "complete"
    rows = db_rows(results, "SELECT * FROM measurements WHERE run_id = 2 ORDER BY id")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        verdicts = json.loads(row["generator_json"])["thresholds"]
        assert [(v["expr"], v["pass"]) for v in verdicts] == [(HOLDS, True), (CANNOT_HOLD, False)]
        assert "threshold_failed" in json.loads(row["flags_json"])
        assert "--threshold" in json.loads(row["generator_argv_json"])
    shown = run_cli(["show", "2", "--results", results], cache_dir)
    assert f"threshold failed: external hello c=4,w=1 #1: {CANNOT_HOLD}" in shown.stdout, shown.stdout
    assert "THR" in shown.stdout
    page = run_cli(["report", "2", "--results", results, "-o", tmp_path / "r.html"], cache_dir)
    assert page.returncode == 0 and 'id="thresholds"' in (tmp_path / "r.html").read_text()


def test_suite_entry_thresholds_reach_the_generator(cache_dir, tmp_path, generator_binary):
    from conftest import FIXTURE_CONTESTANTS, write_suite

    suite = write_suite(tmp_path / "gated.toml", f"""name = "gated"
contestants = ["fx-good"]
repeat = 1
warmup_s = 0.2
duration_s = 0.7

[[measure]]
scenario = "hello"
connections = [4]
thresholds = ["{HOLDS}"]

[[measure]]
scenario = "json"
connections = [4]
thresholds = ["{CANNOT_HOLD}"]
""")
    results = tmp_path / "results"
    result = run_cli(["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 99, result.stdout + result.stderr
    flags = {r["scenario"]: json.loads(r["flags_json"]) for r in db_rows(results, "SELECT * FROM measurements")}
    assert "threshold_failed" not in flags["hello"] and "threshold_failed" in flags["json"]


def test_a_bad_threshold_exits_2_before_anything(server, cache_dir, tmp_path, generator_binary):
    _, port = server()
    result = run_cli(["run", "--url", f"http://127.0.0.1:{port}", "--scenario", "hello", "--threshold", "p99<<5ms",
                      *SHORT, "--results", tmp_path], cache_dir)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "p99<<5ms" in result.stderr and result.stderr.count("error:") == 1, result.stderr
    assert not (tmp_path / "netarena.sqlite").exists()


def test_shell_completion_as_the_readme_enables_it(tmp_path):
    """`eval "$(_NETARENA_COMPLETE=bash_source netarena)"` (README): click prints the script; asked as bash asks
    after `netarena ru<TAB>`, it completes `run`."""
    from pathlib import Path

    netarena = Path(sys.executable).with_name("netarena")
    script = subprocess.run([str(netarena)], env=dict(os.environ, _NETARENA_COMPLETE="bash_source"),
                            capture_output=True, text=True, timeout=60)
    assert script.returncode == 0 and "complete -o nosort -F _netarena_completion netarena" in script.stdout
    words = subprocess.run([str(netarena)], env=dict(os.environ, _NETARENA_COMPLETE="bash_complete",
                                                      COMP_WORDS="netarena ru", COMP_CWORD="1"),
                           capture_output=True, text=True, timeout=60)
    assert "plain,run" in words.stdout.splitlines(), words.stdout


def test_https_url_is_measured_over_tls_trusting_cacert_or_any_certificate(server, cache_dir, tmp_path,
                                                                          generator_binary):
    """An https:// URL: the checks and netarena-load speak TLS to the server, trusting --cacert's certificate
    (the server's own, self-signed) or any (--insecure); the levels are h1-tls ones. A certificate --cacert does not vouch for is refused before the run."""
    from netarena.tls import make_run_certificate

    own = make_run_certificate(tmp_path / "server-cert")
    proc, port = server(env={"NETARENA_TLS_CERT": str(own.cert), "NETARENA_TLS_KEY": str(own.key)})
    url = f"https://127.0.0.1:{port}"
    results = tmp_path / "results"
    trusted = run_cli(["run", "--url", url, "--scenario", "hello,json", "--cacert", own.cert, "--pid", proc.pid,
                       *SHORT, "--results", results], cache_dir)
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    anybody = run_cli(["run", "--url", url + "/login", "--method", "POST", "--expect-status", "201", "--insecure",
                       "--connections", "4", *SHORT, "--results", results], cache_dir)
    assert anybody.returncode == 0, anybody.stdout + anybody.stderr
    rows = db_rows(results, "SELECT * FROM measurements ORDER BY id")
    assert [(r["scenario"], r["status"]) for r in rows] == [("hello", "ok"), ("json", "ok"), ("custom", "ok")]
    for row, trust in zip(rows, (["--cacert", str(own.cert)], ["--cacert", str(own.cert)], ["--insecure"])):
        assert "protocol=h1-tls" in row["level_key"], row["level_key"]
        argv = json.loads(row["generator_argv_json"])
        assert argv[2].startswith(url + "/") and " ".join(trust) in " ".join(argv), argv
        generator = json.loads(row["generator_json"])
        assert generator["totals"]["responses"] > 0 and generator["errors"]["total"] == 0, generator["errors"]
        # Negotiated during the warm-up (the measured phase's own handshakes are none: keep-alive connections).
        assert generator["tls"]["version"].startswith("TLSv1") and generator["tls"]["alpn"] == "http/1.1"
        checks = json.loads(row["verification_json"])["checks"]
        assert any(c["request"] == "TLS handshake" and c["ok"] for c in checks), checks
    runs = db_rows(results, "SELECT args_json FROM runs ORDER BY id")
    assert json.loads(runs[0][0])["external"]["tls_trust"] == str(own.cert)
    assert json.loads(runs[1][0])["external"]["tls_trust"] == "any certificate (--insecure)"

    other = make_run_certificate(tmp_path / "other-cert")
    refused = run_cli(["run", "--url", url, "--scenario", "hello", "--cacert", other.cert, *SHORT,
                       "--results", tmp_path / "refused"], cache_dir)
    assert refused.returncode == 2 and f"not one --cacert {other.cert} vouches for" in refused.stderr, refused.stderr
    assert not (tmp_path / "refused" / "netarena.sqlite").exists()
    assert proc.poll() is None
