"""Contestants: discovery, whether each can run here (and exactly why not), installation, placeholders."""

from __future__ import annotations

import fcntl
import fnmatch
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .checkout import repo_root
from .config import MODEL_GROUPS, SCENARIOS, Manifest, NotHereEntry, load_manifest, model_group
from .scenarios import registry
from .errors import ConfigError, did_you_mean
from .jdk import Jdk, find_jdk, jdk_missing_reason
from . import python_env
from .server_user import ServerUser, check_reachable, reachable, reachable_executable, server_user

MANIFEST_NAME = "contestant.toml"
INSTALL_TIMEOUT_S = 1800  # pip builds from source (uwsgi ~30 s), cargo/go builds: generous but bounded
# What older versions wrote into a contestant's folder after its install steps; nothing is written there now
# (the cache's steps.stamp says it all), but a checkout may still hold one: never hashed.
INSTALL_MARKER = ".netarena-installed"
# First-install times by language, for the run's estimate when this cache has no time of its own for a contestant
# (install-time.json, written by each install that did work), optional parts ([install.optional]) not included:
# each language's mean in the quick suite's first run on a fresh 2-core machine (empty caches, 2 installs at a
# time; 2026-11-28: Python 4-32 s, mean 10; Go 7-65 s, mean 39; rust-hyper 19 s; play-scala 42 s; java-netty
# 12 s; Node 2-4 s), times 1.5 for slower hosts. The whole phase was 3 min 29 s; these give an estimate of about 5 min.
# Rust's since TLS and the database drivers' parts came (2026-11-29, `make run` from an empty cache: rust-hyper 83 s,
# rust-actix 132 s, rust-axum 159 s, each in a cargo folder of its own; they share one now): the longest installs,
# which go first (install_concurrently). Python's since uv makes the venvs (2026-11-29, the same: 0.9-4 s, uWSGI's
# two 29 and 35 s, pypy-twisted 8 s; mean 5.7).
DEFAULT_INSTALL_S = {"rust": 120.0, "python": 8.0, "scala": 65.0, "java": 20.0, "go": 60.0, "javascript": 5.0,
                     "erlang": 5.0, "ruby": 10.0, "c": 5.0}
