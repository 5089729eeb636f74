"""HTTP/2 levels (h2 over TLS, h2c in cleartext): suites, verification over HTTP/2 against real servers (one
that speaks HTTP/1.1 only fails with why), a server for h1-tls that chooses h2 fails, and a real run on nginx and
go-net (docs/protocols.md)."""

from __future__ import annotations

import json
import shutil
import ssl
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS, db_rows, run_cli, write_suite
from netarena.config import load_suite
from netarena.errors import ConfigError
from netarena.scenarios import levels_for
from netarena.scenarios.checks import verify
from netarena.tls import make_run_certificate
from test_protocols import RUN_SUITE as TLS_RUN_SUITE
from test_protocols import SUITE, _Hello, _rows

# ----------------------------------------------------------------------------- suites


def test_h2_levels_are_keyed_by_their_protocol(tmp_path):
    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.format(scenario="bytes",
                                                                        protocol='["h1", "h2", "h2c"]')))
    assert [level.key for level in levels_for(suite.measure[0])] == [
        "c=4,w=1,size=40", "c=4,w=1,size=40,protocol=h2", "c=4,w=1,size=40,protocol=h2c"]


def test_streams_multiply_the_http2_levels_only_and_reach_netarena_load(tmp_path):
    from netarena.scenarios.load import load_spec

    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.format(scenario="hello", protocol='["h1", "h2c"]')
                                      + "streams = [1, 8]\n"))
    levels = levels_for(suite.measure[0])
    assert [level.key for level in levels] == ["c=4,w=1", "c=4,w=1,protocol=h2c", "c=4,w=1,protocol=h2c,streams=8"]
    argv = [load_spec("hello", level, 8080, tmp_path).args for level in levels]
    assert "--h2" not in argv[0] and "--streams" not in argv[0]
    assert "--h2" in argv[1] and "--streams" not in argv[1]  # netarena-load's default, 1
    assert argv[2][argv[2].index("--streams") + 1] == "8"
    spec = load_spec("hello", levels[2], 8080, tmp_path)
    assert spec.target == "http://127.0.0.1:8080/hello"


def test_h2_window_multiplies_the_http2_levels_only_and_reaches_netarena_load(tmp_path):
    from netarena.scenarios.load import load_spec

    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.format(scenario="hello", protocol='["h1", "h2c"]')
                                      + "h2_window = [65535, 1048576]\n"))
    levels = levels_for(suite.measure[0])
    assert [level.key for level in levels] == ["c=4,w=1", "c=4,w=1,protocol=h2c,h2_window=65535",
                                               "c=4,w=1,protocol=h2c,h2_window=1048576"]
    argv = [load_spec("hello", level, 8080, tmp_path).args for level in levels]
    assert "--h2-window" not in argv[0]
    assert [a[a.index("--h2-window") + 1] for a in argv[1:]] == ["65535", "1048576"]


@pytest.mark.parametrize("axis", ["streams", "h2_window"])
def test_an_http2_axis_without_an_http2_protocol_is_refused(tmp_path, axis):
    path = write_suite(tmp_path / "s.toml", SUITE.format(scenario="hello", protocol='["h1", "h1-tls"]')
                       + f"{axis} = [8]\n")
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert f"{axis} applies to HTTP/2 levels" in err.value.render() and err.value.field == f"measure[0].{axis}"


@pytest.mark.parametrize("axis", ["streams", "h2_window"])
def test_an_http2_axis_value_listed_twice_is_refused(tmp_path, axis):
    path = write_suite(tmp_path / "s.toml", SUITE.format(scenario="hello", protocol='["h2c"]') + f"{axis} = [8, 8]\n")
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert "a value is listed twice" in err.value.render() and err.value.field == f"measure[0].{axis}"


@pytest.mark.parametrize("scenario, extra, message, field", [
    ("sleep", "", "protocol applies to the scenarios hello, bytes, json, static, not sleep", "measure[0].protocol"),
    # What netarena-load --h2 does not do, refused by netarena-load's own check of the level.
    ("hello", "conn_rate = [10]\nstreams = [4]\n", "--conn-rate and --streams", "measure[0].protocol"),
    ("hello", "streams = [20000]\n", "less than or equal to 10000", "measure[0].streams[0]"),
    ("hello", "h2_window = [0]\n", "greater than or equal to 1", "measure[0].h2_window[0]"),
])
def test_a_suite_asking_for_what_http2_cannot_measure_is_refused(tmp_path, scenario, extra, message, field):
    path = write_suite(tmp_path / "s.toml", SUITE.format(scenario=scenario, protocol='["h2"]') + extra)
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert message in err.value.render(), err.value.render()
    assert err.value.field == field


