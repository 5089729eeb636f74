"""Folded stacks: the one form every profiler's samples are turned into (one line per distinct stack, frames root
first joined by ";", a space and the sample count, as flame graph tools read them), and what the report shows of
them: the frames with the most samples as the leaf (self time), and the split of the samples into the server's
own code, its framework, the language runtime and the kernel.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# The report's table of frames by self time: this many.
TOP_SELF = 15
# The parts a sample's CPU is counted for (frame_category), with the words every output shows for them.
CATEGORIES = {"own": "own code", "framework": "framework", "runtime": "runtime", "kernel": "kernel",
              "unknown": "unknown"}

# A py-spy frame: "function (path:line)"; its root frame per process: 'process 123:"command line"'.
_PY_FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*):(?P<line>-?\d+)\)$")
# A record's first line in `perf script -F pid,tid,time,event,ip,sym,dso --show-switch-events`: "PID/TID TIME: "
# then the event's name and a colon (a sample, its call chain on the lines below) or "PERF_RECORD_SWITCH IN|OUT".
_PERF_HEADER = re.compile(r"^\s*(?P<pid>\d+)/(?P<tid>\d+)\s+(?P<time>\d+\.\d+):\s*(?P<what>.*?)\s*$")
# perf's kernel frames carry this suffix in folded stacks (as Brendan Gregg's stackcollapse-perf writes them).
KERNEL_SUFFIX = "_[k]"
# A JIT-compiled frame named by its process's perf map (/tmp/perf-<pid>.map, profile.jit) is "NAME (JIT)".
JIT_DSO = "JIT"
_PERF_MAP = re.compile(r"^perf-\d+\.map$")


def to_text(stacks: Counter) -> str:
    """Folded text, the most sampled stacks first (ties in stack order, so the same samples give the same text)."""
    return "".join(f"{';'.join(stack)} {count}\n" for stack, count in
                   sorted(stacks.items(), key=lambda item: (-item[1], item[0])))


def parse(text: str | None, skip_bad: bool = False) -> Counter:
    """Folded text back into {stack tuple: samples}; a line that is not `frames count` is refused, or skipped
    with `skip_bad` (a report reading a store someone edited must still render)."""
    stacks: Counter = Counter()
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        frames, _, count = line.rstrip().rpartition(" ")
        if not frames or not count.isdigit():
            if skip_bad:
                continue
            raise ValueError(f"line {number} is not folded stacks ('frame;frame COUNT'): {line[:120]!r}")
        stacks[tuple(frames.split(";"))] += int(count)
    return stacks


# What perf records (profile.sampler): the on-CPU samples' event, and the event whose every occurrence is a
# thread leaving its CPU (its call chain is where it stopped), with the switch records that say when it came back.
ON_CPU_EVENT = "cpu-clock"
OFF_CPU_EVENT = "context-switches"
# The off-CPU view's root frame for a thread taken off its CPU while it could still run (preempted): it waited
# for a CPU, not for something it asked for.
PREEMPTED = "[waiting for a CPU: preempted]"
UNKNOWN_FRAME = "[unknown] ([unknown])"


@dataclass
class Views:
    """A profile's two views as folded stacks: `cpu` (samples on a CPU) and `idle` (time off it, in the same
    unit: one count is 1/rate_hz s of one thread's time), or None when the tool sees no off-CPU time."""

    cpu: Counter
    idle: Counter | None


