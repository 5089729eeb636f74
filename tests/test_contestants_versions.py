"""Every contestant's `framework_version` states the versions actually installed, and no other.

Each contestant whose framework comes from a package registry is listed in FRAMEWORK_PACKAGES with the
packages its framework_version names, each read where the install put it or from the lock file the build is
held to: pip from the contestant's own venv (installed as its manifest says, a cache hit after
test_contestants_verify), npm from node_modules/<package>/package.json (after `npm ci`), cargo from
Cargo.lock (built with --locked), Maven from pom.xml's exact dependency, imported BOM or parent version, sbt
from the build definition's exact pins, Go from go.mod's require line (the version go.sum holds). The test
fails when framework_version lacks one of those versions, or states a version none of them has (a stale one).
Every other contestant is in NO_PACKAGE_VERSION with the reason its version is not a pin; a new contestant
in neither table fails, so the table cannot silently fall behind.
"""

import functools
import json
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTESTANTS = REPO / "contestants"
NAMES = sorted(p.parent.name for p in CONTESTANTS.glob("*/contestant.toml"))

# contestant -> the packages whose versions its framework_version states: (ecosystem, package).
FRAMEWORK_PACKAGES = {
    # --- Python (pip: the contestant's venv) ---
    "django-asgi-uvicorn": [("pip", "Django"), ("pip", "uvicorn")],
    "django-wsgi-gunicorn": [("pip", "Django"), ("pip", "gunicorn")],
    "flask-gunicorn-gevent": [("pip", "Flask"), ("pip", "gunicorn"), ("pip", "gevent")],
    "flask-gunicorn-sync": [("pip", "Flask"), ("pip", "gunicorn")],
    "flask-uwsgi-gevent": [("pip", "Flask"), ("pip", "uWSGI"), ("pip", "gevent")],
    "flask-uwsgi-threads": [("pip", "Flask"), ("pip", "uWSGI")],
    "pypy-twisted": [("pip", "Twisted")],
    "python-aiohttp": [("pip", "aiohttp")],
    "python-eventlet": [("pip", "eventlet")],
    "python-fastapi": [("pip", "fastapi"), ("pip", "uvicorn"), ("pip", "starlette")],
    "python-gevent": [("pip", "gevent")],
    "python-granian": [("pip", "granian"), ("pip", "fastapi")],
    "python-litestar": [("pip", "litestar"), ("pip", "uvicorn")],
    "python-sanic": [("pip", "sanic")],
    "python-tornado": [("pip", "tornado")],
    "python-tornado-on-twisted": [("pip", "tornado"), ("pip", "Twisted")],
    "python-twisted": [("pip", "Twisted")],
    "python-twisted-asyncio": [("pip", "Twisted")],
    "python-uvloop": [("pip", "uvloop")],
    # --- JavaScript (npm: node_modules after npm ci) ---
    "node-express": [("npm", "express")],
    "node-fastify": [("npm", "fastify")],
    "node-hono": [("npm", "hono")],
    "deno-serve": [("npm", "deno")],
    # --- Go (go: the go.mod require line) ---
    "go-gin": [("go", "github.com/gin-gonic/gin")],
    "go-fasthttp": [("go", "github.com/valyala/fasthttp")],
    # --- JVM (Maven: pom.xml; sbt: the build definition) ---
    "java-netty": [("maven", "io.netty:netty-codec-http")],
    # The framework's application parent pins every module of it (its BOM): the parent's version is the pin.
    "java-helidon-se": [("maven", "io.helidon.applications:helidon-se")],
    "java-spring-mvc-vt": [("maven", "org.springframework.boot:spring-boot-starter-parent")],
    "java-spring-webflux": [("maven", "org.springframework.boot:spring-boot-starter-parent")],
    "java-vertx": [("maven", "io.vertx:vertx-stack-depchain")],
    "play-scala": [("sbt", "org.playframework:sbt-plugin"), ("sbt", "scalaVersion"), ("sbt", "sbt.version")],
    # --- Rust (cargo: Cargo.lock) ---
    "rust-actix": [("cargo", "actix-web"), ("cargo", "actix-http"), ("cargo", "actix-files"), ("cargo", "tokio")],
    "rust-axum": [("cargo", "axum"), ("cargo", "hyper"), ("cargo", "tokio"), ("cargo", "tower-http")],
    "rust-hyper": [("cargo", "hyper"), ("cargo", "hyper-util"), ("cargo", "tokio"), ("cargo", "tower-http")],
}