DEFAULT_INSTALL_PART_S = 120.0  # an optional part (a database driver) without a time of its own
# Build tools whose shared cache two builds must not write at once: their steps hold a lock named after the
# tool while they run, also when installs run concurrently. Cargo, Go, npm and pip lock (or do not share)
# theirs themselves.
SHARED_CACHE_TOOLS = {"mvn": "Maven's local repository (~/.m2) is not safe for two builds writing at once"}
# NETARENA_QUICK_BUILDS=1 (the tests set it, tests/conftest.py): the cargo steps of contestants build unoptimized,
# cargo's release profile at opt-level 0 without LTO. The same source in about a tenth of the time (rust-hyper with
# both database drivers: 73 s of wall time on 2 cores against about 10 min), for checks of behaviour, never for
# figures: the steps' stamp holds the setting, so an optimized install is never taken for a quick one nor the
# reverse (a later run without the variable rebuilds), their install times are kept apart, and the install record
# says so, which the report shows as the UNOPT badge on every figure of the contestant.
QUICK_BUILDS_ENV = "NETARENA_QUICK_BUILDS"
QUICK_CARGO_ENV = {"CARGO_PROFILE_RELEASE_OPT_LEVEL": "0", "CARGO_PROFILE_RELEASE_LTO": "false",
                   "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "16"}
# The same setting for a JVM contestant, whose optimizing build happens in its server as it runs: the server's
# JIT stops at its first tier (C1), without C2's profiling and recompilation. C2's compiler threads were about
# half of a Spring Boot server's CPU in a `netarena verify` (40 s of CPU against 21 s with C1 alone), and the
# JVM servers about a fifth of all the CPU a `make test` spent (docs/testing.md). What a server answers is the same with either
# tier; how fast is not, so the install record says so (the report's UNOPT badge). Appended to the server's
# JAVA_TOOL_OPTIONS (after its manifest's and a profiled repeat's), where a flag on its own command line wins.
QUICK_JIT_OPTIONS = "-XX:TieredStopAtLevel=1"
# Folders that builds write into; hashing them would make every build invalidate itself.
_BUILD_OUTPUT_DIRS = {"node_modules", "target", "__pycache__", ".venv", "build", "_build", "deps", "ebin"}


# root's default cache: root's own home is closed to the unprivileged user that runs the servers (server_user).
ROOT_CACHE = Path("/var/cache/netarena")


def cache_root() -> Path:
    explicit = os.environ.get("NETARENA_CACHE")
    if explicit:
        return Path(explicit).absolute()
    return ROOT_CACHE if os.geteuid() == 0 else Path.home() / ".cache" / "netarena"


def default_contestants_dir() -> Path:
    root = repo_root()
    return (root / "contestants") if root else Path("contestants").absolute()


@dataclass
class Contestant:
    manifest: Manifest
    dir: Path

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def env_dir(self) -> Path:
        return cache_root() / "envs" / self.name

    @property
    def run_dir(self) -> Path:
        """The one folder the server may write to (and its HOME), owned by the user it runs as."""
        return cache_root() / "run" / self.name

    @property
    def venv_dir(self) -> Path:
        return self.env_dir / "venv"

    def python(self) -> str:
        if self.manifest.install.python_requirements:
            return str(self.venv_dir / "bin" / "python")
        return "python3"

    def jdk(self) -> Jdk | None:
        """The JDK it builds and runs with when its manifest asks for one (`[install] java`): the first of that
        Java release or newer found here (netarena.jdk.find_jdk); None otherwise, or when there is none."""
        minimum = self.manifest.install.java
        return find_jdk(minimum)[0] if minimum else None

    def java_env(self) -> dict[str, str]:
        """The environment its install steps and server get for its JDK: JAVA_HOME, and PATH with the JDK's bin
        first (so `mvn` compiles with it); empty when it asks for none."""
        jdk = self.jdk()
        if jdk is None:
            return {}
        return {"JAVA_HOME": str(jdk.home),
                "PATH": os.pathsep.join([str(jdk.home / "bin"), os.environ.get("PATH", "")])}

    def placeholders(self, *, port: int | None = None, workers: int | None = None,
                     static_dir: Path | None = None, host: str = "127.0.0.1",
                     threads: int | None = None) -> dict[str, str]:
        jdk = self.jdk()
        # {host}: the address to listen on; loopback on one machine, every address (0.0.0.0) on the server
        # host of a cluster, where the generators come from other hosts (docs/many-machines.md).
        values = {
            "host": host,
            "dir": str(self.dir),
            "env_dir": str(self.env_dir),
            "build_dir": str(self.env_dir / "build"),
            "cargo_target_dir": str(shared_cargo_target_dir(self.manifest)),
            "run_dir": str(self.run_dir),
            "python": self.python(),
            # The JDK's java when the manifest asks for one ([install] java), else the java on PATH.
            "java": str(jdk.java) if jdk else "java",
            "static_dir": str(static_dir) if static_dir else "",
        }
        if port is not None:
            values["port"] = str(port)
        if workers is not None:
            values["workers"] = str(workers)
        if self.manifest.threads.supported:
            values["threads"] = str(threads if threads is not None else self.manifest.threads.default)
        if self.manifest.database is not None:
            values["db_pool"] = str(self.manifest.database.pool)
        return values

    def pool(self, workers: int, threads: int | None) -> int | None:
        """How many requests this set-up serves at once where a pool bounds it: workers x threads for a
        thread pool, workers for processes; None where nothing the manifest states bounds it."""
        model = self.manifest.concurrency_model
        if model == "processes":
            return workers
        if model == "threads" and self.manifest.threads.supported:
            size = threads if threads is not None else self.manifest.threads.default
            return size * workers if size > 0 else None
        return None

    def command(self, scenario: str) -> list[str]:
        start = self.manifest.start
        return list(start.command if registry.kind(scenario).is_http else start.echo_command)


def expand(word: str, values: dict[str, str]) -> str:
    # Only known placeholders are replaced, so literal braces (JSON, shell snippets) pass through.
    return re.sub(r"\{([a-z_]+)\}", lambda m: values.get(m.group(1), m.group(0)), word)


def list_names(contestants_dir: Path) -> list[str]:
    if not contestants_dir.is_dir():
        return []
    return sorted(p.name for p in contestants_dir.iterdir() if (p / MANIFEST_NAME).is_file())


def select(contestants_dir: Path, patterns: list[str], exclude: list[str] = (), source: str = "--only", *,
           field: str | None = None, line_of=None) -> list[str]:
    """Names matching the patterns (exact names or fnmatch globs), minus the excluded ones.

    An exact name that does not exist is an error with the near miss; a glob may match nothing. From a file,
    `source` is its path, `field` the key and `line_of(name)` the line the name is on.
    """
    names = list_names(contestants_dir)
    chosen: list[str] = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            chosen += [n for n in names if fnmatch.fnmatchcase(n, pattern) and n not in chosen]
        elif pattern in names:
            if pattern not in chosen:
                chosen.append(pattern)
        else:
            raise ConfigError(
                f"unknown contestant '{pattern}' (looked in {contestants_dir}; "
                f"known: {', '.join(names) if names else 'none'})",
                path=source, field=field, line=line_of(pattern) if line_of else None,
                hint=did_you_mean(pattern, names))
    return [n for n in chosen if not excluded(n, exclude)]


def excluded(name: str, exclude) -> bool:
    return any(fnmatch.fnmatchcase(name, ex) for ex in exclude)


def entry_measures(entry, name: str) -> bool:
    """Whether a suite [[measure]] entry applies to contestant `name` (its own contestants/exclude)."""
    patterns = entry.contestants or ["*"]
    return any(fnmatch.fnmatchcase(name, p) for p in patterns) and not excluded(name, entry.exclude)


def load(contestants_dir: Path, names: list[str]) -> list[Contestant]:
    return [Contestant(load_manifest(contestants_dir / n / MANIFEST_NAME), (contestants_dir / n).absolute())
            for n in names]


# ----------------------------------------------------------------------------- can it run here?


def dpkg_installed(package: str) -> bool:
    if not shutil.which("dpkg-query"):
        return False
    result = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return result.returncode == 0 and result.stdout.strip().endswith("install ok installed")


def is_root() -> bool:
    return os.geteuid() == 0


@dataclass
class Availability:
    runnable: bool
    reasons: list[str] = field(default_factory=list)  # why not, each with the command that fixes it
    notes: list[str] = field(default_factory=list)  # what installing will do

    @property
    def summary(self) -> str:
        return "; ".join(self.reasons) if self.reasons else ("; ".join(self.notes) or "ready")


def _required_executables(manifest: Manifest, parts=()) -> list[str]:
    """The executables the install needs: [install] requires, the venv's interpreter, and the `requires` of the
    optional `parts` asked for (cargo for a part that compiles a Python package's Rust code)."""
    required = list(dict.fromkeys([*manifest.install.requires,
                                   *(exe for part in parts for exe in manifest.install.optional[part].requires)]))
    if manifest.install.python_requirements:
        runtime = "pypy3" if manifest.install.python_runtime == "pypy" else "python3"
        if runtime not in required:
            required.append(runtime)
    return required


def availability(contestant: Contestant, allow_apt: bool = True, parts=()) -> Availability:
    """Whether the contestant can run here, without changing anything; `parts`: the optional install parts
    that will be asked for (install_parts)."""
    manifest = contestant.manifest
    av = Availability(True)
    missing_debs = [p for p in manifest.install.debian if not dpkg_installed(p)]
    apt_will_install = bool(missing_debs) and allow_apt and is_root() and shutil.which("apt-get") is not None
    if missing_debs:
        command = "apt-get install -y " + " ".join(missing_debs)
        if apt_will_install:
            av.notes.append(f"Debian packages {', '.join(missing_debs)} will be installed ({command})")
        else:
            av.runnable = False
            why = "not root" if not is_root() else ("--no-apt given" if not allow_apt else "apt-get not found")
            av.reasons.append(f"Debian package(s) {', '.join(missing_debs)} not installed ({why}): "
                              f"sudo {command}")
    for exe in _required_executables(manifest, parts):
        if shutil.which(exe):
            continue
        if apt_will_install:
            av.notes.append(f"{exe} expected from the Debian packages")
            continue
        av.runnable = False
        hint = ("apt-get install -y " + " ".join(manifest.install.debian)) if manifest.install.debian else \
            ("apt-get install -y pypy3 pypy3-venv" if exe == "pypy3" else f"install {exe} and put it on PATH")
        av.reasons.append(f"{exe} not installed: {hint}")
    if manifest.install.java:
        jdk, found = find_jdk(manifest.install.java)
        if jdk is None:
            av.runnable = False
            av.reasons.append(jdk_missing_reason(manifest.install.java, found))
    if manifest.install.python_requirements and not _venv_current(contestant):
        av.notes.append(f"a venv will be created in {contestant.venv_dir} from "
                        f"{manifest.install.python_requirements}")
    if _has_steps(manifest) and not _steps_current(contestant, parts):
        av.notes.append("build steps will run")
    return av


def scenario_note(contestant: Contestant, scenario: str) -> str | None:
    """None when the contestant implements the scenario, else its declared reason."""
    if scenario in contestant.manifest.scenarios:
        return None
    return contestant.manifest.unsupported.get(scenario, "not implemented")


# ----------------------------------------------------------------------------- install


class InstallError(Exception):
    def __init__(self, message: str, output_tail: str = ""):
        super().__init__(message)
        self.output_tail = output_tail


def _hash_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _BUILD_OUTPUT_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name == INSTALL_MARKER:
                continue
            path = Path(root) / name
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                pass
    return digest.hexdigest()


def _venv_stamp(contestant: Contestant) -> str:
    install = contestant.manifest.install
    # "made_by": a venv made by pip (before uv, netarena.python_env) also holds pip and setuptools, which its
    # requirements do not pin, so a stamp without it is not current; each interpreter's uv cache keeps what pip's
    # "wheels" setting once ensured (a wheel built from source reused only by the interpreter that built it).
    return json.dumps({"runtime": install.python_runtime, "made_by": "uv, a wheel cache per interpreter",
                       "requirements_sha256": _hash_file(contestant.dir / install.python_requirements)})


def _every_step(manifest: Manifest) -> list[list[str]]:
    """The install steps and every optional part's steps: whatever an install of the contestant may run."""
    return [*manifest.install.steps, *(step for part in manifest.install.optional.values() for step in part.steps)]


def _quick_asked() -> bool:
    return os.environ.get(QUICK_BUILDS_ENV, "") not in ("", "0")


def quick_build(manifest: Manifest) -> bool:
    """Whether this install builds unoptimized (QUICK_BUILDS_ENV): asked for, and a step of the contestant runs cargo."""
    return _quick_asked() and any(step[0] == "cargo" for step in _every_step(manifest))


def quick_jit(manifest: Manifest) -> bool:
    """Whether this contestant's servers run with the JIT's first tier alone (QUICK_JIT_OPTIONS): asked for
    (QUICK_BUILDS_ENV), and it runs on the JVM."""
    # A service's manifest (services.py: a database, installed by the same install()) has no runtime.
    return _quick_asked() and getattr(manifest, "runtime", None) == "jvm"


def shared_cargo_target_dir(manifest: Manifest) -> Path:
    """{cargo_target_dir}: one cargo target folder for the builds of every contestant, so a crate built at the same
    version, features and profile is compiled once for all of them (rust-hyper, rust-axum and rust-actix share
    tokio, hyper, rustls and the database drivers, and contestants/_rust-shared/unified-deps gives each crate the
    same features in all their builds: after rust-hyper's builds, rust-axum's with both drivers compiles 9 crates,
    its own). Quick builds (QUICK_BUILDS_ENV) get a folder of their own: both write the same binary paths.
    Two builds into one folder take turns (cargo locks it), so a step copies its binary into {build_dir}, where the
    server runs it from and where no other contestant's build writes."""
    return cache_root() / "cargo-target" / ("quick" if quick_build(manifest) else "optimized")


def _steps_stamp(contestant: Contestant) -> str:
    install = contestant.manifest.install
    return json.dumps({"steps": install.steps, "tree_sha256": _tree_hash(contestant.dir),
                       **({"quick_build": QUICK_CARGO_ENV} if quick_build(contestant.manifest) else {}),
                       **({"build_inputs_sha256": {folder: _tree_hash(contestant.dir / folder)
                                                   for folder in install.build_inputs}}
                          if install.build_inputs else {}),
                       **({"optional": {name: part.model_dump(mode="json") for name, part in
                                        sorted(install.optional.items())}} if install.optional else {}),
                       # Built with another JDK (another folder, or the same one updated) is not current.
                       **({"jdk": _jdk_record(contestant)} if install.java else {})})


def _jdk_record(contestant: Contestant) -> dict | None:
    jdk = contestant.jdk()
    return {"home": str(jdk.home), "version": jdk.version} if jdk else None


def _has_steps(manifest: Manifest) -> bool:
    return bool(manifest.install.steps or manifest.install.optional)


def install_parts(contestant: Contestant, levels) -> list[str]:
    """The optional install parts ([install.optional.NAME]) that measuring `levels` needs, by name: each level a
    (scenario, protocol) pair, needing every part that names its scenario or its protocol."""
    scenarios = {scenario for scenario, _ in levels}
    protocols = {protocol for _, protocol in levels}
    return sorted(name for name, part in contestant.manifest.install.optional.items()
                  if scenarios & set(part.scenarios) or protocols & set(part.protocols))


def _venv_current(contestant: Contestant, user=None) -> bool:
    """The venv matches the requirements and, when servers run as `user`, was made from an interpreter that
    user can run (a venv's python links to it: one under /root, such as pyenv's, is out of its reach)."""
    stamp = contestant.env_dir / "venv.stamp"
    if not (stamp.is_file() and stamp.read_text() == _venv_stamp(contestant)
            and (contestant.venv_dir / "bin" / "python").exists()):
        return False
    return user is None or reachable((contestant.venv_dir / "bin" / "python").resolve(), user)


def _open_to_servers(contestant: Contestant) -> None:
    """Let every user read (and run what its owner may run) in the venv and {build_dir}: the servers run from
    there, possibly as another user, and build tools create some files for their owner alone (sbt's start
    script is mode 744)."""
    for top in (contestant.venv_dir, contestant.env_dir / "build"):
        for root, dirs, files in os.walk(top):
            for path in [root, *(os.path.join(root, f) for f in files)]:
                mode = os.lstat(path).st_mode
                if stat.S_ISLNK(mode):
                    continue
                wanted = mode | stat.S_IRGRP | stat.S_IROTH
                if mode & stat.S_IXUSR:
                    wanted |= stat.S_IXGRP | stat.S_IXOTH
                if wanted != mode:
                    os.chmod(path, stat.S_IMODE(wanted))


def _folder_outputs(contestant: Contestant) -> dict[str, list[int]]:
    """The build-output folders the steps left in the contestant's folder (npm ci's node_modules), each with
    its identity: the same folder, not one of the same name in a fresh clone."""
    found = {}
    for name in sorted(_BUILD_OUTPUT_DIRS):
        try:
            st = (contestant.dir / name).stat()
        except OSError:
            continue
        found[name] = [st.st_dev, st.st_ino, st.st_ctime_ns]  # ctime too: a recreated folder may get the same inode
    return found


def _steps_current(contestant: Contestant, parts=()) -> bool:
    """The install steps' outputs, and those of the optional `parts`, are present for this checkout and this
    cache.

    Steps write into the cache (go build -o {build_dir}) and some into the contestant folder too (npm ci makes
    node_modules there). A fresh cache next to a built checkout has no stamp; a fresh clone next to a kept cache
    (CI: new clone, old ~/.cache) has the stamp but not the folders it names. Both re-run the steps. Nothing is
    written into the contestant folder to tell: the stamp in the cache records those folders' identities.
    """
    built = _parts_built(contestant)
    return built is not None and set(parts) <= built


def _parts_built(contestant: Contestant) -> set[str] | None:
    """The optional parts built beside the current base steps' outputs (empty: the base alone); None when the
    base steps' outputs are not current (see _steps_current)."""
    stamp = contestant.env_dir / "steps.stamp"
    if not stamp.is_file():
        return None
    try:
        recorded = json.loads(stamp.read_text())
    except ValueError:
        return None
    if (recorded.get("stamp") != _steps_stamp(contestant) or recorded.get("outputs") != _folder_outputs(contestant)
            or recorded.get("venv") != _venv_identity(contestant)):
        return None
    return set(recorded.get("parts", []))


def _venv_identity(contestant: Contestant) -> list[int] | None:
    """Which making of the venv this is (its stamp file's identity, written once per venv): steps may install into
    the venv (a part's Python packages), and a venv made again, for changed requirements or after it was removed,
    is made without them, so steps recorded beside another venv are not current."""
    try:
        st = (contestant.env_dir / "venv.stamp").stat()
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns]


