"""A contestant's Python environment: its venv, made and filled by uv with the package-index settings pip has.

Why uv rather than `python -m venv` and pip: the same venv for a third to a quarter of the CPU. Measured on a
2-core machine (2026-11-29), a contestant's whole install (venv, packages with their bytecode, the install record):
pip 8 to 13 s of CPU (python-fastapi 11.4 s, python-litestar 13.1 s), uv 2.3 to 4.9 s (3.1 s, 4.9 s); nineteen
Python contestants made half of a first run's installs. uWSGI's compilation (about 30 s of CPU) is the same either
way.

uv does not read pip's configuration. A machine set up for pip (a private index, a proxy's certificate, a folder
of wheels) keeps working: pip's settings, from its files and PIP_* variables (`pip config list`), are handed to uv:
its indexes in a uv configuration file (uv_config; as variables where uv has a configuration of its own on the
machine, venv_environment), the others as uv's own variables (PIP_SETTINGS_FOR_UV). A UV_* variable or
SSL_CERT_FILE already set is left as it is.

That configuration file declares every index's files immutable (uv's index `cache-control`), as PyPI's are: a
file name on an index names one content for good. An index that sends its files without caching headers (as the
proxy of the machine this was written on did for PyPI's) otherwise left uv unable to tell that the source archive
it had cached was current: it fetched it again for every venv and built uWSGI again each time (45 CPU seconds on
2 cores), warm cache or not. The index pages stay as the index sends them (checked again at each install).

Each interpreter gets a uv cache of its own: a wheel built from source is keyed by its tags (cp311-linux_x86_64),
not by the interpreter that built it, so a package that embeds Python (uWSGI) built for one CPython 3.11 (a pyenv
build) would be reused for another (Debian's) and fail at start, its libpython finding a standard library without
the modules it expects built in.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# pip's setting -> uv's variable, and how pip's value (several values are separated by whitespace) becomes uv's.
# pip's indexes go into uv_config instead, unless the machine has a uv configuration of its own (venv_environment).
PIP_INDEX_SETTINGS = ("index-url", "extra-index-url")
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


PYPI = "https://pypi.org/simple"
# How long uv may take a file of an index as current without asking again: for good (the module docstring says why).
IMMUTABLE_FILES = "max-age=365000000, immutable"


def uv_config(settings: dict[str, str]) -> str:
    """uv's configuration (uv.toml) for pip's index settings: the extra indexes (extra-index-url) first, then the
    default one (index-url, else PyPI), each with its files immutable. uv asks them in that order and takes a
    package from the first that has it, as UV_INDEX and UV_DEFAULT_INDEX would."""
    urls = [(url, False) for url in str(settings.get("extra-index-url", "")).split()]
    urls.append((str(settings.get("index-url", "")).strip() or PYPI, True))
    # JSON's string syntax is TOML's basic string's for every character JSON escapes.
    return "".join(f"[[index]]\nurl = {json.dumps(url)}\n" + ("default = true\n" if default else "") +
                   f"cache-control = {{ files = {json.dumps(IMMUTABLE_FILES)} }}\n\n" for url, default in urls)


def uv_config_file(cache_root: Path, text: str) -> Path:
    """The file holding `text` under the cache, named by its content: written once, never changed under an
    install reading it."""
    path = cache_root / "uv" / f"config-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # A partial file of its own for each writer: installs run in threads of one process too.
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".partial")
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(partial, path)
    return path


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


def venv_creation_command(interpreter: str, venv_dir: Path) -> list[str]:
    """The command that makes an empty venv: no pip, setuptools or wheel (what a server imports is what its
    requirements pin)."""
    return [uv_binary(), "venv", "--python", interpreter, str(venv_dir)]


def requirements_install_command(venv_dir: Path, requirements: Path, source_builds: bool) -> list[str]:
    """The command that installs the requirements into the venv. --compile-bytecode: the .pyc files pip writes
    too, so a server run by a user who cannot write into the venv does not compile every module at each start.

    Without `source_builds` (--no-build), only wheels: it fails, before installing anything, when a requirement
    has no wheel for the interpreter and would be built from its source distribution (uWSGI). Two such installs at
    once would each build it (uv shares a build only once it is in the cache), so the caller installs with builds
    allowed one at a time per interpreter (source_builds_lock), where the second finds the first one's wheel in
    the cache."""
    command = [uv_binary(), "pip", "install", "--compile-bytecode", "--python", str(venv_dir / "bin" / "python"),
               "-r", str(requirements)]
    return command if source_builds else [*command, "--no-build"]


def source_builds_lock(uv_cache: Path) -> Path:
    """The lock an install with source builds holds (requirements_install_command): one per interpreter's uv cache
    (uv_cache_dir), where the built wheel is shared; beside it, not in it (uv's to manage)."""
    return uv_cache.with_name(uv_cache.name + ".builds.lock")


def installed_packages(venv_dir: Path) -> list[str]:
    """The venv's packages as `name==version` lines (`uv pip freeze`; names as the index normalizes them)."""
    listed = subprocess.run([uv_binary(), "pip", "freeze", "--python", str(venv_dir / "bin" / "python")],
                            capture_output=True, text=True, timeout=120)
    return listed.stdout.split()


def machine_uv_config(environ=os.environ) -> Path | None:
    """The user's or the system's uv configuration file, found where uv looks for one, or None."""
    user = Path(environ.get("XDG_CONFIG_HOME") or Path(environ.get("HOME") or Path.home()) / ".config")
    system = [Path(folder) for folder in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if folder]
    candidates = [user / "uv" / "uv.toml", *(folder / "uv" / "uv.toml" for folder in system),
                  Path("/etc/uv/uv.toml")]
    return next((path for path in candidates if path.is_file()), None)


def venv_environment(cache_root: Path, interpreter: str) -> dict[str, str]:
    """The environment of those commands: this interpreter's uv cache, pip's settings, never a download of a
    Python (the interpreter is given).

    pip's indexes go into netarena's uv configuration file (uv_config), with their files immutable, unless uv is
    configured on this machine already (UV_CONFIG_FILE, or a user's or system uv.toml): a configuration file
    given to uv replaces the ones it finds, so those stay in charge, and pip's indexes are then uv variables."""
    settings = pip_settings(_pip_config_list())
    variables = uv_variables(settings)
    own_config = "UV_CONFIG_FILE" not in os.environ and machine_uv_config() is None
    if own_config:
        variables = {key: value for key, value in variables.items()
                     if key not in (PIP_SETTINGS_FOR_UV[setting][0] for setting in PIP_INDEX_SETTINGS)}
        variables["UV_CONFIG_FILE"] = str(uv_config_file(cache_root, uv_config(settings)))
    return {**os.environ, **variables,
            "UV_CACHE_DIR": str(uv_cache_dir(cache_root, interpreter)), "UV_PYTHON_DOWNLOADS": "never"}
