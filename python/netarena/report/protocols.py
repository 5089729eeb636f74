"""What a protocol costs each contestant: every group measured over another protocol than cleartext HTTP/1.1
(h1-tls, h2, h2c) set beside the same contestant's group at the same level over h1, as ratios.

A pair is made only where the two levels are the same in everything but the protocol (connections, workers,
parameters, generator options), so a ratio says what the protocol alone changed. Find-max searches and
connection sweeps are left out: their figures are a search's or a sweep's, not one level's.

The handshake-rate experiment (suites/tls-handshakes.toml) has a pairing of its own: a connection-rate sweep over
TLS making a full handshake on every connection, set beside the same sweep resuming sessions (tls_resume), step
by step (handshake_costs).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from ..scenarios.levels import Level
from ..tls import H1, is_tls
from .model import Group, rank_interval, rank_key


@dataclass
class ProtocolCost:
    """One contestant's figures at one level over `protocol`, against the same level over cleartext h1."""

    contestant: str
    scenario: str
    protocol: str
    level_key: str                  # the protocol's level
    base_key: str                   # the same level over h1
    requests_per_s: float | None
    base_requests_per_s: float | None
    server_cpu_us: float | None     # per request, median of the counted repeats
    base_server_cpu_us: float | None
    generator_cpu_us: float | None  # the generator's own cost per request, which the protocol changes too
    base_generator_cpu_us: float | None
    p99_us: float | None
    base_p99_us: float | None
    # What ranks the two groups (throughput, or p99 in the open loop) has overlapping intervals: the repeats
    # cannot tell the two protocols apart on it (the ranking's tie rule, applied across the protocol).
    within_noise: bool
    open_loop: bool
    ids: list[int]                  # the counted repeats of the protocol's group
    base_ids: list[int]             # and of the h1 group's

    @property
    def throughput_ratio(self) -> float | None:
        return _ratio(self.requests_per_s, self.base_requests_per_s)

    @property
    def server_cpu_ratio(self) -> float | None:
        return _ratio(self.server_cpu_us, self.base_server_cpu_us)

    @property
    def generator_cpu_ratio(self) -> float | None:
        return _ratio(self.generator_cpu_us, self.base_generator_cpu_us)

    @property
    def p99_ratio(self) -> float | None:
        return _ratio(self.p99_us, self.base_p99_us)


def _ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else value / base


def _comparable(g: Group) -> bool:
    return bool(g.level) and g.find_max is None and g.sweep is None and g.ok_ids != []


def protocol_costs(groups: list[Group]) -> list[ProtocolCost]:
    """Every group over a protocol other than h1 that has an h1 twin (same contestant, scenario and level but
    for the protocol), in the reports' order; groups without a twin are left out."""
    by_level = {(g.contestant, g.scenario, Level.from_dict(g.level).key): g for g in groups if _comparable(g)}
    out = []
    for g in sorted(groups, key=rank_key):
        if not _comparable(g):
            continue
        level = Level.from_dict(g.level)
        if level.protocol == H1:
            continue
        # An HTTP/2 level with several streams in flight has no twin (h1's level has one): not paired.
        base = by_level.get((g.contestant, g.scenario, replace(level, protocol=H1).key))
        if base is None:
            continue
        mine, theirs = rank_interval(g), rank_interval(base)
        out.append(ProtocolCost(
            contestant=g.contestant, scenario=g.scenario, protocol=level.protocol, level_key=g.level_key,
            base_key=base.level_key, requests_per_s=g.requests_per_s_median,
            base_requests_per_s=base.requests_per_s_median, server_cpu_us=g.server_cpu_us_median,
            base_server_cpu_us=base.server_cpu_us_median, generator_cpu_us=g.generator_cpu_us_median,
            base_generator_cpu_us=base.generator_cpu_us_median, p99_us=g.latency_p99_us,
            base_p99_us=base.latency_p99_us,
            within_noise=mine is not None and theirs is not None and mine.overlaps(theirs),
            open_loop=g.open_loop, ids=g.ok_ids, base_ids=base.ok_ids))
    return out


# What the section says each column is, in every renderer.
PROTOCOL_COST_NOTE = (
    "Each contestant's figures over a protocol divided by its own figures at the same level over cleartext "
    "HTTP/1.1 (h1): throughput × (below 1: slower), server CPU per request × and the generator's CPU per request × "
    "(above 1: each request costs more), p99 ×. Medians of the counted repeats. \"within noise\": the two "
    "intervals of what ranks the level (throughput; p99 in the open loop) overlap, so the repeats cannot tell the "
    "protocols apart on it. Find-max searches and sweeps are left out.")