def _record_steps_installed(contestant: Contestant, parts: set[str]) -> None:
    (contestant.env_dir / "steps.stamp").write_text(json.dumps({"stamp": _steps_stamp(contestant),
                                                                "outputs": _folder_outputs(contestant),
                                                                "venv": _venv_identity(contestant),
                                                                "parts": sorted(parts)}))


def _base_current(contestant: Contestant) -> bool:
    """Debian packages, venv and base build steps in place (optional parts aside)."""
    install = contestant.manifest.install
    return (all(dpkg_installed(p) for p in install.debian)
            and (not install.python_requirements or _venv_current(contestant))
            and (not _has_steps(contestant.manifest) or _parts_built(contestant) is not None))


def install_current(contestant: Contestant, parts=()) -> bool:
    """Whether install() would find everything in place, `parts` included, and only record versions: what the
    run's estimate counts as no install time."""
    return _base_current(contestant) and (not parts or _steps_current(contestant, parts))


def _install_time_path(contestant: Contestant) -> Path:
    # A quick build's time says nothing of an optimized one's (QUICK_BUILDS_ENV).
    return contestant.env_dir / ("install-time-quick.json" if quick_build(contestant.manifest) else "install-time.json")


def _remember_install_time(contestant: Contestant, base_s: float | None, parts_s: dict[str, float]) -> None:
    """Keep what this install took in the cache, for the next run's estimate (install_estimate_s)."""
    path = _install_time_path(contestant)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if base_s is not None:
        known["base_s"] = round(base_s, 1)
    known["parts_s"] = {**known.get("parts_s", {}), **{k: round(v, 1) for k, v in parts_s.items()}}
    path.write_text(json.dumps(known))


