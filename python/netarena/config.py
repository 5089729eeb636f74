"""Schemas of contestant manifests and suites, and strict loading with errors that point at the fix.

Every file is parsed with tomllib, then validated by pydantic (extra="forbid"); every error is turned
into a ConfigError naming the file, the line (found by scanning the TOML text for the key), the field,
and the near miss when there is one.
"""

from __future__ import annotations

import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from .errors import ConfigError, did_you_mean
from .generator import GeneratorMissing, check_argv, find_generator, level_check_argv
from .scenarios import registry
from .scenarios.levels import conn_rate_steps, levels_for
from .scenarios.load import OPTION_FIELDS
from .scenarios.static_set import BYTES_SIZES
from .tls import H1, H1_TLS, PROTOCOLS, is_http2, is_tls, protocol_problem

# The catalog, from the scenario registry (python/netarena/scenarios/, one module per scenario).
SCENARIOS = registry.names()
HTTP_SCENARIOS = tuple(s.name for s in registry.all() if s.is_http)
# Scenarios that need a backing service (services/*/service.toml), by the name contestants give in `needs`.
# A contestant may leave them out without a reason under [unsupported]: not every framework has a driver,
# and leaving one out says only "not implemented".
SERVICE_SCENARIOS = {s.name: s.service for s in registry.all() if s.service is not None}
SERVICE_NAMES = registry.services()
PLACEHOLDERS = ("host", "port", "workers", "threads", "static_dir", "dir", "env_dir", "build_dir", "run_dir", "python",
                "java", "db_pool", "tls_cert", "tls_key", "protocol", *(f"{name}_url" for name in SERVICE_NAMES))
# The scenarios a level may measure over TLS and HTTP/2 (their modules' `tls`): the HTTP scenarios whose server
# has no backing service to wait for, where the protocol's own cost shows.
TLS_SCENARIOS = tuple(s.name for s in registry.all() if s.tls)
# {cargo_target_dir} (contestants.shared_cargo_target_dir) in the steps only: other contestants' builds write there,
# so a server runs the binary its steps copied into {build_dir}. {uv}: the uv that makes the venvs
# (python_env.uv_binary), for a step installing more into the venv; it is not on PATH when netarena runs from its
# own venv without activating it.
STEP_PLACEHOLDERS = ("static_dir", "dir", "env_dir", "build_dir", "cargo_target_dir", "python", "java", "uv")
# An optional part's steps may also name the parts the build ends up with ({install_parts}, see
# contestants._install_locked): one cargo build with every feature asked for, not the last part's alone.
PART_STEP_PLACEHOLDERS = (*STEP_PLACEHOLDERS, "install_parts")
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
# Debian's package-name rule. The names reach `apt-get install` as arguments: this keeps an option such as
# `-oAPT::Get::...` (which can run commands) out of a command netarena runs as root.
DEBIAN_PACKAGE_PATTERN = r"^[a-z0-9][a-z0-9+.-]+$"

ScenarioName = Literal[SCENARIOS]
ServiceName = Literal[SERVICE_NAMES]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------- contestant manifest


InstallSteps = list[Annotated[list[str], Field(min_length=1)]]


class OptionalInstall(Strict):
    """[install.optional.NAME]: build steps only some levels need (a database driver, a TLS library, an HTTP/2
    build), run after the base steps and only when a run or verification plans a level whose scenario is one of
    `scenarios` or whose protocol is one of `protocols`; the install cache records which parts were built, so a
    later plan that needs this one builds it once (docs/contestant-manifest.md)."""

    scenarios: list[ScenarioName] = []
    protocols: list[str] = []
    # Executables only this part's steps need (cargo to compile a Python package's Rust code): checked, with the
    # contestant's own `requires`, only when the part is asked for, so a run without it does not need them.
    requires: list[str] = []
    steps: Annotated[InstallSteps, Field(min_length=1)]
    # The part's steps build everything the base steps do and more (the same build with a cargo feature): when
    # the base is not built yet they run instead of it. A cargo feature changes the features of shared
    # dependencies (tokio, hyper, serde), so a feature build on top of a base build recompiles nearly all of it.
    instead_of_steps: bool = False


class Install(Strict):
    requires: list[str] = []
    debian: list[str] = []
    python_requirements: str | None = None
    python_runtime: Literal["cpython", "pypy"] = "cpython"
    # The least Java feature release it builds and runs with (21: virtual threads). netarena finds a JDK of it or
    # newer (netarena.jdk: JAVA_HOME, the java on PATH, /usr/lib/jvm) and gives it to the install steps and the
    # server (JAVA_HOME, PATH, {java}); none found: the contestant is skipped with what was found and the fix.
    java: Annotated[int, Field(ge=8, le=1000)] | None = None
    steps: InstallSteps = []
    optional: dict[str, OptionalInstall] = {}
    # Folders outside the contestant's that its build steps read (a crate shared by several contestants, named
    # relative to the contestant's folder): their files count in the build's stamp, so a change there rebuilds.
    build_inputs: list[str] = []


class Start(Strict):
    command: Annotated[list[str], Field(min_length=1)] | None = None
    echo_command: Annotated[list[str], Field(min_length=1)] | None = None
    stop_signal: Literal["SIGTERM", "SIGINT", "SIGQUIT", "SIGKILL"] = "SIGTERM"
    stop_timeout_s: Annotated[float, Field(gt=0, le=600)] = 5
    ready_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30
    # The least warm-up before this server's figures mean anything: a JIT still compiling after the suite's
    # short warm-up measures its compiler (java-netty: 16k req/s after 1 s, 90k after 6 s). A measurement's
    # warm-up is the larger of this and the suite's; the report marks where it was raised (badge WARM).
    warmup_min_s: Annotated[float, Field(ge=0, le=600)] = 0
    env: dict[str, str] = {}
    # A path (on {port}, loopback) where the server reports its own request counters, e.g. nginx's
    # stub_status. Across hosts it is read before and after the load and stored with the measurement, so
    # the server's count can be set against the generators' merged one (docs/many-machines.md).
    status_path: Annotated[str, Field(pattern=r"^/")] | None = None


class Workers(Strict):
    supported: bool = False
    # {workers} > 1 starts that many processes, each holding its own connections (pre-fork, SO_REUSEPORT);
    # false: threads or schedulers of one process, whose open-files limit bounds every connection.
    processes: bool = False
    how: str = ""


