"""The environment fingerprint, checked against the machine it runs on."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from netarena import envinfo  # noqa: E402


@pytest.fixture(scope="module")
def info() -> dict:
    return envinfo.collect({"cpu_sets": {"server": [0], "generator": [1]}})


def test_collect_is_json_serializable(info):
    json.dumps(info)


def _hanging_tool(directory: Path, name: str) -> None:
    tool = directory / name
    # A child holding the pipes, like a shim would; its pid in NAME.child.
    tool.write_text(f"#!/bin/sh\n/bin/sleep 30 &\necho $! > {directory / name}.child\nwait\n")
    tool.chmod(0o755)


def test_collect_asks_the_tools_in_parallel_each_within_its_timeout(tmp_path, monkeypatch):
    """Every runtime on PATH hangs: collect() still returns, each version None, in about one TOOL_TIMEOUT_S.
    One after the other they would take len(RUNTIMES) x TOOL_TIMEOUT_S (21 s); half of that is the bound,
    a margin no slow or busy machine needs, which only asking one at a time exceeds."""
    for name in envinfo.RUNTIMES:
        _hanging_tool(tmp_path, name)
    monkeypatch.setenv("PATH", str(tmp_path))
    started_s = time.monotonic()
    result = envinfo.collect()
    elapsed_s = time.monotonic() - started_s
    assert result["runtimes"] == {name: None for name in envinfo.RUNTIMES}
    serial_s = len(envinfo.RUNTIMES) * envinfo.TOOL_TIMEOUT_S
    assert elapsed_s < serial_s / 2, f"{elapsed_s:.1f} s: the version commands ran one after another"


def test_extra_is_merged(info):
    assert info["cpu_sets"] == {"server": [0], "generator": [1]}


def test_values_match_the_machine(info):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert info["limits"]["open_files"] == {
        "soft": None if soft == resource.RLIM_INFINITY else soft,
        "hard": None if hard == resource.RLIM_INFINITY else hard,
    }
    assert info["cpu"]["logical_cores"] == os.cpu_count()
    assert info["cpu"]["available_cpus"] == sorted(os.sched_getaffinity(0))
    assert info["kernel"]["release"] == os.uname().release
    assert info["hostname"] == os.uname().nodename
    assert info["memory"]["total_bytes"] > 0
    assert info["python"]["version"] == "%d.%d.%d" % sys.version_info[:3]
    for name in envinfo.SYSCTLS:
        path = Path("/proc/sys") / name.replace(".", "/")
        expected = " ".join(path.read_text().split()) if path.exists() else None
        assert info["sysctls"][name] == expected, name
    assert info["sysctls"]["net.ipv4.ip_local_port_range"].count(" ") == 1


def test_git_revision_matches_the_checkout(info):
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not running from a git checkout")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                                capture_output=True, text=True, check=True).stdout.strip())
    assert info["netarena"]["git"] == {"sha": head, "dirty": dirty}


def test_runtime_versions_come_from_the_tools_on_path(info):
    assert set(info["runtimes"]) == set(envinfo.RUNTIMES)
    for name, version in info["runtimes"].items():
        if shutil.which(name) is None:
            assert version is None, name
    python3 = shutil.which("python3")
    if python3:
        out = subprocess.run([python3, "--version"], capture_output=True, text=True)
        assert info["runtimes"]["python3"] == (out.stdout or out.stderr).strip()


def test_missing_or_hanging_tools_give_none(tmp_path, monkeypatch):
    _hanging_tool(tmp_path, "hangtool")
    failing = tmp_path / "failtool"
    failing.write_text("#!/bin/sh\necho 'failtool: unknown option' >&2\nexit 2\n")
    failing.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert envinfo.tool_version("no-such-tool-here", ["--version"]) is None
    assert envinfo.tool_version("failtool", ["--version"]) is None
    started_s = time.monotonic()
    assert envinfo.tool_version("hangtool", ["--version"]) is None
    # Given up after its timeout, not after the 30 s its child sleeps: that child was killed with it.
    assert time.monotonic() - started_s < 15
    child = int((tmp_path / "hangtool.child").read_text())
    # Killed, not left sleeping: a SIGKILLed process may take a moment to go, so wait a little (not 30 s).
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and time.monotonic() < deadline:
        try:
            if psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_missing_files_give_none():
    assert envinfo.read_sysctl("net.no_such_setting") is None
    assert envinfo.read_text("/proc/no/such/file") is None
