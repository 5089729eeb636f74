"""Terminal output under one rule: text from outside is printed as it is, never read as rich markup.

A server's headers and body, its stderr, install output, manifest and suite fields and file paths can hold
`[`...`]`; read as markup, `Content-Type: [/]` raised rich's MarkupError and ended a run. So every console
comes from `console()`, which has markup off (strings, table cells and titles alike), and a style is given
as a rich Text built by `styled()`, never as `[red]...[/red]` inside a string.
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.text import Text

# Rich falls back to 80 columns when not on a terminal; summary tables need more to stay readable in logs.
PIPED_WIDTH = 160


def console(stderr: bool = False, width: int | None = None, **options) -> Console:
    """A console with markup (and rich's automatic highlighting) off. Piped output without COLUMNS gets
    PIPED_WIDTH columns unless `width` says otherwise."""
    out = Console(stderr=stderr, highlight=False, markup=False, width=width, **options)
    if width is None and not out.is_terminal and "COLUMNS" not in os.environ and "file" not in options:
        out = Console(stderr=stderr, highlight=False, markup=False, width=PIPED_WIDTH, **options)
    return out


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line from plain strings and (text, style) pairs, e.g. styled(("warning:", "yellow"), " ", message)."""
    return Text.assemble(*parts)