# install_estimate_s's source for a contestant with nothing to install.
INSTALLED = "installed"


def install_estimate_s(contestant: Contestant, parts=()) -> tuple[float, str]:
    """(seconds, where that figure comes from) of what install() would do now for `parts`: 0 when everything
    is current, else this cache's last time for the base install and for each missing part, or the stated
    defaults (DEFAULT_INSTALL_S by language, DEFAULT_INSTALL_PART_S per part)."""
    if install_current(contestant, parts):
        return 0.0, INSTALLED
    try:
        known = json.loads(_install_time_path(contestant).read_text())
    except (OSError, ValueError):
        known = {}
    base_current = _base_current(contestant)
    built = (_parts_built(contestant) or set()) if base_current else set()
    language = getattr(contestant.manifest, "language", None)  # None: a service's (services.Service) manifest
    seconds, sources = 0.0, []
    replacing = any(contestant.manifest.install.optional[part].instead_of_steps for part in parts)
    if not base_current and not replacing:
        if "base_s" in known:
            seconds += known["base_s"]
            sources.append("its last install here")
        else:
            seconds += DEFAULT_INSTALL_S.get(language, 60.0)
            sources.append(f"default for {language or 'a service'}")
    for part in parts:
        if part in built:
            continue
        if part in known.get("parts_s", {}):
            seconds += known["parts_s"][part]
            sources.append(f"{part}: its last build here")
        else:
            seconds += DEFAULT_INSTALL_PART_S
            sources.append(f"{part}: default")
    return seconds, ", ".join(sources)


