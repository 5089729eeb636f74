"""Planning the measurement of a server netarena did not start: `netarena run --url URL [--pid N |
--process-name NAME]` (the external backend, netarena.backends.external, measures it).

The server is already running, so there is no install, start or stop. Everything else is a run like any
other: the scenarios' responses are verified first (and before each measurement), netarena-load runs on
CPUs of its own, the monitor samples the server's process tree, and every measurement goes into the store
under one contestant name (`--name`, default "external"), so show/report/export/compare read it as they
read any run. The run's args record the target (`args.external`), which the reports show.

Only the responses are verified: the catalog's set-up checks (listen backlog, Nagle, sleep overlap) are
rules for contestants netarena compares, and a server of one's own is measured as it is.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from pydantic import ValidationError

from ..config import (NAME_PATTERN, SCENARIOS, TLS_SCENARIOS, Install, Measure, Request, Start, Strict, Suite,
                      Threads, Workers, load_request)
from ..contestants import cache_root
from ..errors import ConfigError, did_you_mean
from ..process import available_cpus
from ..scenarios import (STATIC_SET_VERSION, Verification, build_static_files, levels_for, load_spec, registry,
                         request_load_spec, static_set_ready, verify, verify_request)
from ..store import now_iso
from ..tls import H1, H1_TLS
from .suite import Item, Plan, build_plan

DEFAULT_NAME = "external"
DEFAULT_CONNECTIONS = [50]
# How long the check before the run waits for each scenario's first answer.
FIRST_CHECK_TIMEOUT_S = 5.0


class ExternalManifest(Strict):
    """What is stored as the external server's manifest (contestants.manifest_json): enough for the reports,
    and what a contestant's plan reads (`start`, `workers`, `threads`, `unsupported`, `install`'s optional
    parts, `serves_from_static_set`), at their neutral defaults: netarena installs and serves nothing for it."""

    name: str
    display_name: str
    url: str
    pid: int | None = None
    process: list[str] = []
    framework: str = "external server"
    framework_version: str = "-"
    language: str = "-"
    runtime: str = "-"
    concurrency_model: str = "-"
    scenarios: list[str]
    # What a suite level's `protocol` is checked against: the URL's, h1 for http://, h1-tls for https://.
    protocols: list[str] = [H1]
    request: Request | None = None
    unsupported: dict[str, str] = {}
    needs: list[str] = []  # the databases behind it are its owner's: netarena starts none
    start: Start = Start()
    workers: Workers = Workers(supported=False, how="an external server runs as it was started")
    threads: Threads = Threads()
    install: Install = Install()
    serves_from_static_set: list[str] = []


@dataclass
class ExternalServer:
    """Plays a Contestant's part in the plan and the runner (name, manifest) and knows where the server is."""

    manifest: ExternalManifest
    origin: str  # scheme://host:port
    host: str
    port: int
    prefix: str  # path before the catalog's paths ("" for none)
    pid: int | None
    request: Request | None
    allow_target: list[str] = field(default_factory=list)
    # An https:// URL: its certificate is checked against --cacert's PEM file, or not at all (--insecure).
    tls: bool = False
    cacert: Path | None = None

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def url(self) -> str:
        return self.manifest.url

    def verify(self, scenario: str, static_dir: Path, timeout_s: float) -> Verification:
        if self.request is not None and scenario == self.request.name:
            return verify_request(self.request, self.host, self.port, timeout_s, tls=self.tls, cafile=self.cacert)
        return verify(scenario, self.port, static_dir, timeout_s=timeout_s, responses_only=True, host=self.host,
                      prefix=self.prefix, cafile=self.cacert, tls=self.tls)

    def load_spec(self, scenario: str, level, static_dir: Path):
        insecure = self.tls and self.cacert is None
        if self.request is not None and scenario == self.request.name:
            spec = request_load_spec(self.request, level, self.origin, self.cacert, insecure)
        else:
            spec = load_spec(scenario, level, self.port, static_dir, base_url=self.origin + self.prefix,
                             cacert=self.cacert, insecure=insecure)
        for host in self.allow_target:
            spec.args += ["--allow-target", host]
        return spec

    def describe(self) -> dict:
        """The install record's counterpart: what was measured, as found when the run started."""
        return {"external": True, "url": self.url, "pid": self.pid, "process": self.manifest.process,
                "allow_target": self.allow_target, "recorded_at": now_iso(),
                **({"tls_trust": str(self.cacert) if self.cacert else "any certificate (--insecure)"}
                   if self.tls else {})}


