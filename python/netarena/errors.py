"""Errors that the CLI turns into one clear message and an exit code."""

from __future__ import annotations

import difflib
from pathlib import Path

# Exit codes shared by every command (and documented in the CLI help).
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran, but something it checked failed (verify, a run with no result)
EXIT_BAD_INPUT = 2  # malformed TOML, unknown names, impossible values: nothing was started
EXIT_INTERRUPTED = 130
# `netarena run` (and netarena-load) completed, and at least one measurement failed a threshold: k6's code.
EXIT_THRESHOLD_FAILED = 99


class ConfigError(Exception):
    """Bad input: a manifest, a suite or a command-line value that cannot be used.

    The message names the file (and line when known), the field, what is wrong and how to fix it.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ):
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.message = message
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.path:
            where = self.path + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        text = f"{where}{field}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


def near_miss(word: str, candidates) -> str | None:
    """The closest candidate to a misspelt name, or None (difflib's ratio, cutoff 0.6)."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates) -> str | None:
    match = near_miss(word, candidates)
    return f"did you mean '{match}'?" if match else None