def _run_logged(argv: list[str], cwd: Path, log: Path, what: str, env: dict | None = None, check: bool = True) -> int:
    """Run `argv` with its output appended to `log`; its exit code. A non-zero one raises InstallError with the
    log's tail unless `check` is false (a command whose failure the caller handles); a missing program or one
    still running after INSTALL_TIMEOUT_S always raises."""
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            result = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=INSTALL_TIMEOUT_S, env=env)
        except FileNotFoundError:
            raise InstallError(f"{what}: {argv[0]} not found") from None
        except subprocess.TimeoutExpired:
            raise InstallError(f"{what}: still running after {INSTALL_TIMEOUT_S} s", tail(log)) from None
    if result.returncode != 0 and check:
        raise InstallError(f"{what} failed with exit code {result.returncode}: {' '.join(argv)}", tail(log))
    return result.returncode


def tail(path: Path, limit_bytes: int = 4000) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


# Whether this process already ran `apt-get update`: a fresh machine or container has empty package
# lists, where every `apt-get install` fails with "Unable to locate package"; once per process is enough.
_apt_updated = False


def _apt_update_once(contestant: Contestant, log: Path, env: dict, say) -> None:
    global _apt_updated
    if _apt_updated:
        return
    say(f"{contestant.name}: apt-get update (once per run, before the first Debian install)")
    _run_logged(["apt-get", "update", "-q"], contestant.dir, log, "apt-get update", env)
    _apt_updated = True


@contextmanager
def _tool_lock(tool: str, contestant: Contestant, say):
    """Hold the tool's lock while a step runs it when that tool's shared cache is not safe for two builds at
    once (SHARED_CACHE_TOOLS); nothing otherwise."""
    name = os.path.basename(tool)
    if name not in SHARED_CACHE_TOOLS:
        yield
        return
    with _exclusive(cache_root() / f"tool-{name}.lock", f"{contestant.name}: waiting for another {name} build "
                    f"({SHARED_CACHE_TOOLS[name]})", say):
        yield


