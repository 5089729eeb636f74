"""A contestant's venv is made by uv from the package-index settings pip has (netarena.python_env): real pip
reading real configuration, real uv installs into a private cache."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
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


def _wheel(folder: Path, name: str, version: str, module_text: str) -> Path:
    """A pure-Python wheel written by hand: one module and the metadata an installer reads."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {f"{module}/__init__.py": module_text,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: netarena-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name_in_archive, text in files.items():
            archive.writestr(name_in_archive, text)
    return path


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
    caches = list((cache / "uv").iterdir())
    assert len(caches) == 1 and any(caches[0].rglob("fx_local_only*")), caches
