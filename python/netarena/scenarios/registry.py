"""The scenario registry: every module of this package that defines SCENARIO (an instance of Scenario) is one
catalog scenario, found when the registry is first asked. The rest of netarena asks the registry about a scenario
(its protocol, service, static set, suite parameters, load, checks) and never names one.

Adding a scenario: one module here (see hello.py for the smallest, mongo.py for one with a service and a
fixture) and the contestants' handlers (contestants/*/, python/netarena/templates/*/ for a self-contained one),
plus its row in docs/scenarios.md. tests/test_scenario_registry.py enforces that no other module names it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from .levels import Level
    from .load import LoadSpec
    from .checks import Check


class Scenario:
    """One catalog scenario. A module subclasses it, sets the class attributes and overrides the methods its
    scenario needs; the class docstring is the scenario's documentation string (`doc`)."""

    name: str = ""
    # Its place in the catalog's order (tables, lists, error messages): docs/scenarios.md's row order.
    order: int = 1000
    # "http": requests and responses over HTTP/1.1 (start.command); "tcp": a raw TCP byte stream (start.echo_command,
    # netarena-load's echo mode): no HTTP-only suite options (rates, pipeline, close, requests, find_max).
    protocol: str = "http"
    # The backing service it talks to (services/*/service.toml `provides`, the manifest's `needs`), or None. A
    # contestant may leave a service scenario out without a reason (it needs a driver, not a refusal).
    service: str | None = None
    # It reads the static file set (STATIC_SET_VERSION): a run generates the set before it is measured.
    static_set: bool = False
    # A suite may measure it over a protocol other than cleartext HTTP/1.1 (`protocol = ["h1", "h1-tls", "h2",
    # "h2c"]`): an HTTP scenario without a backing service, where the protocol's own cost shows.
    tls: bool = False
    # The request the Nagle check repeats on one connection (None: no Nagle check, and no `nagle_stall`).
    nagle_path: str | None = None
    # Its own suite [[measure]] fields: name -> (pydantic annotation, default), each allowed only with this scenario
    # (config.Measure gains them; config.check_suite refuses them elsewhere).
    params: dict[str, tuple[Any, Any]] = {}
    # Report wording: what its throughput counts, and what server CPU is given per.
    throughput_unit: str = "req/s"
    cost_unit: str = "request"
    cost_unit_short: str = "req"

    @property
    def doc(self) -> str:
        return inspect.cleandoc(type(self).__doc__ or "")

    @property
    def is_http(self) -> bool:
        return self.protocol == "http"

    def __repr__(self) -> str:
        return f"<scenario {self.name}>"

    # ---------------------------------------------------------------- suite parameters

    def check_entry(self, entry, fail) -> None:
        """Checks of a suite [[measure]] entry of this scenario beyond its fields' types; fail(field, message)."""

    def level_params(self, measure) -> list[tuple]:
        """The scenario part of each level of a [[measure]] entry: sorted (name, value) pairs, one tuple a level."""
        return [()]

    # ---------------------------------------------------------------- service and fixture

    def ensure_fixture(self, running, level: "Level", static_dir: "Path", say) -> None:
        """Make the service `running` (services.Running) hold what this level reads (beyond the service's own
        fixture, loaded when it starts); say(message) reports progress."""

    def service_url(self, level: "Level", url: str) -> str:
        """The service's address as the contestant is given it ({<service>_url}) for this level: the service's
        own URL unless a level parameter is a client setting carried by the address (mongo: mongo_pool)."""
        return url

    # ---------------------------------------------------------------- load

    # The suite entry's field behind each of this scenario's own netarena-load options (level_options), so a
    # refusal of one by netarena-load points at the line that set it.
    option_fields: dict[str, str] = {}

    def level_options(self, level: "Level") -> list[str]:
        """netarena-load options this scenario takes from a level beyond the generic ones (load.level_options):
        from the suite entry only, never from files, so netarena-load can check them when the suite is read."""
        return []

    def load(self, level: "Level", base: str, static_dir: "Path", http_args: list[str]) -> "LoadSpec":
        """The netarena-load request for a level on the server at `base` (scheme://host:port[/prefix]): an HTTP
        scenario's URL, arguments and expectation, `http_args` being the level's own options (load.http_level_args)."""
        raise NotImplementedError(f"{self.name}: no load")

    def count_during_load(self, level: "Level", service_url: str | None):
        """A count of the server's own work over the whole load, started just before netarena-load runs: an
        object whose finish(generator_document) returns what it found, `ok` and `reason` among it (a wrong
        count fails the measurement), or None when this scenario counts nothing (techempower: its queries)."""
        return None

    # ---------------------------------------------------------------- checks before the load

    def check_responses(self, http, static_dir: "Path") -> None:
        """The catalog's responses, checked before the load: http.run(path, check, expected_bytes) per request
        (checks.HttpChecks)."""

    def check_stream(self, port: int, host: str, timeout_s: float, checks: "list[Check]") -> None:
        """A tcp scenario's check of its byte stream, before the load (in place of check_responses)."""
        raise NotImplementedError(f"{self.name}: no stream check")

    def check_server(self, port: int, host: str, timeout_s: float, checks: "list[Check]", *,
                     concurrency_model: str | None, pool: int | None) -> None:
        """Checks of how the server behaves beyond its answers (sleep: concurrent sleeps overlap), after the
        responses and the Nagle check, unless only the responses are asked for."""


