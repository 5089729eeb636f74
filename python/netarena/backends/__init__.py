"""Measurement backends: each turns one planned measurement (base.MeasureRequest) into one plain record (a dict,
stored as it is), with the verdict of base.conclude.

- real: start the contestant on this machine, verify it, run netarena-load against it, stop it.
- mock: deterministic generator-shaped results without starting anything (fast CLI tests).
- external: the real backend's load and monitoring against a server netarena did not start (`run --url`).
- cluster: the server on one host, the load spread over others (`run --cluster`), through Dask;
  cluster_tasks holds what runs on those hosts.

A backend may import the layers below it (the plan, contestants, scenarios, ...), never the runner or the
command line (tests/test_layering.py).
"""

from __future__ import annotations

from .external import ExternalBackend
from .mock import MockBackend
from .real import RealBackend


def make_backend(name: str, **kwargs):
    if name == "mock":
        return MockBackend(**kwargs)
    if name == "real":
        return RealBackend(**kwargs)
    if name == "external":
        return ExternalBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r} (real | mock | external)")
