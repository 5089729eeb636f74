"""A contestant's venv is made by uv from the package-index settings pip has (netarena.python_env): real pip
reading real configuration, real uv installs into a private cache."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import tomllib
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS
from netarena import contestants as ct
from netarena import python_env


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("NETARENA_CACHE", str(root))
    return root


def _pip_config_list(environ: dict) -> str:
    return subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          timeout=60, env=environ, check=True).stdout


def test_pip_settings_follow_pips_own_precedence_and_a_uv_variable_already_set_wins(tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = http://127.0.0.1:9/global\ntimeout = 33\n"
                      "[install]\nindex-url = http://127.0.0.1:9/install\ntrusted-host = a.test b.test\n")
    environ = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    environ.update(PIP_CONFIG_FILE=str(config), PIP_FIND_LINKS=f"{tmp_path}/one {tmp_path}/two")
    settings = python_env.pip_settings(_pip_config_list(environ))
    assert settings["index-url"] == "http://127.0.0.1:9/install"  # [install] over [global]
    assert settings["timeout"] == "33"
    variables = python_env.uv_variables(settings, environ={})
    assert variables["UV_DEFAULT_INDEX"] == "http://127.0.0.1:9/install"
    assert variables["UV_FIND_LINKS"] == f"{tmp_path}/one,{tmp_path}/two"
    assert variables["UV_INSECURE_HOST"] == "a.test b.test"
    assert variables["UV_HTTP_TIMEOUT"] == "33"
    # Set by the user for uv: left alone.
    assert "UV_DEFAULT_INDEX" not in python_env.uv_variables(settings, environ={"UV_DEFAULT_INDEX": "x"})
    # The indexes go into uv's configuration file (uv reading it: the test below, whose index is pip's).
    settings["extra-index-url"] = "http://127.0.0.1:9/extra-one http://127.0.0.1:9/extra-two"
    config = tomllib.loads(python_env.uv_config(settings))
    assert [(index["url"], index.get("default", False)) for index in config["index"]] == [
        ("http://127.0.0.1:9/extra-one", False), ("http://127.0.0.1:9/extra-two", False),
        ("http://127.0.0.1:9/install", True)]
    assert {index["cache-control"]["files"] for index in config["index"]} == {python_env.IMMUTABLE_FILES}
    del settings["index-url"], settings["extra-index-url"]
    assert tomllib.loads(python_env.uv_config(settings))["index"] == [
        {"url": python_env.PYPI, "default": True, "cache-control": {"files": python_env.IMMUTABLE_FILES}}]


def test_the_venvs_uv_gets_netarenas_configuration_unless_the_machine_has_its_own(tmp_path, monkeypatch):
    """pip's index in netarena's uv configuration file; with a user's uv.toml (which a configuration file given to
    uv would replace) or UV_CONFIG_FILE, no file of netarena's, and pip's index as a variable."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/pips")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "system"))
    monkeypatch.delenv("UV_CONFIG_FILE", raising=False)
    monkeypatch.delenv("UV_DEFAULT_INDEX", raising=False)
    python_env._pip_config_list.cache_clear()
    try:
        if python_env.machine_uv_config() is not None:
            pytest.fail(f"this machine has a uv configuration of its own ({python_env.machine_uv_config()}): "
                        "the test needs a machine without one")
        own = python_env.venv_environment(tmp_path / "cache", sys.executable)
        assert "UV_DEFAULT_INDEX" not in own
        config = tomllib.loads(Path(own["UV_CONFIG_FILE"]).read_text())
        assert config["index"][-1]["url"] == "http://127.0.0.1:9/pips", config
        (tmp_path / "config" / "uv").mkdir(parents=True)
        (tmp_path / "config" / "uv" / "uv.toml").write_text('[[index]]\nurl = "http://127.0.0.1:9/users"\n')
        users = python_env.venv_environment(tmp_path / "cache", sys.executable)
        assert "UV_CONFIG_FILE" not in users and users["UV_DEFAULT_INDEX"] == "http://127.0.0.1:9/pips"
        (tmp_path / "config" / "uv" / "uv.toml").unlink()
        monkeypatch.setenv("UV_CONFIG_FILE", str(tmp_path / "given.toml"))
        given = python_env.venv_environment(tmp_path / "cache", sys.executable)
        assert given["UV_CONFIG_FILE"] == str(tmp_path / "given.toml")
        assert given["UV_DEFAULT_INDEX"] == "http://127.0.0.1:9/pips"
    finally:
        python_env._pip_config_list.cache_clear()