@pytest.mark.parametrize("generator_io, io_args", [("uring", ["--io", "uring"]),
                                                   ("uring-auto", ["--io", "uring", "--coalesce-us", "auto"])])
def test_tls_and_http2_levels_may_run_on_io_uring(tmp_path, generator_io, io_args):
    """netarena-load runs https and HTTP/2 on io_uring too: a suite asking for it is accepted (its own check of
    every level) and the levels' loads name the engine."""
    from netarena.scenarios.load import load_spec

    path = write_suite(tmp_path / "s.toml", SUITE.format(scenario="hello", protocol='["h1-tls", "h2", "h2c"]')
                       + f'generator_io = "{generator_io}"\n')
    suite, _ = load_suite(path)
    levels = levels_for(suite.measure[0])
    assert [level.protocol for level in levels] == ["h1-tls", "h2", "h2c"]
    for level in levels:
        args = load_spec("hello", level, 8080, tmp_path, insecure=True).args
        at = args.index("--io")
        assert args[at:at + len(io_args)] == io_args, args


# ----------------------------------------------------------------------------- servers started for a protocol


@pytest.mark.parametrize("protocol, over_tls", [("h1", False), ("h1-tls", True), ("h2", True), ("h2c", False)])
def test_every_server_is_started_with_its_protocol(tmp_path, cache_dir, monkeypatch, protocol, over_tls):
    """NETARENA_PROTOCOL and {protocol} name the level's protocol at every start; the run's certificate comes
    with the protocols over TLS only (h1-tls, h2)."""
    import time

    from netarena.backends.real import RealBackend
    from netarena.contestants import load

    monkeypatch.setenv("NETARENA_CACHE", str(cache_dir))
    folder = tmp_path / "contestants" / "fx-env"
    folder.mkdir(parents=True)
    seen = folder / "seen"
    text = (FIXTURE_CONTESTANTS / "fx-tls" / "contestant.toml").read_text().replace(
        'name = "fx-tls"', 'name = "fx-env"').replace('protocols = ["h1", "h1-tls"]',
                                                      'protocols = ["h1", "h1-tls", "h2", "h2c"]')
    script = ("import os, sys; open(sys.argv[1], 'w').write(' '.join([sys.argv[2], "
              "os.environ['NETARENA_PROTOCOL'], str('NETARENA_TLS_CERT' in os.environ)]))")
    start = next(line for line in text.splitlines() if line.startswith("command = "))
    text = text.replace(start, f'command = ["python3", "-c", "{script}", "{{dir}}/seen", "{{protocol}}"]')
    (folder / "contestant.toml").write_text(text)
    [contestant] = load(tmp_path / "contestants", ["fx-env"])
    cert = make_run_certificate(tmp_path / "tls") if over_tls else None
    proc = RealBackend(generator=None).start_server(contestant, "hello", 1, 1, tmp_path, [], tmp_path / "log",
                                                    tls=cert, protocol=protocol)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() == 0, (tmp_path / "log").read_text()
    assert seen.read_text() == f"{protocol} {protocol} {over_tls}"


# ----------------------------------------------------------------------------- verification over HTTP/2


def _serve_h1(cert=None, alpn=("http/1.1",)):
    """A real HTTP/1.1 server (http.server) on a loopback port, over TLS with `cert` offering `alpn`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.daemon_threads = True
    if cert is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert.cert, cert.key)
        context.set_alpn_protocols(list(alpn))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def _verify_against(server_port, protocol, cert=None):
    server, port = server_port
    try:
        return verify("hello", port, Path("."), timeout_s=5, responses_only=True,
                      cafile=cert.cert if cert is not None else None, protocol=protocol), port
    finally:
        server.shutdown()


def test_an_http1_server_fails_h2c_with_no_preface_answer():
    result, port = _verify_against(_serve_h1(), "h2c")
    assert not result.ok and not result.retryable
    assert f"no HTTP/2 preface answer on port {port}" in result.reason, result.reason


def test_an_http1_server_over_tls_fails_h2_naming_what_alpn_chose(tmp_path):
    cert = make_run_certificate(tmp_path / "tls")
    result, _ = _verify_against(_serve_h1(cert, ("http/1.1",)), "h2", cert)
    assert not result.ok and not result.retryable
    # http.server's ALPN knows http/1.1 only: the client offering h2 alone gets no protocol.
    assert "ALPN chose no protocol, not h2" in result.reason, result.reason


def test_a_server_for_h1_tls_that_chooses_h2_fails(tmp_path):
    cert = make_run_certificate(tmp_path / "tls")
    offers_h2, _ = _verify_against(_serve_h1(cert, ("h2", "http/1.1")), "h1-tls", cert)
    assert not offers_h2.ok and "ALPN chose h2" in offers_h2.reason, offers_h2.reason
    http1_only, _ = _verify_against(_serve_h1(cert, ("http/1.1",)), "h1-tls", cert)
    assert http1_only.ok, http1_only.reason


def test_verify_fails_a_contestant_that_claims_http2_and_serves_http1(tmp_path, cache_dir, no_leftover_processes):
    """fx-tls's server (HTTP/1.1 over TLS when given the certificate) with a manifest that claims h2 and h2c."""
    folder = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS / "_fixture-shared", folder / "_fixture-shared")
    (folder / "fx-claims-h2").mkdir(parents=True)
    text = (FIXTURE_CONTESTANTS / "fx-tls" / "contestant.toml").read_text()
    text = text.replace('name = "fx-tls"', 'name = "fx-claims-h2"').replace(
        'protocols = ["h1", "h1-tls"]', 'protocols = ["h1", "h1-tls", "h2", "h2c"]')
    (folder / "fx-claims-h2" / "contestant.toml").write_text(text)
    result = run_cli(["verify", "fx-claims-h2", "--contestants-dir", folder, "--scenario", "hello,json"], cache_dir)
    assert result.returncode != 0
    rows = {(r[1], r[2]): r[3] for r in _rows(result.stdout) if r[0]}
    assert rows == {(scenario, protocol): "FAIL" if protocol in ("h2", "h2c") else "pass"
                    for scenario in ("hello", "json") for protocol in ("h1", "h1-tls", "h2", "h2c")}, result.stdout
    text = " ".join(result.stdout.split())
    assert "no HTTP/2 preface answer on port" in text, result.stdout
    assert "ALPN chose http/1.1, not h2" in text or "ALPN chose no protocol, not h2" in text, result.stdout


