"""Folded stacks: the one form every profiler's samples are turned into (one line per distinct stack, frames root
first joined by ";", a space and the sample count, as flame graph tools read them), and what the report shows of
them: the frames with the most samples as the leaf (self time), and the split of the samples into the server's
own code, its framework, the language runtime and the kernel.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

# The report's table of frames by self time: this many.
TOP_SELF = 15
# The parts a sample's CPU is counted for (frame_category), with the words every output shows for them.
CATEGORIES = {"own": "own code", "framework": "framework", "runtime": "runtime", "kernel": "kernel",
              "unknown": "unknown"}

# A py-spy frame: "function (path:line)"; its root frame per process: 'process 123:"command line"'.
_PY_FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*):(?P<line>-?\d+)\)$")
# A sample's first line in `perf script -F pid,tid,...`.
_PERF_HEADER = re.compile(r"^\s*(?P<pid>\d+)/(?P<tid>\d+)\s*$")
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


def perf_script_to_stacks(text: str, pids: set[int] | None = None) -> Counter:
    """`perf script -F pid,tid,ip,sym,dso` output as {stack: samples}: each sample is a "PID/TID" line and its
    call chain leaf first, one "ADDRESS SYMBOL (DSO)" line per frame. Kernel frames get KERNEL_SUFFIX; a frame
    without a symbol is its DSO's name in brackets. Only samples of `pids`, when given."""
    stacks: Counter = Counter()
    pid, frames = None, []

    def flush() -> None:
        if pid is not None and (pids is None or pid in pids) and frames:
            stacks[tuple(reversed(frames))] += 1

    for line in text.splitlines():
        if not line.strip():
            flush()
            pid, frames = None, []
            continue
        header = _PERF_HEADER.match(line)
        if header:  # a sample's header: "PID/TID", right-aligned (leading spaces for short PIDs)
            flush()
            pid, frames = int(header["pid"]), []
            continue
        parts = line.strip().split(" ", 1)
        if len(parts) < 2:
            frames.append("[unknown]")
            continue
        rest = parts[1]
        symbol, _, dso = rest.rpartition(" (")
        dso = dso.rstrip(")") if _ else ""
        symbol = (symbol if _ else rest).strip() or "[unknown]"
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
        frames.append(symbol)
    flush()
    return stacks


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


def summarize(stacks: Counter, tool: str, own_dirs: list[Path], own_symbols: tuple[str, ...] = ()) -> dict:
    """The samples' split by the leaf frame's category, and the TOP_SELF leaf frames with their shares."""
    total = sum(stacks.values())
    categories = dict.fromkeys(CATEGORIES, 0)
    leaves: Counter = Counter()
    for stack, count in stacks.items():
        leaves[stack[-1]] += count
        categories[frame_category(stack[-1], tool, own_dirs, own_symbols)] += count
    top = [{"frame": frame, "samples": count, "share": round(count / total, 4)}
           for frame, count in sorted(leaves.items(), key=lambda item: (-item[1], item[0]))[:TOP_SELF]]
    return {"categories": categories, "top_self": top}