@contextmanager
def _exclusive(lock_path: Path, waiting: str, say):
    """Hold an exclusive lock on `lock_path` (flock: released by the kernel when the holder exits, also on
    kill -9, so a crashed install never blocks the next one). Says `waiting` when another process holds it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(waiting)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def install(contestant: Contestant, allow_apt: bool = True, say=lambda msg: None, user=None, parts=()) -> dict:
    """Make the contestant runnable, with the optional install `parts` (install_parts: those the planned
    scenarios need); returns what was installed (versions) for the store. What it says goes to `say` and into
    its install log too.

    Raises InstallError with the reason and the tail of the install log.

    Two netarena processes may install the same contestant at once (a `verify` beside a `run`, two runs sharing
    the cache): the first holds the contestant's install lock, the other waits, then finds the venv or build
    current and reuses it instead of rebuilding it under the first one's feet.
    """
    unknown = sorted(set(parts) - set(contestant.manifest.install.optional))
    if unknown:
        raise ValueError(f"{contestant.name} has no optional install part(s) {unknown}")
    contestant.env_dir.mkdir(parents=True, exist_ok=True)
    log = contestant.env_dir / "install.log"

    def say_and_log(message: str) -> None:
        say(message)
        with log.open("a") as out:
            out.write(f"# {message}\n")

    with _exclusive(contestant.env_dir / "install.lock",
                    f"{contestant.name}: waiting for another netarena process installing it", say_and_log):
        return _install_locked(contestant, allow_apt, say_and_log, user, tuple(parts))


def _install_locked(contestant: Contestant, allow_apt: bool, say, user, parts: tuple[str, ...]) -> dict:
    manifest = contestant.manifest
    log = contestant.env_dir / "install.log"
    record: dict = {"env_dir": str(contestant.env_dir), "install_log": str(log)}
    started = time.monotonic()
    base_was_current = _base_current(contestant)
    missing_debs = [p for p in manifest.install.debian if not dpkg_installed(p)]
    if missing_debs:
        av = availability(contestant, allow_apt)
        if not (allow_apt and is_root() and shutil.which("apt-get")):
            raise InstallError("; ".join(av.reasons))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        # One apt-get at a time across netarena processes: a second one would fail on dpkg's own lock.
        with _exclusive(cache_root() / "apt.lock", f"{contestant.name}: waiting for another netarena process's "
                        "apt-get", say):
            missing_debs = [p for p in missing_debs if not dpkg_installed(p)]  # the other may have installed them
            if missing_debs:
                _apt_update_once(contestant, log, env, say)
                say(f"{contestant.name}: apt-get install -y {' '.join(missing_debs)}")
                _run_logged(["apt-get", "install", "-y", "--no-install-recommends", *missing_debs], contestant.dir,
                            log, "apt-get install", env)
    record["debian"] = {p: _dpkg_version(p) for p in manifest.install.debian}
    if quick_jit(manifest):
        record["quick_jit"] = QUICK_JIT_OPTIONS  # the report's UNOPT badge
    for exe in _required_executables(manifest, parts):
        if not shutil.which(exe):
            raise InstallError(availability(contestant, allow_apt, parts).summary or f"{exe} not installed")
    record["executables"] = {exe: shutil.which(exe) for exe in _required_executables(manifest, parts)}
    if manifest.install.java:
        record["jdk"] = _jdk_record(contestant)
        if record["jdk"] is None:
            raise InstallError(availability(contestant, allow_apt).summary)
    if manifest.install.python_requirements:
        if not _venv_current(contestant, user):
            say(f"{contestant.name}: creating venv ({manifest.install.python_runtime}) and installing "
                f"{manifest.install.python_requirements}")
            shutil.rmtree(contestant.venv_dir, ignore_errors=True)
            (contestant.env_dir / "venv.stamp").unlink(missing_ok=True)
            runtime = "pypy3" if manifest.install.python_runtime == "pypy" else "python3"
            runtime = reachable_executable(runtime, user) or runtime  # the first on PATH the servers' user can run
            interpreter = shutil.which(runtime) or runtime
            _make_venv(contestant, interpreter, log, say)
            (contestant.env_dir / "venv.stamp").write_text(_venv_stamp(contestant))
        try:  # also for a venv made earlier, while uv may have gone since
            record["pip_freeze"] = python_env.installed_packages(contestant.venv_dir)
        except python_env.PythonEnvError as exc:
            raise InstallError(str(exc)) from exc
        version = subprocess.run([str(contestant.venv_dir / "bin" / "python"), "-c",
                                  "import sys,platform;print(platform.python_implementation(), sys.version.split()[0])"],
                                 capture_output=True, text=True, timeout=60)
        record["python"] = version.stdout.strip()
    parts_s: dict[str, float] = {}
    if _has_steps(manifest):
        built = _parts_built(contestant)
        # The base steps run when their outputs are not current (and then every part asked for after them);
        # otherwise only the parts asked for that were not built yet: a plan with mongo after one without
        # builds the driver once, on top of what is there.
        replacing = any(manifest.install.optional[part].instead_of_steps for part in parts)
        # The base's build first (the base steps, or the parts that replace them), then the parts that build
        # something of their own.
        todo = ([(None, manifest.install.steps)] if built is None and not replacing else []) + \
            [(part, manifest.install.optional[part].steps)
             for part in sorted(parts, key=lambda part: not manifest.install.optional[part].instead_of_steps)
             if part not in (built or set())]
        if todo:
            (contestant.env_dir / "steps.stamp").unlink(missing_ok=True)
            (contestant.env_dir / "build").mkdir(parents=True, exist_ok=True)
            values = contestant.placeholders()
            # {install_parts}: every part the base's build ends up with (the parts that build all the base
            # does and more, `instead_of_steps`), those built before and those asked for now, comma-separated
            # (cargo's --features list). Such a part's build replaces the binary: built with its own feature
            # alone, a postgresql part after a mongo one would leave a binary without the MongoDB driver while
            # the stamp says both are built. A part that builds something else (a second binary for HTTP/2)
            # stays out of the base's build.
            values["install_parts"] = ",".join(sorted(
                part for part in (built or set()) | set(parts) if manifest.install.optional[part].instead_of_steps))
            step_env = {**os.environ, **contestant.java_env(),
                        **(QUICK_CARGO_ENV if quick_build(manifest) else {})}
            if any("{uv}" in word for _, part_steps in todo for step in part_steps for word in step):
                try:
                    values["uv"] = python_env.uv_binary()
                except python_env.PythonEnvError as exc:
                    raise InstallError(str(exc)) from exc
            if manifest.install.python_requirements:
                # A step installing into the venv ({uv} pip install --python {python}) does so as the venv's own
                # install did: with the uv cache of its interpreter and pip's index settings.
                step_env.update(python_env.venv_environment(cache_root(), contestant.python()))
            count, index = sum(len(part_steps) for _, part_steps in todo), 0
            for part, part_steps in todo:
                part_started = time.monotonic()
                label = f" ({part})" if part else ""
                for step in part_steps:
                    index += 1
                    argv = [expand(w, values) for w in step]
                    say(f"{contestant.name}: step {index}/{count}{label}: {' '.join(argv)}")
                    with _tool_lock(argv[0], contestant, say):
                        _run_logged(argv, contestant.dir, log, f"install step {index}{label}", step_env)
                if part is not None:
                    parts_s[part] = time.monotonic() - part_started
            built = (built or set()) | {part for part, _ in todo if part is not None}
            _record_steps_installed(contestant, built)
        record["steps"] = manifest.install.steps
        if quick_build(manifest):
            record["quick_build"] = QUICK_CARGO_ENV  # the report's UNOPT badge
        record["install_parts"] = {part: manifest.install.optional[part].steps for part in sorted(built)}
    _open_to_servers(contestant)
    if not base_was_current or parts_s:
        # What this install took, beside the cache it filled: the next run's estimate (install_estimate_s).
        # The base's time is everything but the parts built after it.
        _remember_install_time(contestant, None if base_was_current else
                               time.monotonic() - started - sum(parts_s.values()), parts_s)
    record.update(_build_versions(contestant))
    return record


def _make_venv(contestant: Contestant, interpreter: str, log: Path, say) -> None:
    """Make the contestant's venv with `interpreter` and install its requirements: from wheels alone when they all
    have one, else (a requirement built from its source, uWSGI) under the interpreter's source-builds lock, so
    that two contestants needing the same build get it built once (python_env.requirements_install_command)."""
    requirements = contestant.dir / contestant.manifest.install.python_requirements
    venv_env = python_env.venv_environment(cache_root(), interpreter)
    try:
        _run_logged(python_env.venv_creation_command(interpreter, contestant.venv_dir), contestant.dir, log,
                    "venv creation", venv_env)
        wheels_only = python_env.requirements_install_command(contestant.venv_dir, requirements, source_builds=False)
        if _run_logged(wheels_only, contestant.dir, log, "pip install (uv, wheels only)", venv_env, check=False) == 0:
            return
        with log.open("a") as out:
            out.write("# not every requirement has a wheel for this interpreter (above): installing with source "
                      "builds, one such install per interpreter at a time\n")
        with _exclusive(python_env.source_builds_lock(Path(venv_env["UV_CACHE_DIR"])),
                        f"{contestant.name}: waiting for another install building from source with {interpreter}",
                        say):
            _run_logged(python_env.requirements_install_command(contestant.venv_dir, requirements, source_builds=True),
                        contestant.dir, log, "pip install (uv)", venv_env)
    except python_env.PythonEnvError as exc:
        raise InstallError(str(exc)) from exc


def default_install_jobs() -> int:
    """How many contestants install at once by default: two per CPU this process may use, at most 4. Much of an
    install's time is downloads (Maven's artifacts, one build at a time on ~/.m2; npm and pip packages, Go modules),
    which leave the CPUs to the builds beside them: the quick suite's first installs on 2 CPUs took 5 min 54 s 4 at
    a time against 7 min 39 s to 8 min 42 s 2 at a time. More than 4 gains nothing: every build tool runs its own
    jobs on every CPU already, and builds sharing 2 CPUs with three others took a quarter more CPU time each."""
    from .process import available_cpus

    return min(4, 2 * len(available_cpus()))


@dataclass
class Installed:
    """One contestant's install, as install_concurrently reports it: its record, or the error that stopped it."""

    contestant: Contestant
    record: dict | None
    error: BaseException | None
    seconds: float