# ----------------------------------------------------------------------------- parsing the command line


def parse_url(url: str) -> tuple[str, str, int, str]:
    """(origin, host, port, path prefix) of --url; a ConfigError says what is wrong with it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"{url!r}: only http:// and https:// URLs (HTTP/1.1, over TLS for https://)",
                          path="--url", hint="e.g. --url http://127.0.0.1:8080")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"{url!r}: the port is not a number from 1 to 65535", path="--url") from None
    if not parts.hostname:
        raise ConfigError(f"{url!r}: no host", path="--url", hint="e.g. --url http://127.0.0.1:8080")
    if parts.query or parts.fragment:
        raise ConfigError(f"{url!r}: no query or fragment here; a request whose path has a query is described "
                          "in a --request FILE (path = \"/search?q=x\")", path="--url")
    default_port = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{parts.netloc}", parts.hostname, port or default_port, parts.path.rstrip("/")


def check_trust(url: str, cacert: Path | None, insecure: bool) -> None:
    """An https:// URL says whom to trust, --cacert FILE (a PEM file Python's ssl can load) or --insecure, not
    both; an http:// one takes neither, where they would silently do nothing (netarena-load's rule too)."""
    given = [flag for flag, on in (("--cacert", cacert is not None), ("--insecure", insecure)) if on]
    if not url.startswith("https://"):
        if given:
            raise ConfigError(f"{given[0]} applies to https:// URLs only, and {url!r} is http://", path=given[0],
                              hint=f"drop {given[0]}, or use the server's https:// URL")
        return
    if len(given) == 2:
        raise ConfigError("--cacert and --insecure together: trust the certificates of --cacert FILE, or any "
                          "certificate with --insecure", path="--insecure", hint="drop one of them")
    if not given:
        raise ConfigError(f"{url!r} is https://: say whom to trust", path="--url",
                          hint="--cacert FILE (the PEM certificate of the server's CA, or its self-signed one), "
                               "or --insecure (any certificate; the handshake is made and measured all the same)")
    if cacert is not None:
        try:
            ssl.create_default_context(cafile=str(cacert))
        except FileNotFoundError:
            raise ConfigError(f"{cacert}: no such file", path="--cacert") from None
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ConfigError(f"{cacert}: not a PEM certificate file ({exc})", path="--cacert",
                              hint="the server's certificate, or its CA's, in PEM (-----BEGIN CERTIFICATE-----)") \
                from None


def check_loopback(host: str, allow_target: list[str]) -> None:
    """The generator's rule, checked before anything starts: loopback only unless --allow-target names the host."""
    if host in allow_target:
        return
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve {host!r}: {exc.strerror}", path="--url") from None
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise ConfigError(f"{host} is not a loopback address ({', '.join(sorted(addresses))}); netarena loads "
                          "only this machine unless told otherwise", path="--url",
                          hint=f"add --allow-target {host} if you mean to load that host")