def _wheel(folder: Path, name: str, version: str, module_text: str) -> Path:
    """A pure-Python wheel written by hand: one module and the metadata an installer reads."""
    module = name.replace("-", "_")
    path = folder / f"{module}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_wheel_bytes(name, version, module_text))
    return path


def _wheel_bytes(name: str, version: str, module_text: str) -> bytes:
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {f"{module}/__init__.py": module_text,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: netarena-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name_in_archive, text in files.items():
            archive.writestr(name_in_archive, text)
    return buffer.getvalue()


def test_a_contestants_venv_finds_a_package_only_pips_configuration_knows_of(cache, tmp_path, monkeypatch):
    """A package on no index, in a folder pip is told of (PIP_FIND_LINKS): the venv uv makes has it, so pip's
    settings reached uv. Its uv cache is the interpreter's own, in netarena's cache."""
    wheels = tmp_path / "wheels"
    _wheel(wheels, "fx-local-only", "1.0", 'VALUE = "from the folder pip was told of"\n')
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    python_env._pip_config_list.cache_clear()
    folder = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS / "fx-pip", folder / "fx-pip")
    (folder / "fx-pip" / "requirements.txt").write_text("fx-local-only==1.0\n")
    contestant = ct.load(folder, ["fx-pip"])[0]
    try:
        record = ct.install(contestant, allow_apt=False)
    finally:
        python_env._pip_config_list.cache_clear()
    assert record["pip_freeze"] == ["fx-local-only==1.0"]  # the requirements and nothing else
    imported = subprocess.run([str(contestant.venv_dir / "bin" / "python"), "-c",
                               "import fx_local_only; print(fx_local_only.VALUE)"],
                              capture_output=True, text=True, timeout=60)
    assert imported.stdout.strip() == "from the folder pip was told of", imported
    log = (contestant.env_dir / "install.log").read_text()
    assert "uv pip install --compile-bytecode" in log, log[-2000:]
    caches = [path for path in (cache / "uv").iterdir() if path.is_dir()]  # beside them: uv.toml files, locks
    assert len(caches) == 1 and any(caches[0].rglob("fx_local_only*")), caches


# The build backend of the source distribution below, in the archive itself (backend-path): it notes each build
# in FX_BUILD_LOG and takes FX_BUILD_SECONDS, as a compiler would, so that two installs started together overlap.
_BACKEND = """
import base64, hashlib, io, os, time, zipfile

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.environ["FX_BUILD_LOG"], "a") as log:
        log.write(f"built by {os.getpid()}\\n")
    time.sleep(float(os.environ["FX_BUILD_SECONDS"]))
    name = "fx_built-1.0-py3-none-any.whl"
    with open(os.path.join(wheel_directory, name), "wb") as out:
        out.write(base64.b64decode(WHEEL))
    return name
"""