def perf_script_views(text: str, pids: set[int] | None = None, rate_hz: int = 99,
                      window: tuple[float, float] | None = None) -> Views:
    """`perf script -F pid,tid,time,event,ip,sym,dso --show-switch-events` output as the two views. An
    ON_CPU_EVENT sample is one count of its call chain (leaf first, one "ADDRESS SYMBOL (DSO)" line a frame) in
    `cpu`. An OFF_CPU_EVENT sample is a thread leaving its CPU: its call chain gets the time until that thread's
    next "PERF_RECORD_SWITCH IN" in `idle` (converted to counts of 1/rate_hz s per stack, rounded); a switch
    out marked "preempt" puts PREEMPTED under it. Kernel frames get KERNEL_SUFFIX; a frame without a symbol is
    its DSO's name in brackets. Only records of `pids`, when given; with `window` (from, to: seconds on the
    recording's clock), only on-CPU samples inside it and the part of each time away that falls inside it."""
    begin, end = window if window is not None else (float("-inf"), float("inf"))
    cpu: Counter = Counter()
    idle_s: dict[tuple, float] = {}
    # Per thread: the stack it left its CPU with, when, and whether it was preempted (its switch-out record,
    # which perf writes just after the sample, says so).
    away: dict[int, list] = {}
    sample: tuple[str, int, float] | None = None  # (event, tid, time) of the sample whose frames are being read
    frames: list[str] = []

    def flush() -> None:
        if sample is None or not frames:
            return
        event, tid, time = sample
        # Code without frame pointers unwinds into a run of unnamed frames whose length varies from sample to
        # sample: one "[unknown]" stands for the run, so the same call path is one stack.
        stack = tuple(f for i, f in enumerate(reversed(frames))
                      if not (f == UNKNOWN_FRAME and i and frames[len(frames) - i] == UNKNOWN_FRAME))
        if event == ON_CPU_EVENT:
            if begin <= time < end:
                cpu[stack] += 1
        elif event == OFF_CPU_EVENT:
            away[tid] = [stack, time, False]

    for line in text.splitlines():
        header = _PERF_HEADER.match(line)
        if header is None:
            if sample is not None and line.strip():
                frames.append(_perf_frame(line))
            continue
        flush()
        sample, frames = None, []
        if pids is not None and int(header["pid"]) not in pids:
            continue
        tid, time, what = int(header["tid"]), float(header["time"]), header["what"]
        if what.startswith("PERF_RECORD_SWITCH"):
            words = what.split()
            if len(words) > 1 and words[1] == "OUT" and "preempt" in words and tid in away:
                away[tid][2] = True
            elif len(words) > 1 and words[1] == "IN" and tid in away:
                stack, left, preempted = away.pop(tid)
                stack = (PREEMPTED, *stack) if preempted else stack
                away_s = min(time, end) - max(left, begin)
                if away_s > 0:
                    idle_s[stack] = idle_s.get(stack, 0.0) + away_s
            continue
        event = what.rstrip(":").split("/", 1)[0].split(":", 1)[0].strip()
        sample = (event, tid, time)
    flush()
    idle = Counter({stack: round(seconds * rate_hz) for stack, seconds in idle_s.items()
                    if round(seconds * rate_hz) > 0})
    return Views(cpu, idle)


def _perf_frame(line: str) -> str:
    """One call-chain line ("ADDRESS SYMBOL+OFFSET (DSO)") as a frame's name."""
    parts = line.strip().split(" ", 1)
    if len(parts) < 2:
        return "[unknown]"
    rest = parts[1]
    symbol, found, dso = rest.rpartition(" (")
    dso = dso.rstrip(")") if found else ""
    symbol = (symbol if found else rest).strip() or "[unknown]"
    symbol = re.sub(r"\+0x[0-9a-f]+$", "", symbol)
    if _PERF_MAP.match(os.path.basename(dso)):
        dso = JIT_DSO  # one name for every process's JIT code, so the same function merges across processes
    if symbol == "[unknown]" and dso and dso != "[unknown]":
        symbol = f"[{os.path.basename(dso)}]"
        if dso != "[kernel.kallsyms]":
            dso = ""  # named by its DSO already: "[libfoo.so]", an unknown frame (frame_category)
    if dso == "[kernel.kallsyms]":
        symbol += KERNEL_SUFFIX
    elif dso:
        symbol += f" ({os.path.basename(dso)})"
    return symbol


