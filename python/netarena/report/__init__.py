"""Reports read from the results store: the terminal summary, one self-contained HTML page, and run comparison.

Plotting reads the store, never the live run: ``load_report`` builds plain records, and each renderer is
a pure function of them (``html.render`` -> bytes, ``terminal.render_text`` -> str, ``compare``).
"""

from __future__ import annotations

import os
from pathlib import Path

from .model import Report, ReportError, load_report, open_store, resolve_run

__all__ = ["Report", "ReportError", "load_report", "open_store", "resolve_run", "write_run_report",
           "default_report_path"]


def default_report_path(results_dir: Path, run_id: int) -> Path:
    return Path(results_dir) / f"report-run-{run_id}.html"


def write_run_report(store_path_or_conn, run_id: int, out_path) -> Path:
    """Render run ``run_id`` of a store (a Store, a sqlite3 connection, a results folder or the .sqlite file) to
    one self-contained HTML file at ``out_path``; returns the path written.

    The file is written beside its final name and renamed into place, so a reader never sees half a page.
    """
    from . import html

    report = load_report(store_path_or_conn, run_id)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_bytes(html.render(report))
    os.replace(tmp, out)
    return out
