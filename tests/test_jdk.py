"""`[install] java = N`: netarena finds a JDK of Java N or newer (JAVA_HOME when it qualifies, else the java on
PATH, else /usr/lib/jvm newest first), builds and starts the contestant with it (JAVA_HOME, PATH, {java}),
rebuilds when the JDK changes, and refuses with what it found and the fix when there is none.

The positive path uses this machine's real JDKs: one of Java 21 or newer under /usr/lib/jvm (Temurin 25 on this
project's machines; without one the test is skipped with the reason, a failure under CI like every skip). Small
scripts stand in for a JDK where the test needs an old one, or a second qualifying one to switch to.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from netarena import contestants as ct
from netarena import jdk as jdk_module
from netarena.backends.real import RealBackend
from netarena.ports import free_port
from netarena.profile import ENV_BY_RUNTIME
from netarena.process import available_cpus

MANIFEST = """
name = "fx-java"
display_name = "fixture that asks for Java 21"
language = "java"
runtime = "jvm"
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
java = 21
# What the step saw (JAVA_HOME, the java first on PATH, {java}), and a counter of how often it ran.
steps = [
  ["sh", "-c", "echo $JAVA_HOME > {build_dir}/java_home; command -v java > {build_dir}/java_on_path"],
  ["sh", "-c", "{java} -version 2> {build_dir}/java_version; echo run >> {env_dir}/runs"],
]