@dataclass
class HandshakeStep:
    """One step (connection rate) of the two sweeps: the server's CPU per request and the p99 of each."""

    rate_per_s: float
    server_cpu_us: float | None
    resumed_server_cpu_us: float | None
    p99_us: float | None
    resumed_p99_us: float | None
    # The resumed sweep's step: its completed handshakes, and how many resumed a session (the generator's tls).
    resumed_handshakes: int | None = None
    resumed_sessions: int | None = None


@dataclass
class HandshakeCost:
    """One contestant's connection-rate sweep over TLS with a full handshake on every connection, beside the same
    sweep resuming sessions: what a full handshake costs the server over a resumed one."""

    contestant: str
    scenario: str
    protocol: str
    level_key: str          # full handshakes
    resumed_key: str        # the same level with tls_resume
    requests_per_conn: int | None
    steps: list[HandshakeStep]   # the rates both sweeps stepped through, in order
    id: int | None          # the measurement whose steps are shown (the median repeat's), of each sweep
    resumed_id: int | None

    @property
    def server_cpu_us(self) -> float | None:
        """The median over the steps of the server's CPU per request with full handshakes."""
        return _median(st.server_cpu_us for st in self.steps)

    @property
    def resumed_server_cpu_us(self) -> float | None:
        return _median(st.resumed_server_cpu_us for st in self.steps)

    @property
    def server_cpu_ratio(self) -> float | None:
        """Full over resumed: how many times a connection's server CPU a full handshake makes it cost."""
        return _ratio(self.server_cpu_us, self.resumed_server_cpu_us)

    @property
    def sessions_resumed(self) -> str:
        """How many of the resumed sweep's handshakes did resume, over its steps ("37 of 40"): a server that issues
        no tickets shows 0, and its two sweeps measure the same thing; "—" for documents that do not say."""
        known = [st for st in self.steps if st.resumed_handshakes is not None and st.resumed_sessions is not None]
        if not known:
            return "—"
        return f"{sum(st.resumed_sessions for st in known)} of {sum(st.resumed_handshakes for st in known)}"


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def handshake_costs(groups: list[Group]) -> list[HandshakeCost]:
    """Every connection-rate sweep over TLS without tls_resume whose twin with tls_resume (same contestant,
    scenario and level otherwise) was measured too, steps paired by their asked rate."""
    sweeps = {(g.contestant, g.scenario, Level.from_dict(g.level).key): g
              for g in groups if g.sweep is not None and g.level and g.ok_ids}
    out = []
    for g in sorted(sweeps.values(), key=lambda g: (g.scenario, g.level_key, g.contestant)):
        level = Level.from_dict(g.level)
        if not is_tls(level.protocol) or level.tls_resume:
            continue
        twin = sweeps.get((g.contestant, g.scenario, replace(level, tls_resume=True).key))
        if twin is None:
            continue
        resumed = {st["rate_per_s"]: st for st in twin.sweep["steps"]}
        steps = [HandshakeStep(rate_per_s=st["rate_per_s"], server_cpu_us=st.get("server_cpu_us"),
                               resumed_server_cpu_us=resumed[st["rate_per_s"]].get("server_cpu_us"),
                               p99_us=st.get("p99_us"), resumed_p99_us=resumed[st["rate_per_s"]].get("p99_us"),
                               resumed_handshakes=resumed[st["rate_per_s"]].get("handshakes"),
                               resumed_sessions=resumed[st["rate_per_s"]].get("resumed"))
                 for st in g.sweep["steps"] if st["rate_per_s"] in resumed]
        out.append(HandshakeCost(contestant=g.contestant, scenario=g.scenario, protocol=level.protocol,
                                 level_key=g.level_key, resumed_key=twin.level_key,
                                 requests_per_conn=g.sweep.get("requests_per_conn"), steps=steps,
                                 id=g.sweep.get("steps_measurement_id"), resumed_id=twin.sweep.get("steps_measurement_id")))
    return out


# What the handshake section says its columns are, in every renderer.
HANDSHAKE_COST_NOTE = (
    "Connection-rate sweeps over TLS, each connection making a full handshake, beside the same sweeps where each new "
    "connection resumes an earlier one's session (tls_resume): the server's CPU per request at each step (with one "
    "request per connection, per connection: the handshake is most of it), its median over the steps, and full ÷ "
    "resumed (above 1: a full handshake costs the server that many times a resumed one). Steps from the median "
    "repeat of each sweep. A server that issues no session tickets resumes nothing, and its two sweeps then agree "
    "(the column sessions resumed: of the resumed sweep's handshakes, how many did).")
