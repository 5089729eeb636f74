"""Every suite shipped in suites/ validates and names only contestants that exist."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from netarena.config import load_suite  # noqa: E402
from netarena.contestants import select  # noqa: E402

SUITES = sorted((REPO / "suites").rglob("*.toml"))


def test_there_are_suites():
    assert REPO / "suites" / "quick.toml" in SUITES and len(SUITES) >= 5


@pytest.mark.parametrize("path", SUITES, ids=lambda p: str(p.relative_to(REPO / "suites")))
def test_suite_validates_and_names_real_contestants(path):
    suite, _ = load_suite(path)
    names = select(REPO / "contestants", list(suite.contestants), list(suite.exclude), str(path))
    assert names, f"{path} selects no contestant"
