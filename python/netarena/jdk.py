"""The JDK a contestant asks for with `[install] java = N`: the first one of Java N or newer found here.

Where to look, in order: `JAVA_HOME` when it qualifies, else the `java` on PATH, else the JDKs under
/usr/lib/jvm (Debian's packages put theirs there, and so do Adoptium's), the newest first. A JDK's version is its
`release` file's JAVA_VERSION (every JDK since 9 ships one), else what its `bin/java -version` says.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

JVM_DIR = Path("/usr/lib/jvm")
VERSION_TIMEOUT_S = 30


@dataclass(frozen=True)
class Jdk:
    home: Path
    version: str  # as the JDK states it: "25.0.3", "1.8.0_392"

    @property
    def feature(self) -> int:
        """Java's feature release: 25 for "25.0.3", 8 for "1.8.0_392" (the numbering before Java 9)."""
        parts = self.version_key
        return parts[1] if parts[0] == 1 and len(parts) > 1 else parts[0]

    @property
    def version_key(self) -> list[int]:
        """Its version's numbers, for ordering JDKs newest first."""
        return [int(p) for p in re.findall(r"\d+", self.version)]

    @property
    def java(self) -> Path:
        return self.home / "bin" / "java"

    def describe(self) -> str:
        return f"Java {self.version} ({self.home})"


def _release_version(home: Path) -> str | None:
    try:
        text = (home / "release").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    found = re.search(r'^JAVA_VERSION="?(\d[^"\s]*)"?\s*$', text, re.MULTILINE)
    return found.group(1) if found else None


def _java_version(java: Path) -> str | None:
    try:
        result = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # `openjdk version "17.0.15" 2025-04-15`, `java version "1.8.0_392"`: the first quoted version, on stderr.
    found = re.search(r'version "(\d[^"]*)"', result.stderr + result.stdout)
    return found.group(1) if found else None


@functools.lru_cache(maxsize=None)
def _probe(home: str, java_identity: tuple[int, int, int]) -> Jdk | None:
    """`java_identity` (bin/java's device, inode and mtime) keys the cache: a JDK replaced in place is probed again."""
    version = _release_version(Path(home)) or _java_version(Path(home) / "bin" / "java")
    return Jdk(Path(home), version) if version and re.match(r"\d", version) else None


def probe(home: Path) -> Jdk | None:
    """The JDK at `home`, or None when it has no runnable bin/java and bin/javac (a runtime alone cannot build
    the contestant) or no version can be read."""
    java = home / "bin" / "java"
    try:
        st = java.stat()
    except OSError:
        return None
    if not all(os.access(home / "bin" / tool, os.X_OK) for tool in ("java", "javac")):
        return None
    return _probe(str(home), (st.st_dev, st.st_ino, st.st_mtime_ns))


def _candidates() -> list[tuple[str, list[Path]]]:
    """Where JDKs are looked for, in order of preference: (how it was found, the homes found there)."""
    found = []
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        found.append((f"JAVA_HOME={java_home}", [Path(java_home)]))
    on_path = shutil.which("java")
    if on_path:
        # /usr/bin/java -> /etc/alternatives/java -> /usr/lib/jvm/X/bin/java: the JDK is two levels up.
        found.append(("java on PATH", [Path(on_path).resolve().parent.parent]))
    try:
        homes = sorted({p.resolve() for p in JVM_DIR.iterdir() if p.is_dir()})
    except OSError:
        homes = []
    found.append((str(JVM_DIR), homes))
    return found


def find_jdk(minimum: int) -> tuple[Jdk | None, str]:
    """The first JDK of Java `minimum` or newer (JAVA_HOME, the java on PATH, /usr/lib/jvm newest first), and
    what was looked at, for the reason when there is none: "JAVA_HOME=/x: Java 11.0.2; java on PATH: Java 17..."."""
    seen = []
    for where, homes in _candidates():
        jdks = sorted((j for j in map(probe, homes) if j is not None), key=lambda j: j.version_key, reverse=True)
        for jdk in jdks:
            if jdk.feature >= minimum:
                return jdk, ""
        own_home = where.startswith("JAVA_HOME=")  # the folder is in `where` already
        if jdks:
            seen.append(f"{where}: " + ", ".join(f"Java {j.version}" if own_home else j.describe() for j in jdks))
        elif own_home:
            seen.append(f"{where}: no JDK there (no runnable bin/java and bin/javac with a readable version)")
    return None, "; ".join(seen) or "no JDK at all"


def jdk_missing_reason(minimum: int, found: str) -> str:
    """Why a contestant needing Java `minimum` cannot run here, with the fix (`netarena list`, the skip)."""
    return (f"needs a JDK of Java {minimum} or newer, found {found}: install one (e.g. under {JVM_DIR}) or set "
            f"JAVA_HOME to one")
