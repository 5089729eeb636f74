"""Who contestant servers run as, and the limits they run under.

netarena runs as root to install Debian packages, raise limits and pin CPUs; the servers it measures are other
people's code. So when netarena runs as root, each server runs as the unprivileged system user SERVER_USER
(created on first use with useradd), unless the run opts out with `--run-as-root` or NETARENA_RUN_AS_ROOT=1.
Installs keep root (apt-get needs it; pip, npm, cargo and the rest write only into the cache, which stays
readable by everyone). The server user needs to reach the contestant's folder, the cache and the static set:
`check_reachable` refuses a run where a folder on the way is closed to it (a checkout under /root, mode 700),
before anything starts. What it may write: its own `{run_dir}` (cache/run/<name>, owned by it, also its HOME).

Every server also gets a size limit on the files it writes (RLIMIT_FSIZE = SERVER_LOG_MAX_BYTES, SIGXFSZ
ignored): its log cannot fill the disk; past the limit its writes fail (EFBIG) instead.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

SERVER_USER = "netarena"
RUN_AS_ROOT_ENV = "NETARENA_RUN_AS_ROOT"
SERVER_LOG_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ServerUser:
    name: str
    uid: int
    gid: int


def wants_root(flag: bool) -> bool:
    return flag or os.environ.get(RUN_AS_ROOT_ENV, "") not in ("", "0")


def server_user(run_as_root: bool) -> ServerUser | None:
    """The user servers run as: None (netarena's own user) unless netarena is root and did not opt out.

    Creates SERVER_USER (a system user without a login shell or home) when it does not exist; a failure is a
    ConfigError naming the fix."""
    if os.geteuid() != 0 or wants_root(run_as_root):
        return None
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        useradd = shutil.which("useradd")
        command = [useradd or "useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                   "/nonexistent", "--shell", "/usr/sbin/nologin", SERVER_USER]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=60)
            failure = None if result.returncode == 0 else (result.stderr.strip() or f"exit {result.returncode}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            failure = str(exc)
        if failure is not None:
            raise ConfigError(f"cannot create the user {SERVER_USER!r} that runs the contestants' servers "
                              f"({' '.join(command)}: {failure})",
                              hint="create it yourself, or pass --run-as-root to run them as root") from None
        entry = pwd.getpwnam(SERVER_USER)
    return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _blocking(path: Path, user: ServerUser) -> Path | None:
    """The first folder from / down to `path` that `user` may not enter (no search permission), if any."""
    path = path.resolve()
    for folder in [*reversed(path.parents), path]:
        try:
            st = folder.stat()
        except OSError:
            return None  # not there yet (created later by netarena, with default permissions)
        if not stat.S_ISDIR(st.st_mode):
            continue
        bit = stat.S_IXUSR if st.st_uid == user.uid else stat.S_IXGRP if st.st_gid == user.gid else stat.S_IXOTH
        if not st.st_mode & bit:
            return folder
    return None


def reachable(path: Path, user: ServerUser) -> bool:
    """Whether `user` can enter every folder on the way to `path` (a file or folder)."""
    return _blocking(path.parent if not path.is_dir() else path, user) is None


def reachable_executable(name: str, user: ServerUser | None) -> str | None:
    """The first `name` on PATH that `user` can reach (None for user None, or when there is none)."""
    if user is None:
        return None
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder or ".") / name
        if candidate.is_file() and os.access(candidate, os.X_OK) and reachable(candidate.resolve(), user):
            return str(candidate)
    return None


def check_reachable(paths: dict[str, Path], user: ServerUser | None) -> None:
    """Raise ConfigError when `user` cannot reach one of `paths` ({what: path}); nothing to check for None."""
    if user is None:
        return
    for what, path in paths.items():
        closed = _blocking(path, user)
        if closed is not None:
            raise ConfigError(
                f"{what} {path} is out of reach of the user {user.name!r} that runs the contestants' servers: "
                f"{closed} is mode {stat.S_IMODE(closed.stat().st_mode):o}",
                hint="keep the checkout and NETARENA_CACHE under folders others may enter (e.g. /opt, /srv, "
                     "/var/cache), or pass --run-as-root")


def prepare_run_dir(run_dir: Path, user: ServerUser | None) -> Path:
    """The server's writable folder ({run_dir}, its HOME), owned by the user it runs as."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if user is not None:
        for root, dirs, files in os.walk(run_dir):  # what an earlier run as root left there
            for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
                if os.lstat(name).st_uid != user.uid:
                    os.lchown(name, user.uid, user.gid)
    return run_dir
