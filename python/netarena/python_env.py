"""A contestant's Python environment: its venv, made and filled by uv with the package-index settings pip has.

Why uv rather than `python -m venv` and pip: the same venv for a third to a quarter of the CPU. Measured on a
2-core machine (2026-11-29), a contestant's whole install (venv, packages with their bytecode, the install record):
pip 8 to 13 s of CPU (python-fastapi 11.4 s, python-litestar 13.1 s), uv 2.3 to 4.9 s (3.1 s, 4.9 s); nineteen
Python contestants made half of a first run's installs. uWSGI's compilation (about 30 s of CPU) is the same either
way.

uv does not read pip's configuration. A machine set up for pip (a private index, a proxy's certificate, a folder
of wheels) keeps working: pip's settings, from its files and PIP_* variables (`pip config list`), are handed to uv
as uv's own variables (PIP_SETTINGS_FOR_UV). A UV_* variable or SSL_CERT_FILE already set is left as it is.

Each interpreter gets a uv cache of its own: a wheel built from source is keyed by its tags (cp311-linux_x86_64),
not by the interpreter that built it, so a package that embeds Python (uWSGI) built for one CPython 3.11 (a pyenv
build) would be reused for another (Debian's) and fail at start, its libpython finding a standard library without
the modules it expects built in.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path

# pip's setting -> uv's variable, and how pip's value (several values are separated by whitespace) becomes uv's.
PIP_SETTINGS_FOR_UV = {
    "index-url": ("UV_DEFAULT_INDEX", lambda value: value),
    "extra-index-url": ("UV_INDEX", lambda value: " ".join(value.split())),
    "find-links": ("UV_FIND_LINKS", lambda value: ",".join(value.split())),
    "cert": ("SSL_CERT_FILE", lambda value: value),
    "trusted-host": ("UV_INSECURE_HOST", lambda value: " ".join(value.split())),
    "timeout": ("UV_HTTP_TIMEOUT", lambda value: value),
    "default-timeout": ("UV_HTTP_TIMEOUT", lambda value: value),
}
# Where pip reads a setting from, lowest precedence first: its files' [global] and [install] sections, then the
# PIP_* variables (which `pip config list` shows as ":env:").
_PIP_SECTIONS = ("global", "install", ":env:")


class PythonEnvError(Exception):
    """The venv could not be made; the message says why and what to do."""


def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError as exc:
        raise PythonEnvError("uv is not installed beside netarena (it makes the contestants' venvs): run "
                             "`make setup`, or `pip install -c requirements.lock uv`") from exc
    return find_uv_bin()


def pip_settings(pip_config_list: str) -> dict[str, str]:
    """pip's effective install settings from the output of `pip config list` (lines `section.key='value'`)."""
    found: dict[str, dict[str, str]] = {section: {} for section in _PIP_SECTIONS}
    for line in pip_config_list.splitlines():
        name, sep, value = line.partition("=")
        section, dot, key = name.rpartition(".")
        if sep and dot and section in found:
            try:
                found[section][key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                found[section][key] = value
    merged: dict[str, str] = {}
    for section in _PIP_SECTIONS:
        merged.update(found[section])
    return merged


def uv_variables(settings: dict[str, str], environ=os.environ) -> dict[str, str]:
    """uv's variables for pip's settings; those the environment already sets stay out."""
    variables: dict[str, str] = {}
    for key, value in settings.items():
        if key in PIP_SETTINGS_FOR_UV and str(value).strip():
            variable, convert = PIP_SETTINGS_FOR_UV[key]
            if variable not in environ:
                variables[variable] = convert(str(value))
    return variables


@functools.cache
def _pip_config_list() -> str:
    """`pip config list` of netarena's own interpreter: pip's files and variables are the machine's, whichever
    interpreter a contestant uses. Without pip there, no settings."""
    try:
        listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return listed.stdout if listed.returncode == 0 else ""


def uv_cache_dir(cache_root: Path, interpreter: str) -> Path:
    """The uv cache of one interpreter (the module docstring says why one each), named after the executable it
    runs as and its version: a launcher on PATH (pyenv's shim) names whichever interpreter it starts today."""
    try:
        about = subprocess.run([interpreter, "-c", "import os, sys; print(os.path.realpath(sys.executable), sys.version)"],
                               capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        about = ""
    key = hashlib.sha256((about.strip() or os.path.realpath(interpreter)).encode()).hexdigest()[:16]
    return cache_root / "uv" / key


def venv_commands(interpreter: str, venv_dir: Path, requirements: Path) -> list[tuple[list[str], str]]:
    """The commands that make the venv and install the requirements into it, each with what it does. The venv
    holds the requirements and nothing else (no pip, setuptools or wheel: what a server imports is what its
    requirements pin). --compile-bytecode: the .pyc files pip writes too, so a server run by a user who cannot
    write into the venv does not compile every module at each start."""
    uv = uv_binary()
    python = str(venv_dir / "bin" / "python")
    return [([uv, "venv", "--python", interpreter, str(venv_dir)], "venv creation"),
            ([uv, "pip", "install", "--compile-bytecode", "--python", python, "-r", str(requirements)],
             "pip install (uv)")]


def installed_packages(venv_dir: Path) -> list[str]:
    """The venv's packages as `name==version` lines (`uv pip freeze`; names as the index normalizes them)."""
    listed = subprocess.run([uv_binary(), "pip", "freeze", "--python", str(venv_dir / "bin" / "python")],
                            capture_output=True, text=True, timeout=120)
    return listed.stdout.split()


def venv_environment(cache_root: Path, interpreter: str) -> dict[str, str]:
    """The environment of those commands: this interpreter's uv cache, pip's index settings, never a download of
    a Python (the interpreter is given)."""
    return {**os.environ, **uv_variables(pip_settings(_pip_config_list())),
            "UV_CACHE_DIR": str(uv_cache_dir(cache_root, interpreter)), "UV_PYTHON_DOWNLOADS": "never"}
