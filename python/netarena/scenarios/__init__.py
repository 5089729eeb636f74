"""The scenario catalog (docs/scenarios.md) as code: one module per scenario, found by the registry.

- registry.py: Scenario (what a scenario module defines) and the registry (get, find, all, names, kind);
- one module per scenario (echo, hello, bytes, json, static, sleep, mongo, gridfs, db, queries, fortunes,
  updates, cached_queries): its parameters and their checks, its service and fixture, its load, its checks
  before the load, its documentation;
- shared: techempower.py (what TechEmpower's database scenarios share), static_set.py (the static file set),
  levels.py (Level, levels_for), load.py (LoadSpec, the level's
  netarena-load options, load_spec), checks.py (verify: responses, backlog, Nagle; verify_request),
  socket_diag.py (listen backlogs, accept queues).

The names below are the catalog's public interface, as `from netarena.scenarios import X`.
"""

from __future__ import annotations

from . import registry
from .checks import (FETCH_MAX_BODY_BYTES, JSON_CONTENT_TYPE, MIN_LISTEN_BACKLOG, NAGLE_CHECK_REQUESTS,
                     NAGLE_MIN_STALL_MS, Check, Verification, verify, verify_request)
from .levels import FIND_MAX_DEFAULT_START_RATE, Level, levels_for
from .load import GENERATOR_IO_ARGS, SERVICE_LEVEL_SPIN_US, LoadSpec, level_options, load_spec, request_load_spec
from .socket_diag import accept_queue, listen_backlogs
from .static_set import (BYTES_FILL, BYTES_SIZES, STATIC_FILE_COUNT, STATIC_MAX_BYTES, STATIC_MEDIAN_BYTES,
                         STATIC_MIN_BYTES, STATIC_SEED, STATIC_SET_VERSION, STATIC_SIGMA, build_static_files,
                         sha256_hex, static_file_bytes, static_file_sizes, static_set_ready, url_list)

# Each scenario module's own constants, re-exported under the names they have always had.
from .bytes import DEFAULT_BYTES_SIZE  # noqa: E402
from .echo import ECHO_VERIFY_BYTES, echo_pattern  # noqa: E402
from .gridfs import DEFAULT_GRIDFS_PATH  # noqa: E402
from .hello import HELLO_BODY, HELLO_CONTENT_TYPE  # noqa: E402
from .json import JSON_BODY  # noqa: E402
from .mongo import DEFAULT_MONGO_DOC, MONGO_DOCS  # noqa: E402
from .sleep import (DEFAULT_SLEEP_MS, SLEEP_BODY, SLEEP_OVERLAP_CONNECTIONS, SLEEP_OVERLAP_MAX_BATCHES,  # noqa: E402
                    SLEEP_OVERLAP_MS, SLEEP_OVERLAP_ROUNDS, THREADED_MODELS, VERIFY_SLEEP_MS)
from .static import DEFAULT_STATIC_PATH, STATIC_VERIFY_PATHS  # noqa: E402

# The request each HTTP scenario's Nagle check repeats (sleep has none: it waits on purpose).
NAGLE_CHECK_PATHS = {s.name: s.nagle_path for s in registry.all() if s.nagle_path is not None}

__all__ = [
    "registry", "Check", "Verification", "verify", "verify_request", "Level", "levels_for",
    "LoadSpec", "level_options", "load_spec", "request_load_spec", "accept_queue", "listen_backlogs", "build_static_files",
    "static_file_bytes", "static_file_sizes", "static_set_ready", "url_list", "sha256_hex", "echo_pattern",
    "FETCH_MAX_BODY_BYTES", "JSON_CONTENT_TYPE", "MIN_LISTEN_BACKLOG", "NAGLE_CHECK_REQUESTS", "NAGLE_MIN_STALL_MS",
    "NAGLE_CHECK_PATHS", "FIND_MAX_DEFAULT_START_RATE", "GENERATOR_IO_ARGS", "SERVICE_LEVEL_SPIN_US", "BYTES_FILL",
    "BYTES_SIZES", "STATIC_FILE_COUNT", "STATIC_MAX_BYTES", "STATIC_MEDIAN_BYTES", "STATIC_MIN_BYTES", "STATIC_SEED",
    "STATIC_SET_VERSION", "STATIC_SIGMA", "STATIC_VERIFY_PATHS", "DEFAULT_BYTES_SIZE", "DEFAULT_SLEEP_MS",
    "DEFAULT_STATIC_PATH", "DEFAULT_MONGO_DOC", "DEFAULT_GRIDFS_PATH", "MONGO_DOCS", "ECHO_VERIFY_BYTES",
    "HELLO_BODY", "HELLO_CONTENT_TYPE", "JSON_BODY", "SLEEP_BODY", "SLEEP_OVERLAP_CONNECTIONS",
    "SLEEP_OVERLAP_MAX_BATCHES", "SLEEP_OVERLAP_MS", "SLEEP_OVERLAP_ROUNDS", "THREADED_MODELS", "VERIFY_SLEEP_MS",
]
