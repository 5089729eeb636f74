"""Install steps re-run whenever their outputs may be missing: a fresh clone beside a kept cache (what CI is),
a fresh cache beside a built checkout, or a changed contestant folder; and not otherwise."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from netarena import contestants as ct

MANIFEST = """
name = "fx-steps"
display_name = "fixture with install steps"
language = "c"
runtime = "native"
framework = "none"
framework_version = "0"
concurrency_model = "threads"
scenarios = ["hello"]

[unsupported]
echo = "fixture"
bytes = "fixture"
json = "fixture"
static = "fixture"
sleep = "fixture"

[install]
requires = ["sh"]
# One output in the folder (like npm ci's node_modules), one in the cache (like go build -o {build_dir}/...);
# every run appends to a counter in the cache so the test sees how often the steps ran.
steps = [["sh", "-c", "mkdir -p node_modules && echo ok > node_modules/dep && echo ok > {build_dir}/server && echo run >> {env_dir}/runs"]]

[start]
command = ["sh", "-c", "exit 1"]
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("NETARENA_CACHE", str(root))
    return root


def _checkout(where: Path) -> ct.Contestant:
    folder = where / "contestants" / "fx-steps"
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text(MANIFEST)
    return ct.load(where / "contestants", ["fx-steps"])[0]


def _runs(contestant: ct.Contestant) -> int:
    runs = contestant.env_dir / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_steps_run_once_then_are_current(cache, tmp_path):
    contestant = _checkout(tmp_path / "a")
    ct.install(contestant, allow_apt=False)
    ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 1
    assert (contestant.dir / "node_modules" / "dep").read_text() == "ok\n"


def test_fresh_clone_beside_a_kept_cache_reinstalls(cache, tmp_path):
    """The CI failure: a new checkout at the same path, ~/.cache kept from an earlier run, node_modules gone."""
    first = _checkout(tmp_path / "clone")
    ct.install(first, allow_apt=False)
    shutil.rmtree(tmp_path / "clone")
    again = _checkout(tmp_path / "clone")
    ct.install(again, allow_apt=False)
    assert _runs(again) == 2
    assert (again.dir / "node_modules" / "dep").is_file()


def test_fresh_cache_beside_a_built_checkout_reinstalls(cache, tmp_path):
    contestant = _checkout(tmp_path / "a")
    ct.install(contestant, allow_apt=False)
    shutil.rmtree(cache)
    ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 1  # the counter lives in the (new) cache
    assert (contestant.env_dir / "build" / "server").is_file()


def test_changed_contestant_folder_reinstalls_and_nothing_is_written_into_it(cache, tmp_path):
    contestant = _checkout(tmp_path / "a")
    ct.install(contestant, allow_apt=False)
    # Only what the steps themselves make there (npm ci's node_modules); netarena's own record is in the cache.
    assert sorted(p.name for p in contestant.dir.iterdir()) == ["contestant.toml", "node_modules"]
    (contestant.dir / "server.sh").write_text("echo changed\n")
    ct.install(contestant, allow_apt=False)
    ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 2


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("apt-get"), reason="needs root and apt-get (CI runs as root)")
def test_first_debian_install_of_a_process_runs_apt_get_update_first_and_only_once(cache, tmp_path, monkeypatch):
    """A fresh container has empty apt lists: without `apt-get update` every Debian install fails.

    Real apt-get, with a package name that exists nowhere, so nothing on the machine is installed.
    """
    monkeypatch.setattr(ct, "_apt_updated", False)
    folder = tmp_path / "contestants" / "fx-steps"
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text(MANIFEST.replace('requires = ["sh"]',
                                                             'requires = ["sh"]\ndebian = ["netarena-no-such-package"]'))
    contestant = ct.load(tmp_path / "contestants", ["fx-steps"])[0]
    said = []
    for _ in range(2):
        with pytest.raises(ct.InstallError, match="apt-get install failed"):
            ct.install(contestant, allow_apt=True, say=said.append)
    log = (contestant.env_dir / "install.log").read_text()
    commands = [line for line in log.splitlines() if line.startswith("$ apt-get")]
    assert commands == ["$ apt-get update -q",
                        "$ apt-get install -y --no-install-recommends netarena-no-such-package",
                        "$ apt-get install -y --no-install-recommends netarena-no-such-package"], log
    assert "Unable to locate package netarena-no-such-package" in log
    assert sum("apt-get update" in s for s in said) == 1


def test_what_servers_run_from_is_open_to_every_user(cache, tmp_path):
    """Servers may run as another user than the installer (root): a build output its tool made for its owner
    alone (sbt's start script is mode 744) is opened for reading, and running where the owner may run it."""
    folder = tmp_path / "contestants" / "fx-steps"
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text(MANIFEST.replace(
        "echo ok > {build_dir}/server &&", "echo ok > {build_dir}/server && chmod 700 {build_dir}/server && "
        "echo x > {build_dir}/data && chmod 600 {build_dir}/data &&"))
    contestant = ct.load(tmp_path / "contestants", ["fx-steps"])[0]
    ct.install(contestant, allow_apt=False)
    assert stat.S_IMODE((contestant.env_dir / "build" / "server").stat().st_mode) == 0o755
    assert stat.S_IMODE((contestant.env_dir / "build" / "data").stat().st_mode) == 0o644


def test_two_processes_installing_at_once_build_once(cache, tmp_path):
    """Two real netarena processes install the same contestant at the same time (a `verify` beside a `run`):
    the second waits on the install lock, then finds the build current; the steps ran once and both succeed.
    Without the lock both ran the (slow) steps, each under the other's feet."""
    import subprocess
    import sys
    import time

    folder = tmp_path / "a" / "contestants" / "fx-steps"
    folder.mkdir(parents=True)
    # The step holds the install until the test creates `release` (30 s at most, so it stops by itself): the
    # second process is started only once the first is inside its step, and the step ends only once the second
    # has said it waits, so the two overlap in that order whatever the machine's speed.
    hold = "i=0; while [ ! -e {env_dir}/release ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
    (folder / "contestant.toml").write_text(MANIFEST.replace("echo run >> {env_dir}/runs",
                                                             "echo run >> {env_dir}/runs && " + hold))
    contestant = ct.load(tmp_path / "a" / "contestants", ["fx-steps"])[0]
    script = ("import sys; from pathlib import Path; from netarena import contestants as ct; "
              "c = ct.load(Path(sys.argv[1]), ['fx-steps'])[0]; ct.install(c, allow_apt=False, say=print)")
    env = dict(os.environ, NETARENA_CACHE=str(cache))

    def start():
        return subprocess.Popen([sys.executable, "-u", "-c", script, str(tmp_path / "a" / "contestants")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    first = start()
    deadline = time.monotonic() + 60
    while _runs(contestant) == 0:
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    second = start()
    said = []
    while not said or "waiting for another netarena process installing it" not in said[-1]:
        line = second.stdout.readline()  # the first's step holds the lock for 30 s at most: this returns
        assert line, said
        said.append(line)
    (contestant.env_dir / "release").touch()
    outputs = [first.communicate(timeout=60)[0], "".join(said) + second.communicate(timeout=60)[0]]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    assert _runs(contestant) == 1, outputs