def shared_build_folder(contestant: Contestant) -> Path | None:
    """The build folder this contestant's install shares with other contestants', or None; two installs sharing
    one take turns (next_install). Cargo's target folder ({cargo_target_dir} in a step, shared_cargo_target_dir):
    cargo locks it, so the second of two started together would hold an install job while it waits. Go's build
    cache (a step running `go build`): Go does not lock it, but two builds at once each compile what the other is
    compiling (the standard library's net/http and crypto, shared modules): go-fasthttp and go-gin side by side
    took 180 s of CPU against 136 s one after the other, when the second finds it all in the cache."""
    steps = _every_step(contestant.manifest)
    if any("{cargo_target_dir}" in arg for step in steps for arg in step):
        return shared_cargo_target_dir(contestant.manifest)
    if any(os.path.basename(step[0]) == "go" and step[1:2] == ["build"] for step in steps):
        return go_build_cache()
    return None


@functools.cache
def go_build_cache() -> Path | None:
    """Go's build cache (`go env GOCACHE`: the GOCACHE variable, else its default under the user's cache folder);
    None without a go that answers (a contestant needing it is then not runnable here anyway)."""
    try:
        answer = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(answer.stdout.strip()) if answer.returncode == 0 and answer.stdout.strip() else None


def longest_chains_first(installs: list, seconds, folder) -> list:
    """`installs` in the order they start (install_concurrently, and plan.suite.install_phase_s, which models it):
    those sharing a build folder (folder(one), None for none) run one after the other, a chain, so the longest
    chain's (the sum of its installs' seconds(one)) come first, each chain's longest first; an install sharing
    nothing is a chain of its own. Started last, a long chain would run alone at the end, with nothing left to
    fill the other CPUs."""
    keyed = [(one, seconds(one), folder(one)) for one in installs]  # each estimate and folder asked once
    chains: dict = {}
    for _, own_s, key in keyed:
        if key is not None:
            chains[key] = chains.get(key, 0.0) + own_s
    keyed.sort(key=lambda entry: (-(chains[entry[2]] if entry[2] is not None else entry[1]), -entry[1]))
    return [one for one, _, _ in keyed]


def next_install(pending: list, running: list, folder) -> object | None:
    """The install to start next, the one rule for install_concurrently and the plan's estimate of it
    (plan.suite.install_phase_s): the first of `pending` (longest_chains_first) whose shared build folder
    (folder(one), None for none) no running install builds into; None when every pending one would wait for a
    running one's folder. A job is then given to an install that can work instead of one that would wait."""
    busy = {folder(one) for one in running} - {None}
    return next((one for one in pending if folder(one) is None or folder(one) not in busy), None)


