"""docs/contestants.md is generated from the real manifests and must stay in step with them."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_contestants_doc_matches_the_manifests():
    generated = subprocess.run([sys.executable, "-m", "netarena", "list", "--markdown"], cwd=REPO,
                               capture_output=True, text=True, timeout=60)
    assert generated.returncode == 0, generated.stderr
    names = sorted(p.parent.name for p in (REPO / "contestants").glob("*/contestant.toml"))
    for name in names:  # every manifest loaded and is in the table
        assert f"| {name} |" in generated.stdout
    on_disk = (REPO / "docs" / "contestants.md").read_text()
    assert on_disk == generated.stdout, \
        "docs/contestants.md is out of date: run `netarena list --markdown > docs/contestants.md`"


def test_every_bundled_contestant_serves_techempowers_scenarios_or_says_why_not():
    """The TechEmpower scenarios are optional for a manifest in general (a service scenario needs a driver), but
    every bundled contestant either serves each of them or gives its reason under [unsupported], which
    `netarena list` shows: a reader sees why a framework is missing from those tables."""
    from netarena.config import load_manifest
    from netarena.scenarios import registry

    postgresql = [s.name for s in registry.all() if s.service == "postgresql"]
    assert "db" in postgresql
    silent = {}
    for path in sorted((REPO / "contestants").glob("*/contestant.toml")):
        manifest = load_manifest(path)
        missing = [s for s in postgresql if s not in manifest.scenarios and not manifest.unsupported.get(s)]
        if missing:
            silent[path.parent.name] = missing
    assert not silent, f"neither served nor given a reason under [unsupported]: {silent}"
