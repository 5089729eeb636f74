"""Which build of netarena-load a binary is: the one definition for the orchestrator, doctor and the benches.

`netarena-load --version` names the cargo profile it was built with ("netarena-load 0.1.0 (release build)",
crates/loadgen/build.rs). `make test` builds it with the `tests` profile (no fat LTO), which costs more CPU per
request than the release build that `make setup` installs and bench/ measures.

Standard library only, so that `bench/benchlib.py` (which runs without the project's virtualenv) imports it too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

RELEASE_BUILD = "release"


def generator_version(path: Path) -> str | None:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def not_the_release_build(version: str | None) -> str | None:
    """Why the figures of the generator whose `--version` is this are not those of the measured build, or None.
    A generator older than the build in `--version` names none: nothing is said of it."""
    match = re.search(r"\((\S+) build\)", version or "")
    if match is None or match.group(1) == RELEASE_BUILD:
        return None
    return (f"netarena-load is the {match.group(1)} build (cargo profile {match.group(1)}, as `make test` builds it), "
            "not the release build: its CPU per request is higher than the measured generator's; `make setup` "
            "rebuilds the release one")