def install_concurrently(contestants: list[Contestant], install_one, jobs: int, on_done, parts=lambda c: ()) -> None:
    """Run install_one(contestant) for every contestant, at most `jobs` at once (threads: the work is in the
    build tools' processes). on_done(Installed) is called in this thread as each one ends, in the order they
    end; a failing one (any exception) is reported there and the others go on. Each install keeps its own
    lock (install.lock, and apt.lock around apt-get), so concurrent ones never step on each other.

    They start longest first by install_estimate_s (with parts(contestant), the optional parts asked for), those
    sharing a build folder by their chain's sum (longest_chains_first), as the plan's estimate
    (plan.suite.install_phase_s) assumes: a long build started last would run alone at the end, with no download
    or short install left to fill the other CPU. An install whose shared build folder another running install
    builds into waits for it, and the next one that can work starts instead (next_install).

    Ctrl-C: the installs not started yet are dropped, those running end (their build tools got the signal
    too), and the KeyboardInterrupt goes on."""
    def timed(contestant: Contestant) -> Installed:
        started = time.monotonic()
        try:
            record, error = install_one(contestant), None
        except Exception as exc:
            record, error = None, exc
        return Installed(contestant, record, error, time.monotonic() - started)

    pending = longest_chains_first(contestants, lambda c: install_estimate_s(c, parts(c))[0], shared_build_folder)
    running: dict = {}  # future -> contestant
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="install")
    try:
        while pending or running:
            while len(running) < max(1, jobs):
                chosen = next_install(pending, list(running.values()), shared_build_folder)
                if chosen is None:
                    break
                pending.remove(chosen)
                running[pool.submit(timed, chosen)] = chosen
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                del running[future]
                on_done(future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# Files that pin what a build pulls in; their hashes say whether two installs built the same thing.
LOCK_FILES = ("requirements.txt", "package-lock.json", "Cargo.lock", "go.mod", "go.sum", "pom.xml", "build.sbt",
              "project/build.properties", "project/plugins.sbt")


def _build_versions(contestant: Contestant) -> dict:
    """Versions that decide what was built: the tools the manifest needs and its steps run, the lock files'
    hashes, and the resolved package versions where a lock file or the binary lists them (npm, cargo, go)."""
    from .envinfo import RUNTIMES, tool_version

    manifest = contestant.manifest
    tools = list(dict.fromkeys([*_required_executables(manifest), *(step[0] for step in manifest.install.steps)]))
    out: dict = {"tool_versions": {}, "lock_files": {}}
    for tool in tools:
        args, lines, ok = RUNTIMES.get(tool, (["--version"], 1, (0,)))
        out["tool_versions"][tool] = tool_version(tool, args, lines, ok)
    folder = contestant.dir
    requirements = [manifest.install.python_requirements] if manifest.install.python_requirements else []
    for name in dict.fromkeys([*requirements, *LOCK_FILES]):
        if (folder / name).is_file():
            out["lock_files"][name] = "sha256:" + _hash_file(folder / name)
    try:
        lock = json.loads((folder / "package-lock.json").read_text())
        out["npm_packages"] = {key.removeprefix("node_modules/"): value.get("version")
                               for key, value in lock.get("packages", {}).items() if key}
    except (OSError, ValueError, AttributeError):
        pass
    try:
        import tomllib
        cargo = tomllib.loads((folder / "Cargo.lock").read_text())
        out["cargo_packages"] = {p["name"]: p.get("version") for p in cargo.get("package", [])}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    values = contestant.placeholders()
    for step in manifest.install.steps:
        if step[0] == "go" and "-o" in step[:-1] and shutil.which("go"):
            binary = expand(step[step.index("-o") + 1], values)
            try:
                listed = subprocess.run(["go", "version", "-m", binary], capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if listed.returncode == 0:  # the Go toolchain, module path and every dependency, as built
                out.setdefault("go_modules", {})[binary] = [" ".join(line.split()) for line in
                                                             listed.stdout.splitlines()[1:] if line.strip()]
    return out


def _dpkg_version(package: str) -> str | None:
    if not shutil.which("dpkg-query"):
        return None
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return (result.stdout.strip() or None) if result.returncode == 0 else None


def _by_language_and_model(contestants: list[Contestant]) -> list[str]:
    """The same contestants as a language x model grid (config.MODEL_GROUPS), the way a reader chooses."""
    groups = list(dict.fromkeys(MODEL_GROUPS.values()))
    cells: dict[tuple[str, str], list[str]] = {}
    for c in contestants:
        cells.setdefault((c.manifest.language, model_group(c.manifest.concurrency_model)), []).append(c.name)
    lines = ["", "## By language and model", "",
             "Models: event loop (one thread multiplexes many connections), green threads (goroutines, greenlets: "
             "cheap runtime threads, a blocking call parks only its own), virtual threads (Java's), threads (an OS "
             "thread per request, from a pool), multi-process (one request at a time per process), actors "
             "(Erlang's processes). A multi-core set-up of any of them (several processes or event loops) keeps its "
             "model; the table above says how each uses `workers`.", "",
             "| language | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for language in sorted({c.manifest.language for c in contestants}):
        lines.append(f"| {language} | " + " | ".join(", ".join(sorted(cells.get((language, g), []))) or " "
                                                   for g in groups) + " |")
    return lines


def markdown_catalog(contestants: list[Contestant], not_here: list[NotHereEntry] = ()) -> str:
    """docs/contestants.md: the contestants x scenarios table, generated from the manifests alone (what each
    contestant implements, not whether it runs on this machine: that is `netarena list`)."""
    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    lines = ["# Contestants", "",
             "Generated from `contestants/*/contestant.toml` by `netarena list --markdown > docs/contestants.md`;",
             "a test fails when this file and the manifests disagree. Scenarios are defined in",
             "[scenarios.md](scenarios.md); ✓ = implemented, ✗ = declared unsupported (reason below the table), – = not",
             "implemented yet (only scenarios that need a backing service may be left out without a reason).", "",
             "The protocols column says what each serves the HTTP scenarios over: h1 (HTTP/1.1), h1-tls (HTTP/1.1",
             "over TLS), h2 (HTTP/2 over TLS), h2c (HTTP/2 in cleartext); [protocols.md](protocols.md).", "",
             "| contestant | runtime | framework | model | workers | protocols | " + " | ".join(SCENARIOS) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(SCENARIOS)]
    reasons = []
    for c in contestants:
        m = c.manifest
        marks = ["✓" if s in m.scenarios else ("✗" if s in m.unsupported else "–") for s in SCENARIOS]
        workers = "yes" if m.workers.supported else "no"
        lines.append(f"| {c.name} | {cell(m.runtime)} | {cell(m.framework)} {cell(m.framework_version)} | "
                     f"{m.concurrency_model} | {workers} | {', '.join(m.protocols)} | " + " | ".join(marks) + " |")
        reasons += [f"- **{c.name}** `{s}`: {cell(m.unsupported[s])}" for s in SCENARIOS if s in m.unsupported]
    lines += _by_language_and_model(contestants)
    lines += ["", "## Not implemented, and why", ""] + (reasons or ["(none)"])
    if not_here:
        lines += ["", "## Frameworks that are not contestants, and why", "",
                  "From `contestants/not-here.toml`; `netarena list` prints them too.", "",
                  "| framework | language | why |", "|---|---|---|"]
        lines += [f"| {cell(n.framework)} | {cell(n.language)} | {cell(n.reason)} |" for n in not_here]
    lines += ["", "## Notes", ""] + [f"- **{c.name}** ({cell(c.manifest.display_name)}): {cell(c.manifest.notes)}"
                                     for c in contestants if c.manifest.notes]
    return "\n".join(lines) + "\n"


__all__ = ["Contestant", "Availability", "InstallError", "Installed", "availability", "install", "install_parts",
           "quick_build", "quick_jit", "QUICK_BUILDS_ENV", "QUICK_JIT_OPTIONS",
           "install_current", "install_estimate_s", "install_concurrently", "next_install", "shared_build_folder",
           "longest_chains_first", "go_build_cache",
           "default_install_jobs", "select", "load", "list_names",
           "expand", "cache_root", "default_contestants_dir", "repo_root", "tail", "scenario_note", "markdown_catalog"]


def for_servers(run_as_root: bool, contestants) -> ServerUser | None:
    """The user the servers of `contestants` will run as, once it is known to reach what they need."""
    user = server_user(run_as_root)
    paths = {"the cache": cache_root()}
    for contestant in contestants:
        paths[f"{contestant.name}'s folder"] = contestant.dir
        jdk = contestant.jdk()
        if jdk is not None:
            paths[f"{contestant.name}'s JDK"] = jdk.home
    check_reachable(paths, user)
    return user