class Threads(Strict):
    """A thread-pool contestant's pool size, {threads} in start.command: a suite's `threads = [...]` axis sets
    it per level (seed 002's /sleep with 1 and 2 threads); a level without one gets `default`."""

    supported: bool = False
    # What {threads} is when a suite entry sets none; its meaning is the contestant's (python-threads: 0 = a
    # thread per connection, no pool), written in `how`.
    default: Annotated[int, Field(ge=0, le=65_536)] = 0
    how: str = ""


# How a server runs requests at once, as `concurrency_model` names it, and the family a reader chooses between
# (`netarena list`, docs/contestants.md and the report's filter group by it). Goroutines and greenlets are both
# green threads: the runtime multiplexes many cheap threads onto few OS threads, and a blocking call parks only
# the green thread. Java's virtual threads are that too, but people weigh them as a model of their own (the
# JVM's platform threads against its virtual ones), so they get their own group.
MODEL_GROUPS = {"event-loop": "event loop", "greenlets": "green threads", "goroutines": "green threads",
                "virtual-threads": "virtual threads", "threads": "threads", "processes": "multi-process",
                "actors": "actors"}
ConcurrencyModel = Literal[tuple(MODEL_GROUPS)]  # the manifest's allowed values: MODEL_GROUPS' keys


def model_group(concurrency_model: str | None) -> str:
    """The group a contestant's model belongs to; an unknown one (an external server's "-") is its own."""
    return MODEL_GROUPS.get(concurrency_model or "", concurrency_model or "unknown")


class Profile(Strict):
    """How `netarena run --profile` samples this contestant's server (netarena.profile, docs/profiles.md): its
    `tool`, or why it cannot be profiled here (`unsupported`), and `env`, variables the profiled repeat's server
    gets, each replacing the runtime's (profile.ENV_BY_RUNTIME: the flags that make a JIT write its perf map).
    Without the table, or without `tool`, the runtime's default applies (profile.DEFAULT_BY_RUNTIME)."""

    tool: Literal["py-spy", "perf"] | None = None
    unsupported: Annotated[str, Field(min_length=1)] | None = None
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str] = {}

    @model_validator(mode="after")
    def _one(self) -> "Profile":
        if self.tool is not None and self.unsupported is not None:
            raise ValueError("give either tool (\"py-spy\" or \"perf\") or unsupported (why), not both")
        if self.unsupported is not None and self.env:
            raise ValueError("env is for a profiled server: it has no use with unsupported")
        if self.tool is None and self.unsupported is None and not self.env:
            raise ValueError("give tool (\"py-spy\" or \"perf\"), unsupported (why) or env")
        return self


class Database(Strict):
    """How the contestant uses a database it queries per request (the postgresql service's scenarios,
    docs/techempower.md): `pool`, the connections its driver's pool holds per server process, given to it as
    {db_pool} in start.command / start.env and stated in the report; `pipelining`: its driver sends a
    connection's queries without waiting for each answer (the report badges its figures PIPE: TechEmpower's
    results split into tiers on it); `how`, where the pool is and what it counts."""

    pool: Annotated[int, Field(ge=1, le=10_000)]
    pipelining: bool = False
    how: Annotated[str, Field(min_length=1)]


class Manifest(Strict):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    display_name: Annotated[str, Field(min_length=1)]
    language: Literal["python", "javascript", "go", "erlang", "ruby", "java", "scala", "rust", "c"]
    runtime: Literal["cpython", "pypy", "node", "deno", "go", "erlang", "ruby", "jvm", "native"]
    framework: Annotated[str, Field(min_length=1)]
    framework_version: Annotated[str, Field(min_length=1)]
    concurrency_model: ConcurrencyModel
    scenarios: Annotated[list[ScenarioName], Field(min_length=1)]
    notes: str = ""
    unsupported: dict[str, str] = {}
    # Scenarios whose responses wait for the client's delayed ACK because the framework offers no way to set
    # TCP_NODELAY there, with the reason: verification measures the stall and passes instead of failing.
    nagle_stall: dict[str, str] = {}
    # Why the server closes every connection after one response (gunicorn's sync worker), when it does: the
    # catalog's keep-alive requirement is then waived for it, and the reason shown, instead of failing it.
    closes_connections: Annotated[str, Field(min_length=1)] | None = None
    install: Install = Install()
    start: Start
    workers: Workers = Workers()
    threads: Threads = Threads()
    # Backing services the contestant talks to (e.g. "mongo"): started by the orchestrator before it, their
    # address given as {mongo_url} in start.command / start.env.
    needs: list[ServiceName] = []
    # Scenarios besides static and gridfs whose answers the server reads from the static file set (nginx serves
    # /bytes/{n} as files): a run planning one of them generates the set first, as it does for static.
    serves_from_static_set: list[ScenarioName] = []
    # How --profile samples it; None: the runtime's default (netarena.profile).
    profile: Profile | None = None
    # Its database pool and whether it pipelines queries; required to claim a postgresql scenario.
    database: Database | None = None
    # The protocols it serves (tls.PROTOCOLS): "h1" cleartext HTTP/1.1, "h1-tls" HTTP/1.1 over TLS on {port}
    # when started with NETARENA_TLS_CERT / NETARENA_TLS_KEY ({tls_cert}, {tls_key}), "h2" HTTP/2 over TLS (ALPN
    # h2) with them, "h2c" HTTP/2 in cleartext (prior knowledge); NETARENA_PROTOCOL ({protocol}) says which. A
    # level over a protocol it does not list is skipped with that reason. Checked in load_manifest.
    protocols: Annotated[list[str], Field(min_length=1)] = [H1]


# ----------------------------------------------------------------------------- suite


class Cpus(Strict):
    server: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    generator: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    # Backing services (databases). Unset: the generator's CPUs, so the server keeps its CPUs alone (the
    # generator is nearly idle at database-bound rates, and its busy fraction is measured and flagged).
    services: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] | None = None


class FindMax(Strict):
    """A suite entry's `find_max`: the highest rate that meets a latency objective and an error budget
    (netarena-load --find-max --slo --max-errors; docs/load-generator.md)."""

    slo: str                     # pPERCENTILE<=DURATION on latency from the intended send time, "p99<=100ms"
    max_errors: str = "0.1%"     # errors / (successes + errors) allowed per step: "0.1%" or "0.001"