def find_process(pid: int | None, process_name: str | None, host: str, port: int) -> tuple[int | None, str]:
    """The server's root process: --pid, else --process-name, else the listener of the URL's port on this
    machine. Returns (pid or None, how it was found)."""
    if pid is not None:
        if not psutil.pid_exists(pid):
            raise ConfigError(f"no process {pid} on this machine", path="--pid",
                              hint="the server's PID, e.g. from `pgrep -o NAME`")
        return pid, f"--pid {pid}"
    if process_name is not None:
        matches = {}
        for proc in psutil.process_iter(["name", "cmdline", "ppid"]):
            cmd = proc.info["cmdline"] or []
            if proc.info["name"] == process_name or (cmd and os.path.basename(cmd[0]) == process_name):
                matches[proc.pid] = proc.info["ppid"]
        roots = sorted(p for p, parent in matches.items() if parent not in matches and p != os.getpid())
        if not roots:
            known = sorted({p.info["name"] for p in psutil.process_iter(["name"]) if p.info["name"]})
            raise ConfigError(f"no process named {process_name!r}", path="--process-name",
                              hint=did_you_mean(process_name, known))
        if len(roots) > 1:
            raise ConfigError(f"{len(roots)} separate processes are named {process_name!r} (PIDs "
                              f"{', '.join(map(str, roots[:10]))}); say which with --pid", path="--process-name")
        return roots[0], f"--process-name {process_name}"
    try:
        addresses = {ipaddress.ip_address(info[4][0].split("%")[0])
                     for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (socket.gaierror, ValueError):
        return None, "not found"
    if not all(a.is_loopback for a in addresses):
        return None, "not on this machine"
    try:
        listeners = {c.pid for c in psutil.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    except psutil.Error:
        return None, "not found (listening sockets unreadable)"
    parents = {}
    for listener in listeners:
        try:
            parents[listener] = psutil.Process(listener).ppid()
        except psutil.Error:  # exited since the sockets were listed
            continue
    roots = sorted(p for p, parent in parents.items() if parent not in parents)
    if len(roots) == 1:
        return roots[0], f"the process listening on port {port}"
    return None, "not found" if not roots else f"{len(roots)} processes listen on port {port}"


def cmdline(pid: int | None) -> list[str]:
    if pid is None:
        return []
    try:
        return psutil.Process(pid).cmdline()[:12]
    except psutil.Error:
        return []


def pick_cpus(pid: int | None, generator: list[int] | None) -> tuple[list[int], list[int], str | None]:
    """(server CPUs as found, generator CPUs, warning). netarena cannot pin a server it did not start: the
    generator gets CPUs the server is not allowed on when there are any, and a warning when it must share."""
    available = available_cpus()
    try:
        server = sorted(os.sched_getaffinity(pid)) if pid is not None else []
    except OSError:
        server = []
    if generator is not None:
        unknown = [c for c in generator if c not in available]
        if unknown:
            raise ConfigError(f"CPU(s) {unknown} not available to this process (available: {available})",
                              path="--generator-cpus")
        shared = sorted(set(generator) & set(server))
    else:
        free = [c for c in available if c not in server] if server else []
        generator = [free[0]] if free else [available[-1]]
        shared = [] if free else generator
    warning = None
    if shared:
        who = f"the server (pid {pid})" if pid is not None else "the server (its process unknown)"
        warning = (f"{who} may run on the generator's CPU(s) {shared}: its figures then include the generator's "
                   f"cost. Pin the server elsewhere (e.g. taskset -c 0 ...) and netarena-load takes the others")
    return server, list(generator), warning


def build_request(request_file: Path | None, method: str | None, path: str, headers: tuple[str, ...],
                  body: str | None, expect_status: int | None, expect_body: str | None) -> Request | None:
    """--request FILE, or the request flags (not both) with the URL's path; None when neither is given."""
    flags = {"method": method, "headers": list(headers) or None, "body": body, "expect_status": expect_status,
             "expect_body": expect_body}
    given = {k: v for k, v in flags.items() if v is not None}
    if request_file is not None:
        if given:
            raise ConfigError(f"--request {request_file} describes the request; drop "
                              f"{', '.join(_option(k) for k in given)} or move them "
                              "into the file", path="--request")
        return load_request(request_file)
    if not given:
        return None
    try:
        return Request.model_validate(dict(given, path=path))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"{err['msg']} (got {err.get('input')!r})", path=_option(str(err["loc"][0]))) from None


def _option(field_name: str) -> str:
    """The `netarena run` flag of a Request field."""
    return "--header" if field_name == "headers" else "--" + field_name.replace("_", "-")


# ----------------------------------------------------------------------------- the plan


def plan_external(*, url: str, scenarios: list[str] | None, connections: str | None, pid: int | None,
                  process_name: str | None, name: str | None, allow_target: list[str], request_file: Path | None,
                  method: str | None, headers: tuple[str, ...], body: str | None, expect_status: int | None,
                  expect_body: str | None, overrides, cacert: Path | None = None, insecure: bool = False):
    """Everything `netarena run --url` needs, checked before anything is stored: the server (found and
    answering every scenario correctly), the suite the options describe (`overrides(base)` applies --repeat,
    --duration, --warmup and --threshold the way they apply to a suite file) and its plan.
    Returns (server, suite, plan, how the server's process was found); a ConfigError on any problem."""
    origin, host, port, prefix = parse_url(url)
    check_trust(url, cacert, insecure)
    protocol = H1_TLS if origin.startswith("https://") else H1
    check_loopback(host, allow_target)
    name = name or DEFAULT_NAME
    if not re.match(NAME_PATTERN, name):
        raise ConfigError(f"{name!r}: lowercase letters, digits and '-', starting with a letter or digit",
                          path="--name")
    for scenario in scenarios or []:
        if scenario not in SCENARIOS:
            raise ConfigError(f"unknown scenario '{scenario}' (catalog: {', '.join(SCENARIOS)}; an endpoint of "
                              "your own is a custom request: --request FILE or --method/--header/--body)",
                              path="--scenario", hint=did_you_mean(scenario, SCENARIOS))
    request = build_request(request_file, method, prefix or "/", headers, body, expect_status, expect_body)
    if not scenarios and request is None:
        # Nothing chosen: the URL itself, GET, any 2xx/3xx (what wrk or oha would load).
        request = Request(path=prefix or "/")
    try:
        counts = [int(c) for c in (connections or ",".join(map(str, DEFAULT_CONNECTIONS))).split(",") if c.strip()]
    except ValueError:
        raise ConfigError(f"{connections!r} is not a list of connection counts (e.g. 50 or 10,100)",
                          path="--connections") from None
    found_pid, found_by = find_process(pid, process_name, host, port)
    # Built as a suite so --repeat/--duration/--warmup/--threshold and their checks are the ones of a suite file;
    # a custom request's levels come from the same entry settings (its name is not a catalog scenario).
    # An https:// URL's levels are h1-tls ones: over TLS, as the report shows them; the catalog scenarios measured
    # over TLS are those a suite may measure over it (TLS_SCENARIOS), a custom request any.
    off_tls = [s for s in scenarios or [] if protocol == H1_TLS and s not in TLS_SCENARIOS]
    if off_tls:
        raise ConfigError(f"--scenario {off_tls[0]} with an https:// URL: over TLS netarena measures "
                          f"{', '.join(TLS_SCENARIOS)} and custom requests", path="--scenario",
                          hint=f"drop {off_tls[0]}, or measure it at the server's http:// URL")
    entries = [{"scenario": s, "connections": counts, "protocol": [protocol]} for s in scenarios or []]
    # A custom request's entry borrows the first plain HTTP scenario's name (no parameters, no service, no files).
    plain = next(s.name for s in registry.all() if s.is_http and not s.params and not s.service and not s.static_set)
    template = {"scenario": plain, "connections": counts, "protocol": [protocol]}
    try:
        base = Suite.model_validate({"name": "external", "description": f"netarena run --url {url}",
                                     "contestants": [name], "measure": entries or [template]})
    except Exception as exc:  # pydantic: e.g. --connections 0
        raise ConfigError(f"--connections {connections}: {exc.errors()[0]['msg']}", path="--connections") from None
    suite = overrides(base)
    request_entry = Measure.model_validate(dict(template, thresholds=suite.measure[0].thresholds))
    if not entries:
        suite = suite.model_copy(update={"measure": []})
    manifest = ExternalManifest(name=name, display_name=f"external server at {url}", url=url, pid=found_pid,
                                process=cmdline(found_pid), scenarios=list(scenarios or []) +
                                ([request.name] if request else []), request=request, protocols=[protocol])
    server = ExternalServer(manifest, origin, host, port, prefix, found_pid, request, allow_target,
                            tls=protocol == H1_TLS, cacert=cacert.absolute() if cacert is not None else None)
    plan = build_plan(suite, [server], None) if entries else _empty_plan(suite, server)
    if request is not None:
        plan.items += [Item(name, request.name, level) for level in levels_for(request_entry)]
    static_dir = cache_root() / "static" / f"v{STATIC_SET_VERSION}"
    if any(registry.get(s).static_set and registry.get(s).service is None for s in scenarios or []) \
            and not static_set_ready(static_dir):
        static_dir.mkdir(parents=True, exist_ok=True)
        build_static_files(static_dir)
    for scenario in manifest.scenarios:
        result = server.verify(scenario, static_dir, FIRST_CHECK_TIMEOUT_S)
        if not result.ok:
            if result.retryable:
                raise ConfigError(f"{url} does not answer ({scenario}: {result.reason})", path="--url",
                                  hint="is the server running and listening there?")
            raise ConfigError(f"{url} answers {scenario} wrongly: {result.reason}", path="--url",
                              hint="docs/scenarios.md defines each scenario's responses" if scenario in SCENARIOS
                              else "check the request and what it expects")
    return server, suite, plan, found_by


def _empty_plan(suite, server):
    return Plan(suite, [server], [])