[start]
command = ["sh", "-c", "echo $JAVA_HOME > {run_dir}/java_home; exec {java} -version 2> {run_dir}/java_version"]
"""


@pytest.fixture
def java_env(tmp_path, monkeypatch):
    """A private cache, and no JAVA_HOME unless the test sets one."""
    monkeypatch.setenv("NETARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return tmp_path


def _fake_jdk(where: Path, version: str, release: bool = False) -> Path:
    """A folder laid out as a JDK whose bin/java prints `version` as `java -version` does (on stderr); with
    `release`, the version is in its release file too."""
    (where / "bin").mkdir(parents=True)
    (where / "bin" / "java").write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2020-01-01' >&2\n")
    (where / "bin" / "javac").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("java", "javac"):
        (where / "bin" / tool).chmod(0o755)
    if release:
        (where / "release").write_text(f'IMPLEMENTOR="fake"\nJAVA_VERSION="{version}"\n')
    return where


def _real_jdk(minimum: int = 21) -> jdk_module.Jdk:
    """The newest JDK of Java `minimum` or newer under /usr/lib/jvm, as find_jdk picks it there."""
    homes = sorted(p for p in jdk_module.JVM_DIR.iterdir() if p.is_dir()) if jdk_module.JVM_DIR.is_dir() else []
    found = [j for j in map(jdk_module.probe, homes) if j is not None and j.feature >= minimum]
    if not found:
        pytest.skip(f"no JDK of Java {minimum} or newer under {jdk_module.JVM_DIR}, which the java-21 contestants "
                    f"(java-helidon-se, java-spring-mvc-vt) need: install one there or set JAVA_HOME")
    return max(found, key=lambda j: j.version_key)


def _contestant(where: Path, manifest: str = MANIFEST) -> ct.Contestant:
    folder = where / "contestants" / "fx-java"
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text(manifest)
    return ct.load(where / "contestants", ["fx-java"])[0]


def _runs(contestant: ct.Contestant) -> int:
    runs = contestant.env_dir / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_versions_are_read_from_the_release_file_else_from_java_version(java_env):
    assert jdk_module.probe(_fake_jdk(java_env / "new", "22.0.1", release=True)) == \
        jdk_module.Jdk(java_env / "new", "22.0.1")
    old = jdk_module.probe(_fake_jdk(java_env / "old", "1.8.0_392"))
    assert (old.version, old.feature) == ("1.8.0_392", 8)  # Java 8 still numbered itself 1.8
    runtime_only = _fake_jdk(java_env / "jre", "25.0.1", release=True)
    (runtime_only / "bin" / "javac").unlink()
    assert jdk_module.probe(runtime_only) is None  # a runtime alone cannot build the contestant
    real = _real_jdk()
    said = subprocess.run([str(real.java), "-version"], capture_output=True, text=True, timeout=60).stderr
    assert f'version "{real.version}"' in said, said  # the release file says what the binary says


def test_without_a_jdk_new_enough_it_cannot_run_and_says_what_it_found_and_the_fix(java_env, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(java_env / "old-jdk", "11.0.2")))
    monkeypatch.setenv("PATH", str(_fake_jdk(java_env / "path-jdk", "17.0.15") / "bin") + ":/usr/bin:/bin")
    monkeypatch.setattr(jdk_module, "JVM_DIR", java_env / "no-jvm-dir")
    contestant = _contestant(java_env)
    av = ct.availability(contestant, allow_apt=False)
    assert not av.runnable
    assert av.reasons == [
        f"needs a JDK of Java 21 or newer, found JAVA_HOME={java_env / 'old-jdk'}: Java 11.0.2; java on PATH: "
        f"Java 17.0.15 ({java_env / 'path-jdk'}): install one (e.g. under {java_env / 'no-jvm-dir'}) or set "
        "JAVA_HOME to one"]
    with pytest.raises(ct.InstallError, match="needs a JDK of Java 21 or newer"):
        ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 0


def test_a_java_home_without_a_jdk_is_named_in_the_reason(java_env, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(java_env / "nothing-here"))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(jdk_module, "JVM_DIR", java_env / "no-jvm-dir")
    assert jdk_module.find_jdk(21) == (None, f"JAVA_HOME={java_env / 'nothing-here'}: no JDK there (no runnable "
                                             "bin/java and bin/javac with a readable version)")


def test_the_order_is_java_home_then_path_then_the_newest_under_usr_lib_jvm(java_env, monkeypatch):
    real = _real_jdk()
    path_jdk = _fake_jdk(java_env / "path-jdk", "22.0.2", release=True)
    # Neither JAVA_HOME nor PATH qualifies: the newest of /usr/lib/jvm.
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(java_env / "old-jdk", "11.0.2")))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert jdk_module.find_jdk(21)[0] == real
    # A qualifying java on PATH comes before /usr/lib/jvm, newer ones there notwithstanding.
    monkeypatch.setenv("PATH", f"{path_jdk / 'bin'}:/usr/bin:/bin")
    assert jdk_module.find_jdk(21)[0].home == path_jdk
    # A qualifying JAVA_HOME comes first.
    monkeypatch.setenv("JAVA_HOME", str(real.home))
    assert jdk_module.find_jdk(21)[0] == real


def test_install_steps_and_the_server_get_the_jdk_and_another_jdk_rebuilds(java_env, monkeypatch):
    real = _real_jdk()
    monkeypatch.setenv("JAVA_HOME", str(real.home))
    contestant = _contestant(java_env)
    assert ct.availability(contestant, allow_apt=False).runnable
    record = ct.install(contestant, allow_apt=False)
    assert record["jdk"] == {"home": str(real.home), "version": real.version}
    build = contestant.env_dir / "build"
    assert (build / "java_home").read_text().strip() == str(real.home)
    assert (build / "java_on_path").read_text().strip() == str(real.java)  # `mvn` would compile with it
    assert f'version "{real.version}"' in (build / "java_version").read_text()  # {java} in a step
    assert contestant.placeholders()["java"] == str(real.java)

    # The server: JAVA_HOME in its environment, {java} in its command.
    log = java_env / "server.log"
    proc = RealBackend(generator=None).start_server(contestant, "hello", free_port(), 1, java_env,
                                                    available_cpus()[:1], log)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() == 0, ct.tail(log)
    assert (contestant.run_dir / "java_home").read_text().strip() == str(real.home)
    assert f'version "{real.version}"' in (contestant.run_dir / "java_version").read_text()

    # The JDK is part of the build's cache key: another one rebuilds, the same one again does not.
    ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 1
    other = _fake_jdk(java_env / "other-jdk", "21.0.9", release=True)
    monkeypatch.setenv("JAVA_HOME", str(other))
    assert not ct.install_current(contestant)
    ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 2
    assert (build / "java_home").read_text().strip() == str(other)
    monkeypatch.setenv("JAVA_HOME", str(real.home))
    ct.install(contestant, allow_apt=False)
    assert _runs(contestant) == 3


def test_a_manifest_without_java_keeps_the_java_on_path_and_its_environment(java_env):
    contestant = _contestant(java_env, MANIFEST.replace("java = 21\n", ""))
    assert contestant.jdk() is None
    assert contestant.java_env() == {}
    assert contestant.placeholders()["java"] == "java"


FLAGS_MANIFEST = MANIFEST.replace(
    'command = ["sh", "-c", "echo $JAVA_HOME > {run_dir}/java_home; exec {java} -version 2> {run_dir}/java_version"]',
    'command = ["sh", "-c", "exec {java} -XX:+PrintFlagsFinal -version > {run_dir}/flags 2> {run_dir}/stderr"]\n'
    'env = { JAVA_TOOL_OPTIONS = "-Xss2m" }')


def _server_flags(contestant: ct.Contestant, where: Path, profile_env: dict | None = None) -> dict[str, str]:
    """Start the fixture's server (a real JVM that prints its final flags and exits), wait for it; its flags by
    name, and what it said on stderr."""
    proc = RealBackend(generator=None).start_server(contestant, "hello", free_port(), 1, where, available_cpus()[:1],
                                                    where / "server.log", profile_env=profile_env)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() == 0, ct.tail(where / "server.log")
    flags = {}
    for line in (contestant.run_dir / "flags").read_text().splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] == "=":  # "intx TieredStopAtLevel = 1 {C1 product} {default}"
            flags[words[1]] = words[3]
    flags["stderr"] = (contestant.run_dir / "stderr").read_text()
    return flags


def test_quick_builds_run_a_jvm_server_with_the_first_jit_tier_alone_and_say_so(java_env, monkeypatch):
    """NETARENA_QUICK_BUILDS=1 (the tests' setting): a JVM contestant's server runs with -XX:TieredStopAtLevel=1
    after its manifest's JAVA_TOOL_OPTIONS and a profiled repeat's, and its install record says so (the report's
    UNOPT badge); without it the JVM keeps all its tiers and the record says nothing."""
    monkeypatch.setenv("JAVA_HOME", str(_real_jdk().home))
    contestant = _contestant(java_env, FLAGS_MANIFEST)

    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "0")
    assert "quick_jit" not in ct.install(contestant, allow_apt=False)
    flags = _server_flags(contestant, java_env)
    assert flags["TieredStopAtLevel"] == "4" and flags["ThreadStackSize"] == "2048", flags

    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "1")
    assert ct.install(contestant, allow_apt=False)["quick_jit"] == "-XX:TieredStopAtLevel=1"
    flags = _server_flags(contestant, java_env)
    assert flags["TieredStopAtLevel"] == "1" and flags["ThreadStackSize"] == "2048", flags
    assert "Picked up JAVA_TOOL_OPTIONS: -Xss2m -XX:TieredStopAtLevel=1" in flags["stderr"], flags["stderr"]
    # A profiled repeat's environment replaces the manifest's variable; the first tier still comes after it.
    flags = _server_flags(contestant, java_env, ENV_BY_RUNTIME["jvm"])
    assert flags["TieredStopAtLevel"] == "1" and flags["PreserveFramePointer"] == "true", flags
    assert flags["UseDynamicNumberOfCompilerThreads"] == "false", flags


def test_quick_builds_leave_servers_of_other_runtimes_alone(java_env, monkeypatch):
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "1")
    monkeypatch.setenv("JAVA_HOME", str(_real_jdk().home))
    contestant = _contestant(java_env, FLAGS_MANIFEST.replace('runtime = "jvm"', 'runtime = "native"'))
    assert "quick_jit" not in ct.install(contestant, allow_apt=False)
    flags = _server_flags(contestant, java_env)
    assert flags["TieredStopAtLevel"] == "4", flags