class _MeasureCommon(Strict):
    """A suite [[measure]] entry's fields that are not one scenario's own."""

    scenario: ScenarioName
    # Which of the suite's contestants this entry measures (names or globs), minus `exclude`; unset: all of them.
    # Seed 002 ran gunicorn's sync workers at 9 processes beside servers of one: two entries.
    contestants: Annotated[list[str], Field(min_length=1)] | None = None
    exclude: list[str] = []
    connections: Annotated[list[Annotated[int, Field(ge=1, le=1_000_000)]], Field(min_length=1)]
    workers: Annotated[list[Annotated[int, Field(ge=1, le=1024)]], Field(min_length=1)] = [1]
    # Thread-pool size per worker ({threads}) of contestants with [threads] supported = true; one level per value.
    # Unset: each contestant's own default. A contestant without a thread pool is skipped for these levels.
    threads: Annotated[list[Annotated[int, Field(ge=1, le=65_536)]], Field(min_length=1)] | None = None
    # What the requests travel over (tls.PROTOCOLS), one level per value: "h1" cleartext HTTP/1.1, "h1-tls"
    # HTTP/1.1 over TLS, "h2" / "h2c" HTTP/2 over TLS / in cleartext (the others than h1 for the TLS_SCENARIOS
    # only). A contestant that does not list one is skipped for its levels.
    protocol: Annotated[list[str], Field(min_length=1)] = [H1]
    # HTTP/2 streams in flight per connection (netarena-load --streams), one level per value, for the h2 and h2c
    # levels only (the entry's other protocols are measured at one request in flight per connection). Unset: 1.
    streams: Annotated[list[Annotated[int, Field(ge=1, le=10_000)]], Field(min_length=1)] | None = None
    # HTTP/2 flow control (netarena-load --h2-window): every stream's and the connection's receive window in bytes,
    # one level per value, for the h2 and h2c levels only. Unset: netarena-load's default (h2load's, 1 GiB - 1:
    # the server is never held back by the client). A small window makes a server wait for WINDOW_UPDATE frames.
    h2_window: Annotated[list[Annotated[int, Field(ge=1, le=2**31 - 1)]], Field(min_length=1)] | None = None
    # TLS session resumption (netarena-load --tls-resume), one level per value, for the levels over TLS (h1-tls,
    # h2) only: false, a full handshake on every connection; true, each connection resumes the session of an
    # earlier one of its generator thread. With conn_rate, the handshake-rate experiment. Unset: [false].
    tls_resume: Annotated[list[bool], Field(min_length=1)] | None = None
    # Each scenario's own parameters (its module's `params`: sizes, sleep_ms, static_path, doc, gridfs_files,
    # gridfs_path, echo_bytes, probe_interval_s, ...) are added below (Measure); each is only allowed with its
    # scenario (checked after validation).
    # netarena-load threads (-t). More than the generator has CPUs is capped to their number when the run is
    # planned (runner.cap_generator_threads), the asked number kept in the level and said in the run's output.
    generator_threads: Annotated[int, Field(ge=1, le=256)] = 1
    # Closed loop (weighttp -n, seed 001): stop after this many completed responses instead of after duration_s,
    # which becomes the time limit: a measurement that has not got them all by then fails (requests_not_reached)
    # instead of reporting a shorter run as if it were the asked one. Reported as "N requests in X s" beside req/s.
    requests: Annotated[int, Field(ge=1, le=1_000_000_000)] | None = None
    # How netarena-load drives its sockets for HTTP (docs/load-generator.md): auto (its default: uring-auto for
    # the closed loop where the kernel allows it, epoll otherwise and for open-loop rates, the result saying which
    # and why), epoll, io_uring, or (closed loop only) io_uring waiting for more completions up to 5% of the
    # fastest recent latency.
    generator_io: Literal["auto", "epoll", "uring", "uring-auto"] = "auto"
    pipeline: Annotated[int, Field(ge=1, le=1024)] = 1
    close: bool = False
    echo_chunk_bytes: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 32768
    # Open loop (HTTP scenarios): constant request rates (req/s, on the `connections` pool) or connection
    # rates (connections/s, each doing requests_per_conn requests, `connections` = most open at once);
    # one level per value. Latency then counts from each request's intended send time.
    rate: list[Annotated[float, Field(gt=0, le=10_000_000)]] | None = None
    conn_rate: list[Annotated[float, Field(gt=0, le=1_000_000)]] | None = None
    requests_per_conn: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    # conn_rate only (autobench's num_conn, seed 003): each rate is a step that opens exactly this many connections,
    # so it lasts connections_per_step / conn_rate (plus the drain of what is in flight, up to timeout_s). The
    # conn_rate values, evenly spaced and rising, become one sweep on one server start (netarena-load --steps
    # --conns-per-step): one level, whose steps the report lists.
    connections_per_step: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    arrival: Literal["uniform", "poisson"] = "uniform"
    # Open loop: netarena-load --spin-us, how long before each send the load thread stops sleeping and
    # busy-polls (unset: the generator's `auto`, which measures the timer and widens the window where the
    # timer is coarse for the rate; 20 µs for levels reading a database, which shares the generator's CPU).
    # Above the machine's timer wake-up lag the schedule lag p99 drops to a few µs, at up to a core per
    # generator thread (docs/load-generator.md).
    generator_spin_us: int | None = None  # netarena-load --spin-us: its range is the generator's
    # The highest rate that holds (seed 003's "requests per second handled without errors"): search it per
    # contestant, starting at this entry's one rate / conn_rate (default 100 req/s); each step lasts duration_s.
    find_max: FindMax | None = None
    # Per-entry timing, overriding the suite's (e.g. one long saturated flood in a suite of short ones).
    warmup_s: Annotated[float, Field(ge=0, le=3600)] | None = None
    duration_s: Annotated[float, Field(gt=0, le=86_400)] | None = None
    # Pass/fail gates on each measurement of this entry, as netarena-load --threshold takes them (its parser is the
    # only one: `netarena run` has the generator check them before anything starts), e.g. "p99<=5ms",
    # "errors<=0.1%", "rps>=50000". A failed one is stored with the measurement and makes `netarena run` exit 99.
    thresholds: list[Annotated[str, Field(min_length=1)]] = []


# A suite entry: the common fields above and every scenario's own (registry.suite_params).
Measure = create_model("Measure", __base__=_MeasureCommon, __module__=__name__,
                       **{name: spec for name, (_, spec) in registry.suite_params().items()})


class ServiceOptions(Strict):
    # FerretDB's storage: PostgreSQL (default, started by the orchestrator) or SQLite files.
    backend: Literal["postgresql", "sqlite"] | None = None