def off_cpu(all_threads: Counter, on_cpu: Counter) -> Counter:
    """py-spy's off-CPU view: every thread's samples (`--idle`) less the GIL holder's (`--gil`), stack by stack,
    from two samplers at the same rate over the same window. What is left are the threads not running Python:
    blocked in a system call, sleeping, or waiting for the GIL. Two samplings differ by chance, so a stack's
    difference is clipped at zero."""
    return Counter({stack: count - on_cpu.get(stack, 0) for stack, count in all_threads.items()
                    if count > on_cpu.get(stack, 0)})


def py_spy_stacks(text: str, own_dirs: list[Path]) -> Counter:
    """py-spy's raw output (folded, with --full-filenames) with each frame's path shortened for reading and
    marked with its part: "[own] " and a file of the contestant's own folders relative to them, "[pkg] " and a
    package's path from its site-packages folder on, "[stdlib] " and the standard library's from its
    lib/pythonX.Y folder on. The root frame py-spy adds per process is dropped."""
    stacks: Counter = Counter()
    for stack, count in parse(text).items():
        frames = [_short_py_frame(f, own_dirs) for f in stack if not f.startswith("process ")]
        if frames:
            stacks[tuple(frames)] += count
    return stacks


def _short_py_frame(frame: str, own_dirs: list[Path]) -> str:
    match = _PY_FRAME.match(frame)
    if not match:
        return frame
    path = match["path"]
    category = py_path_category(path, own_dirs)
    if category == "own":
        for d in own_dirs:
            if path.startswith(str(d) + os.sep):
                path = f"[own] {os.path.relpath(path, d.parent)}"
                break
    elif "-packages/" in path:
        path = "[pkg] " + path.split("-packages/", 1)[1]
    elif re.search(r"/lib/python3\.\d+/", path):
        path = "[stdlib] " + re.split(r"/lib/python3\.\d+/", path, 1)[1]
    return f"{match['function']} ({path}:{match['line']})"


def py_path_category(path: str, own_dirs: list[Path]) -> str:
    if path.startswith("[own] ") or any(path.startswith(str(d) + os.sep) for d in own_dirs):
        return "own"
    if path.startswith("[pkg] ") or "-packages/" in path:
        return "framework"
    if path.startswith("[stdlib] ") or re.search(r"/lib/python3\.\d+/", path) or path.startswith("<frozen"):
        return "runtime"
    return "unknown"


# Native code (perf): shared libraries of the C runtime, the dynamic loader and the language runtimes.
_RUNTIME_LIBRARIES = re.compile(r"\((libc|libpthread|libm|ld-linux[^)]*|libstdc\+\+|libgcc_s|libpython[^)]*|"
                                r"libjvm|libuv|libnode|\[vdso\])[^)]*\)$")
# The executables of the JIT runtimes (their C++ and builtins: V8, the BEAM, the JVM's launcher).
_RUNTIME_EXECUTABLES = re.compile(r"\((node|deno|beam\.smp|java)\)$")
# A V8 function in a perf map: "JS:*name path:line:column" ("*" optimised, "~" interpreted or baseline; older
# V8 says LazyCompile or Function); V8's other code (Builtin:, Stub:, BytecodeHandler:, RegExp:) is runtime.
_V8_FUNCTION = re.compile(r"^(JS|LazyCompile|Function|Script):")
# A JVM method in a perf map: "RETURN-TYPE package.Class.method(ARGUMENTS)"; the JVM's other code (Interpreter,
# StubRoutines, adapters) is runtime. A lambda's hidden class has "/0x…" in its name.
_JAVA_METHOD = re.compile(r"^(?:[\w.$\[\]<>?, ]+ )?(?P<name>[\w$]+(?:\.[\w$<>/]+)+)\(")
# The JDK's packages: the JVM's runtime.
_JDK_PACKAGES = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
# Symbols of a language's runtime inside the executable: Go's runtime, Rust's standard library.
_RUNTIME_SYMBOLS = re.compile(r"^(runtime\.|internal/|runtime/|std::|core::|alloc::|<std::|<core::|<alloc::|"
                              r"__rust|_start|__libc)")


