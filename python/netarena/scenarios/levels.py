"""Load levels: one suite [[measure]] entry expanded into the points of its load matrix (Level)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..tls import H1, is_http2, is_tls
from . import registry


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
    # What the requests travel over (tls.PROTOCOLS): "h1" cleartext HTTP/1.1, "h1-tls" HTTP/1.1 over TLS, "h2" and
    # "h2c" HTTP/2 over TLS and in cleartext. In the key only when not h1, so the keys stored before the axis
    # existed still name the same levels.
    protocol: str = H1
    # HTTP/2 streams in flight per connection (netarena-load --streams; h2 and h2c only). In the key only when
    # not 1, as netarena-load's default.
    streams: int = 1
    # HTTP/2 receive window in bytes (netarena-load --h2-window; h2 and h2c only). In the key only when set;
    # None: netarena-load's default.
    h2_window: int | None = None
    # TLS session resumption (netarena-load --tls-resume; levels over TLS only): each new connection resumes an
    # earlier one's session instead of a full handshake. In the key only when on.
    tls_resume: bool = False

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
        if self.protocol != H1:
            parts.append(("protocol", f"protocol={self.protocol}"))
        if self.streams != 1:
            parts.append(("streams", f"streams={self.streams}"))
        if self.h2_window is not None:
            parts.append(("h2_window", f"h2_window={self.h2_window}"))
        if self.tls_resume:
            parts.append(("tls_resume", "tls_resume"))
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


def conn_rate_steps(rates: list[float]) -> tuple[float, float, float] | None:
    """(low, high, step) of evenly spaced, rising rates (netarena-load --steps LOW:HIGH:STEP); None otherwise.
    One rate is a sweep of one step."""
    if len(rates) == 1:
        return rates[0], rates[0], rates[0]
    step = rates[1] - rates[0]
    if step <= 0 or any(abs((b - a) - step) > 1e-9 * max(1.0, step) for a, b in zip(rates, rates[1:])):
        return None
    return rates[0], rates[-1], step


def levels_for(measure) -> list[Level]:
    """Expand one suite [[measure]] entry into its levels (every combination, in a stable order)."""
    params = registry.get(measure.scenario).level_params(measure)
    # Open-loop rates multiply the levels like any other parameter. A find-max search starts at its one rate
    # (validated in config.check_suite), by default the suite's: --rate FIND_MAX_DEFAULT_START_RATE.
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
              probe_interval_s=getattr(measure, "probe_interval_s", None), warmup_s=measure.warmup_s, duration_s=measure.duration_s,
              arrival=measure.arrival, generator_spin_us=measure.generator_spin_us,
              find_max_slo=find_max.slo if find_max else None, find_max_errors=find_max.max_errors if find_max else None,
              thresholds=tuple(measure.thresholds), requests=getattr(measure, "requests", None), protocol=proto,
              streams=streams, h2_window=window, tls_resume=resume)
        for p in params for proto in getattr(measure, "protocol", [H1])
        # The streams axis multiplies the HTTP/2 levels only: an HTTP/1.1 level has one request in flight.
        for streams in ((getattr(measure, "streams", None) or [1]) if is_http2(proto) else [1])
        for window in ((getattr(measure, "h2_window", None) or [None]) if is_http2(proto) else [None])
        # And tls_resume the levels over TLS only: a cleartext connection has no session to resume.
        for resume in ((getattr(measure, "tls_resume", None) or [False]) if is_tls(proto) else [False])
        for w in measure.workers for th in (getattr(measure, "threads", None) or [None])
        for c in measure.connections
    ]


# Where a find-max search starts without a rate in its suite entry: the suite's own default (netarena-load has
# none: it searches from the --rate or --conn-rate it is given).
FIND_MAX_DEFAULT_START_RATE = 100
