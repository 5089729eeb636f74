"""What a protocol costs each contestant: every group measured over another protocol than cleartext HTTP/1.1
(h1-tls, h2, h2c) set beside the same contestant's group at the same level over h1, as ratios.

A pair is made only where the two levels are the same in everything but the protocol (connections, workers,
parameters, generator options), so a ratio says what the protocol alone changed. Find-max searches and
connection sweeps are left out: their figures are a search's or a sweep's, not one level's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..scenarios.levels import Level
from ..tls import H1
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
