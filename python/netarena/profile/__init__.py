"""Where a server spends its time: `netarena run --profile` (or a suite's `profile = true`) adds one repeat per
level, sampled by the contestant's profiler during the measured phase and kept out of every figure
(docs/profiles.md).

- Which profiler: the manifest's [profile] table (`tool`, or `unsupported` with why), else the runtime's
  default (DEFAULT_BY_RUNTIME): py-spy for CPython, perf's software cpu-clock event for native code (C, Go,
  Rust). Runtimes whose frames neither tool can name here say why (UNSUPPORTED_BY_RUNTIME).
- The samples become folded stacks (profile.folded), stored with the measurement (`profile_json`,
  docs/store.md) with the split into own code / framework / runtime / kernel and the frames with the most
  self time.
- A profiler that is missing, fails or hangs costs the profile, never the measurement or the run: the document
  says why (`error`, or `unsupported`).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

# A profiled repeat's `discarded` (the store's column): out of every figure, because profiling it may have
# slowed the server, yet not noise either.
PROFILED = "profiled"
# Each tool samples this often (Hz): 99, not 100, so the samples do not beat with a 100 Hz timer of the server.
RATE_HZ = 99
# The runtimes each tool profiles by default; a manifest's [profile] table overrides.
DEFAULT_BY_RUNTIME = {"cpython": "py-spy", "go": "perf", "native": "perf"}
# Why the others have no default profiler yet: perf samples them, but their JIT-compiled or interpreted frames
# would show as addresses without names.
UNSUPPORTED_BY_RUNTIME = {
    "jvm": "the JVM's JIT-compiled frames need a perf map agent and frame pointers (-XX:+PreserveFramePointer); "
           "not wired up yet",
    "node": "Node's JIT-compiled frames need node --perf-basic-prof in the start command; not wired up yet",
    "deno": "Deno's JIT-compiled frames need --v8-flags=--perf-basic-prof in the start command; not wired up yet",
    "pypy": "py-spy reads only CPython's frames, and perf sees PyPy's JIT code as unnamed addresses",
    "erlang": "the BEAM's JIT frames need +JPperf true in the start command; not wired up yet",
    "ruby": "no Ruby sampling profiler is installed from this project's registries yet",
}


@dataclass(frozen=True)
class ProfilePlan:
    """How one contestant is profiled: `tool`, or `unsupported` (why not)."""

    tool: str | None
    unsupported: str | None = None


def plan_for(manifest) -> ProfilePlan:
    """The manifest's [profile] table, else its runtime's default."""
    if manifest.profile is not None:
        return ProfilePlan(manifest.profile.tool, manifest.profile.unsupported)
    if manifest.runtime in DEFAULT_BY_RUNTIME:
        return ProfilePlan(DEFAULT_BY_RUNTIME[manifest.runtime])
    return ProfilePlan(None, UNSUPPORTED_BY_RUNTIME.get(manifest.runtime, f"no profiler for the {manifest.runtime} "
                                                                          "runtime"))


# Each tool's executable may be named in the environment, when the one found is not the one to use (a perf
# built for another kernel, a py-spy outside netarena's environment).
TOOL_ENV = {"perf": "NETARENA_PERF", "py-spy": "NETARENA_PY_SPY"}


def tool_path(tool: str) -> str | None:
    """The tool's executable: the one its TOOL_ENV variable names, else py-spy from netarena's own environment
    (a pinned dependency) and perf from PATH."""
    named = os.environ.get(TOOL_ENV[tool])
    if named is not None:
        return named if os.path.isfile(named) and os.access(named, os.X_OK) else None
    if tool == "py-spy":
        beside = Path(sys.executable).parent / "py-spy"
        return str(beside) if beside.is_file() else shutil.which("py-spy")
    return shutil.which(tool)


def tool_missing(tool: str) -> str | None:
    """Why `tool` cannot run here, or None."""
    if tool_path(tool) is not None:
        return None
    named = os.environ.get(TOOL_ENV[tool])
    if named is not None:
        return f"{TOOL_ENV[tool]}={named} is not an executable file"
    if tool == "py-spy":
        return "py-spy is not installed (a dependency of netarena: `make setup` installs it)"
    return "perf is not installed (Debian: apt-get install linux-perf)"
