"""Names for JIT-compiled frames: perf reads them at `perf script` time from /tmp/perf-<pid>.map, one line per
piece of compiled code ("START SIZE NAME"), which the JIT of a profiled server writes (profile.ENV_BY_RUNTIME):
V8 (Node, Deno) and the BEAM as they compile, the JVM only when asked, by `jcmd <pid> Compiler.perfmap` (JDK
17 on). The maps are removed when the server stops (remove_perf_maps): the folded stacks keep the names, and
the raw perf data they would serve is not kept either.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import psutil

# A JIT's map of process `pid`: where it writes it and where perf looks for it.
PERF_MAP = "/tmp/perf-{pid}.map"
# How long jcmd may take to attach to a JVM and write its map.
JCMD_TIMEOUT_S = 30.0


def perf_map(pid: int) -> Path:
    return Path(PERF_MAP.format(pid=pid))


def write_perf_maps(pids: list[int]) -> list[str]:
    """Make the perf maps of the sampled processes ready for `perf script`; called after sampling ended, while
    the server still runs. Each JVM among `pids` writes its map now (jcmd Compiler.perfmap: the code cache as it
    is now); a map that another user wrote (the server's user) is given to this one, as perf ignores a map
    owned by neither the user reading it nor root. Returns what was done, one line per map, for the profile's
    document (`perf_maps`); a JVM whose map could not be written says why there, and its frames stay unnamed."""
    notes = []
    for pid in pids:
        path = perf_map(pid)
        try:
            exe = psutil.Process(pid).exe()
        except psutil.Error:
            exe = ""
        jvm = os.path.basename(exe) == "java"
        if jvm:
            # The jcmd beside the JVM's own java: the same JDK, whose attach protocol it speaks.
            jcmd = os.path.join(os.path.dirname(exe), "jcmd")
            try:
                done = subprocess.run([jcmd, str(pid), "Compiler.perfmap"], capture_output=True, text=True,
                                      timeout=JCMD_TIMEOUT_S)
                failure = None if done.returncode == 0 and path.is_file() else \
                    f"exited with code {done.returncode}: {(done.stdout + done.stderr).strip()[-300:]}"
            except (OSError, subprocess.SubprocessError) as exc:
                failure = str(exc)
            if failure is not None:
                notes.append(f"pid {pid} (JVM): no perf map, jcmd Compiler.perfmap failed: {failure}")
                continue
        if not path.is_file():
            continue
        try:
            if path.stat().st_uid not in (0, os.geteuid()):
                os.chown(path, os.geteuid(), -1)
            with path.open("rb") as f:
                symbols = sum(1 for _ in f)
        except OSError as exc:
            notes.append(f"pid {pid}: {path} cannot be read: {exc}")
            continue
        notes.append(f"pid {pid}: {symbols} symbols" + (" (JVM, jcmd Compiler.perfmap)" if jvm else ""))
    return notes


def remove_perf_maps(pids: list[int]) -> None:
    """Remove the perf maps of a server's processes (called as it stops): nothing of a profile is left in /tmp."""
    for pid in pids:
        try:
            perf_map(pid).unlink(missing_ok=True)
        except OSError:
            pass  # another user's file in a sticky /tmp when netarena is not root: not netarena's to remove


# A contestant's source files of JIT languages, for its own code's names (sampler.own_code).
_SOURCE_SUFFIXES = (".java", ".scala", ".kt", ".erl")
_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)", re.MULTILINE)


def own_jit_symbols(dirs: list[Path], runtime: str) -> tuple[str, ...]:
    """The prefixes of the contestant's own JIT frames, from its sources in `dirs`: on the JVM the packages its
    files declare ("netarena.netty."), on the BEAM its modules ("$netarena_http:"); () for other runtimes."""
    if runtime not in ("jvm", "erlang"):
        return ()
    found = set()
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs[:] = [s for s in subdirs if not s.startswith(".") and s != "node_modules"]
            for name in files:
                if not name.endswith(_SOURCE_SUFFIXES):
                    continue
                if runtime == "erlang":
                    if name.endswith(".erl"):
                        found.add(f"${name[:-4]}:")
                    continue
                try:
                    declared = _PACKAGE.search(Path(root, name).read_text(errors="replace"))
                except OSError:
                    continue
                if declared:
                    found.add(declared[1] + ".")
    return tuple(sorted(found))