def frame_category(frame: str, tool: str, own_dirs: list[Path], own_symbols: tuple[str, ...]) -> str:
    """Which part of the server a frame belongs to: "own" (the contestant's code), "framework" (the libraries
    it is built on, the web framework first), "runtime" (the interpreter, the language runtime, the C library),
    "kernel", or "unknown". A heuristic by path (py-spy) or by symbol and library (perf; JIT frames by the
    function's file, package or module): docs/profiles.md."""
    if tool == "py-spy":
        match = _PY_FRAME.match(frame)
        return py_path_category(match["path"], own_dirs) if match else "unknown"
    if frame.endswith(KERNEL_SUFFIX):
        return "kernel"
    if frame.startswith("[unknown]") or frame.startswith("[") and frame.endswith("]"):
        # No symbol: only its library or executable is known, which may still be a runtime's (Deno ships its
        # executable stripped: its Rust and V8 frames are "[deno]").
        library = f"({frame[1:-1]})"
        return "runtime" if _RUNTIME_LIBRARIES.search(library) or _RUNTIME_EXECUTABLES.search(library) else "unknown"
    symbol = frame.rsplit(" (", 1)[0]
    if frame.endswith(f" ({JIT_DSO})"):
        return _jit_category(symbol, own_dirs, own_symbols)
    if _RUNTIME_LIBRARIES.search(frame) or _RUNTIME_EXECUTABLES.search(frame) or _RUNTIME_SYMBOLS.match(symbol):
        return "runtime"
    if own_symbols and symbol.startswith(own_symbols):
        return "own"
    return "framework"


def _jit_category(symbol: str, own_dirs: list[Path], own_symbols: tuple[str, ...]) -> str:
    """A JIT frame's part: V8's by the function's file (node:, ext: the runtime's own JavaScript; node_modules a
    package's; the contestant's folders its own), the JVM's by the method's package (the JDK's is runtime, the
    contestant's own, any other a framework's), the BEAM's by module ("$module:function/arity": the
    contestant's modules own, every other one, OTP's, runtime)."""
    if _V8_FUNCTION.match(symbol):
        path = symbol.rsplit(" ", 1)[-1].removeprefix("file://")
        if path.startswith(("node:", "ext:")):
            return "runtime"
        if "/node_modules/" in path:
            return "framework"
        if any(path.startswith(str(d) + os.sep) for d in own_dirs):
            return "own"
        return "unknown"
    if symbol.startswith("$"):
        return "own" if own_symbols and symbol.startswith(own_symbols) else "runtime"
    method = _JAVA_METHOD.match(symbol)
    if method:
        name = method["name"]
        if name.startswith(_JDK_PACKAGES):
            return "runtime"
        return "own" if own_symbols and name.startswith(own_symbols) else "framework"
    return "runtime"


def self_samples(stacks: Counter) -> Counter:
    """Each frame's self time: the samples in which it was the leaf of the stack."""
    leaves: Counter = Counter()
    for stack, count in stacks.items():
        leaves[stack[-1]] += count
    return leaves


def summarize(stacks: Counter, tool: str, own_dirs: list[Path], own_symbols: tuple[str, ...] = ()) -> dict:
    """The samples' split by the leaf frame's category, and the TOP_SELF leaf frames with their shares."""
    total = sum(stacks.values())
    categories = dict.fromkeys(CATEGORIES, 0)
    leaves = self_samples(stacks)
    for frame, count in leaves.items():
        categories[frame_category(frame, tool, own_dirs, own_symbols)] += count
    top = [{"frame": frame, "samples": count, "share": round(count / total, 4)}
           for frame, count in sorted(leaves.items(), key=lambda item: (-item[1], item[0]))[:TOP_SELF]]
    return {"categories": categories, "top_self": top}