_REGISTRY: dict[str, Scenario] = {}
_LOADED = False
# The package's shared modules: everything else defining SCENARIO is a scenario.
_SHARED = {"registry", "checks", "levels", "load", "static_set", "socket_diag", "techempower"}


def register(scenario: Scenario) -> Scenario:
    """Add a scenario to the registry (the package's own modules are found on their own; a test may add one)."""
    if not scenario.name:
        raise ValueError(f"{scenario!r} has no name")
    if scenario.protocol not in ("http", "tcp"):
        raise ValueError(f"{scenario.name}: protocol {scenario.protocol!r} is not http or tcp")
    _REGISTRY[scenario.name] = scenario
    return scenario


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    package = __name__.rpartition(".")[0]
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name.startswith("_") or info.name in _SHARED:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        scenario = getattr(module, "SCENARIO", None)
        if isinstance(scenario, Scenario):
            _REGISTRY.setdefault(scenario.name, scenario)


def all() -> list[Scenario]:  # noqa: A001 - the registry's interface: registry.all()
    """Every scenario, in catalog order."""
    _load()
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.name))


def names() -> tuple[str, ...]:
    return tuple(s.name for s in all())


class UnknownScenario(KeyError, ValueError):
    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str) -> Scenario:
    """The scenario called `name`; UnknownScenario (a KeyError and a ValueError) for a name outside the catalog."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownScenario(f"unknown scenario {name!r}") from None


def find(name: str) -> Scenario | None:
    _load()
    return _REGISTRY.get(name)


class _Custom(Scenario):
    """A request outside the catalog (netarena run --url --request): HTTP, nothing else known."""

    name = "custom"


CUSTOM = _Custom()


def kind(name: str) -> Scenario:
    """The scenario called `name`, or for a name outside the catalog (a custom request's, a store's from another
    version) a plain HTTP one: what the report needs to word it."""
    return find(name) or CUSTOM


def services() -> tuple[str, ...]:
    """The backing services some scenario needs, in catalog order, once each."""
    return tuple(dict.fromkeys(s.service for s in all() if s.service))


def suite_params() -> dict[str, tuple[tuple[str, ...], tuple[Any, Any]]]:
    """Every scenario's own suite fields: field name -> (the scenarios that take it, (annotation, default)). Two
    scenarios share a field only by declaring the same spec object (TechEmpower's queries and updates: `queries`)."""
    out: dict[str, tuple[tuple[str, ...], tuple[Any, Any]]] = {}
    for scenario in all():
        for field, spec in scenario.params.items():
            if field in out and out[field][1] is not spec:
                raise ValueError(f"suite field {field!r} is declared by both {out[field][0][0]} and {scenario.name}")
            out[field] = ((*out[field][0], scenario.name) if field in out else (scenario.name,), spec)
    return out