# ----------------------------------------------------------------------------- a real run

# test_protocols' tiny run, its levels over HTTP/2, and one h2c level with several streams in flight.
RUN_SUITE = TLS_RUN_SUITE.format(contestants='["nginx", "go-net"]').replace(
    'protocol = ["h1", "h1-tls"]', 'protocol = ["h1", "h2", "h2c"]') + """
[[measure]]
scenario = "bytes"
contestants = ["nginx"]
connections = [2]
sizes = [10000]
protocol = ["h2c"]
streams = [4]
# A window smaller than the 10 kB body: nginx must wait for the client's WINDOW_UPDATE frames to finish each one.
h2_window = [4096]
"""


def test_a_real_run_at_h2_and_h2c_on_nginx_and_go_net(tmp_path, cache_dir, generator_binary, no_leftover_processes):
    listed = run_cli(["list", "--json"], cache_dir)
    runnable = {row["name"]: row for row in json.loads(listed.stdout)["contestants"]}
    for name in ("nginx", "go-net"):
        if not runnable[name]["runnable"]:
            pytest.skip(f"{name} cannot run here: {'; '.join(runnable[name]['reasons'])}")
    results = tmp_path / "results"
    result = run_cli(["run", write_suite(tmp_path / "suite.toml", RUN_SUITE), "--results", results, "--quiet"],
                     cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = db_rows(results, "SELECT contestant, scenario, level_key, status, error, generator_argv_json, "
                            "generator_json, verification_json FROM measurements")
    assert sorted((r["contestant"], r["level_key"]) for r in rows) == sorted(
        [(name, key) for name in ("nginx", "go-net") for key in ("c=4,w=1", "c=4,w=1,protocol=h2",
                                                                 "c=4,w=1,protocol=h2c")]
        + [("nginx", "c=2,w=1,size=10000,protocol=h2c,streams=4,h2_window=4096")])
    for row in rows:
        assert row["status"] == "ok", row["error"]
        argv = json.loads(row["generator_argv_json"])
        document = json.loads(row["generator_json"])
        assert document["errors"]["total"] == 0
        protocol = row["level_key"].partition("protocol=")[2].split(",")[0] or "h1"
        if protocol == "h1":
            assert "--h2" not in argv and document.get("http2") is None
            continue
        assert "--h2" in argv
        # netarena-load's own word on what it spoke: h2 by ALPN over TLS, h2c with prior knowledge.
        assert document["http2"]["protocol"] == protocol, document["http2"]
        assert document["http2"]["streams"] == (4 if "streams=4" in row["level_key"] else 1)
        if "h2_window=" in row["level_key"]:
            assert argv[argv.index("--h2-window") + 1] == "4096" and document["http2"]["window"] == 4096
        target = next(a for a in argv if "://127.0.0.1:" in a)
        assert target.startswith("https://" if protocol == "h2" else "http://")
        assert ("--cacert" in argv) == (protocol == "h2")
        checks = {c["request"]: c for c in json.loads(row["verification_json"])["checks"]}
        assert checks["HTTP/2 connection"]["ok"]
    assert not list(results.glob("logs/run-*/tls"))