class Suite(Strict):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: str = ""
    contestants: Annotated[list[str], Field(min_length=1)] = ["*"]
    exclude: list[str] = []
    repeat: Annotated[int, Field(ge=1, le=1000)] = 3
    # Repeats until precise (netarena.precision): the largest half-width of the throughput median's interval,
    # as a percentage of the median ("3%"); `repeat` is then the minimum, `repeat_max` and
    # `precision_budget_s` (time spent measuring, from the run's start) the budget.
    precision: str | None = None
    repeat_max: Annotated[int, Field(ge=1, le=1000)] | None = None
    precision_budget_s: Annotated[float, Field(gt=0)] | None = None
    warmup_s: Annotated[float, Field(ge=0, le=3600)] = 1.0
    duration_s: Annotated[float, Field(gt=0, le=86_400)] = 3.0
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 5.0
    # Warm up each closed-loop measurement until successive windows' requests/s agree within this fraction
    # (netarena.warmup, docs/suites.md), warmup_s (raised to a contestant's start.warmup_min_s) being the
    # minimum and warmup_max_s the bound; unset: a fixed warm-up of warmup_s.
    warmup_until_steady: Annotated[float, Field(gt=0, lt=1)] | None = None
    warmup_max_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # false: a contestant's start.warmup_min_s does not raise this suite's warm-up. For a suite that checks
    # correctness (answers, verification, stopping), not figures: each measurement warmed up less than its
    # contestant asks is flagged warmup_below_min (badge COLD).
    apply_warmup_min: bool = True
    # "repeat": every repeat starts its own server, the repeats interleaved across contestants (A B C A B C), so
    # a figure's interval holds the differences between starts (JIT decisions, memory layout) and the machine's
    # drift. "level": one server serves all of a (contestant, scenario, level)'s repeats back to back (A A A B B
    # B), started, verified and warmed up (to start.warmup_min_s) once; each later repeat is verified again and
    # warmed up on new connections for warmup_s, at least a quarter of the first repeat's
    # (plan.REUSED_WARMUP_SHARE). Cheaper where starting and warming up cost most (the JIT runtimes), but its
    # interval shows one process's run-to-run noise only (docs/suites.md, "One server per level"). Only on one
    # machine: across hosts every repeat starts its server.
    server_per: Literal["repeat", "level"] = "repeat"
    time_budget_s: Annotated[float, Field(gt=0)] | None = None
    # How many extra measurements each (contestant, scenario, level) may take to replace ones the machine made
    # noisy (stats.noisy_reason: CPU steal, or the server or the generator waiting for a CPU); the noisy ones are
    # stored as discarded. Only within time_budget_s (a suite without one keeps and badges them): none that would
    # take the run past it. 0: badge them only.
    noisy_retries: Annotated[int, Field(ge=0, le=10)] = 2
    cpus: Cpus | None = None
    services: dict[ServiceName, ServiceOptions] = {}
    # Each netarena-load process's open-files limit, when lower than the hard limit it would have: a level
    # beyond it is spread over several processes (docs/load-generator.md, "Levels beyond one process").
    generator_open_files: Annotated[int, Field(ge=128, le=1 << 30)] | None = None
    # One more repeat per level, sampled by the contestant's profiler and kept out of every figure
    # (netarena.profile, docs/profiles.md); `netarena run --profile` sets it.
    profile: bool = False
    measure: Annotated[list[Measure], Field(min_length=1)]


# ----------------------------------------------------------------------------- custom request


