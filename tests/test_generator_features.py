"""The generator's test build reuses the compilation `make setup` made: every crate netarena-load's own build
compiles has, in `cargo test`'s build (with the dev-dependencies), the same features. Cargo compiles a crate
again for each other set of features, so a dev-dependency turning on one more feature of a crate the generator
uses (serde's alloc, through jsonschema) made the test build compile it and all that depends on it a second time.
crates/loadgen/Cargo.toml's "The test build's features" lines give the generator's build those features; this
fails, naming the crate and the feature, when a new dev-dependency asks for one they lack. `cargo tree` reads the
lock file and the manifests: nothing is compiled."""

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# One line of `cargo tree --prefix none -f '{p} {f}'`: name, version, the rest of {p} (a path crate's folder,
# "(proc-macro)"), then the features, comma-separated (none: nothing after the space).
TREE_LINE = re.compile(r"(?P<name>\S+) v(?P<version>\S+)(?: \([^)]*\))* ?(?P<features>\S*)$")


def host_triple() -> str:
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("host: "))


def compiled_units(edges: str, host: str) -> dict[tuple[str, str], set[str]]:
    """(crate, version) -> the sets of features it is compiled with (more than one where the host's build and
    the target's differ), in netarena-load's build with these dependency edges, for the host's triple."""
    cmd = ["cargo", "tree", "--locked", "-p", "netarena-load", "-e", edges, "--target", host, "--prefix", "none",
           "-f", "{p} {f}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr}"
    units = defaultdict(set)
    for line in proc.stdout.splitlines():
        match = TREE_LINE.match(line.strip().removesuffix(" (*)"))
        assert match, f"unexpected line of cargo tree: {line!r}"
        units[match["name"], match["version"]].add(match["features"])
    return units


@pytest.fixture(scope="module")
def builds():
    if not shutil.which("cargo"):
        pytest.fail("these tests need cargo on PATH (make test builds the generator with it)")
    host = host_triple()
    return compiled_units("normal,build", host), compiled_units("normal,build,dev", host)


def test_every_crate_of_the_generator_has_its_test_build_features(builds):
    generator, test_build = builds
    differ = {crate: (sorted(features), sorted(test_build[crate])) for crate, features in generator.items()
              if test_build[crate] != features}
    assert not differ, ("crates the test build compiles with other features than the generator's build (add them to "
                        "crates/loadgen/Cargo.toml's \"The test build's features\"): " +
                        "; ".join(f"{name} {version}: {ours} in the generator's build, {theirs} in the test build"
                                  for (name, version), (ours, theirs) in differ.items()))


def test_the_test_build_has_crates_of_its_own(builds):
    """The comparison sees the dev-dependencies: the test build's tree is the generator's and more."""
    generator, test_build = builds
    assert set(generator) < set(test_build)
    assert ("jsonschema", next(v for n, v in test_build if n == "jsonschema")) not in generator
