"""Where a server spends its time: `netarena run --profile` (or a suite's `profile = true`) adds one repeat per
level, sampled by the contestant's profiler during the measured phase and kept out of every figure
(docs/profiles.md).

- Which profiler: the manifest's [profile] table (`tool`, or `unsupported` with why), else the runtime's
  default (DEFAULT_BY_RUNTIME): py-spy for CPython, perf's software cpu-clock event for native code (C, Go,
  Rust) and for the JIT runtimes (JVM, Node, Deno, Erlang), whose profiled server gets the flags that make its
  JIT write a perf map (ENV_BY_RUNTIME, profile.jit). Runtimes whose frames neither tool can name here say why
  (UNSUPPORTED_BY_RUNTIME).
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
from dataclasses import dataclass, field
from pathlib import Path

# A profiled repeat's `discarded` (the store's column): out of every figure, because profiling it may have
# slowed the server, yet not noise either.
PROFILED = "profiled"
# Each tool samples this often (Hz): 99, not 100, so the samples do not beat with a 100 Hz timer of the server.
RATE_HZ = 99
# The runtimes each tool profiles by default; a manifest's [profile] table overrides.
DEFAULT_BY_RUNTIME = {"cpython": "py-spy", "go": "perf", "native": "perf", "jvm": "perf", "node": "perf",
                      "deno": "perf", "erlang": "perf"}
# What a JIT runtime's server needs in its environment for perf to name its JIT-compiled frames: set only in the
# profiled repeat's server (every repeat starts a server of its own), on top of its start.env; a manifest's
# [profile] env overrides a variable. The JIT writes /tmp/perf-<pid>.map (the JVM when asked: profile.jit), and
# frame pointers give perf whole call chains through JIT code.
ENV_BY_RUNTIME = {
    # Frame pointers in JIT-compiled code (C1, C2); the map is written by jcmd after sampling (profile.jit). A fixed
    # number of compiler threads: the JVM ends the extra ones it started when compiling calms down, and perf 6.1
    # (record -p) spins on a CPU once a thread it attached to has exited (129,680 wake-ups in a 5 s recording of
    # java-netty, against 4 with this flag), on the CPUs the generator shares with it.
    "jvm": {"JAVA_TOOL_OPTIONS": "-XX:+PreserveFramePointer -XX:-UseDynamicNumberOfCompilerThreads"},
    # V8 writes each compiled function, builtin and stub to the map as it makes it; with
    # --interpreted-frames-native-stack an interpreted function has a frame of its own, not the interpreter's.
    "node": {"NODE_OPTIONS": "--perf-basic-prof --interpreted-frames-native-stack"},
    "deno": {"DENO_V8_FLAGS": "--perf-basic-prof,--interpreted-frames-native-stack"},
    # The BEAM's JIT (OTP 25 on x86-64) writes its map and keeps frame pointers.
    "erlang": {"ERL_FLAGS": "+JPperf true"},
}
# Why the others have no default profiler: perf samples them, but their JIT-compiled or interpreted frames
# would show as addresses without names.
UNSUPPORTED_BY_RUNTIME = {
    "pypy": "py-spy reads only CPython's frames, and perf sees PyPy's JIT code as unnamed addresses (PyPy writes "
            "no perf map)",
    "ruby": "rbspy (a crate on crates.io) would name Ruby's frames, and 0.55.0 built with cargo install here "
            "samples Ruby 3.1; netarena does not install or run it yet",
}


@dataclass(frozen=True)
class ProfilePlan:
    """How one contestant is profiled: `tool`, or `unsupported` (why not); `env`: what the profiled repeat's
    server gets in its environment besides its own (ENV_BY_RUNTIME)."""

    tool: str | None
    unsupported: str | None = None
    env: dict = field(default_factory=dict)


def plan_for(manifest) -> ProfilePlan:
    """The manifest's [profile] table, else its runtime's default; the environment is the runtime's, each
    variable the table's `env` names replaced."""
    table = manifest.profile
    if table is not None and table.unsupported is not None:
        return ProfilePlan(None, table.unsupported)
    env = {**ENV_BY_RUNTIME.get(manifest.runtime, {}), **(table.env if table is not None else {})}
    tool = table.tool if table is not None and table.tool is not None else DEFAULT_BY_RUNTIME.get(manifest.runtime)
    if tool is not None:
        return ProfilePlan(tool, env=env)
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
