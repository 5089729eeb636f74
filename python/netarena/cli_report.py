"""`netarena report`, `netarena show` and `netarena compare`: read the results store, never a live run.

Registered on the main click group with ``register(main)`` (cli.py), so this module stays out of cli.py's
way. Exit codes as in cli.py: 0 ok, 1 `compare --fail-on-regression` found a regression, 2 bad input (no store,
no such run, unreadable store, an unknown --metric).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import click
from rich.console import Console

from .errors import EXIT_BAD_INPUT, EXIT_FAILED
from .term import console as make_console, styled

DEFAULT_RESULTS_DIR = "results"


def _fail(message: str) -> None:
    make_console(stderr=True).print(f"error: {message}", soft_wrap=True)
    sys.exit(EXIT_BAD_INPUT)


def _results_option(f):
    return click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False),
                        default=DEFAULT_RESULTS_DIR, show_default=True,
                        help="Folder holding the results store (netarena.sqlite).")(f)


def _load(results_dir: Path, run: str | None, what: str = "RUN"):
    from .report import ReportError, load_report, open_store, resolve_run
    from .store import unreadable

    try:
        db, where = open_store(results_dir)
        try:
            run_id = resolve_run(db, run, where)
            return load_report(db, run_id)
        except sqlite3.DatabaseError as exc:  # damage quick_check did not see: still one line, exit 2
            raise ReportError(unreadable(where, exc).render()) from None
        finally:
            db.close()
    except ReportError as exc:
        _fail(f"{what}: {exc}" if what != "RUN" else str(exc))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _warn(console: Console, message: str) -> None:
    # soft_wrap: one line whatever the console width, so the store's path and the command stay copyable.
    console.print(styled(("warning:", "yellow"), " ", message), soft_wrap=True)


def report_after_run(store, run_id: int, results_dir: Path, err: Console) -> Path | None:
    """Write the HTML report at the end of `netarena run` (complete, or interrupted with something measured).

    The measurements are already safe in the store, so nothing here may turn the run into a traceback: a
    rendering error, or a second Ctrl-C while the page is written, is one warning naming the store and the
    command that writes the report later. Returns the page's path, or None when it was not written.
    """
    from .report import default_report_path, write_run_report

    later = f"the results are in {store.path}; `netarena report {run_id} --results {results_dir}` writes it"
    try:
        return write_run_report(store, run_id, default_report_path(results_dir, run_id))
    except KeyboardInterrupt:
        _warn(err, f"HTML report not written (interrupted); {later}")
    except Exception as exc:  # noqa: BLE001 - any failure of the renderer, reported in one line
        _warn(err, f"HTML report not written ({_one_line(exc)}); {later}")
    return None


def summary_after_run(store, run_id: int, results_dir: Path, console: Console, err: Console) -> None:
    """The terminal summary at the end of `netarena run`, under the same rule as ``report_after_run``."""
    from .report import load_report
    from .report.terminal import print_summary

    try:
        print_summary(load_report(store, run_id), console)
    except KeyboardInterrupt:
        _warn(err, f"summary not printed (interrupted); `netarena show {run_id} --results {results_dir}` prints it")
    except Exception as exc:  # noqa: BLE001
        _warn(err, f"summary not printed ({_one_line(exc)}); the results are in {store.path}; "
                   f"`netarena show {run_id} --results {results_dir}` prints it")


def _confidence(text: str) -> float:
    """compare --confidence: "95%" -> 0.95, between 50% and 99.9%."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", text)
    value = float(match.group(1)) / 100 if match else None
    if value is None or not 0.5 <= value <= 0.999:
        _fail(f"--confidence {text!r}: give a percentage between 50% and 99.9%, e.g. --confidence 99%")
    return value


def measured_any(store, run_id: int) -> bool:
    """Whether the run has a measurement worth a report: ok or failed (interrupted ones are redone on resume)."""
    row = store.db.execute("SELECT count(*) FROM measurements WHERE run_id=? AND status != 'interrupted'",
                           (run_id,)).fetchone()
    return bool(row[0])


