"""Where this package runs from: the checkout (its contestants, suites and built generator), when it is one."""

from __future__ import annotations

from pathlib import Path


def repo_root() -> Path | None:
    """The checkout this package runs from, when it runs from one (python/netarena/ inside it)."""
    here = Path(__file__).resolve().parent.parent.parent
    return here if (here / "pyproject.toml").is_file() and (here / "contestants").is_dir() else None
