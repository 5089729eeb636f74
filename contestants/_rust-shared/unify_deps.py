#!/usr/bin/env python3
"""Rewrites unified-deps/Cargo.toml, the crate every Rust contestant depends on so that each crate two of their
builds share is compiled once into the shared cargo target folder ({cargo_target_dir}).

The Rust contestants (CONTESTANTS) build into one cargo target folder, each with its own Cargo.lock and with the
optional cargo features OPTIONAL_FEATURES, and rust-actix also alone with a feature building a binary of its own
(BINARY_FEATURES: `http2`). Cargo compiles a crate again for every other version or set of
features it is asked for, and a feature changes the features of crates all builds have (tokio, serde, syn, ...):
so without this crate each contestant and each combination of features compiled most of the graph again.
unified-deps depends on every crate that is built with other features in another build, with the union of the
features any build gives it; it is one path crate (as a "workspace-hack" of cargo-hakari, which needs one cargo
workspace, while each contestant is a workspace of its own). A crate is added only to the builds that already
have it: through the unified-deps feature named after the contestant (each contestant enables its own), or a
feature a contestant forwards (`mongo`, `postgresql`, `http2`), so a build without `mongo` still has no MongoDB
driver. The crate features a binary's feature exists for (actix-http's `http2`) stay out of the union: they are
that binary's alone, so those crates are compiled once per binary.

Run it after a change to a Rust contestant's or a shared crate's dependencies (it compiles nothing; cargo reads
crates.io only for what the lock files do not pin yet), then commit unified-deps/Cargo.toml and the contestants'
Cargo.lock files:
    python3 contestants/_rust-shared/unify_deps.py
Where two lock files pin other versions of a crate (of one semver series), the newest is written into the
others first (`cargo update --precise`). tests/test_rust_unified_deps.py checks the result.
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SHARED = Path(__file__).resolve().parent
CONTESTANTS_DIR = SHARED.parent
UNIFIED = SHARED / "unified-deps"
CONTESTANTS = ("rust-hyper", "rust-axum", "rust-actix")
OPTIONAL_FEATURES = ("mongo", "postgresql")


@dataclass(frozen=True)
class BinaryFeature:
    """A contestant's cargo feature that builds a binary of its own beside the base one, alone (no optional feature
    with it), and the features it turns on in crates the base builds have too, which only its build may have."""
    contestant: str
    own_crate_features: dict[str, tuple[str, ...]]


# rust-actix's HTTP/2 server (its contestant.toml's [install.optional.h2]). Unified into every build, actix-http's
# `http2` would put h2 first in the base binary's ALPN list, which a start for h1-tls must not offer
# (rust-actix/Cargo.toml); actix-web's only turns on actix-http's.
BINARY_FEATURES = {"http2": BinaryFeature("rust-actix", {"actix-web": ("http2",), "actix-http": ("http2",)})}
# unified-deps' features besides the contestants' names, each forwarded by the contestants' feature of that name.
FEATURES = OPTIONAL_FEATURES + tuple(BINARY_FEATURES)
# Every build a run may ask for: each contestant with each combination of its optional features, and each binary
# feature's build.
BUILDS = [(contestant, features) for contestant in CONTESTANTS
          for n in range(len(OPTIONAL_FEATURES) + 1) for features in itertools.combinations(OPTIONAL_FEATURES, n)]
BUILDS += [(binary.contestant, (feature,)) for feature, binary in BINARY_FEATURES.items()]

# One line of `cargo tree -f '{p} {f}'`: name, version, whether a proc-macro, a path crate's folder, its features.
TREE_LINE = re.compile(r"(?P<name>\S+) v(?P<version>\S+)(?P<proc_macro> \(proc-macro\))?(?P<path> \([^)]*\))?"
                       r"(?: (?P<features>\S*))?$")
# What cargo tree draws before a node: four characters a level of depth.
TREE_DRAWING = "│├└─ "
BUILD_SECTION = "[build-dependencies]"


class UnifyError(Exception):
    """What stops the rewrite, said once."""


@dataclass(frozen=True, order=True)
class Crate:
    """A registry crate as cargo compiles it: one semver series of it, for the target or for the host (build
    scripts and proc-macros, compiled with their own profile and features, so apart from the target's)."""
    name: str
    series: str
    host: bool

    def __str__(self):
        return f"{self.name} {self.series}.x{' (host)' if self.host else ''}"


@dataclass(frozen=True)
class Unit:
    version: str
    features: tuple[str, ...]


def semver_series(version: str) -> str:
    """The versions cargo treats as compatible: 1.54.1 -> "1", 0.7.18 -> "0.7"."""
    major, minor = version.split(".")[:2]
    return major if major != "0" else f"0.{minor}"


def host_triple() -> str:
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("host: "))