def register(cli_group: click.Group) -> None:
    """Add report, show and compare to netarena's command group."""

    @cli_group.command()
    @click.argument("run", required=False)
    @_results_option
    @click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False),
                  help="HTML file to write (default: RESULTS/report-run-<id>.html).")
    def report(run, results_dir, output):
        """Write one self-contained HTML report of RUN (default: the latest run); it works offline."""
        from .report import default_report_path
        from .report.html import render

        loaded = _load(results_dir, run)
        out = output or default_report_path(results_dir, loaded.run.id)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(render(loaded))
        except OSError as exc:
            _fail(f"-o {out}: cannot write the report: {exc.strerror or exc}")
        click.echo(f"wrote {out} (run {loaded.run.id}, {len(loaded.measurements)} measurements)")

    @cli_group.command()
    @click.argument("run", required=False)
    @_results_option
    @click.option("--json", "as_json", is_flag=True,
                  help="The same figures as one JSON document (run, one entry per contestant x scenario x level).")
    def show(run, results_dir, as_json):
        """The summary tables of RUN (default: the latest run) in the terminal, with the report's badges."""
        from .report.terminal import print_summary

        loaded = _load(results_dir, run)
        if as_json:
            from .report.model import summary_document

            click.echo(json.dumps(summary_document(loaded), indent=2))
            return
        print_summary(loaded)

    @cli_group.command()
    @click.argument("run_a")
    @click.argument("run_b")
    @_results_option
    @click.option("--results-b", "results_b", type=click.Path(path_type=Path, file_okay=False),
                  help="Folder of RUN_B's store, when it is not the same as RUN_A's (--results).")
    @click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False),
                  help="Also write the comparison as one self-contained HTML file.")
    @click.option("--fail-on-regression", is_flag=True,
                  help="Exit 1 when a significant change of a --metric goes the wrong way (a CI gate).")
    @click.option("--metric", "metric_opt", default="rps,p99", show_default=True,
                  help="Comma-separated metrics the gate watches: rps (lower is worse), p99 (higher is worse), "
                       "cpu (the server's CPU per request; higher is worse).")
    @click.option("--confidence", "confidence_opt", default="95%", show_default=True, metavar="PCT",
                  help="Confidence of the bootstrap interval of B/A that decides significance (99% calls fewer "
                       "false alarms and misses more small changes).")
    @click.option("--json", "json_mode", is_flag=True, help="Print the comparison as JSON instead of tables.")
    def compare(run_a, run_b, results_dir, results_b, output, fail_on_regression, metric_opt, confidence_opt,
                json_mode):
        """Ratios B/A of throughput, p99 and server CPU per request per contestant × scenario × level, with their
        intervals.

        A change is significant when the bootstrap interval of the ratio of medians excludes 1 (at least five
        ok repeats each; docs/reports.md). Exit codes: 0 ok (or no regression with --fail-on-regression);
        1 a regression; 2 bad input.
        """
        import json

        from .report.compare import GATE_METRICS, compare as build, print_comparison, regressions, render_html, to_dict

        metrics = [m.strip() for m in metric_opt.split(",") if m.strip()]
        unknown = [m for m in metrics if m not in GATE_METRICS]
        if unknown or not metrics:
            _fail(f"--metric: {', '.join(unknown) or 'nothing given'}: choose from {', '.join(GATE_METRICS)} "
                  "(e.g. --metric rps,p99)")
        confidence = _confidence(confidence_opt)
        a = _load(results_dir, run_a, "RUN_A")
        b = _load(results_b or results_dir, run_b, "RUN_B")
        comparison = build(a, b, confidence)
        if not comparison.rows:
            _fail(f"runs {a.run.id} and {b.run.id} share no contestant × scenario × level to compare "
                  f"(only in A: {len(comparison.only_in_a)}, only in B: {len(comparison.only_in_b)})")
        found = regressions(comparison, metrics)
        if json_mode:
            click.echo(json.dumps(to_dict(comparison, metrics), indent=2, default=str))
        else:
            print_comparison(comparison)
            if fail_on_regression:
                for regression in found:
                    click.echo(f"regression: {regression.text}")
                click.echo(f"{len(found)} regression(s) in {', '.join(metrics)}" if found else
                           f"no significant change for the worse in {', '.join(metrics)}")
        if output is not None:
            try:
                output.parent.mkdir(parents=True, exist_ok=True)
                output.write_bytes(render_html(comparison))
            except OSError as exc:
                _fail(f"-o {output}: cannot write the comparison: {exc.strerror or exc}")
            click.echo(f"wrote {output}", err=json_mode)
        if fail_on_regression and found:
            sys.exit(EXIT_FAILED)