class Request(Strict):
    """An endpoint outside the scenario catalog, measured by `netarena run --url` (--request FILE, or flags)."""

    # The name it is stored and reported under, in place of a scenario's.
    name: Annotated[str, Field(pattern=NAME_PATTERN)] = "custom"
    method: Annotated[str, Field(pattern=r"^[A-Z]+$")] = "GET"
    path: Annotated[str, Field(pattern=r"^/")] = "/"
    headers: list[Annotated[str, Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+:")]] = []
    body: str | None = None
    expect_status: Annotated[int, Field(ge=100, le=599)] | None = None
    expect_body: str | None = None


def load_request(path: Path) -> Request:
    data, text = read_toml(path)
    request: Request = _validate(Request, data, path, text)
    if request.name in SCENARIOS:
        raise ConfigError(f"'{request.name}' is a catalog scenario; name the custom request otherwise",
                          path=path, line=key_lines(text).get(("name",)), field="name")
    return request


# ----------------------------------------------------------------------------- loading


def read_toml(path: Path) -> tuple[dict, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", path=path) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        # tomllib ends its message with "(at line L, column C)".
        match = re.search(r"at line (\d+), column (\d+)", str(exc))
        line = int(match.group(1)) if match else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        col = f" column {match.group(2)}" if match else ""
        raise ConfigError(f"malformed TOML{col}: {msg}", path=path, line=line) from None


def key_lines(text: str) -> dict[tuple, int]:
    """Map each key path (as pydantic reports it: strings and array-of-table indexes) to its line.

    A deliberately small scanner: it understands [table], [[array]], `key =` and dotted keys, which is
    all the manifests and suites use. It only serves error messages, so a miss just drops the line.
    """
    lines: dict[tuple, int] = {}
    current: tuple = ()
    array_counts: dict[tuple, int] = {}

    def split_key(raw: str) -> tuple:
        return tuple(part.strip().strip('"').strip("'") for part in raw.split("."))

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[["):
            end = line.find("]]")
            table = split_key(line[2:end])
            array_counts[table] = array_counts.get(table, -1) + 1
            current = table + (array_counts[table],)
            lines.setdefault(current, lineno)
            lines.setdefault(table, lineno)
        elif line.startswith("["):
            end = line.find("]")
            current = split_key(line[1:end])
            lines.setdefault(current, lineno)
        elif "=" in line:
            key = split_key(line.split("=", 1)[0])
            lines.setdefault(current + key, lineno)
    return lines


def value_line(path: Path | str, key: str, value: str) -> int | None:
    """The line of a top-level key's array element (e.g. one name of `contestants = [...]`, which may span
    lines), else the key's own line; None when the file or the key is not found."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    start = key_lines(text).get((key,))
    if start is None:
        return None
    quoted = re.compile(r"[\"']" + re.escape(value) + r"[\"']")
    for lineno, raw in enumerate(text.splitlines()[start - 1:], start):
        if quoted.search(raw.split("#", 1)[0]):
            return lineno
        if "]" in raw.split("#", 1)[0]:
            break  # end of the array
    return start


def _line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    for cut in range(len(loc), 0, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None


def _unwrap(annotation):
    """The model class inside list[...] / dict[str, ...] / X | None / Annotated[...], if any."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (list, tuple):
        return _unwrap(typing.get_args(annotation)[0])
    if origin is dict:
        return _unwrap(typing.get_args(annotation)[1])
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _unwrap(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = _unwrap(field.annotation)
    return current


def format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _clean_loc(loc: tuple) -> tuple:
    # pydantic inserts the union branch / constraint names ("list[...]", "function-after") into locs.
    return tuple(p for p in loc if isinstance(p, int) or "[" not in p)


def validation_to_config_error(exc: ValidationError, model: type[BaseModel], path: Path, text: str) -> ConfigError:
    lines = key_lines(text)
    # A misspelt key also makes its real name "missing": report the misspelling, it explains both.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    loc = _clean_loc(tuple(err["loc"]))
    field = format_loc(loc)
    line = _line_for(lines, loc)
    kind = err["type"]
    value = err.get("input")
    hint = None
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        candidates = list(parent.model_fields) if parent else []
        hint = did_you_mean(str(loc[-1]), candidates)
        allowed = ", ".join(candidates)
        message = f"unknown key '{loc[-1]}'" + (f"; allowed keys here: {allowed}" if allowed else "")
        field = format_loc(loc[:-1]) or None
    elif kind == "missing":
        message = "required field is missing"
    elif kind in ("literal_error", "enum"):
        expected = re.findall(r"'([^']*)'|(\d+)", err.get("ctx", {}).get("expected", ""))
        options = [a or b for a, b in expected]
        hint = did_you_mean(str(value), options)
        message = f"{value!r} is not one of: {', '.join(options)}"
    else:
        message = f"{err['msg']} (got {value!r})" if not isinstance(value, dict) else err["msg"]
    if len(exc.errors()) > 1:
        message += f" [and {len(exc.errors()) - 1} more problem(s) in this file]"
    return ConfigError(message, path=path, line=line, field=field or None, hint=hint)


def _validate(model: type[BaseModel], data: dict, path: Path, text: str):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_to_config_error(exc, model, path, text) from None


def _placeholders(words, allowed, path, lines, loc) -> None:
    for word in words:
        for name in re.findall(r"\{([^{}]*)\}", word):
            if name not in allowed:
                raise ConfigError(
                    f"unknown placeholder '{{{name}}}' in {word!r}; known: "
                    + ", ".join("{" + p + "}" for p in allowed),
                    path=path,
                    line=_line_for(lines, loc),
                    field=format_loc(loc),
                    hint=did_you_mean(name, allowed),
                )


# Where a path in a command, an environment value or an install step ends: argument separators such as
# `--opt=PATH`, `A:B` lists (PYTHONPATH) and `a,b` lists.
_PATH_SEPARATORS = re.compile(r"[=:,;\s]")


def _manifest_paths(word: str) -> list[str]:
    """The paths a manifest word names in the contestant's tree: each part built on {dir}, or written relative
    with `./` or `../` (commands run in the contestant's folder). Paths under netarena's own placeholders
    ({env_dir}, {build_dir}, {static_dir}, ...) and bare command names found on PATH are not the manifest's."""
    found = []
    for part in _PATH_SEPARATORS.split(word):
        if "{dir}" in part:
            found.append(part[part.index("{dir}"):])
        elif part.startswith(("./", "../")) or part in (".", ".."):
            found.append(part)
        elif part.startswith("/") and not part.startswith("//"):  # "//host" is a URL's remainder after "scheme:"
            found.append(part)
    return found


def _check_manifest_paths(words, folder: Path, fail, loc: tuple) -> None:
    """A path in a manifest stays inside the contestants directory that holds it: the contestant's own folder,
    or a folder it shares code with there (a `_`-prefixed shared folder, or a sibling contestant whose server
    it runs under another runtime). `..` past that directory, an absolute path and a symlink leading out are
    refused: a manifest is run as root, and what it reaches should be what its directory holds."""
    root = folder.parent
    for word in words:
        for raw in _manifest_paths(word):
            if raw.startswith("/"):
                fail(loc, f"{word!r} names the absolute path {raw!r}, outside the contestant's folder",
                     "name files relative to the contestant's folder ({dir}/... or ./...), or a program by its "
                     "name on PATH")
            relative = raw.replace("{dir}", ".", 1) if raw.startswith("{dir}") else raw
            if "{" in relative:
                continue  # another placeholder inside the path: netarena's own folder, checked by _placeholders
            resolved = (folder / relative).resolve()
            if not resolved.is_relative_to(root.resolve()):
                fail(loc, f"{word!r} resolves to {resolved}, outside the contestants directory {root}",
                     "keep what the contestant runs in its own folder (or a shared _folder beside it)")


# ----------------------------------------------------------------------------- frameworks that are not contestants

# contestants/not-here.toml: frameworks a user would look for that are not contestants, each with why (a runtime
# that cannot run here, packages no registry of the project serves). `netarena list` and docs/contestants.md
# show them, so the reason is where the contestants are listed.
NOT_HERE_FILE = "not-here.toml"


class NotHereEntry(Strict):
    framework: Annotated[str, Field(min_length=1)]
    language: Annotated[str, Field(min_length=1)]
    reason: Annotated[str, Field(min_length=1)]


class NotHere(Strict):
    framework: Annotated[list[NotHereEntry], Field(default_factory=list)]


def load_not_here(contestants_dir: Path) -> list[NotHereEntry]:
    """The frameworks contestants_dir says are not contestants, and why; none when it has no such file."""
    path = contestants_dir / NOT_HERE_FILE
    if not path.is_file():
        return []
    data, text = read_toml(path)
    return list(_validate(NotHere, data, path, text).framework)


def load_manifest(path: Path) -> Manifest:
    data, text = read_toml(path)
    manifest: Manifest = _validate(Manifest, data, path, text)
    lines = key_lines(text)

    def fail(loc: tuple, message: str, hint: str | None = None):
        raise ConfigError(message, path=path, line=_line_for(lines, loc), field=format_loc(loc), hint=hint)

    folder = path.parent.name
    if manifest.name != folder:
        fail(("name",), f"'{manifest.name}' must equal the folder name '{folder}'", "rename one of them")
    if len(set(manifest.scenarios)) != len(manifest.scenarios):
        fail(("scenarios",), "a scenario is listed twice")
    for key in manifest.unsupported:
        if key not in SCENARIOS:
            fail(("unsupported", key), f"'{key}' is not a catalog scenario ({', '.join(SCENARIOS)})",
                 did_you_mean(key, SCENARIOS))
        if key in manifest.scenarios:
            fail(("unsupported", key), f"'{key}' is both implemented (scenarios) and unsupported")
    # Scenarios without a Nagle check (echo has no request/response rhythm, sleep waits on purpose) take no nagle_stall.
    nagle_checked = [s for s in manifest.scenarios if registry.get(s).nagle_path is not None]
    for key in manifest.nagle_stall:
        if key not in nagle_checked:
            fail(("nagle_stall", key), f"'{key}' is not one of this contestant's Nagle-checked scenarios "
                 f"({', '.join(nagle_checked)})", did_you_mean(key, nagle_checked))
    missing = [s for s in SCENARIOS if s not in manifest.scenarios and s not in manifest.unsupported
               and s not in SERVICE_SCENARIOS]
    if missing:
        fail(("unsupported",), "every catalog scenario not implemented needs a reason under [unsupported]; "
             f"missing: {', '.join(missing)}", f'add e.g. {missing[0]} = "why it is not implemented"')
    claims_http = any(s in HTTP_SCENARIOS for s in manifest.scenarios)
    if claims_http and manifest.start.command is None:
        fail(("start", "command"), "required when an HTTP scenario is listed in scenarios")
    claims_tcp = [s for s in manifest.scenarios if not registry.get(s).is_http]
    tcp_names = " or ".join(f"'{s.name}'" for s in registry.all() if not s.is_http)
    if claims_tcp and manifest.start.echo_command is None:
        fail(("start", "echo_command"), f"required when {tcp_names} is listed in scenarios")
    if not claims_tcp and manifest.start.echo_command is not None:
        fail(("start", "echo_command"), f"given but {tcp_names} is not in scenarios")
    if manifest.install.python_requirements is None and "python_runtime" in data.get("install", {}):
        fail(("install", "python_runtime"), "only meaningful with install.python_requirements")
    for index, package in enumerate(manifest.install.debian):
        if not re.fullmatch(DEBIAN_PACKAGE_PATTERN, package):
            fail(("install", "debian", index), f"{package!r} is not a Debian package name (lower-case letters, "
                 "digits, '+', '-' and '.', starting with a letter or digit; it is passed to apt-get as it is)",
                 'give the package\'s name only, e.g. "nginx"')
    if manifest.install.python_requirements is not None:
        folder = path.parent.resolve()
        req = (path.parent / manifest.install.python_requirements).resolve()
        if not req.is_relative_to(folder):
            fail(("install", "python_requirements"), f"{manifest.install.python_requirements!r} resolves to {req}, "
                 f"outside the contestant's folder {folder}",
                 "keep the requirements file in the contestant's folder and name it relative to it")
        if not req.is_file():
            fail(("install", "python_requirements"), f"file not found: {req}")
    for index, folder in enumerate(manifest.install.build_inputs):
        if not (path.parent / folder).is_dir():
            fail(("install", "build_inputs", index), f"{folder!r} is not a folder (resolves to "
                 f"{(path.parent / folder).resolve()})", "name a folder relative to the contestant's folder")
    for scenario in manifest.scenarios:
        service = SERVICE_SCENARIOS.get(scenario)
        if service is not None and service not in manifest.needs:
            fail(("needs",), f"scenario '{scenario}' talks to the '{service}' service: add needs = [\"{service}\"]")
    for scenario in manifest.serves_from_static_set:
        if scenario not in manifest.scenarios:
            fail(("serves_from_static_set",), f"'{scenario}' is not one of this contestant's scenarios "
                 f"{manifest.scenarios}", "list only scenarios it implements")
    for service in manifest.needs:
        words = [*(manifest.start.command or []), *manifest.start.env.values()]
        if not any("{" + service + "_url}" in w for w in words):
            fail(("start", "command"), f"needs '{service}' but neither start.command nor start.env uses "
                 f"{{{service}_url}}, the address the orchestrator gives it")
    _check_protocols(manifest.protocols, lambda message, hint=None: fail(("protocols",), message, hint))
    if H1 not in manifest.protocols:
        fail(("protocols",), f"protocols {manifest.protocols} leaves out \"{H1}\": every scenario is measured over "
             "it, TLS only where a suite asks", f'list "{H1}" first, e.g. protocols = ["{H1}", "{H1_TLS}"]')
    uses_tls = [w for w in [*(manifest.start.command or []), *manifest.start.env.values()]
                if "{tls_cert}" in w or "{tls_key}" in w]
    if uses_tls and not any(is_tls(p) for p in manifest.protocols):
        fail(("protocols",), f"start uses {{tls_cert}} / {{tls_key}} ({uses_tls[0]!r}) but protocols lists no "
             f"protocol over TLS (\"{H1_TLS}\", \"h2\")", f'add "{H1_TLS}" to protocols, or leave the placeholders out')
    if manifest.workers.supported and not manifest.workers.how.strip():
        fail(("workers", "how"), "say how several workers run (required when workers.supported = true)")
    contestant_folder = path.parent.resolve()
    _check_manifest_paths(manifest.start.command or [], contestant_folder, fail, ("start", "command"))
    _check_manifest_paths(manifest.start.echo_command or [], contestant_folder, fail, ("start", "echo_command"))
    for key, value in manifest.start.env.items():
        _check_manifest_paths([value], contestant_folder, fail, ("start", "env", key))
    for index, step in enumerate(manifest.install.steps):
        _check_manifest_paths(step, contestant_folder, fail, ("install", "steps", index))
    for part, optional in manifest.install.optional.items():
        if not re.fullmatch(NAME_PATTERN, part):
            fail(("install", "optional", part), f"{part!r} is not a part name (lower-case letters, digits and '-', "
                 "starting with a letter or digit)", 'name it after what it builds, e.g. [install.optional.mongo]')
        if not optional.scenarios and not optional.protocols:
            fail(("install", "optional", part), "names neither scenarios nor protocols: the part would never be built",
                 'say which levels need it, e.g. scenarios = ["mongo"] or protocols = ["h1-tls"]')
        for protocol in optional.protocols:
            if protocol not in manifest.protocols:
                fail(("install", "optional", part, "protocols"), f"'{protocol}' is not one of this contestant's "
                     f"protocols ({', '.join(manifest.protocols)}): the part would never be built",
                     did_you_mean(protocol, manifest.protocols))
        for scenario in optional.scenarios:
            if scenario not in manifest.scenarios:
                fail(("install", "optional", part, "scenarios"), f"'{scenario}' is not one of this contestant's "
                     f"scenarios ({', '.join(manifest.scenarios)}): the part would never be built",
                     did_you_mean(scenario, manifest.scenarios))
        for index, step in enumerate(optional.steps):
            _check_manifest_paths(step, contestant_folder, fail, ("install", "optional", part, "steps", index))
    uses_threads = any("{threads}" in w for w in [*(manifest.start.command or []), *(manifest.start.echo_command or []),
                                                  *manifest.start.env.values()])
    if manifest.threads.supported and not manifest.threads.how.strip():
        fail(("threads", "how"), "say what the thread pool is and what the default means (required when "
             "threads.supported = true)")
    if manifest.threads.supported and not uses_threads:
        fail(("threads", "supported"), "threads.supported = true but neither start.command nor start.env uses "
             "{threads}, the pool size the orchestrator gives it")
    if uses_threads and not manifest.threads.supported:
        fail(("start", "command"), "{threads} is used but [threads] supported is not true",
             'add [threads] with supported = true, default = N and how = "..."')
    uses_pool = any("{db_pool}" in w for w in [*(manifest.start.command or []), *manifest.start.env.values()])
    if uses_pool and manifest.database is None:
        fail(("start", "command"), "{db_pool} is used but the manifest has no [database] table",
             'add [database] with pool = N and how = "..."')
    if manifest.database is not None and not uses_pool:
        fail(("database", "pool"), "[database] pool is set but neither start.command nor start.env uses {db_pool}, "
             "the pool size the orchestrator gives it")
    claims_pg = [name for name in manifest.scenarios if SERVICE_SCENARIOS.get(name) == "postgresql"]
    if claims_pg and manifest.database is None:
        fail(("scenarios",), f"{', '.join(claims_pg)} query PostgreSQL: the manifest must say its connection pool",
             'add [database] with pool = N (per server process), how = "..." and pipelining = true if its driver '
             "pipelines queries")
    _placeholders(manifest.start.command or [], PLACEHOLDERS, path, lines, ("start", "command"))
    _placeholders(manifest.start.echo_command or [], PLACEHOLDERS, path, lines, ("start", "echo_command"))
    for key, value in manifest.start.env.items():
        _placeholders([value], PLACEHOLDERS, path, lines, ("start", "env", key))
    for index, step in enumerate(manifest.install.steps):
        _placeholders(step, STEP_PLACEHOLDERS, path, lines, ("install", "steps", index))
    for part, optional in manifest.install.optional.items():
        for index, step in enumerate(optional.steps):
            _placeholders(step, PART_STEP_PLACEHOLDERS, path, lines, ("install", "optional", part, "steps", index))
    return manifest


def load_suite(path: Path) -> tuple[Suite, dict]:
    """The validated suite and its raw TOML data (stored with the run so --resume replays it)."""
    data, text = read_toml(path)
    suite: Suite = _validate(Suite, data, path, text)
    check_suite(suite, path, text)
    return suite, data


def _check_precision(suite: Suite, fail) -> None:
    from .precision import DEFAULT_REPEAT_MAX, MIN_REPEATS, parse_precision

    if suite.precision is None:
        for name in ("repeat_max", "precision_budget_s"):
            if getattr(suite, name) is not None:
                fail((name,), f"{name} is the budget of a precision target: give precision too (e.g. "
                     "precision = \"3%\"), or leave it out and set repeat")
        return
    try:
        parse_precision(suite.precision)
    except ValueError as exc:
        fail(("precision",), str(exc))
    if suite.repeat < MIN_REPEATS:
        fail(("repeat",), f"with precision, repeat is the minimum number of repeats and must be at least "
             f"{MIN_REPEATS} (got {suite.repeat})")
    repeat_max = suite.repeat_max or max(DEFAULT_REPEAT_MAX, suite.repeat)
    if repeat_max < suite.repeat:
        fail(("repeat_max",), f"repeat_max ({repeat_max}) is below repeat ({suite.repeat}), the minimum")


def check_suite(suite: Suite, path: Path | str, text: str = "") -> None:
    lines = key_lines(text)

    def fail(loc: tuple, message: str, hint: str | None = None):
        raise ConfigError(message, path=path, line=_line_for(lines, loc), field=format_loc(loc), hint=hint)

    _check_precision(suite, fail)

    # Each scenario's own parameters (its module's `params`) are allowed with it only.
    only = {param: scenarios for param, (scenarios, _) in registry.suite_params().items()}
    for index, entry in enumerate(suite.measure):
        definition = registry.get(entry.scenario)
        for param, scenarios in only.items():
            if getattr(entry, param) is not None and entry.scenario not in scenarios:
                allowed = " or ".join(f'"{s}"' for s in scenarios)
                fail(("measure", index, param), f"only allowed with scenario = {allowed} "
                     f"(this entry is \"{entry.scenario}\")")
        # The suite's own rules: fields netarena-load never sees in the combination given (levels_for and
        # level_options drop them), and the suite's choices beyond the generator's (close stays closed-loop).
        # Everything a level passes to netarena-load is checked by it below (_check_loads).
        if not definition.is_http:
            for name in HTTP_ONLY_FIELDS:
                if getattr(entry, name) != type(entry).model_fields[name].default:
                    fail(("measure", index, name), f"{name} applies to HTTP scenarios, not {entry.scenario} (its "
                         f"load is sized by connections, duration_s and its own parameters: "
                         f"{', '.join(definition.params) or 'none'})")
        open_loop = entry.rate is not None or entry.conn_rate is not None or entry.find_max is not None
        if entry.find_max is not None:
            _check_find_max(entry, ("measure", index), fail)
        if entry.rate is not None and entry.conn_rate is not None:
            fail(("measure", index, "conn_rate"), "give either rate (requests/s) or conn_rate (connections/s), "
                 "not both")
        if open_loop and entry.close:
            fail(("measure", index, "close"), "close describes the closed loop; with conn_rate use "
                 "requests_per_conn instead")
        if entry.connections_per_step is not None:
            _check_connections_per_step(entry, lambda field, message: fail(("measure", index, field), message))
        if entry.requests_per_conn != 1 and entry.conn_rate is None:
            fail(("measure", index, "requests_per_conn"), "only meaningful with conn_rate")
        if entry.arrival != "uniform" and not open_loop:
            fail(("measure", index, "arrival"), "only meaningful with rate or conn_rate")
        _check_protocols(entry.protocol, lambda message, hint=None: fail(("measure", index, "protocol"), message, hint))
        if entry.protocol != [H1] and entry.scenario not in TLS_SCENARIOS:
            fail(("measure", index, "protocol"), f"protocol applies to the scenarios {', '.join(TLS_SCENARIOS)}, not "
                 f"{entry.scenario}: it is measured over h1 only", 'remove protocol or set protocol = ["h1"]')
        over_http2 = [p for p in entry.protocol if is_http2(p)]
        if entry.tls_resume is not None and not any(is_tls(p) for p in entry.protocol):
            fail(("measure", index, "tls_resume"), f"tls_resume applies to levels over TLS, and protocol "
                 f"{entry.protocol} has none", 'add "h1-tls" (or "h2") to protocol, or remove tls_resume')
        if entry.tls_resume is not None and len(set(entry.tls_resume)) != len(entry.tls_resume):
            fail(("measure", index, "tls_resume"), f"a value is listed twice: {entry.tls_resume}",
                 "list each once, e.g. tls_resume = [false, true]")
        for axis in ("streams", "h2_window"):
            values = getattr(entry, axis)
            if values is not None and not over_http2:
                fail(("measure", index, axis), f"{axis} applies to HTTP/2 levels, and protocol {entry.protocol} "
                     "has none", f'add "h2" or "h2c" to protocol, or remove {axis}')
            if values is not None and len(set(values)) != len(values):
                fail(("measure", index, axis), f"a value is listed twice: {values}", "list each value once")
        definition.check_entry(entry, lambda field, message: fail(("measure", index, field), message))
    if suite.cpus is not None:
        overlap = set(suite.cpus.server) & set(suite.cpus.generator)
        if overlap:
            fail(("cpus",), f"server and generator CPU sets overlap on {sorted(overlap)}; "
                 "disjoint sets keep the generator from measuring itself")
        if suite.cpus.services and set(suite.cpus.services) & set(suite.cpus.server):
            fail(("cpus", "services"), f"services and server CPU sets overlap on "
                 f"{sorted(set(suite.cpus.services) & set(suite.cpus.server))}; the database would take the "
                 "server's CPU time and its figures with it")
    _check_loads(suite, fail)


def protocols_for(manifest: Manifest, scenario: str) -> list[str]:
    """The protocols `netarena verify` checks a contestant's scenario over: each its manifest lists that the
    scenario may be measured over (h1 always, the others for the TLS_SCENARIOS)."""
    return [p for p in manifest.protocols if p == H1 or scenario in TLS_SCENARIOS]


def _check_protocols(names: list[str], fail) -> None:
    """A manifest's `protocols` or a suite entry's `protocol`: known names, once each."""
    for name in names:
        problem = protocol_problem(name)
        if problem is not None:
            fail(problem, did_you_mean(name, list(PROTOCOLS)))
    if len(set(names)) != len(names):
        fail(f"a protocol is listed twice: {names}", f"list each once, e.g. {list(dict.fromkeys(names))}")


# An echo entry's fields that only HTTP loads take: refused there, since netarena-load never sees them.
HTTP_ONLY_FIELDS = ("close", "pipeline", "rate", "conn_rate", "find_max", "requests", "requests_per_conn",
                    "generator_spin_us", "arrival")


def _check_loads(suite: Suite, fail) -> None:
    """Every level's load as netarena-load would run it, checked by netarena-load itself (`check`, sending
    nothing): the rules of its options are its own (which go together, their ranges, the threshold expressions),
    so a suite is refused for the reason a run would be, at the line of the field that set the option. Limits
    (open files, ports) are the plan's: a level beyond one process is spread over several."""
    try:
        binary = find_generator()
    except GeneratorMissing as exc:
        fail(("measure",), f"netarena-load checks the suite's loads and is missing: {exc}")
    checked: set[tuple] = set()
    for index, entry in enumerate(suite.measure):
        definition = registry.get(entry.scenario)
        for level in levels_for(entry):
            argv = level_check_argv(binary, entry.scenario, level, timeout_s=suite.timeout_s,
                                    warmup_s=suite.warmup_s if level.warmup_s is None else level.warmup_s,
                                    duration_s=suite.duration_s if level.duration_s is None else level.duration_s)
            if tuple(argv) in checked:
                continue
            checked.add(tuple(argv))
            _, refused = check_argv(argv, skip_limits=True)
            if refused:
                field = _option_field(refused, {**OPTION_FIELDS, **definition.option_fields})
                if field is None:
                    loc: tuple = ("measure", index)
                elif field in ("timeout_s", "warmup_s", "duration_s") and getattr(entry, field, None) is None:
                    loc = (field,)  # the suite's own value
                else:
                    loc = ("measure", index, *field.split("."))
                fail(loc, f"netarena-load refuses this entry's load: {refused}",
                     f"the load it was given: netarena-load {' '.join(a for a in argv[1:] if a != '--json')}")


def _option_field(message: str, fields: dict[str, str]) -> str | None:
    """The suite field behind the first netarena-load option the message names (None: it names none we set)."""
    for option in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", message):
        if option in fields:
            return fields[option]
    return None


def _check_connections_per_step(entry: Measure, fail) -> None:
    if entry.conn_rate is None:
        fail("connections_per_step", "only meaningful with conn_rate: each connection rate is a step that opens "
             "this many connections")
    if entry.find_max is not None:
        fail("connections_per_step", "a find_max search's steps last duration_s each; remove one of them")
    if conn_rate_steps(entry.conn_rate) is None:
        fail("conn_rate", "with connections_per_step the rates are one sweep (netarena-load --steps LOW:HIGH:STEP): "
             "give them evenly spaced and rising, e.g. [50, 100, 150, 200]")


def _check_find_max(entry: Measure, loc: tuple, fail) -> None:
    # The objective and the error budget are netarena-load's --slo and --max-errors: it checks them (_check_loads).
    for name in ("rate", "conn_rate"):
        values = getattr(entry, name)
        if values is not None and len(values) != 1:
            fail(loc + (name,), f"with find_max, {name} is where the search starts: give one value "
                 f"(got {len(values)}), e.g. {name} = [{values[0]:g}]")


def check_names(requested: list[str], known: list[str], what: str, source: str) -> None:
    """Exact names (not patterns) must exist; a typo is an error with the near miss."""
    for name in requested:
        if any(ch in name for ch in "*?[") or name in known:
            continue
        hint = did_you_mean(name, known)
        raise ConfigError(
            f"unknown {what} '{name}'; known: {', '.join(known) if known else '(none)'}",
            path=source,
            hint=hint,
        )


__all__ = [
    "SCENARIOS", "HTTP_SCENARIOS", "SERVICE_SCENARIOS", "TLS_SCENARIOS", "protocols_for", "BYTES_SIZES", "PLACEHOLDERS", "MODEL_GROUPS", "model_group",
    "NotHereEntry", "load_not_here", "Manifest", "Suite",
    "Measure", "FindMax", "Cpus", "Threads", "Request", "load_manifest", "load_request", "load_suite", "check_suite",
    "check_names", "key_lines", "value_line",
]