def build_label(build) -> str:
    contestant, features = build
    return contestant + "".join(f"+{feature}" for feature in features)


def build_units(contestant: str, features, *, locked: bool = True, triple: str | None = None) -> dict[Crate, Unit]:
    """The registry crates one build compiles, from `cargo tree` (no compiling): each with its version and
    features. locked=False lets cargo write what the manifests now need into Cargo.lock, keeping every other pin
    (not --offline: offline, cargo re-resolves a locked crate it never downloaded, one for another platform, to
    an older version it has)."""
    cmd = ["cargo", "tree", *(["--locked"] if locked else []), "-e", "normal,build", "--no-dedupe",
           # The host's triple named: without --target cargo tree shows a crate the host and the target build
           # with equal features as one node, the host's dependencies then under the target's and the other way.
           "--target", triple or host_triple(), "-f", "{p} {f}"]
    if features:
        cmd += ["--features", ",".join(features)]
    proc = subprocess.run(cmd, cwd=CONTESTANTS_DIR / contestant, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UnifyError(f"{' '.join(cmd)} in contestants/{contestant} failed:\n{proc.stderr.strip()}")
    units: dict[Crate, Unit] = {}
    # Per depth of the tree: whether the node there is built for the host, and whether its children listed so
    # far are its build-dependencies.
    ancestors: list[list[bool]] = []
    for line in proc.stdout.splitlines():
        indent = len(line) - len(line.lstrip(TREE_DRAWING))
        depth, text = indent // 4, line[indent:]
        if text == BUILD_SECTION:
            ancestors[depth][1] = True
            continue
        match = TREE_LINE.match(text.removesuffix(" (*)"))
        if not match:
            raise UnifyError(f"contestants/{contestant}: unexpected line of cargo tree: {line!r}")
        del ancestors[depth:]
        parent_host, under_build_section = ancestors[-1] if ancestors else (False, False)
        host = parent_host or under_build_section or bool(match["proc_macro"])
        ancestors.append([host, False])
        if match["path"]:
            continue  # the repository's own crates (contestants, _rust-shared): built with the features they ask
        crate = Crate(match["name"], semver_series(match["version"]), host)
        unit = Unit(match["version"], tuple(filter(None, (match["features"] or "").split(","))))
        if units.setdefault(crate, unit) != unit:
            raise UnifyError(f"contestants/{contestant} {build_label((contestant, features))}: {crate} twice: "
                             f"{units[crate]} and {unit}")
    return units


def every_build_units(*, locked: bool = True) -> dict[tuple, dict[Crate, Unit]]:
    triple = host_triple()
    return {build: build_units(*build, locked=locked, triple=triple) for build in BUILDS}


def shared_unit(crate: Crate, unit: Unit) -> Unit:
    """The unit without the features a binary feature keeps to its own build (BINARY_FEATURES)."""
    own = {feature for binary in BINARY_FEATURES.values() for feature in binary.own_crate_features.get(crate.name, ())}
    return Unit(unit.version, tuple(feature for feature in unit.features if feature not in own))


def divergent(builds: dict[tuple, dict[Crate, Unit]]) -> dict[Crate, dict[Unit, list[str]]]:
    """Each crate that two builds compile differently (another version or other features, but those a binary
    feature keeps to its own build): its units, each with the builds that compile it so."""
    found: dict[Crate, dict[Unit, list[str]]] = {}
    for crate in sorted({crate for units in builds.values() for crate in units}):
        ways: dict[Unit, list[str]] = {}
        for build, units in builds.items():
            if crate in units:
                ways.setdefault(shared_unit(crate, units[crate]), []).append(build_label(build))
        if len(ways) > 1:
            found[crate] = ways
    return found


def describe(found: dict[Crate, dict[Unit, list[str]]]) -> str:
    return "\n".join(f"{crate}:\n" + "\n".join(f"    {unit.version} [{','.join(unit.features)}]: {' '.join(labels)}"
                                              for unit, labels in ways.items())
                     for crate, ways in found.items())


def align_versions(builds) -> bool:
    """Where builds compile other versions of one crate, `cargo update --precise` the newest into the others'
    lock files. Whether it changed a lock file."""
    changed = False
    for crate, ways in divergent(builds).items():
        versions = {unit.version for unit in ways}
        if len(versions) == 1:
            continue
        newest = max(versions, key=lambda v: tuple(map(int, re.match(r"(\d+)\.(\d+)\.(\d+)", v).groups())))
        for contestant in CONTESTANTS:
            old = {units[crate].version for (name, _), units in builds.items() if name == contestant and crate in units}
            for version in old - {newest}:
                cmd = ["cargo", "update", "-p", f"{crate.name}@{version}", "--precise", newest]
                proc = subprocess.run(cmd, cwd=CONTESTANTS_DIR / contestant, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise UnifyError(f"{crate}: the builds lock {', '.join(sorted(versions))}; {' '.join(cmd)} in "
                                     f"contestants/{contestant} failed (an exact pin in its Cargo.toml?):\n"
                                     f"{proc.stderr.strip()}")
                changed = True
    return changed


@dataclass(frozen=True)
class Entry:
    """A dependency of unified-deps: the crate with the union of its features, and the unified-deps features
    that add it (none: every build has it)."""
    crate: Crate
    version: str
    features: tuple[str, ...]
    added_by: tuple[str, ...]


def presence_features(crate: Crate, present: set) -> tuple[str, ...]:
    """The unified-deps features whose builds are exactly the builds that have `crate`: the contestants all of
    whose builds have it, and the optional and binary features all of whose builds have it."""
    if present == set(BUILDS):
        return ()
    chosen = [c for c in CONTESTANTS if all(b in present for b in BUILDS if b[0] == c)]
    # A feature whose builds are all some chosen contestant's adds nothing (rust-actix covers its http2 build).
    chosen += [f for f in FEATURES if all(b in present for b in BUILDS if f in b[1])
               and not all(b[0] in chosen for b in BUILDS if f in b[1])]
    covered = {b for b in BUILDS if b[0] in chosen or set(b[1]) & set(chosen)}
    if covered != present:
        raise UnifyError(f"{crate} is in the builds {' '.join(sorted(map(build_label, present)))}, which no "
                         f"union of unified-deps features ({', '.join(CONTESTANTS + FEATURES)}) names: "
                         f"give unified-deps a feature for them")
    return tuple(chosen)


def entries(builds) -> list[Entry]:
    made = []
    for crate, ways in divergent(builds).items():
        versions = {unit.version for unit in ways}
        if len(versions) > 1:
            raise UnifyError(f"{crate}: the lock files still pin {', '.join(sorted(versions))}")
        present = {build for build, units in builds.items() if crate in units}
        features = sorted({feature for unit in ways for feature in unit.features})
        made.append(Entry(crate, versions.pop(), tuple(features), presence_features(crate, present)))
    return made


HEADER = """\
# Generated by contestants/_rust-shared/unify_deps.py: do not edit. After a change to a Rust contestant's or a
# shared crate's dependencies run `python3 contestants/_rust-shared/unify_deps.py` (offline) and commit this file
# with the contestants' Cargo.lock files; tests/test_rust_unified_deps.py fails until then.
#
# Every crate that two builds of the Rust contestants (rust-hyper, rust-axum, rust-actix, each with any of its
# features mongo and postgresql, and rust-actix with http2 alone, its HTTP/2 binary) would compile with other
# features, with the union of those features: each is then compiled once into the shared cargo target folder,
# whatever a run's build asks for. A crate is added only to the builds that have it anyway, through the feature
# named after the contestant (each enables its own) or one a contestant's feature forwards (mongo, postgresql,
# http2). actix-web's and actix-http's `http2` are the HTTP/2 binary's alone, never unified.
"""


def _toml_list(items) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def render(made: list[Entry]) -> str:
    # A key per dependency: the crate's name, made unique where two series or the host and the target need it
    # (an optional dependency's key names it in both [dependencies] and [build-dependencies]).
    names = {}
    for entry in made:
        names.setdefault(entry.crate.name, []).append(entry.crate)
    keys = {}
    for entry in made:
        crate, key = entry.crate, entry.crate.name
        if len({c.series for c in names[crate.name]}) > 1:
            key += "-" + crate.series.replace(".", "-")
        if crate.host and any(not c.host and c.series == crate.series for c in names[crate.name]):
            key += "-host"
        keys[entry] = key
    lines = [HEADER, '[package]\nname = "netarena-unified-deps"\nversion = "0.1.0"\nedition = "2021"\n'
             'publish = false\n\n# Own workspace root so this crate never joins the repository\'s Cargo workspace.'
             '\n[workspace]\n\n[features]']
    for feature in CONTESTANTS + FEATURES:
        added = sorted(f"dep:{keys[e]}" for e in made if feature in e.added_by)
        lines.append(f"{feature} = {_toml_list(added)}")
    for host, section in ((False, "dependencies"), (True, "build-dependencies")):
        lines.append(f"\n[{section}]")
        for entry in sorted((e for e in made if e.crate.host == host), key=lambda e: keys[e]):
            key = keys[entry]
            fields = ([f'package = "{entry.crate.name}"'] if key != entry.crate.name else []) + [
                f'version = "={entry.version}"', "default-features = false",
                f"features = {_toml_list(entry.features)}"] + (["optional = true"] if entry.added_by else [])
            lines.append(f"{key} = {{ {', '.join(fields)} }}")
    return "\n".join(lines) + "\n"


def regenerate(max_rounds: int = 10) -> list[Entry]:
    """From a unified-deps without dependencies, until its dependencies make every build agree: unifying a
    crate's features may add crates or features below it, which the next round unifies in turn."""
    cargo_toml = UNIFIED / "Cargo.toml"
    made: list[Entry] = []
    cargo_toml.write_text(render(made))
    for _ in range(max_rounds):
        builds = every_build_units(locked=False)
        if align_versions(builds):
            builds = every_build_units(locked=False)
        if not divergent(builds):
            return made
        # One entry per crate: a crate's features from two rounds make one union, and so do the builds it is in
        # (no feature adding it: every build has it).
        merged: dict[Crate, Entry] = {}
        for entry in made + entries(builds):
            known = merged.get(entry.crate)
            merged[entry.crate] = entry if not known else Entry(
                entry.crate, entry.version, tuple(sorted(set(known.features) | set(entry.features))),
                tuple(f for f in CONTESTANTS + FEATURES if f in known.added_by + entry.added_by)
                if known.added_by and entry.added_by else ())
        made = list(merged.values())
        cargo_toml.write_text(render(made))
    raise UnifyError(f"the builds still differ after {max_rounds} rounds:\n{describe(divergent(builds))}")


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    try:
        made = regenerate()
    except UnifyError as error:
        print(f"unify_deps: {error}", file=sys.stderr)
        return 1
    print(f"unify_deps: {UNIFIED / 'Cargo.toml'}: {len(made)} crates unified over {len(BUILDS)} builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