# contestant -> why its framework_version is not a registry package's pinned version.
NO_PACKAGE_VERSION = {
    "erlang-otp": "inets comes with Debian's Erlang/OTP package: the version apt installs on the host (the "
                  "manifest names the one it was verified with)",
    "go-net": "net/http is Go's standard library, of the toolchain on PATH",
    "nginx": "Debian's nginx package: the version apt installs on the host (the manifest names the one it was "
             "verified with)",
    "node-http": "node:http is a Node.js core module, of the node on PATH",
    "python-asyncio": "asyncio is CPython's standard library",
    "python-threads": "http.server and socketserver are CPython's standard library",
    "ruby-eventmachine": "eventmachine and thin are Debian's packages: the versions apt installs on the host (the "
                         "manifest names the ones it was verified with)",
    "ruby-puma": "puma and rack are Debian's packages: the versions apt installs on the host (the manifest names "
                 "the ones it was verified with)",
}

# A version as framework_version writes one: digits and dots, with a suffix (4.2.20.Final, 1.0.0-rc1).
VERSION_TOKEN = re.compile(r"(?<![\w.+~:-])\d+(?:\.\d+)+(?:[.-][A-Za-z0-9]+)*(?![\w.+~-])")


def _manifest(name):
    return tomllib.loads((CONTESTANTS / name / "contestant.toml").read_text())


@functools.lru_cache(maxsize=None)  # one install (and pip freeze) per contestant, however many packages
def _installed(name):
    """Install the contestant exactly as `netarena verify` does (a cache hit after test_contestants_verify);
    skipped where it cannot run here, as there."""
    from netarena import contestants as ct
    from netarena.contestants import for_servers

    contestant = ct.load(CONTESTANTS, [name])[0]
    av = ct.availability(contestant)
    if not av.runnable:
        pytest.skip(f"{name} cannot run here: {av.summary}")
    return ct.install(contestant, user=for_servers(False, [contestant]))


def _pip_versions(name):
    """The venv's packages, as pip lists them right after the install."""
    return {line.split("==")[0].lower().replace("_", "-"): line.split("==")[1]
            for line in _installed(name)["pip_freeze"] if "==" in line}


def _npm_version(name, package):
    _installed(name)
    return json.loads((CONTESTANTS / name / "node_modules" / package / "package.json").read_text())["version"]


def _cargo_version(name, package):
    lock = tomllib.loads((CONTESTANTS / name / "Cargo.lock").read_text())
    versions = {p["version"] for p in lock["package"] if p["name"] == package}
    assert len(versions) == 1, f"{name}/Cargo.lock holds {package} {sorted(versions) or 'not at all'}"
    return versions.pop()


