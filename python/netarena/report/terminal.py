"""The run's summary tables for a terminal (rich), readable in 100 columns, with the same badges as the page."""

from __future__ import annotations

import os

from rich import box
from rich.console import Console, Group as RichGroup
from rich.table import Table
from rich.text import Text

from . import fmt, profiles
from ..term import console as make_console
from .. import stats
from .model import (BADGES, SATURATED_BUSY_PCT, TIE_NOTE, Report, capped_line, database_bound_note,
                    one_server_line, external_line, find_max_line, level_title, rank_key, rank_text, ranking, requests_line, stopped_line, sweep_line,
                    unfinished_notable)


TERMINAL_WIDTH = 100


def summary_renderables(report: Report) -> list:
    run = report.run
    out: list = [Text(f"run {run.id} · suite {run.suite_name} · {run.status} · started {run.started_at} · "
                      f"server CPUs {run.server_cpus}, generator CPUs {run.generator_cpus}")]
    if external_line(run):
        out.append(Text(external_line(run), style="bold"))
    if run.status != "complete":
        made = sum(1 for m in report.measurements if m.status in ("ok", "failed"))
        out.append(Text(f"partial: the run is {run.status}; {made} of {run.planned_measurements} planned "
                        f"measurements made (netarena run --resume {run.id} finishes it)", style="bold red"))
    # What needs a reader's attention comes first, the tables after: a run of 39 groups must not bury its one
    # failure below them.
    out += attention_lines(report)
    out.append(Text(f"median of repeats; {stats.interval_note()}; latency percentiles from the repeats' merged "
                    f"histograms; #N = measurement id in the store; {TIE_NOTE}", style="dim"))
    if one_server_line(run):
        out.append(Text(one_server_line(run), style="dim"))
    rank = ranking(report.groups)
    used: set[str] = set()
    for scenario in report.scenarios():
        for level_key, groups in report.levels_for(scenario):
            title = level_title(scenario, groups[0])
            table = Table(title=title, title_justify="left", title_style="bold",
                          box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), show_edge=False)
            table.add_column("#", justify="right", no_wrap=True)
            table.add_column("contestant", overflow="fold", min_width=10)
            database = any(g.database_cpu_pct_median is not None for g in groups)
            per = fmt.cost_unit(groups[0].cost_unit)
            for name in (fmt.throughput_unit(scenario), "interval", f"cpu/{per}", "p50", "p99", "p99.9",
                         "err", "cpu", "rss",
                         *(("db cpu", "bound") if database else ())):
                table.add_column(name, justify="right", no_wrap=True)
            table.add_column("badges", min_width=6)
            table.add_column("from", overflow="fold", min_width=4)
            for g in groups:
                used.update(g.badges)
                table.add_row(
                    rank_text(rank, g, "-"), g.contestant, fmt.rps_short(g.requests_per_s_median),
                    _range(g.requests_per_s_ci_low, g.requests_per_s_ci_high), fmt.cpu_us(g.server_cpu_us_median),
                    fmt.us(g.latency_p50_us),
                    fmt.us(g.latency_p99_us), fmt.us(g.latency_p99_9_us), fmt.pct(g.error_rate_median, 1),
                    fmt.cpu_pct(g.server_cpu_capacity_pct_median), fmt.size_bytes(g.server_rss_peak_bytes),
                    *((fmt.cpu_pct(g.database_cpu_pct_median),
                       g.bound_by or ("neither" if g.database_cpu_pct_median is not None else "-"))
                      if database else ()),
                    Text(" ".join(g.badges), style="bold yellow") if g.badges else "",
                    fmt.ids(g.measurement_ids))
            out.append(Text(""))
            out.append(table)
            if database_bound_note(groups):
                out.append(Text(f"  {database_bound_note(groups)}", style="yellow"))
            generator_cost = [f"{g.contestant} {fmt.cpu_us(g.generator_cpu_us_median)}" for g in groups
                              if g.generator_cpu_us_median is not None]
            if generator_cost:
                out.append(Text(f"  generator CPU per {per}: " + " · ".join(generator_cost), style="dim"))
            out += [Text(f"  {find_max_line(g)}") for g in groups if g.find_max is not None]
            out += [Text(f"  {requests_line(g)}") for g in groups if g.requests_asked is not None]
            out += [Text(f"  {sweep_line(g)}") for g in groups if g.sweep is not None]
            out += [Text(f"  {stopped_line(g)}") for g in groups if g.stopped_because is not None]
    if used:
        legend = Text("badges: ", style="dim")
        legend.append("; ".join(f"{code} = {BADGES[code][0]}" for code in BADGES if code in used))
        out.append(legend)
    out.append(Text("cpu/req (cpu/MiB for echo) = server CPU time (user + system) per request over the measured "
                    "phase, median of repeats (it holds when throughput falls to a noisy machine); "
                    "cpu = server CPU, % of the CPUs it was pinned to (median of repeats); rss = server "
                    "peak RSS over the repeats", style="dim"))
    profiled = profiles.entries(report)
    if profiled:
        out.append(Text("profiles (overhead = the profiled repeat's throughput against its group's unprofiled "
                        "median; top self = the frames most often on CPU; `netarena report` draws them):",
                        style="bold"))
        for entry in profiled:
            out.append(Text(f"  {profiles.line(entry)}"))
            if profiles.generator_line(entry):  # only where the generator was the limit (GEN)
                out.append(Text(f"    {profiles.generator_line(entry)}"))
    if any(g.database_cpu_pct_median is not None for g in report.groups):
        out.append(Text("db cpu = the database's processes (FerretDB + its storage), % of one core; bound = the "
                        f"side whose own processes kept its CPUs at least {SATURATED_BUSY_PCT:g}% busy (neither: "
                        "look at latency and errors)", style="dim"))
    for g in report.groups:
        if g.warmups:
            out.append(Text(f"warm-up until steady: {g.contestant} {g.scenario} {g.level_key}: " + ", ".join(
                f"#{w['repeat_index'] + 1} {w['used_s']:.1f} s" + ("" if w["settled"] else " (never settled)")
                for w in g.warmups), style="dim"))
    out += _calibration(report)
    return out