def _source_distribution() -> bytes:
    """fx-built 1.0 as a source distribution only (no wheel: installing it means building it), with static
    metadata (so resolving it needs no build) and its own build backend."""
    wheel = base64.b64encode(_wheel_bytes("fx-built", "1.0", 'VALUE = "built from its source"\n')).decode()
    files = {"PKG-INFO": "Metadata-Version: 2.2\nName: fx-built\nVersion: 1.0\n",
             "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "fx_backend"\nbackend-path = ["."]\n'
                               '\n[project]\nname = "fx-built"\nversion = "1.0"\n',
             "fx_backend.py": _BACKEND + f"\nWHEEL = {wheel!r}\n"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(f"fx_built-1.0/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


class _Index(BaseHTTPRequestHandler):
    """A package index (PEP 503's simple API) on loopback holding fx-built's source distribution, sending no
    Cache-Control, ETag or Last-Modified, as the proxy in front of PyPI on the machine this was written on did.
    uv alone then fetches the archive again for every install and builds it again each time."""

    archive = b""

    def do_GET(self):
        digest = hashlib.sha256(self.archive).hexdigest()
        pages = {"/simple/fx-built/": (f'<a href="/files/fx_built-1.0.tar.gz#sha256={digest}">fx_built-1.0.tar.gz'
                                       "</a>\n").encode(),
                 "/files/fx_built-1.0.tar.gz": self.archive}
        body = pages.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path.startswith("/simple/") else "application/x-gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_two_contestants_needing_the_same_source_build_get_it_built_once(cache, tmp_path, monkeypatch):
    """Two contestants install at once, each requiring a package the index (pip's index-url) has only as a source
    distribution: it is built once (the source-builds lock of the interpreter's uv cache, and uv told that the
    index's files are immutable), and both venvs have it."""
    _Index.archive = _source_distribution()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    builds = tmp_path / "builds.log"
    builds.touch()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple/")
    monkeypatch.setenv("FX_BUILD_LOG", str(builds))
    monkeypatch.setenv("FX_BUILD_SECONDS", "3")
    python_env._pip_config_list.cache_clear()
    folder = tmp_path / "contestants"
    for name in ("fx-source-a", "fx-source-b"):
        shutil.copytree(FIXTURE_CONTESTANTS / "fx-pip", folder / name)
        manifest = folder / name / "contestant.toml"
        manifest.write_text(manifest.read_text().replace('name = "fx-pip"', f'name = "{name}"'))
        (folder / name / "requirements.txt").write_text("fx-built==1.0\n")
    both = ct.load(folder, ["fx-source-a", "fx-source-b"])
    records: dict[str, dict] = {}
    errors: list[BaseException] = []

    def install(contestant):
        try:
            records[contestant.name] = ct.install(contestant, allow_apt=False)
        except BaseException as exc:  # reported below, with the install's log
            errors.append(exc)

    threads = [threading.Thread(target=install, args=(contestant,)) for contestant in both]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
            assert not thread.is_alive(), "an install still running after 300 s"
    finally:
        server.shutdown()
        python_env._pip_config_list.cache_clear()
    assert not errors, errors
    assert builds.read_text().count("built by") == 1, builds.read_text()
    for contestant in both:
        assert records[contestant.name]["pip_freeze"] == ["fx-built==1.0"]
        imported = subprocess.run([str(contestant.venv_dir / "bin" / "python"), "-c",
                                   "import fx_built; print(fx_built.VALUE)"],
                                  capture_output=True, text=True, timeout=60)
        assert imported.stdout.strip() == "built from its source", imported
        # Tried from wheels alone first, which fails without installing anything, then with the build allowed.
        log = (contestant.env_dir / "install.log").read_text()
        assert "--no-build" in log and "installing with source builds" in log, log[-3000:]


def test_the_uv_configuration_written_by_many_installs_at_once_is_one_whole_file(tmp_path):
    """Installs run in threads of one process: each writer has a partial file of its own, so every one of them
    gets the file, whole, and none is left half-written."""
    paths: list[Path] = []
    errors: list[BaseException] = []

    def write():
        try:
            paths.append(python_env.uv_config_file(tmp_path, python_env.uv_config({})))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert len(set(paths)) == 1 and len(paths) == 16, paths
    assert tomllib.loads(paths[0].read_text())["index"][0]["url"] == python_env.PYPI
    assert [path.name for path in (tmp_path / "uv").iterdir()] == [paths[0].name]  # no partial file left