def _maven_version(name, package):
    """The exact version pom.xml gives `package`: a dependency's, a BOM's it imports (java-vertx's
    vertx-stack-depchain) or its parent's (java-spring-webflux's spring-boot-starter-parent)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(CONTESTANTS / name / "pom.xml").getroot()
    properties = {child.tag.split("}")[1]: child.text for child in pom.find("m:properties", ns) or []}
    group, artifact = package.split(":")
    places = ["m:dependencies/m:dependency", "m:dependencyManagement/m:dependencies/m:dependency", "m:parent"]
    for element in (e for place in places for e in pom.iterfind(place, ns)):
        coordinates = element.findtext("m:groupId", namespaces=ns), element.findtext("m:artifactId", namespaces=ns)
        if coordinates == (group, artifact):
            version = element.findtext("m:version", namespaces=ns)
            assert version, f"{name}/pom.xml gives {package} no version of its own (a BOM or the parent manages it)"
            return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], version)
    raise AssertionError(f"{name}/pom.xml has no dependency, imported BOM or parent {package}")


def _sbt_version(name, package):
    folder = CONTESTANTS / name
    if package == "sbt.version":
        text, pattern = (folder / "project" / "build.properties").read_text(), r"^sbt\.version\s*=\s*(\S+)"
    elif package == "scalaVersion":
        text, pattern = (folder / "build.sbt").read_text(), r'scalaVersion\s*:=\s*"([^"]+)"'
    else:
        group, artifact = package.split(":")
        text = (folder / "project" / "plugins.sbt").read_text()
        pattern = rf'addSbtPlugin\(\s*"{re.escape(group)}"\s*%\s*"{re.escape(artifact)}"\s*%\s*"([^"]+)"'
    found = re.findall(pattern, text, re.MULTILINE)
    assert len(found) == 1, f"{name}: {package} is pinned {len(found)} times in its build definition"
    return found[0]


def _go_version(name, package):
    found = re.findall(rf"^\s*(?:require\s+)?{re.escape(package)}\s+v(\S+)", (CONTESTANTS / name / "go.mod").read_text(),
                       re.MULTILINE)
    assert len(found) == 1, f"{name}/go.mod requires {package} {len(found)} times"
    return found[0]


def installed_version(name, ecosystem, package):
    if ecosystem == "pip":
        versions = _pip_versions(name)
        key = package.lower().replace("_", "-")
        assert key in versions, f"{package} is not installed in {name}'s venv: {sorted(versions)}"
        return versions[key]
    readers = {"npm": _npm_version, "cargo": _cargo_version, "maven": _maven_version, "sbt": _sbt_version,
               "go": _go_version}
    assert ecosystem in readers, f"unknown ecosystem {ecosystem!r} for {name}; one of pip, {', '.join(readers)}"
    return readers[ecosystem](name, package)


def test_every_contestant_is_in_exactly_one_table():
    both = set(FRAMEWORK_PACKAGES) & set(NO_PACKAGE_VERSION)
    assert not both, f"in both tables: {sorted(both)}"
    missing = [n for n in NAMES if n not in FRAMEWORK_PACKAGES and n not in NO_PACKAGE_VERSION]
    assert not missing, (f"{missing}: add each to FRAMEWORK_PACKAGES in {Path(__file__).name} with the packages "
                         "its framework_version names, or to NO_PACKAGE_VERSION with the reason it has none")
    gone = sorted((set(FRAMEWORK_PACKAGES) | set(NO_PACKAGE_VERSION)) - set(NAMES))
    assert not gone, f"no such contestants any more: {gone}"


def disagreements(stated, installed):
    """What is wrong with `stated` (a framework_version) given `installed` (package -> version): the installed
    versions it does not state, and the versions it states that no listed package has (stale ones)."""
    tokens = VERSION_TOKEN.findall(stated)
    missing = {package: version for package, version in installed.items() if version not in tokens}
    stale = [token for token in tokens if token not in installed.values()]
    return missing, stale


@pytest.mark.parametrize("name", sorted(set(FRAMEWORK_PACKAGES) & set(NAMES)))
def test_framework_version_matches_what_is_installed(name):
    stated = _manifest(name)["framework_version"]
    installed = {package: installed_version(name, ecosystem, package) for ecosystem, package in FRAMEWORK_PACKAGES[name]}
    missing, stale = disagreements(stated, installed)
    assert not missing, f"{name}: framework_version {stated!r} does not state the installed {missing}"
    assert not stale, (f"{name}: framework_version {stated!r} states {stale}, which no listed package has "
                       f"(installed: {installed}); update it, or list the package in FRAMEWORK_PACKAGES")


@pytest.mark.parametrize("stated, installed, ok", [
    ("3.14.5", {"aiohttp": "3.14.5"}, True),
    ("3.14.4", {"aiohttp": "3.14.5"}, False),                                 # stale
    ("FastAPI 0.165.0, uvicorn 0.54.0", {"fastapi": "0.165.0"}, False),       # a version no listed package has
    ("4.2.20.Final", {"netty": "4.2.20.Final"}, True),
    ("4.2.20", {"netty": "4.2.20.Final"}, False),                             # a prefix is not the version
    ("Flask 3.1.3, gunicorn 27.0.1", {"Flask": "3.1.3", "gunicorn": "27.0.11"}, False),
    ("3.0.11 (Scala 2.13.18, sbt 1.12.14)", {"play": "3.0.11", "scala": "2.13.18", "sbt": "1.12.14"}, True),
])
def test_version_comparison_tells_a_wrong_version(stated, installed, ok):
    """The comparison above, on strings: a stale, truncated or unlisted version is caught."""
    missing, stale = disagreements(stated, installed)
    assert (not missing and not stale) is ok, (stated, installed, missing, stale)