def attention_lines(report: Report) -> list[Text]:
    """Failures, failed thresholds, skips, flagged groups and capped levels, one line each, in that order. A
    healthy closed loop's requests in flight at the end are not among them (docs/reports.md says why); a group
    whose unfinished requests are notable (report.model.unfinished_notable) is."""
    out: list[Text] = []
    for g in report.groups:
        if g.failures:
            more = f" (+{len(g.failures) - 1} more failed repeat(s))" if len(g.failures) > 1 else ""
            out.append(Text(f"failed: {g.contestant} {g.scenario} {g.level_key}: {g.failures[0]}{more}",
                            style="bold red"))
    for g in report.groups:
        if g.discarded:
            out.append(Text(f"discarded: {g.contestant} {g.scenario} {g.level_key}: {g.discarded} measurement(s) kept "
                            f"out of the figures: {'; '.join(g.discarded_reasons)}"))
    if profiles.profiled_line(report):
        out.append(Text(profiles.profiled_line(report), style="dim"))
    for g in report.groups:
        for t in g.thresholds:
            if not t.get("pass"):
                out.append(Text(f"threshold failed: {g.contestant} {g.scenario} {g.level_key} "
                                f"#{t['repeat_index'] + 1}: {t.get('expr')} (measured {fmt.measured(t)})",
                                style="bold red"))
    for s in report.skipped:
        what = " ".join(x for x in (s.contestant, s.scenario, s.level_key) if x)
        out.append(Text(f"skipped: {what}: {s.reason}"))
    for code in BADGES:
        flagged = [g for g in report.groups if code in g.badges]
        if flagged:
            names = ", ".join(f"{g.contestant} {g.scenario} {g.level_key}" for g in flagged)
            out.append(Text(f"flagged {code} ({BADGES[code][0]}), {len(flagged)} group(s): {names}",
                            style="yellow"))
    for g in report.groups:
        if unfinished_notable(g):
            out.append(Text(f"unfinished: {g.contestant} {g.scenario} {g.level_key}: {_unfinished(g)}"))
    for g in report.groups:
        if g.generator_threads_asked is not None:
            out.append(Text(f"capped: {capped_line(g)}"))
    return out


def _calibration(report: Report) -> list:
    """The run's calibration and each group's figures relative to its reference pair (docs/reports.md)."""
    out: list = [Text(f"{label}: {text}", style="dim") for label, text in fmt.calibration_pairs(report.run.environment)
                 if label.startswith("calibration") or label == "steal at start"]
    relative = [g for g in report.groups if g.requests_per_s_vs_reference is not None]
    if not relative:
        return out
    table = Table(title="relative to the reference pair (figure ÷ the reference's)", title_justify="left",
                  title_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), show_edge=False)
    for name, justify in (("contestant", "left"), ("scenario", "left"), ("level", "left"),
                          ("req/s ×ref", "right"), ("cpu/req µs", "right"), ("cpu/req ×ref", "right")):
        table.add_column(name, justify=justify, overflow="fold")
    for g in sorted(relative, key=rank_key):
        table.add_row(g.contestant, g.scenario, g.level_key, fmt.times_reference(g.requests_per_s_vs_reference),
                      fmt.cpu_us(g.server_cpu_us_median),
                      fmt.times_reference(g.server_cpu_per_req_vs_reference))
    return [*out, Text(""), table]


def _unfinished(g) -> str:
    """One line on what was still in flight at the end, shared with the HTML report."""
    return (f"{g.unfinished:,} request(s) still in flight at the end (not errors); the percentiles include "
            f"{g.latency_censored:,} censored lower bound(s); {g.unanswered_connections:,} connection(s) got no "
            f"answer during the measured phase (summed over {g.repeats_ok} repeat(s))")


def _range(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{fmt.rps_short(low)}–{fmt.rps_short(high)}"


def console_width() -> int:
    """TERMINAL_WIDTH, or the terminal's width when it is narrower (COLUMNS counts as one). Piped output (no
    terminal, no COLUMNS) gets TERMINAL_WIDTH, not rich's 80-column fallback, which would fold the tables."""
    probe = Console()
    if probe.is_terminal or "COLUMNS" in os.environ:
        return max(20, min(TERMINAL_WIDTH, probe.width))
    return TERMINAL_WIDTH


def print_summary(report: Report, console: Console | None = None) -> None:
    console = console or make_console(width=console_width())
    console.print(RichGroup(*summary_renderables(report)))


def render_text(report: Report, width: int = TERMINAL_WIDTH) -> str:
    """The summary as plain text (no colour), e.g. for tests and logs."""
    console = make_console(width=width, record=True, file=_Null(), color_system=None)
    print_summary(report, console)
    return console.export_text()


class _Null:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass
