"""What netarena-load is asked to do: a level's generic options, and the request of a catalog scenario (its
module's Scenario.load) or of a custom request."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..tls import is_http2, is_tls
from . import registry
from .levels import Level
from .static_set import STATIC_SEED, sha256_hex, url_list

if TYPE_CHECKING:
    from ..config import Request

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


def level_args(level: Level) -> list[str]:
    out = ["-c", str(level.connections), "-t", str(level.generator_threads)]
    for expression in level.thresholds:
        out += ["--threshold", expression]
    return out



def http_level_args(level: Level) -> list[str]:
    """The netarena-load http options a level sets, whatever the request (catalog scenario or custom)."""
    http_args = level_args(level) + GENERATOR_IO_ARGS[level.generator_io]
    if is_http2(level.protocol):
        # HTTP/2: h2c with prior knowledge to http://, ALPN h2 alone to https:// (load_spec's scheme). Here with
        # the level's other options, so that `netarena-load check` refuses what --h2 does not do (--close,
        # --pipeline, --conn-rate with --streams) before anything runs (config.check_suite).
        http_args.append("--h2")
        if level.streams != 1:
            http_args += ["--streams", str(level.streams)]
        if level.h2_window is not None:
            http_args += ["--h2-window", str(level.h2_window)]
    if level.tls_resume:
        http_args.append("--tls-resume")
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



# The suite entry's field behind each generic netarena-load option a level sets (level_options, generator_argv):
# where a suite is refused when netarena-load refuses one (config.check_suite). A scenario's own options are in
# its option_fields.
OPTION_FIELDS = {
    "-c": "connections", "-t": "generator_threads", "--threshold": "thresholds", "--io": "generator_io",
    "--coalesce-us": "generator_io", "--pipeline": "pipeline", "--close": "close", "--rate": "rate",
    "--arrival": "arrival", "--conn-rate": "conn_rate", "--steps": "conn_rate", "--requests-per-conn": "requests_per_conn",
    "--conns-per-step": "connections_per_step", "-n": "requests", "--requests": "requests",
    "--spin-us": "generator_spin_us", "--find-max": "find_max", "--slo": "find_max.slo",
    "--max-errors": "find_max.max_errors", "--step-duration": "duration_s", "--duration": "duration_s",
    "--warmup": "warmup_s", "--chunk": "echo_chunk_bytes", "--cacert": "protocol", "--insecure": "protocol",
    "--h2": "protocol", "--streams": "streams", "--h2-window": "h2_window",
    "--tls-resume": "tls_resume",
}

# netarena-load's mode for each scenario protocol.
GENERATOR_MODES = {"http": "http", "tcp": "echo"}


def level_options(scenario: str, level: Level) -> tuple[str, list[str]]:
    """netarena-load's mode and the options a level of a catalog scenario sets, whatever the server: everything
    the suite entry decides (config.check_suite has netarena-load check them), nothing read from files."""
    definition = registry.get(scenario)
    if not definition.is_http:
        # A raw TCP stream (netarena-load's echo mode): the level's generic options and the scenario's own.
        return GENERATOR_MODES[definition.protocol], (level_args(level) + GENERATOR_IO_ARGS[level.generator_io]
                                                      + definition.level_options(level))
    http_args = http_level_args(level)
    if definition.service is not None and level.generator_spin_us is None and (
            level.param("rate") or level.param("conn_rate")):
        # The database shares the generator's CPU on small machines ([cpus] services): netarena-load's
        # default (--spin-us auto) may busy-poll a whole core at high rates, which would be taken from the
        # database and show as its slowness. The sleeping window here; a suite's generator_spin_us wins.
        http_args += ["--spin-us", str(SERVICE_LEVEL_SPIN_US)]
    return GENERATOR_MODES[definition.protocol], http_args + definition.level_options(level)


def trust_args(level: Level, cacert: Path | None, insecure: bool = False) -> list[str]:
    """netarena-load's options saying whom an https:// load trusts: `cacert` (the run's certificate, or --cacert's
    for a server of one's own) or anybody (`insecure`, --insecure); none for a cleartext level."""
    if not is_tls(level.protocol):
        return []
    if cacert is not None:
        return ["--cacert", str(cacert)]
    if insecure:
        return ["--insecure"]
    raise ValueError(f"{level.key} is measured over TLS: give the certificate to trust (cacert) or insecure")


def load_spec(scenario: str, level: Level, port: int, static_dir: Path, host: str = "127.0.0.1",
              base_url: str | None = None, cacert: Path | None = None, insecure: bool = False) -> LoadSpec:
    """The load for a catalog scenario on a server at host:port (127.0.0.1 on one machine, the server host's
    address across hosts), or at `base_url` (scheme://host:port and an optional path prefix) for a server
    netarena did not start. A level over TLS (h1-tls, h2) goes to https:// trusting only `cacert`, the run's
    certificate the server was started with (trust_args); one over HTTP/2 (h2, h2c) has --h2 among its
    options (http_level_args)."""
    definition = registry.get(scenario)
    _, options = level_options(scenario, level)
    if not definition.is_http:
        target = urlsplit(base_url).netloc if base_url else f"{host}:{port}"
        return definition.load(level, target, static_dir, options)
    options = options + trust_args(level, cacert, insecure)
    scheme = "https" if is_tls(level.protocol) else "http"
    base = base_url.rstrip("/") if base_url else f"{scheme}://{host}:{port}"
    return definition.load(level, base, static_dir, options)


def body_load(url: str, http_args: list[str], body: bytes) -> LoadSpec:
    """Every response held to one body: status 200, its size and its SHA-256."""
    expectation = {"status": 200, "body_size": len(body), "body_sha256": sha256_hex(body)}
    return LoadSpec("http", url, http_args + [
        "--expect-status", "200", "--expect-body-size", str(len(body)), "--expect-body-sha256", sha256_hex(body)],
        expectation)


def learned_load(url: str, http_args: list[str], **expectation) -> LoadSpec:
    """Every response held to the first one (netarena-load --verify-learn): for bodies whose serialization differs
    between frameworks (spacing, key order), whose value was checked before the load."""
    return LoadSpec("http", url, http_args + ["--expect-status", "200", "--verify-learn"],
                    {"status": 200, "learned": True, **expectation})


def static_set_load(base: str, route: str, rel: str, static_dir: Path, http_args: list[str],
                    count: int | None = None) -> LoadSpec:
    """GET /{route}/{rel} of a file of the static set, or with rel a folder ("img/"), a file of it picked at random
    per request (the first `count` of the folder; None: all)."""
    if rel.endswith("/"):
        # Seed 003: files picked at random (seeded, repeatable) from a folder of the set. Each URL's line
        # carries its file's size, so every response is held to its own file's length; the contents
        # were verified byte for byte before the load (scenarios.verify).
        urls = url_list(static_dir, rel, route, count)
        return LoadSpec("http", f"{base}/{route}/{rel}", http_args + [
            "--urls", str(urls), "--url-order", "random", "--seed", str(STATIC_SEED), "--expect-status", "200"],
            {"status": 200, "urls": str(urls), "body_size": "per URL"})
    return body_load(f"{base}/{route}/{rel}", http_args, (static_dir / rel).read_bytes())


def request_load_spec(request: Request, level: Level, origin: str, cacert: Path | None = None,
                      insecure: bool = False) -> LoadSpec:
    """The load for a custom request (an endpoint outside the catalog) on the server at `origin`
    (scheme://host:port): its method, headers and body, and what a success is (status, body) if it says; over
    TLS, trusting what trust_args says."""
    args = http_level_args(level) + trust_args(level, cacert, insecure) + ["--method", request.method]
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

