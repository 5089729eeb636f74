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
