"""One self-contained HTML page for a run: a pure function from a ``Report`` to bytes.

The page works offline: plotly.js (the version pinned in pyproject.toml) is embedded once, inline, and
no style, font or script is fetched from anywhere. Every figure in a table names the measurement ids it
came from, and each id links to that measurement's row in the "Measurements" appendix (with its exact
generator command line), so any number can be traced back to the store.
"""

from __future__ import annotations

import colorsys
import hashlib
import html
import json
import statistics
from datetime import datetime
from functools import lru_cache

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from .. import stats
from ..config import MODEL_GROUPS, model_group
from ..scenarios import registry
from . import fmt, profiles
from .protocols import HANDSHAKE_COST_NOTE, PROTOCOL_COST_NOTE, handshake_costs, protocol_costs
from .model import (BADGES, OPEN_LOOP_NOTE, SATURATED_BUSY_PCT, TIE_RULE, Group, Measurement, Report, capacity_pct,
                    database_bound_note, database_text, external_line, found_rate_text, interval_series, one_server_line, rank_basis, rank_key, rank_text, ranking, ranks, requests_line)

CHART_HEIGHT_PX = 420
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
# Ticks of the percentile plots: x = 1 / (1 - p), the HdrHistogram way, so each decade is one more nine.
PERCENTILE_TICKS = [(1, "0%"), (10, "90%"), (100, "99%"), (1000, "99.9%"), (10_000, "99.99%"),
                    (100_000, "99.999%"), (1_000_000, "99.9999%")]

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 0 1.5rem 4rem; color: #1f2328; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #d0d7de; padding-bottom: 0.2rem; margin-top: 2.5rem; }
h3 { margin-top: 1.6rem; }
.meta { color: #57606a; margin-top: 0; }
nav { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 0.5rem 1rem; margin: 1rem 0; }
nav a { margin-right: 1rem; white-space: nowrap; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.88rem; }
table.summary { font-size: 0.8rem; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; vertical-align: top; }
th { background: #f6f8fa; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.level-start td { border-top: 2px solid #8c959f; }
.badge { display: inline-block; background: #fff8c5; border: 1px solid #d4a72c; color: #6f4b00; border-radius: 4px;
         padding: 0 0.3rem; margin: 0 0.15rem 0.1rem 0; font-size: 0.78rem; white-space: nowrap; }
.badge.bad { background: #ffebe9; border-color: #ff8182; color: #82071e; }
.ids { white-space: nowrap; } .ids a { color: #0969da; text-decoration: none; font-size: 0.8rem; }
.note { color: #57606a; font-size: 0.9rem; }
.chart { min-height: 420px; margin-bottom: 1rem; } .chart.flame { min-height: 0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.8rem; }
pre { white-space: pre-wrap; word-break: break-all; background: #f6f8fa; padding: 0.4rem; margin: 0; }
details { margin: 0.4rem 0; } summary { cursor: pointer; }
.filter { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 0.4rem 1rem; margin: 0.6rem 0; }
.filter label { margin-right: 1rem; }
.partial { background: #ffebe9; border: 1px solid #ff8182; border-radius: 6px; padding: 0.5rem 1rem; }
"""

_BAD_BADGES = {"VERIFY", "CRASH", "HUNG", "FAIL", "ERR", "THR", "NOANS"}


def e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    # "</script" cannot appear inside an inline script; plotly.js does not contain it, but be sure.
    return get_plotlyjs().replace("</script", "<\\/script")


# Figures are made without plotly's default template ("plotly", which the first new figure would load and every
# one validate, 0.15 s of a report): chart_div gives each the charts' own. The report pages (this one and
# compare.py's) draw every chart through chart_div.
pio.templates.default = None


@lru_cache(maxsize=1)
def _chart_template() -> dict:
    """The charts' look, plotly's "plotly_white" template, as plain data. chart_div puts it into each figure's
    JSON: given through fig.update_layout(template=...), plotly validated the whole template again for every chart
    (20-40 ms each; with the default template's load, half the CPU of rendering a one-measurement run's page)."""
    return pio.templates["plotly_white"].to_plotly_json()


def chart_div(fig: go.Figure, div_id: str, config: dict) -> str:
    """The figure as a <div> drawing it with plotly.js (loaded once by the page), in the charts' look."""
    spec = fig.to_plotly_json()  # validated as it was built; the template is plotly's own
    spec["layout"]["template"] = _chart_template()
    return pio.to_html(spec, validate=False, full_html=False, include_plotlyjs=False, div_id=div_id, config=config)


class _Page:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chart_count = 0

    def add(self, text: str) -> None:
        self.parts.append(text)

    def chart(self, fig: go.Figure, title: str, margin_top_px: int = 60, cls: str = "") -> None:
        self.chart_count += 1
        fig.update_layout(height=fig.layout.height or CHART_HEIGHT_PX, title={"text": title},
                          margin={"t": margin_top_px, "l": 70, "r": 30, "b": 60})
        div = chart_div(fig, f"chart-{self.chart_count}", PLOTLY_CONFIG)
        self.add(f'<div class="chart{" " + cls if cls else ""}" data-chart="{e(title)}">{div}</div>')


def _of(contestant: str) -> dict:
    """A trace's tag for the page's language and model filter (FILTER_JS): the one contestant it draws."""
    return {"contestant": contestant}


def _of_points(contestants: list[str]) -> dict:
    """A bar trace's tag for the filter: the contestant of each of its points, in order."""
    return {"contestants": contestants}


def ids_html(ids: list[int]) -> str:
    return '<span class="ids">' + " ".join(f'<a href="#m{i}">#{i}</a>' for i in ids) + "</span>"


def badges_html(codes: list[str]) -> str:
    return "".join(f'<span class="badge{" bad" if c in _BAD_BADGES else ""}" data-badge="{c}" '
                   f'title="{e(BADGES[c][1])}">{e(BADGES[c][0])}</span>' for c in codes)


def _busiest_thread(generator: dict) -> float | None:
    """The busiest load thread's busy fraction (what generator_saturated is judged on); results from before
    netarena-load reported it carry only the threads' average."""
    own = generator.get("generator") or {}
    return own.get("busy_fraction_max", own.get("busy_fraction"))


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>' + "".join(rows) + "</tbody></table>"


def _value_html(value, depth: int = 0) -> str:
    """A value as HTML a person reads: mappings as nested two-column tables, lists of mappings as a table with a
    column per key, plain lists joined; JSON only past a few levels of nesting."""
    if isinstance(value, dict) and value and depth < 3:
        return _kv_table(list(value.items()), depth + 1)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and depth < 3:
        keys: list[str] = []
        for v in value:
            keys += [k for k in v if k not in keys]
        rows = ["<tr>" + "".join(f"<td>{_value_html(v.get(k), depth + 1)}</td>" for k in keys) + "</tr>"
                for v in value]
        return _table([e(k) for k in keys], rows, cls="nested")
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return e(", ".join(map(str, value)))
    if isinstance(value, (dict, list)):
        return f"<pre>{e(json.dumps(value, indent=1, default=str))}</pre>"
    return e(value)


def _kv_table(pairs: list[tuple[str, object]], depth: int = 0) -> str:
    rows = [f"<tr><th>{e(key)}</th><td>{_value_html(value, depth)}</td></tr>" for key, value in pairs]
    return f'<table class="{"kv" if depth == 0 else "kv nested"}">' + "".join(rows) + "</table>"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-").lower()


@lru_cache(maxsize=None)
def colour_for(contestant: str) -> str:
    """One colour per contestant, derived from its name alone: the same in every chart of a page and in every
    report (a palette indexed by position would recolour everyone when one contestant joins or drops out).
    The hue comes from a hash of the name; lightness and saturation from other bits of it, kept in a band
    that reads on white, so two names whose hues collide still differ in shade."""
    digest = hashlib.sha256(contestant.encode()).digest()
    hue = int.from_bytes(digest[:2], "big") / 65536
    lightness = 0.36 + 0.16 * digest[2] / 255
    saturation = 0.55 + 0.35 * digest[3] / 255
    r, g, b = colorsys.hls_to_rgb(hue, lightness, saturation)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


# Dash styles for the series of one contestant (worker counts, sizes...): its colour stays, the dash changes.
_DASHES = ("solid", "dot", "dash", "longdash", "dashdot", "longdashdot")


def _dash(series: str, all_series: list[str]) -> str:
    return _DASHES[all_series.index(series) % len(_DASHES)] if series in all_series else "solid"


# Marker shapes, also derived from the name: two contestants whose hashed colours come out close (likely with
# 25 of them) still differ in shape. Each has a hollow "-open" form, used for a rate that was not met.
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "triangle-down", "pentagon", "hexagon", "star",
            "hourglass", "cross")


def symbol_for(contestant: str, hollow: bool = False) -> str:
    symbol = _SYMBOLS[hashlib.sha256(contestant.encode()).digest()[4] % len(_SYMBOLS)]
    return symbol + "-open" if hollow else symbol


def _line_name(g: Group, all_series: list[str] | None = None) -> str:
    """The contestant, and its series when the chart has several (a series every line shares says nothing)."""
    several = all_series is None or len(all_series) > 1
    return g.contestant + (f" ({g.series})" if g.series and several else "")




# ----------------------------------------------------------------------------- sections


def _level_cell(g: Group) -> str:
    text = e(g.level_key)
    if g.generator_threads_asked is not None:  # runner.cap_generator_threads: said wherever the level is shown
        text += (f'<br><span class="note" data-capped="{g.generator_threads_asked}">generator_threads = '
                 f"{g.generator_threads_asked} asked, {g.level.get('generator_threads')} ran (one per generator "
                 "CPU)</span>")
    if g.requests_asked is not None:
        text += f'<br><span class="note">{e(requests_line(g).split(": ", 1)[1])}</span>'
    if g.sweep is not None:
        return f'{text}<br><span class="note">connection-rate sweep (steps below): {OPEN_LOOP_NOTE}</span>'
    if g.find_max is not None:
        return f'{text}<br><span class="note">find-max: {OPEN_LOOP_NOTE}</span>'
    if g.offered_rate_per_s is not None:
        return (f'{text}<br><span class="note">offered {fmt.rps(g.offered_rate_per_s)} req/s; open loop: '
                f"{OPEN_LOOP_NOTE}</span>")
    return text


def _summary(page: _Page, report: Report) -> None:
    page.add('<h2 id="summary">Summary</h2>')
    page.add('<p class="note">Per scenario and load level, contestants ranked by median throughput across repeats '
             "(open-loop levels, which offer every contestant the same rate: by p99 latency from the intended send "
             "time; find-max levels: by the highest rate found); "
             f"{e(stats.interval_note())}; rank: {e(TIE_RULE)}; latency percentiles, mean, "
             "standard deviation and max from the repeats' merged HdrHistograms (never averaged); ok / errors = "
             "successful requests and errors summed over the repeats; error rate = errors / (successes + errors), "
             "median of repeats; MB/s received (median); server CPU per request (per MiB echoed for echo): its "
             "CPU time, user + system, over the measured phase divided by the responses in it (median of repeats, "
             "with the repeats' CV; below it the generator's, see Cost per request); "
             "server CPU in % of the CPUs its processes were allowed on "
             "(median of repeats; 100% = all of them busy); peak RSS of the server's process tree over all repeats. "
             "<b>from</b> lists the measurement ids each row was computed from.</p>")
    one_server = one_server_line(report.run)
    if one_server:
        page.add(f'<p class="note one-server">{e(one_server[0].upper() + one_server[1:])}.</p>')
    rank = ranking(report.groups)
    for scenario in report.scenarios():
        unit = fmt.throughput_unit(scenario)
        page.add(f'<h3 id="summary-{_slug(scenario)}">{e(scenario)}</h3>')
        rows, previous = [], None
        # A scenario with a database: its CPU and which side held each figure (report.model.saturated_side).
        database = any(g.database_cpu_pct_median is not None for g in report.groups_for(scenario))
        for g in report.groups_for(scenario):
            cls = ' class="level-start"' if previous is not None and g.level_key != previous else ""
            previous = g.level_key
            position = rank.get((g.contestant, g.scenario, g.level_key))
            tied = ' data-tied="1"' if position and position.tied else ""
            stopped = (f'<br><span class="note">{g.repeats_ok + g.repeats_failed} repeats, stopped: '
                       f"{e(g.stopped_because)}</span>") if g.stopped_because else ""
            cells = [
                f'<td class="num" data-field="rank"{tied} title="{e(rank_basis(g))}">{rank_text(rank, g)}</td>',
                f"<td>{e(g.contestant)}</td>", f"<td>{_level_cell(g)}</td>",
                f'<td class="num" data-field="rps">{fmt.rps(g.requests_per_s_median)}</td>',
                f'<td class="num" data-field="interval">{fmt.rps_range(g.requests_per_s_ci_low, g.requests_per_s_ci_high)}'
                f'<br><span class="note">{e(g.requests_per_s_ci_kind or "")}, CV {fmt.pct(g.cv, 1)}</span>{stopped}</td>',
                f'<td class="num" data-field="cost">{_cost_cell(g)}</td>',
                f'<td class="num" data-field="p50">{fmt.us(g.latency_p50_us)}</td>',
                f'<td class="num" data-field="p99">{fmt.us(g.latency_p99_us)}</td>',
                f'<td class="num">{fmt.us(g.latency_p99_9_us)}</td>',
                f'<td class="num" data-field="mean">{fmt.us(g.latency_mean_us)} ± {fmt.us(g.latency_stdev_us)}</td>',
                f'<td class="num" data-field="max">{fmt.us(g.latency_max_us)}</td>',
                f'<td class="num" data-field="counts">{g.requests_total:,} / {g.errors_total:,}</td>',
                f'<td class="num">{fmt.pct(g.error_rate_median)}</td>',
                f'<td class="num" data-field="mbps">{fmt.mb_per_s(g.bytes_per_s_median)}</td>',
                f'<td class="num" data-field="cpu">{fmt.cpu_capacity(g.server_cpu_capacity_pct_median, g.server_cpus)}'
                "</td>",
                f'<td class="num">{fmt.size_bytes(g.server_rss_peak_bytes)}</td>',
                *((f'<td class="num" data-field="db-cpu">{fmt.cpu_pct(g.database_cpu_pct_median)}</td>',
                   f'<td data-field="bound">{e(g.bound_by or "neither")}</td>') if database else ()),
                f"<td>{g.repeats_ok}/{g.repeats_ok + g.repeats_failed}</td>",
                f"<td>{badges_html(g.badges)}</td>", f"<td>{ids_html(g.measurement_ids)}</td>"]
            rows.append(f'<tr{cls} data-contestant="{e(g.contestant)}" data-level="{e(g.level_key)}">'
                        + "".join(cells) + "</tr>")
        page.add(_table(["rank", "contestant", "level", f"{unit} (median)", "interval",
                         "server CPU per " + fmt.cpu_per(scenario), "p50", "p99", "p99.9",
                         "mean ± stdev", "max", "ok / errors", "error rate", "MB/s", "server CPU", "peak RSS",
                         *(("database CPU", "bound") if database else ()),
                         "ok/repeats", "badges", "from"], rows, cls=f"summary scenario-{_slug(scenario)}"))
        if database:
            page.add('<p class="note">database CPU = the database\'s processes (FerretDB and its storage, or '
                     "PostgreSQL), % of one core (median of repeats); bound = the side whose own processes kept its "
                     f"CPUs at least {SATURATED_BUSY_PCT:g}% busy in most repeats: server, database, host (the two "
                     "together, on CPUs they share), or neither (look at latency and errors); a generator that could "
                     "not keep up is badged GEN.</p>")
        for level_key, groups in report.levels_for(scenario):
            if database_bound_note(groups):
                page.add(f'<p class="note database-bound" data-level="{e(level_key)}"><b>{e(level_key)}</b>: '
                         f"{e(database_bound_note(groups))}.</p>")


def _cost_cell(g: Group) -> str:
    if g.server_cpu_us_median is None and g.generator_cpu_us_median is None:
        return "-"
    return (f"{fmt.cpu_us(g.server_cpu_us_median)}<br><span class=\"note\">CV {fmt.pct(g.server_cpu_us_cv, 1)}; "
            f"generator {fmt.cpu_us(g.generator_cpu_us_median)}</span>")


def _pct_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _cost_section(page: _Page, report: Report) -> None:
    """What each request (MiB, for echo) cost the server and the generator, and how much the machine interfered:
    throughput falls on a noisy machine, CPU time per request should not."""
    groups = [g for g in report.groups if g.server_cpu_us_median is not None or g.generator_cpu_us_median is not None]
    if not groups and not any(g.discarded for g in report.groups):
        return
    page.add('<h2 id="cost">Cost per request</h2>')
    page.add('<p class="note">Over the measured phase only: the server\'s CPU time (user and system) and its voluntary '
             "and involuntary context switches divided by the responses in that window (echo: by the MiB echoed), "
             "and the generator's own CPU time likewise; medians of the counted repeats. Under CPU steal or a "
             "competing process throughput falls but CPU time per request should not, so these compare servers "
             "where throughput cannot. Steal is the machine's (all CPUs); others = the share of a side's CPUs "
             "that other processes used; wait = the share of the time a side wanted a CPU that it spent waiting "
             "for one (run delay, its own threads included); the worst counted repeat is shown. A measurement "
             f"past steal {stats.NOISY_STEAL_PCT:g}% or others {stats.NOISY_OTHERS_PCT:g}% is noisy: re-measured "
             "and discarded while the suite's time budget and noisy_retries allow, else badged NOISY.</p>")
    rows = []
    for g in sorted(report.groups, key=lambda g: (g.scenario, g.connections, g.level_key, g.contestant)):
        per = fmt.cost_unit(g.cost_unit)
        rows.append(
            f'<tr data-contestant="{e(g.contestant)}" data-level="{e(g.level_key)}" data-scenario="{e(g.scenario)}">'
            f"<td>{e(g.contestant)}</td><td>{e(g.scenario)}</td><td>{e(g.level_key)}</td>"
            f'<td class="num">{fmt.rps(g.requests_per_s_median)}</td>'
            f'<td class="num" data-field="server-cpu">{fmt.cpu_us(g.server_cpu_us_median)}/{per}<br>'
            f'<span class="note">CV {fmt.pct(g.server_cpu_us_cv, 1)}</span></td>'
            f'<td class="num">{fmt.cpu_us(g.server_cpu_user_us_median)} + {fmt.cpu_us(g.server_cpu_sys_us_median)}</td>'
            f'<td class="num">{fmt.per_unit(g.server_ctx_voluntary_median)} + '
            f"{fmt.per_unit(g.server_ctx_involuntary_median)}</td>"
            f'<td class="num" data-field="generator-cpu">{fmt.cpu_us(g.generator_cpu_us_median)}/{per}</td>'
            f'<td class="num">{"-" if g.steal_pct_max is None else f"{g.steal_pct_max:.1f}%"}</td>'
            f'<td class="num">{_pct_or_dash(g.server_cpus_others_pct_max)} / '
            f"{_pct_or_dash(g.generator_cpus_others_pct_max)}</td>"
            f'<td class="num">{fmt.pct(g.server_wait_share_max, 0)} / {fmt.pct(g.generator_wait_share_max, 0)}</td>'
            f'<td data-field="discarded">{g.discarded}'
            + (f'<br><span class="note">{e("; ".join(g.discarded_reasons))}</span>' if g.discarded else "")
            + f"</td><td>{badges_html(g.badges)}</td><td>{ids_html(g.ok_ids)}</td></tr>")
    page.add(_table(["contestant", "scenario", "level", "throughput (median)", "server CPU", "user + system",
                     "context switches (vol + invol)", "generator CPU", "steal (max)",
                     "others on server / generator CPUs (max)", "wait server / generator (max)",
                     "discarded", "badges", "from"], rows, cls="cost"))
    for scenario in report.scenarios():
        members = [g for g in groups if g.scenario == scenario]
        if not members:
            continue
        per = fmt.cpu_per(scenario)
        names = [f"{g.contestant} {g.level_key}" for g in members]
        ids = [fmt.ids(g.ok_ids) for g in members]
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                            subplot_titles=(f"server CPU µs per {per} (user + system, median)",
                                            f"generator CPU µs per {per} (median)"))
        for name, values, colour in (("user", [g.server_cpu_user_us_median for g in members], "#0969da"),
                                     ("system", [g.server_cpu_sys_us_median for g in members], "#bf8700")):
            fig.add_trace(go.Bar(x=names, y=values, name=f"server {name}", marker_color=colour, customdata=ids,
                                 meta=_of_points([g.contestant for g in members]),
                                 hovertemplate=f"%{{x}}: {name} %{{y:.2f}} µs<br>from %{{customdata}}<extra></extra>"),
                          row=1, col=1)
        fig.add_trace(go.Bar(x=names, y=[g.generator_cpu_us_median for g in members], name="generator",
                             marker_color=[colour_for(g.contestant) for g in members], customdata=ids,
                             meta=_of_points([g.contestant for g in members]),
                             hovertemplate="%{x}: %{y:.2f} µs<br>from %{customdata}<extra></extra>"), row=1, col=2)
        fig.update_layout(barmode="stack")
        fig.update_xaxes(tickangle=-40)
        page.chart(fig, f"{scenario}: CPU per {per}")


def _protocol_cost(page: _Page, report: Report) -> None:
    """Each contestant's figures over another protocol than h1 (TLS, HTTP/2) against its own over cleartext HTTP/1.1."""
    costs = protocol_costs(report.groups)
    if not costs:
        return
    page.add('<h2 id="protocols">Cost of the protocol</h2>')
    page.add(f'<p class="note">{e(PROTOCOL_COST_NOTE)}</p>')
    rows = [f'<tr data-contestant="{e(c.contestant)}" data-scenario="{e(c.scenario)}" data-level="{e(c.level_key)}" '
            f'data-protocol="{e(c.protocol)}">'
            f"<td>{e(c.contestant)}</td><td>{e(c.scenario)}</td><td>{e(c.level_key)}</td><td>{e(c.base_key)}</td>"
            f'<td class="num">{fmt.rps(c.requests_per_s)} / {fmt.rps(c.base_requests_per_s)}</td>'
            f'<td class="num" data-field="throughput">{fmt.times_reference(c.throughput_ratio)}</td>'
            f'<td class="num">{fmt.cpu_us(c.server_cpu_us)} / {fmt.cpu_us(c.base_server_cpu_us)}</td>'
            f'<td class="num" data-field="server-cpu">{fmt.times_reference(c.server_cpu_ratio)}</td>'
            f'<td class="num" data-field="generator-cpu">{fmt.times_reference(c.generator_cpu_ratio)}</td>'
            f'<td class="num" data-field="p99">{fmt.times_reference(c.p99_ratio)}</td>'
            f'<td data-field="within-noise">{"yes" if c.within_noise else "no"}</td>'
            f"<td>{ids_html(c.ids)} vs {ids_html(c.base_ids)}</td></tr>"
            for c in costs]
    page.add(_table(["contestant", "scenario", "level", "against", "req/s (it / h1)", "throughput ×",
                     "server CPU per request (it / h1)", "server CPU ×", "generator CPU ×", "p99 ×", "within noise",
                     "from"], rows, cls="protocol-cost"))
    for scenario in report.scenarios():
        members = [c for c in costs if c.scenario == scenario]
        if not members:
            continue
        names = [f"{c.contestant} {c.level_key}" for c in members]
        ids = [f"{fmt.ids(c.ids)} vs {fmt.ids(c.base_ids)}" for c in members]
        fig = go.Figure()
        for name, values, colour in (("throughput ×", [c.throughput_ratio for c in members], "#0969da"),
                                     ("server CPU per request ×", [c.server_cpu_ratio for c in members], "#bf8700")):
            fig.add_trace(go.Bar(x=names, y=values, name=name, marker_color=colour, customdata=ids,
                                 meta=_of_points([c.contestant for c in members]),
                                 hovertemplate=f"%{{x}}: {name} %{{y:.3g}}<br>from %{{customdata}}<extra></extra>"))
        fig.add_hline(y=1, line_dash="dot", line_color="#57606a")
        fig.update_layout(barmode="group")
        fig.update_xaxes(tickangle=-40)
        fig.update_yaxes(title="against the same level over h1 (1 = the same)", rangemode="tozero")
        page.chart(fig, f"{scenario}: cost of the protocol against cleartext HTTP/1.1")


def _closed_loop(report: Report, scenario: str) -> list[Group]:
    return [g for g in report.groups_for(scenario) if not g.open_loop and g.requests_per_s_median is not None]


def _throughput_charts(page: _Page, report: Report) -> None:
    page.add('<h2 id="throughput">Throughput against concurrency</h2>')
    page.add('<p class="note">Closed-loop levels. Median across repeats, error bars to the min and max; log x axis; '
             "one colour per contestant on the whole page, one dash style per worker count or parameter set. Below "
             "each: completed requests, mean latency and errors, then server CPU, RSS and MB/s, against the same "
             "connections. With a single level, bars: throughput and p99 side by side. Hover for the measurement "
             "ids.</p>")
    for scenario in report.scenarios():
        groups = _closed_loop(report, scenario)
        if not groups:
            if not any(g.open_loop for g in report.groups_for(scenario)):
                page.add(f"<p>{e(scenario)}: no successful measurement to plot.</p>")
            continue
        if len({g.level_key for g in groups}) == 1:
            _level_bars(page, scenario, groups, ranking(report.groups))
            continue
        fig = go.Figure()
        lines, all_series = _lines(groups)
        for (contestant, series), members in sorted(lines.items()):
            members.sort(key=lambda g: g.connections)
            fig.add_trace(go.Scatter(
                x=[g.connections for g in members], y=[g.requests_per_s_median for g in members],
                error_y={"type": "data", "symmetric": False,
                         "array": [g.requests_per_s_ci_high - g.requests_per_s_median for g in members],
                         "arrayminus": [g.requests_per_s_median - g.requests_per_s_ci_low for g in members]},
                mode="lines+markers", name=_line_name(members[0], all_series), meta=_of(contestant),
                line={"color": colour_for(contestant), "dash": _dash(series, all_series)},
                marker={"symbol": symbol_for(contestant), "size": 8},
                customdata=[fmt.ids(g.ok_ids) for g in members],
                hovertemplate="%{x} connections: %{y:,.0f}/s<br>from %{customdata}<extra>%{fullData.name}</extra>"))
        fig.update_xaxes(type="log", title="connections")
        fig.update_yaxes(title=fmt.throughput_unit(scenario), rangemode="tozero")
        page.chart(fig, f"{scenario}: throughput vs connections")
        if registry.kind(scenario).is_http:  # echo floods have their own section (completion time, probe), no requests
            _completed_latency_errors(page, scenario, groups)
        _load_resources(page, scenario, groups, lambda g: g.connections, "connections", log_x=True)


def _lines(groups: list[Group]) -> tuple[dict[tuple, list[Group]], list]:
    """One chart line per (contestant, series): the groups of each, and every series present (sorted)."""
    lines: dict[tuple, list[Group]] = {}
    for g in groups:
        lines.setdefault((g.contestant, g.series), []).append(g)
    return lines, sorted({series for _, series in lines})


def _completed_latency_errors(page: _Page, scenario: str, groups: list[Group]) -> None:
    """Completed requests, mean latency and errors against connections, one line per contestant and series:
    what siege reports per concurrency (seed 003's file test), beside the throughput above and the server's
    CPU, RSS and MB/s below."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("completed requests (successful, per repeat: median)",
                                        "mean latency (ms)", "errors (count, summed over repeats)"))
    lines, all_series = _lines(groups)
    for (contestant, series), members in sorted(lines.items()):
        members.sort(key=lambda g: g.connections)
        name = _line_name(members[0], all_series)
        style = {"color": colour_for(contestant), "dash": _dash(series, all_series)}
        by_class = [", ".join(f"{c} {n:,}" for c, n in g.errors_by_class.items() if n) or "none" for g in members]
        for row, values, text, fmt_y in (
                (1, [g.requests_completed_median for g in members], None, "%{y:,.0f} completed"),
                (2, [g.latency_mean_us / 1000 if g.latency_mean_us is not None else None for g in members], None,
                 "mean %{y:.3f} ms"),
                (3, [g.errors_total for g in members], by_class, "%{y:,} errors (%{text})")):
            fig.add_trace(go.Scatter(x=[g.connections for g in members], y=values, text=text, mode="lines+markers",
                                     name=name, legendgroup=name, showlegend=row == 1, line=style, meta=_of(contestant),
                                     marker={"symbol": symbol_for(contestant), "size": 7},
                                     customdata=[fmt.ids(g.ok_ids) for g in members],
                                     hovertemplate=f"%{{x}} connections: {fmt_y}<br>from %{{customdata}}"
                                                   "<extra>%{fullData.name}</extra>"),
                          row=row, col=1)
    fig.update_xaxes(type="log")
    fig.update_xaxes(title="connections", row=3, col=1)
    fig.update_yaxes(rangemode="nonnegative")
    fig.update_layout(height=760)
    page.chart(fig, f"{scenario}: completed requests, mean latency and errors vs connections")


def _level_bars(page: _Page, scenario: str, groups: list[Group], rank: dict) -> None:
    """One level: a line of single points says nothing; bars of throughput and p99 per contestant do. Each
    throughput bar is labelled with the contestant's rank, "=" where it is tied (model.TIE_RULE)."""
    groups = sorted(groups, key=lambda g: -(g.requests_per_s_median or 0))
    names = [_line_name(g, sorted({x.series for x in groups})) for g in groups]
    colours = [colour_for(g.contestant) for g in groups]
    ids = [fmt.ids(g.ok_ids) for g in groups]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(f"{fmt.throughput_unit(scenario)} (median, interval)", "p99 latency (ms)"))
    fig.add_trace(go.Bar(x=names, y=[g.requests_per_s_median for g in groups], marker_color=colours,
                         meta=_of_points([g.contestant for g in groups]),
                         name="throughput", showlegend=False, customdata=ids,
                         text=[f"rank {rank_text(rank, g)}" for g in groups], textposition="inside",
                         error_y={"type": "data", "symmetric": False,
                                  "array": [g.requests_per_s_ci_high - g.requests_per_s_median for g in groups],
                                  "arrayminus": [g.requests_per_s_median - g.requests_per_s_ci_low for g in groups]},
                         hovertemplate="%{x}: %{y:,.0f}/s<br>from %{customdata}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=names, y=[(g.latency_p99_us or 0) / 1000 for g in groups], marker_color=colours,
                         meta=_of_points([g.contestant for g in groups]),
                         name="p99", showlegend=False, customdata=ids,
                         hovertemplate="%{x}: p99 %{y:.3f} ms<br>from %{customdata}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(tickangle=-40)
    page.chart(fig, f"{scenario} {groups[0].level_key}: throughput and p99 by contestant")


def _load_resources(page: _Page, scenario: str, groups: list[Group], x_of, x_title: str, log_x: bool) -> None:
    """Server CPU, peak RSS and MB/s against the load (connections or offered rate), one line per contestant
    and series: what seed 003 plotted beside the replies and the errors."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("server CPU (% of its pinned CPUs)", "server peak RSS (MiB)",
                                        "received (MB/s)"))
    lines, all_series = _lines(groups)
    for (contestant, series), members in sorted(lines.items()):
        members.sort(key=x_of)
        style = {"color": colour_for(contestant), "dash": _dash(series, all_series)}
        for row, values, fmt_y in ((1, [g.server_cpu_capacity_pct_median for g in members], "%{y:.0f}%"),
                                   (2, [g.server_rss_peak_bytes / 2**20 if g.server_rss_peak_bytes else None
                                        for g in members], "%{y:.1f} MiB"),
                                   (3, [g.bytes_per_s_median / 1e6 if g.bytes_per_s_median is not None else None
                                        for g in members], "%{y:.2f} MB/s")):
            if all(v is None for v in values):  # e.g. no monitor samples: nothing to draw, not an empty line
                continue
            fig.add_trace(go.Scatter(x=[x_of(g) for g in members], y=values, mode="lines+markers",
                                     name=_line_name(members[0], all_series),
                                     legendgroup=_line_name(members[0], all_series), showlegend=row == 1,
                                     meta=_of(contestant),
                                     line=style, marker={"symbol": symbol_for(contestant), "size": 7},
                                     hovertemplate=f"%{{x}}: {fmt_y}<extra>%{{fullData.name}}</extra>"),
                          row=row, col=1)
    if not fig.data:
        return
    fig.update_xaxes(type="log" if log_x else "linear", title=x_title, row=3, col=1)
    if log_x:
        fig.update_xaxes(type="log")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(height=760)
    page.chart(fig, f"{scenario}: server CPU, peak RSS and MB/s vs {x_title}")


def _rate_charts(page: _Page, report: Report) -> None:
    """Levels with rate / conn_rate, against the offered request rate (seed 003's autobench graphs)."""
    scenarios = [(s, [g for g in report.groups_for(s) if g.offered_rate_per_s is not None and g.repeats_ok])
                 for s in report.scenarios()]
    scenarios = [(s, gs) for s, gs in scenarios if gs]
    if not scenarios:
        return
    page.add('<h2 id="rates">Against the offered rate</h2>')
    page.add(f'<p class="note">Open-loop levels (rate, or conn_rate × requests per connection): x is the request '
             f"rate offered. Every latency here is <b>{OPEN_LOOP_NOTE}</b> (solid), so a server that falls behind "
             "shows the wait its requests spent queued; dashed: from the actual send, for comparison. A hollow marker "
             "is a level whose rate was not met (hover for why): the load was lower than the x value says. At each "
             "rate contestants are ranked by p99, not throughput: all that keep up serve the same rate.</p>")
    for scenario, groups in scenarios:
        fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                            subplot_titles=(f"achieved {fmt.throughput_unit(scenario)} (successful replies)",
                                            f"latency p50, mean (dash-dot) and p99 (ms, {OPEN_LOOP_NOTE}; dashed: from the send)",
                                            "errors (% of requests)", "errors by class (count, summed over repeats)"))
        lines, all_series = _lines(groups)
        top = max(g.offered_rate_per_s for g in groups)
        fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="offered", hoverinfo="skip",
                                 line={"color": "#8c959f", "dash": "dot", "width": 1}), row=1, col=1)
        for (contestant, series), members in sorted(lines.items()):
            members.sort(key=lambda g: g.offered_rate_per_s)
            name = _line_name(members[0], all_series)
            colour = colour_for(contestant)
            xs = [g.offered_rate_per_s for g in members]
            symbols = [symbol_for(contestant, hollow=bool(g.rate_not_met_reasons or "RATE" in g.badges))
                       for g in members]
            why = ["rate not met: " + "; ".join(g.rate_not_met_reasons) if g.rate_not_met_reasons else
                   ("rate not met" if "RATE" in g.badges else "rate met") for g in members]
            common = {"legendgroup": name, "customdata": [[w, fmt.ids(g.ok_ids)] for w, g in zip(why, members)],
                      "meta": _of(contestant)}
            style = {"color": colour, "dash": _dash(series, all_series)}
            fig.add_trace(go.Scatter(
                x=xs, y=[g.requests_per_s_median for g in members], mode="lines+markers", name=name,
                marker={"symbol": symbols, "size": 9, "color": colour}, line=style, **common,
                hovertemplate="offered %{x:,.0f}/s: achieved %{y:,.0f}/s<br>%{customdata[0]}<br>from "
                              "%{customdata[1]}<extra>%{fullData.name}</extra>"), row=1, col=1)
            for label, values, dash, width in (
                    ("p99", [g.latency_p99_us for g in members], "solid", 2.5),
                    ("p50", [g.latency_p50_us for g in members], "solid", 1),
                    ("mean", [g.latency_mean_us for g in members], "dashdot", 1.5),
                    ("p99 from the send", [g.latency_uncorrected_p99_us for g in members], "dash", 1.5),
                    ("p50 from the send", [g.latency_uncorrected_p50_us for g in members], "dash", 0.8)):
                if all(v is None for v in values):
                    continue
                fig.add_trace(go.Scatter(
                    x=xs, y=[v / 1000 if v is not None else None for v in values], mode="lines+markers",
                    name=f"{name} {label}", showlegend=False, line={"color": colour, "dash": dash, "width": width},
                    marker={"symbol": symbols, "color": colour}, **common,
                    hovertemplate=f"offered %{{x:,.0f}}/s: {label} %{{y:.3f}} ms<br>%{{customdata[0]}}<extra>"
                                  f"{e(name)}</extra>"), row=2, col=1)
            fig.add_trace(go.Scatter(
                x=xs, y=[100 * (g.error_rate_median or 0) for g in members], mode="lines+markers",
                name=f"{name} errors", showlegend=False, line=style, marker={"symbol": symbols, "color": colour},
                **common, hovertemplate="offered %{x:,.0f}/s: %{y:.2f}% errors<br>%{customdata[0]}<extra>"
                                        + e(name) + "</extra>"), row=3, col=1)
            fig.add_trace(go.Scatter(
                x=xs, y=[g.errors_total for g in members], mode="lines+markers", name=f"{name} error count",
                showlegend=False, line=style, marker={"symbol": symbols, "color": colour}, **common,
                text=[", ".join(f"{c} {n:,}" for c, n in g.errors_by_class.items() if n) or "none" for g in members],
                hovertemplate="offered %{x:,.0f}/s: %{y:,} errors (%{text})<extra>" + e(name) + "</extra>"),
                row=4, col=1)
        fig.update_yaxes(type="log", row=2, col=1)
        for row in (1, 3, 4):  # counts and rates: never below zero, even when all are zero
            fig.update_yaxes(rangemode="nonnegative", row=row, col=1)
        fig.update_xaxes(title="offered request rate (req/s)", row=4, col=1)
        fig.update_layout(height=1100)
        page.chart(fig, f"{scenario}: against the offered rate")
        _load_resources(page, scenario, groups, lambda g: g.offered_rate_per_s, "offered rate (req/s)", log_x=False)


def _requests_section(page: _Page, report: Report) -> None:
    """requests = N levels (weighttp -n): the time N responses took, weighttp's figure, beside req/s."""
    groups = [g for g in report.groups if g.requests_asked is not None]
    if not groups:
        return
    page.add('<h2 id="requests">Fixed request counts</h2>')
    page.add('<p class="note">Levels with <code>requests = N</code> stop after N responses (netarena-load -n); '
             "duration_s is only their time limit, and a repeat that did not get N responses within it is failed "
             "(requests_not_reached). The time is the measured phase's, median over the ok repeats.</p>")
    rows = [f'<tr data-requests="{e(g.contestant)}" data-contestant="{e(g.contestant)}">'
            f"<td>{e(g.scenario)}</td><td>{e(g.level_key)}</td>"
            f"<td>{e(g.contestant)}</td><td>{e(requests_line(g).split(': ', 1)[1])}</td>"
            f'<td class="num">{fmt.rps(g.requests_per_s_median)}</td><td>{ids_html(g.measurement_ids)}</td></tr>'
            for g in groups]
    page.add(_table(["scenario", "level", "contestant", "requests in", "req/s (median)", "from"], rows,
                    cls="requests-n"))


def _sweep_section(page: _Page, report: Report) -> None:
    """connections_per_step levels (autobench's shape): one row per step of the median repeat."""
    groups = [g for g in report.groups if g.sweep is not None]
    if not groups:
        return
    page.add('<h2 id="sweeps">Connection-rate sweeps</h2>')
    page.add(f'<p class="note">Each step opens a fixed number of connections at its rate (autobench\'s num_conn), '
             f"so it lasts that number / the rate, on one server start for the whole sweep; latency {OPEN_LOOP_NOTE}. "
             "The steps shown are those of the repeat whose whole-sweep throughput is the median.</p>")
    for g in groups:
        sw = g.sweep
        rows = [f'<tr><td class="num">{fmt.rps(st["rate_per_s"])}</td><td class="num">{fmt.rps(st["achieved_per_s"])}'
                f'</td><td class="num">{st["started"]:,} / {st["completed"]:,}</td>'
                f'<td class="num">{fmt.rps(st["requests_per_s"])}</td><td class="num">{fmt.us(st["p50_us"])}</td>'
                f'<td class="num">{fmt.us(st["p99_us"])}</td><td class="num">{fmt.us(st["mean_us"])}</td>'
                f'<td class="num">{fmt.pct(st["error_rate"])}</td>{_step_resource_cells(st, g)}'
                f'<td class="num">{(st["duration_s"] or 0):.2f} s</td><td>{"RATE" if st["rate_not_met"] else ""}</td>'
                "</tr>" for st in sw["steps"]]
        page.add(f'<div data-contestant="{e(g.contestant)}">'
                 f'<h3>{e(g.scenario)} {e(g.level_key)}: {e(g.contestant)}</h3>'
                 f'<p class="note">{len(sw["steps"])} steps of {sw["conns_per_step"]:,} connections x '
                 f'{sw["requests_per_conn"]} requests (measurement {ids_html([sw["steps_measurement_id"]])})</p>'
                 + _table(["conn/s asked", "conn/s achieved", "connections started / completed", "req/s", "p50",
                           "p99", "mean", "errors", *STEP_RESOURCE_HEADERS, "step length", "flag"], rows,
                          cls="sweep-steps") + "</div>")
    _steps_against_rate(page, groups, lambda g: g.sweep["steps"], "rate_per_s", "connection rate asked (conn/s)",
                        "connection-rate sweep")


def _handshake_cost(page: _Page, report: Report) -> None:
    """The handshake-rate experiment: each contestant's sweep over TLS with full handshakes beside the same sweep
    resuming sessions (report.protocols.handshake_costs), a table and, per scenario, the two against the rate."""
    costs = handshake_costs(report.groups)
    if not costs:
        return
    page.add('<h2 id="handshakes">TLS handshakes: full against resumed</h2>')
    page.add(f'<p class="note">{e(HANDSHAKE_COST_NOTE)}</p>')
    rows = [f'<tr data-contestant="{e(c.contestant)}" data-scenario="{e(c.scenario)}" data-level="{e(c.level_key)}">'
            f"<td>{e(c.contestant)}</td><td>{e(c.scenario)}</td><td>{e(c.level_key)}</td>"
            f'<td class="num">{len(c.steps)}</td>'
            f'<td class="num" data-field="full">{fmt.cpu_us(c.server_cpu_us)}</td>'
            f'<td class="num" data-field="resumed">{fmt.cpu_us(c.resumed_server_cpu_us)}</td>'
            f'<td class="num" data-field="ratio">{fmt.times_reference(c.server_cpu_ratio)}</td>'
            f'<td class="num" data-field="sessions-resumed">{e(c.sessions_resumed)}</td>'
            f"<td>{ids_html([c.id])} vs {ids_html([c.resumed_id])}</td></tr>" for c in costs]
    page.add(_table(["contestant", "scenario", "level (full handshakes)", "steps",
                     "server CPU per request, full (median of steps)", "resumed", "full ÷ resumed",
                     "sessions resumed", "from"], rows,
                    cls="handshake-cost"))
    for scenario in report.scenarios():
        members = [c for c in costs if c.scenario == scenario]
        if not members:
            continue
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                            subplot_titles=("server CPU per request, µs: full handshakes (solid), resumed (dashed)",
                                            f"p99, ms, {OPEN_LOOP_NOTE}: full (solid), resumed (dashed)"))
        for c in members:
            xs = [st.rate_per_s for st in c.steps]
            colour = colour_for(c.contestant)
            for row, full, resumed, unit in (
                    (1, [st.server_cpu_us for st in c.steps], [st.resumed_server_cpu_us for st in c.steps], "µs"),
                    (2, [st.p99_us / 1000 if st.p99_us is not None else None for st in c.steps],
                     [st.resumed_p99_us / 1000 if st.resumed_p99_us is not None else None for st in c.steps], "ms")):
                for values, dash, kind in ((full, "solid", "full"), (resumed, "dash", "resumed")):
                    fig.add_trace(go.Scatter(
                        x=xs, y=values, mode="lines+markers", name=f"{c.contestant} ({kind})",
                        showlegend=row == 1, legendgroup=c.contestant, meta=_of(c.contestant),
                        line={"color": colour, "dash": dash},
                        marker={"symbol": symbol_for(c.contestant), "color": colour},
                        hovertemplate=f"%{{x:,.0f}} conn/s: %{{y:,.2f}} {unit} ({kind})"
                                      f"<extra>{e(c.contestant)}</extra>"), row=row, col=1)
        fig.update_yaxes(rangemode="tozero", row=1, col=1)
        fig.update_yaxes(type="log", row=2, col=1)
        fig.update_xaxes(title="connection rate asked (conn/s)", row=2, col=1)
        fig.update_layout(height=700)
        page.chart(fig, f"{scenario}: TLS handshakes, full against resumed, against the connection rate")


STEP_RESOURCE_HEADERS = ("server CPU", "server CPU µs/req", "server peak RSS", "context switches/req")


def _step_resource_cells(st: dict, g: Group) -> str:
    """A step's server figures (stats._step_cost): CPU in % of its CPUs, CPU per request, peak RSS, and context
    switches (voluntary + involuntary) per request; "–" where the step held too few monitor samples."""
    cpu = capacity_pct(st["server_cpu_pct"], g.server_cpus)
    return (f'<td class="num" data-field="step-cpu">{fmt.cpu_capacity(cpu, g.server_cpus)}</td>'
            f'<td class="num">{fmt.cpu_us(st["server_cpu_us"])}</td>'
            f'<td class="num" data-field="step-rss">{fmt.size_bytes(st["server_rss_peak_bytes"])}</td>'
            f'<td class="num">{fmt.per_unit(st["server_ctx_per_request"])}</td>')


def _steps_against_rate(page: _Page, groups: list[Group], steps_of, x_key: str, x_title: str, kind: str) -> None:
    """Seed 003's five graphs across contestants for levels measured in steps on one server start (a
    connection-rate sweep, a find-max search): replies per second, mean and p99 response time, errors, server
    CPU and server RAM against the rate, one line per contestant (and series), one chart per scenario and
    level."""
    by_level: dict[tuple, list[Group]] = {}
    for g in groups:
        by_level.setdefault((g.scenario, g.level_key), []).append(g)
    for (scenario, level_key), members in by_level.items():
        fig = make_subplots(rows=5, cols=1, shared_xaxes=True, vertical_spacing=0.045,
                            subplot_titles=("replies per second (successful)",
                                            f"response time, mean (solid) and p99 (dotted), ms, {OPEN_LOOP_NOTE}",
                                            "errors (% of requests)", "server CPU (% of its pinned CPUs)",
                                            "server peak RSS (MiB)"))
        for g in sorted(members, key=lambda g: g.contestant):
            steps = steps_of(g)
            xs = [st[x_key] for st in steps]
            colour = colour_for(g.contestant)
            common = {"mode": "lines+markers", "legendgroup": g.contestant, "meta": _of(g.contestant),
                      "marker": {"symbol": symbol_for(g.contestant), "color": colour}}
            for row, values, label, dash, legend in (
                    (1, [st["requests_per_s"] for st in steps], "req/s", "solid", True),
                    (2, [st["mean_us"] / 1000 if st["mean_us"] is not None else None for st in steps], "mean ms",
                     "solid", False),
                    (2, [st["p99_us"] / 1000 if st["p99_us"] is not None else None for st in steps], "p99 ms",
                     "dot", False),
                    (3, [100 * st["error_rate"] if st["error_rate"] is not None else None for st in steps],
                     "% errors", "solid", False),
                    (4, [capacity_pct(st["server_cpu_pct"], g.server_cpus) for st in steps], "% CPU", "solid",
                     False),
                    (5, [st["server_rss_peak_bytes"] / 2**20 if st["server_rss_peak_bytes"] else None
                         for st in steps], "MiB", "solid", False)):
                if all(v is None for v in values):
                    continue
                fig.add_trace(go.Scatter(x=xs, y=values, name=g.contestant, showlegend=legend,
                                         line={"color": colour, "dash": dash},
                                         hovertemplate=f"%{{x:,.0f}}: %{{y:,.2f}} {label}<extra>{e(g.contestant)}</extra>",
                                         **common), row=row, col=1)
        fig.update_yaxes(type="log", row=2, col=1)
        for row in (1, 3, 4, 5):
            fig.update_yaxes(rangemode="nonnegative", row=row, col=1)
        fig.update_xaxes(title=x_title, row=5, col=1)
        fig.update_layout(height=1250)
        page.chart(fig, f"{scenario} {level_key}: {kind}, step by step against the rate")


def _find_max_section(page: _Page, report: Report) -> None:
    groups = [g for g in report.groups if g.find_max is not None]
    if not groups:
        return
    page.add('<h2 id="find-max">Highest rate that holds</h2>')
    page.add(f'<p class="note">netarena-load --find-max: from the start rate it doubles the offered rate while a '
             f"step meets the objective (a percentile of the latency, {OPEN_LOOP_NOTE}) and the error budget, then "
             "bisects between the highest passing and the lowest failing rate. The found rate is the median over "
             "the repeats; the steps shown are those of the repeat whose found rate is the median.</p>")
    rank = ranking(report.groups)
    by_level: dict[tuple, list[Group]] = {}
    for g in groups:
        by_level.setdefault((g.scenario, g.level_key), []).append(g)
    for (scenario, level_key), members in by_level.items():
        members.sort(key=lambda g: (r.rank if (r := rank.get((g.contestant, g.scenario, g.level_key))) else 10**9))
        page.add(f"<h3>{e(scenario)} {e(level_key)}</h3>")
        rows = []
        for g in members:
            fm = g.find_max
            found = ", ".join(fmt.rps(f) for f in fm["found_by_repeat"])
            rows.append(f'<tr data-find-max="{e(g.contestant)}" data-contestant="{e(g.contestant)}"><td class="num">'
                        f'{rank_text(rank, g)}</td><td>{e(g.contestant)}</td>'
                        f'<td class="num">{found_rate_text(fm, fm["found_rate_per_s_median"])}</td>'
                        f'<td class="num">{found}</td>'
                        f'<td>{e(fm["slo"])}</td><td class="num">{fmt.pct(fm["max_errors_fraction"], 2)}</td>'
                        f'<td>{e(fm["stopped_because"])}</td><td>{ids_html(g.ok_ids)}</td></tr>')
        page.add(_table(["rank", "contestant", "rate found (median)", "per repeat", "objective", "error budget",
                         "stopped because", "from"], rows, cls="find-max"))
        fig = go.Figure()
        for g in members:
            steps = g.find_max["steps"]
            fig.add_trace(go.Scatter(
                x=list(range(1, len(steps) + 1)), y=[st["rate_per_s"] for st in steps], mode="lines+markers",
                name=g.contestant, line={"color": colour_for(g.contestant)}, meta=_of(g.contestant),
                marker={"symbol": ["circle" if st["passed"] else "x" for st in steps], "size": 9,
                        "color": colour_for(g.contestant)},
                customdata=[["passed" if st["passed"] else "failed: " + "; ".join(st["reasons"]),
                             fmt.us(st["p99_us"])] for st in steps],
                hovertemplate="step %{x}: %{y:,.0f}/s, %{customdata[0]}, p99 %{customdata[1]}<extra>"
                              "%{fullData.name}</extra>"))
            rows = [f'<tr><td class="num">{i}</td><td class="num">{fmt.rps(st["rate_per_s"])}</td>'
                    f'<td>{"passed" if st["passed"] else "failed"}</td><td class="num">{fmt.rps(st["requests_per_s"])}'
                    f'</td><td class="num">{fmt.us(st["p99_us"])}</td><td class="num">{fmt.us(st["mean_us"])}</td>'
                    f'<td class="num">{fmt.pct(st["error_rate"])}</td>{_step_resource_cells(st, g)}'
                    f'<td>{e("; ".join(st["reasons"]))}</td></tr>' for i, st in enumerate(steps, 1)]
            page.add(f'<details data-contestant="{e(g.contestant)}"><summary>'
                     f"{e(g.contestant)}: the search's {len(steps)} steps (measurement "
                     f"{ids_html([g.find_max['steps_measurement_id']])})</summary>"
                     + _table(["step", f"offered {g.find_max['unit']}", "verdict", "achieved req/s", "p99", "mean",
                               "errors", *STEP_RESOURCE_HEADERS, "why not"],
                              rows, cls="find-max-steps") + "</details>")
        fig.update_xaxes(title="step", dtick=1)
        fig.update_yaxes(title=f"offered {members[0].find_max['unit']} (x: failed the objective)", rangemode="tozero")
        page.chart(fig, f"{scenario} {level_key}: find-max steps")
    _steps_against_rate(page, groups, lambda g: sorted(g.find_max["steps"], key=lambda st: st["rate_per_s"] or 0),
                        "rate_per_s", "rate offered in the step", "find-max search")


# With more contestants than this at one level, the percentile chart first shows the best ones (and a menu
# for the rest): 22 overlapping lines are unreadable.
LATENCY_CHART_FIRST_SHOWN = 5


def _latency_charts(page: _Page, report: Report) -> None:
    page.add('<h2 id="latency">Latency distribution</h2>')
    page.add('<p class="note">Percentiles of each contestant\'s repeats merged into one HdrHistogram; x is '
             "1/(1−percentile), so each step right is one more nine; both axes logarithmic. Successful requests "
             f"only (echo: per-chunk round trips; open-loop levels: {OPEN_LOOP_NOTE}), plus one censored lower bound "
             "per request still unanswered at the end: the time it had waited (see Errors, Unfinished). With more than "
             f"{LATENCY_CHART_FIRST_SHOWN} contestants a chart first shows the {LATENCY_CHART_FIRST_SHOWN} ranked "
             "best; the menu adds any other (or all), and a click on a legend entry shows or hides that line.</p>")
    rank = ranks(report.groups)
    for scenario in report.scenarios():
        levels: dict[str, list[Group]] = {}
        for g in report.groups_for(scenario):
            if g.percentile_curve:
                levels.setdefault(g.level_key, []).append(g)
        for level_key, groups in levels.items():
            groups.sort(key=lambda g: (rank.get((g.contestant, g.scenario, g.level_key)) or 10**9, g.contestant))
            fig = go.Figure()
            for g in groups:
                xs = [1.0 / (1.0 - p / 100.0) if p < 100 else None for p, _ in g.percentile_curve]
                points = [(x, v, p) for x, (p, v) in zip(xs, g.percentile_curve) if x is not None]
                fig.add_trace(go.Scatter(
                    x=[x for x, _, _ in points], y=[v / 1000.0 for _, v, _ in points], mode="lines",
                    name=g.contestant, line={"color": colour_for(g.contestant)}, meta=_of(g.contestant),
                    customdata=[[p, fmt.ids(g.ok_ids)] for _, _, p in points],
                    hovertemplate="p%{customdata[0]:.4f}: %{y:.3f} ms<br>from %{customdata[1]}<extra>"
                                  "%{fullData.name}</extra>"))
            top = max(x for trace in fig.data for x in trace.x)
            ticks = [(v, t) for v, t in PERCENTILE_TICKS if v <= top * 10]
            fig.update_xaxes(type="log", title="percentile", tickvals=[v for v, _ in ticks],
                             ticktext=[t for _, t in ticks])
            fig.update_yaxes(type="log", title="latency (ms)")
            margin = 60
            if len(groups) > LATENCY_CHART_FIRST_SHOWN:
                _subset_menu(fig, [g.contestant for g in groups])
                margin = 110
            page.chart(fig, f"{scenario} {level_key}: latency by percentile", margin_top_px=margin)


def _subset_menu(fig: go.Figure, names: list[str]) -> None:
    """Show the first LATENCY_CHART_FIRST_SHOWN traces (names are in rank order) and put the others in the
    legend only (one click shows them); a menu switches to "all" or to the first ones plus any one other."""
    first = LATENCY_CHART_FIRST_SHOWN

    def shown(extra: int | None = None) -> list:
        return [True if i < first or i == extra else "legendonly" for i in range(len(names))]

    for trace, visible in zip(fig.data, shown()):
        trace.visible = visible
    buttons = [{"label": f"top {first}", "method": "restyle", "args": [{"visible": shown()}]},
               {"label": "all", "method": "restyle", "args": [{"visible": [True] * len(names)}]}]
    buttons += [{"label": f"top {first} + {name}", "method": "restyle", "args": [{"visible": shown(i)}]}
                for i, name in enumerate(names) if i >= first]
    fig.update_layout(updatemenus=[{"buttons": buttons, "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom",
                                    "showactive": True}])


def _errors(page: _Page, report: Report) -> None:
    page.add('<h2 id="errors">Errors by class</h2>')
    page.add('<p class="note">Absolute counts, summed over every repeat that produced a generator result (failed '
             "repeats included; successful: over the ok repeats). Classes as netarena-load defines them "
             "(docs/load-generator.md); wrk's socket errors map onto them as connect = connect_*, read = read_error "
             "+ reset + closed_early, write = write_error, timeout = timeout, and its non-2xx/3xx responses are "
             "<code>status</code>, by code in the last column.</p>")
    for scenario in report.scenarios():
        groups = [g for g in report.groups_for(scenario) if sum(g.errors_by_class.values())]
        if not groups:
            page.add(f"<p><b>{e(scenario)}</b>: no errors in any repeat.</p>")
            continue
        classes = sorted({c for g in groups for c, n in g.errors_by_class.items() if n})
        labels = [f"{g.contestant} {g.level_key}" for g in groups]
        fig = go.Figure()
        for c in classes:
            fig.add_trace(go.Bar(x=labels, y=[g.errors_by_class.get(c, 0) for g in groups], name=c,
                                 meta=_of_points([g.contestant for g in groups]),
                                 customdata=[fmt.ids(g.measurement_ids) for g in groups],
                                 hovertemplate="%{x}: %{y:,} " + c + "<br>from %{customdata}<extra></extra>"))
        fig.update_layout(barmode="stack")
        fig.update_yaxes(title="errors")
        page.chart(fig, f"{scenario}: errors by class")
        rows = [f'<tr data-errors="{e(g.contestant)} {e(g.level_key)}" data-contestant="{e(g.contestant)}">'
                f"<td>{e(g.contestant)}</td>"
                f'<td>{e(g.level_key)}</td><td class="num">{g.requests_total:,}</td>'
                + "".join(f'<td class="num">{g.errors_by_class.get(c, 0):,}</td>' for c in classes)
                + f'<td>{e(", ".join(f"{code}: {n:,}" for code, n in sorted(g.status_codes.items())))}</td>'
                + f"<td>{ids_html(g.measurement_ids)}</td></tr>" for g in groups]
        page.add(_table(["contestant", "level", "successful", *map(e, classes), "status codes", "from"], rows,
                        cls="error-counts"))
    _unfinished(page, report)


def _unfinished(page: _Page, report: Report) -> None:
    """Requests in flight at the end: not errors (a healthy closed loop ends with one per connection), but their
    waits are censored lower bounds inside the percentiles, and connections left without any answer flag NOANS."""
    groups = [g for g in report.groups if g.unfinished]
    if not groups:
        return
    page.add('<h3 id="unfinished">Unfinished at the end</h3>')
    page.add('<p class="note">Requests still in flight when the measured phase ended, summed over the ok repeats. '
             "Not counted as errors, and not news in a closed loop, which ends with a request in flight on each connection "
             "(up to its pipeline depth); each one's wait so far is in the latency percentiles as a censored lower bound. "
             "<b>no answer</b>: connections that got no answer at all during the measured phase.</p>")
    rows = [f'<tr data-contestant="{e(g.contestant)}" data-level="{e(g.level_key)}"><td>{e(g.contestant)}</td>'
            f"<td>{e(g.scenario)}</td><td>{e(g.level_key)}</td>"
            f'<td class="num" data-field="unfinished">{g.unfinished:,}</td>'
            f'<td class="num" data-field="censored">{g.latency_censored:,}</td>'
            f'<td class="num" data-field="no-answer">{g.unanswered_connections:,}</td>'
            f"<td>{badges_html([b for b in g.badges if b == 'NOANS'])}</td><td>{ids_html(g.ok_ids)}</td></tr>"
            for g in groups]
    page.add(_table(["contestant", "scenario", "level", "unfinished", "censored in percentiles", "no answer",
                     "badge", "from"], rows, cls="unfinished"))


def _rate_series(samples: list[dict], key, min_dt_s: float = 0.0) -> tuple[list[float], list[float]]:
    """Per-second rates of a cumulative counter, each over the time its interval covers. The monitor's final
    sample is taken when it stops, often a few ms after the one before: a rate over those few ms of tick-granular
    CPU time reads 0% or 300% (the dip at the end of every series). An interval shorter than ``min_dt_s`` is
    therefore merged into the one before it, and the rate computed over their joint span."""
    kept: list[dict] = []
    for sample in samples:
        if kept and sample["t_s"] - kept[-1]["t_s"] < min_dt_s:
            if sample is samples[-1] and len(kept) > 1:
                kept[-1] = sample  # the last point stretches the interval before it
            continue
        kept.append(sample)
    ts, values = [], []
    for before, now in zip(kept, kept[1:]):
        dt_s = now["t_s"] - before["t_s"]
        if dt_s > 0:
            ts.append(now["t_s"])
            values.append((key(now) - key(before)) / dt_s)
    return ts, values


def _generator_offset_s(m: Measurement) -> float:
    """Where the generator's measured phase starts on the monitor's time axis (seconds since it started): the
    generator stamps its phase in wall-clock time, the monitor its own start; without the latter (older
    stores), the warm-up is the best estimate."""
    gen, monitor = m.generator or {}, m.monitor or {}
    try:
        return datetime.fromisoformat(gen["started_at"]).timestamp() - monitor["started_at_unix"]
    except (KeyError, TypeError, ValueError):
        return float(gen.get("warmup_s") or 0.0)


def _over_time(page: _Page, report: Report) -> None:
    page.add('<h2 id="resources">Over time</h2>')
    page.add('<p class="note">For each contestant and level, the repeat with the median throughput (pick it in the '
             "menu at the top right of each chart), on one time axis (seconds since the monitor started, warm-up "
             "included): the generator's requests per second and p99 per interval of its measured phase (each "
             "rate over the time its interval covers), then for each monitored process group (the server, and any "
             "service a contestant runs beside it) CPU in % of the CPUs its processes were allowed on (user + "
             "system, from cumulative times), RSS summed over its processes, and context switches (voluntary + "
             "involuntary) per second over all its threads. Then the system-wide vmstat-style table of the same "
             "measurement.</p>")
    for scenario in report.scenarios():
        chosen = []
        for g in report.groups_for(scenario):
            m = report.measurement(g.median_measurement_id) if g.median_measurement_id else None
            if m is not None and m.monitor and len(m.monitor.get("server") or []) >= 2:
                chosen.append((g, m))
        if not chosen:
            page.add(f"<p><b>{e(scenario)}</b>: no monitor samples stored.</p>")
            continue
        fig = make_subplots(rows=5, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                            subplot_titles=("generator: successful requests per second", "generator: p99 latency (ms)",
                                            "CPU (% of the process group's pinned CPUs)", "RSS (MiB)",
                                            "context switches per second"))
        buttons, masks = [], []
        for index, (g, m) in enumerate(chosen):
            first_trace = len(fig.data)
            _over_time_traces(fig, m, process_groups(m.monitor), visible=index == 0)
            masks.append((first_trace, len(fig.data)))
            label = f"{g.contestant} {g.level_key} (#{m.id})"
            buttons.append({"label": label, "method": "update", "args": [None, {"title.text": f"{scenario}: {label}"}]})
        for button, (start, end) in zip(buttons, masks):
            button["args"][0] = {"visible": [start <= i < end for i in range(len(fig.data))]}
        fig.update_xaxes(title="seconds since the monitor started", row=5, col=1)
        fig.update_yaxes(rangemode="nonnegative")
        # The menu sits top right, clear of the title (top left) and above the legend.
        fig.update_layout(height=1000, updatemenus=[{"buttons": buttons, "x": 1, "xanchor": "right", "y": 1.02,
                                                     "yanchor": "bottom", "showactive": True}])
        page.chart(fig, f"{scenario}: {buttons[0]['label']}", margin_top_px=110)
        for g, m in chosen:
            page.add(_vmstat(g, m))


# The monitor's keys that are not process groups.
_NOT_PROCESS_GROUPS = {"generator", "system", "summary", "summary_whole", "cpus_allowed", "interval_s",
                       "started_at_unix", "error"}


def process_groups(monitor: dict) -> list[str]:
    """The monitored process groups of a measurement, server first: every sample series of the monitor document
    except the generator's own and the system's (a contestant's services, e.g. a database, come as more)."""
    found = [k for k, v in monitor.items() if k not in _NOT_PROCESS_GROUPS and isinstance(v, list) and v
             and isinstance(v[0], dict) and "cpu_user_s" in v[0]]
    return sorted(found, key=lambda k: (k != "server", k))


def _over_time_traces(fig: go.Figure, m: Measurement, groups: list[str], visible: bool) -> None:
    intervals = interval_series(m.generator or {})
    if intervals:
        offset = _generator_offset_s(m)
        xs = [offset + p["t_s"] for p in intervals]
        fig.add_trace(go.Scatter(x=xs, y=[p["requests_per_s"] for p in intervals], mode="lines+markers",
                                 name="requests/s", visible=visible, line={"color": "#1f2328"},
                                 hovertemplate="%{x:.1f} s: %{y:,.0f}/s<extra></extra>"), row=1, col=1)
        p99 = [(x, p["p99_us"] / 1000) for x, p in zip(xs, intervals) if p["p99_us"] is not None]
        if p99:
            fig.add_trace(go.Scatter(x=[x for x, _ in p99], y=[y for _, y in p99], mode="lines+markers", name="p99",
                                     visible=visible, line={"color": "#cf222e"},
                                     hovertemplate="%{x:.1f} s: p99 %{y:.3f} ms<extra></extra>"), row=2, col=1)
    interval_s = float((m.monitor or {}).get("interval_s") or 0.0)
    allowed = (m.monitor or {}).get("cpus_allowed") or {}
    for n, group in enumerate(groups):
        samples = m.monitor[group]
        colour = _GROUP_COLOURS[n % len(_GROUP_COLOURS)]
        cpus = allowed.get(group) or []
        t_cpu, cpu = _rate_series(samples, lambda s: s["cpu_user_s"] + s["cpu_sys_s"], interval_s / 2)
        t_ctx, ctx = _rate_series(samples, lambda s: s["ctx_voluntary"] + s["ctx_involuntary"], interval_s / 2)
        # A measurement shorter than half a sampling interval (a tiny echo flood) has no rate to draw: no trace,
        # rather than an empty one.
        if t_cpu:
            fig.add_trace(go.Scatter(x=t_cpu, y=[capacity_pct(100 * v, cpus) for v in cpu], name=f"{group} CPU",
                                     visible=visible, line={"color": colour},
                                     hovertemplate="%{x:.2f} s: %{y:.0f}%<extra>" + e(group) + "</extra>"),
                          row=3, col=1)
        fig.add_trace(go.Scatter(x=[s["t_s"] for s in samples], y=[s["rss_bytes"] / 2**20 for s in samples],
                                 name=f"{group} RSS", visible=visible, line={"color": colour, "dash": "dot"},
                                 hovertemplate="%{x:.2f} s: %{y:.1f} MiB<extra>" + e(group) + "</extra>"),
                      row=4, col=1)
        if t_ctx:
            fig.add_trace(go.Scatter(x=t_ctx, y=ctx, name=f"{group} context switches/s", visible=visible,
                                     line={"color": colour, "dash": "dash"},
                                     hovertemplate="%{x:.2f} s: %{y:,.0f}/s<extra>" + e(group) + "</extra>"),
                          row=5, col=1)


# Process groups of one measurement (server, then services) are told apart by these, not by contestant colours.
_GROUP_COLOURS = ("#0969da", "#8250df", "#bf8700", "#1a7f37")


def _vmstat(g: Group, m: Measurement) -> str:
    samples = m.monitor.get("system") or []
    if not samples:
        return f"<p>{e(g.contestant)} {e(g.level_key)} (#{m.id}): no system samples.</p>"
    cpus = len(samples[0].get("per_cpu_busy_pct") or [])
    headers = ["t (s)", "cs/s", "in/s", "us %", "sy %", "id %", "wa %", "st %"] + [f"cpu{i} busy %" for i in range(cpus)]
    rows = []
    for s in samples:
        values = [f"{s['t_s']:.2f}", f"{s['ctx_switches_per_s']:,.0f}", f"{s['interrupts_per_s']:,.0f}",
                  f"{s['cpu_user_pct']:.1f}", f"{s['cpu_sys_pct']:.1f}", f"{s['cpu_idle_pct']:.1f}",
                  f"{s['cpu_iowait_pct']:.1f}", f"{s.get('cpu_steal_pct', 0.0):.1f}"]
        values += [f"{v:.1f}" for v in s.get("per_cpu_busy_pct") or []]
        rows.append("<tr>" + "".join(f'<td class="num">{v}</td>' for v in values) + "</tr>")
    return (f'<details><summary>system (vmstat-style) during {e(g.contestant)} {e(g.level_key)}, measurement '
            f'{ids_html([m.id])}</summary>' + _table(headers, rows, cls="vmstat") + "</details>")


def _flood_label(series_key: str, bytes_per_connection: int | None) -> str:
    """'32KiB' for the series 'w=1,bytes=32768': the size first, then whatever else sets the series apart."""
    rest = [p for p in series_key.split(",") if p and not p.startswith("bytes=") and p != "w=1"]
    size = fmt.size_bytes(bytes_per_connection) if bytes_per_connection else "unknown size"
    return ", ".join([size, *rest])


def _echo(page: _Page, report: Report) -> None:
    groups = [g for g in report.groups if not registry.kind(g.scenario).is_http]
    flood = [g for g in groups if g.echo_completion_s]
    probes = [g for g in groups if g.probe]
    if not flood and not probes:
        return
    page.add('<h2 id="echo">Echo flood</h2>')
    if flood:
        page.add('<p class="note">Seed 000: every connection sends its bytes and waits for the whole echo; '
                 "completion = first connect to last connection done. Median of repeats [min–max]; one table per "
                 "size sent per connection.</p>")
        # One series per size (and any other level setting besides the connection count): cells and graph
        # lines keyed by connections alone would mix the sizes, overwriting one with the other.
        series: dict[str, list[Group]] = {}
        for g in flood:
            series.setdefault(g.series, []).append(g)
        ordered = sorted(series.items(), key=lambda item: (item[1][0].echo_bytes_per_connection or 0, item[0]))
        fig = go.Figure()
        for key, members in ordered:
            label = _flood_label(key, members[0].echo_bytes_per_connection)
            connections = sorted({g.connections for g in members})
            contestants = sorted({g.contestant for g in members})
            cell = {(g.contestant, g.connections): g for g in members}
            rows = []
            for c in contestants:
                cells = [f"<td>{e(c)}</td>"]
                for n in connections:
                    g = cell.get((c, n))
                    if g is None:
                        cells.append("<td>–</td>")
                        continue
                    values = g.echo_completion_s
                    cells.append(f'<td class="num" data-connections="{n}">{statistics.median(values):.3f} s<br>'
                                 f'<span class="note">[{min(values):.3f}–{max(values):.3f}]</span> '
                                 f"{ids_html(g.ok_ids)}</td>")
                rows.append(f'<tr data-flood-contestant="{e(c)}" data-contestant="{e(c)}">' + "".join(cells) + "</tr>")
            page.add(f'<h3 id="echo-{_slug(key)}">{e(label)} per connection</h3>')
            page.add(_table(["contestant", *[f"{n:,} connections" for n in connections]], rows,
                            cls=f"echo-flood flood-{_slug(key)}"))
            for c in contestants:
                gs = sorted((g for g in members if g.contestant == c), key=lambda g: g.connections)
                medians = [statistics.median(g.echo_completion_s) for g in gs]
                fig.add_trace(go.Scatter(
                    x=[g.connections for g in gs], y=medians, mode="lines+markers", name=f"{c} ({label})", meta=_of(c),
                    line={"color": colour_for(c), "dash": _dash(key, [k for k, _ in ordered])},
                    error_y={"type": "data", "symmetric": False,
                             "array": [max(g.echo_completion_s) - m for g, m in zip(gs, medians)],
                             "arrayminus": [m - min(g.echo_completion_s) for g, m in zip(gs, medians)]},
                    customdata=[fmt.ids(g.ok_ids) for g in gs],
                    hovertemplate="%{x} connections: %{y:.3f} s<br>from %{customdata}<extra>%{fullData.name}"
                                  "</extra>"))
        fig.update_xaxes(type="log", title="connections")
        fig.update_yaxes(title="completion time (s)", rangemode="tozero")
        page.chart(fig, "echo flood: completion time vs connections")
    if probes:
        page.add('<h3 id="probe">Client-delay probe</h3>')
        page.add('<p class="note">While the flood runs, a fresh connection every interval sends 32 KiB and waits for '
                 "the whole echo: how long a newcomer waits (seed 000). Merged over the repeats.</p>")
        rows = [f"<tr data-contestant=\"{e(g.contestant)}\"><td>{e(g.contestant)}</td><td>{e(g.level_key)}</td>"
                f'<td class="num">{g.probe["completed"]}/{g.probe["attempts"]}</td>'
                f'<td class="num">{g.probe["errors"]}</td><td class="num">{fmt.us(g.probe["p50_us"])}</td>'
                f'<td class="num">{fmt.us(g.probe["p99_us"])}</td><td class="num">{fmt.us(g.probe["max_us"])}</td>'
                f"<td>{ids_html(g.ok_ids)}</td></tr>" for g in sorted(probes, key=lambda g: (g.connections,
                                                                                            g.contestant))]
        page.add(_table(["contestant", "level", "completed/attempts", "errors", "p50", "p99", "max", "from"], rows,
                        cls="probe"))
    _seed_000_table(page, report, flood, probes)


def _seed_000_table(page: _Page, report: Report, flood: list[Group], probes: list[Group]) -> None:
    """Seed 000's own table: one row per server with its time to finish per size and connection count, its
    peak RSS, vmstat's us/sy/cs/in while a flood saturates it, and the probe's client delay."""
    contestants = sorted({g.contestant for g in flood + probes})
    cells = sorted({(g.echo_bytes_per_connection or 0, g.connections) for g in flood})
    by_cell = {(g.contestant, g.echo_bytes_per_connection or 0, g.connections): g for g in flood}
    rows = []
    for c in contestants:
        row = [f"<td>{e(c)}</td>"]
        for size, n in cells:
            g = by_cell.get((c, size, n))
            row.append(f'<td class="num">{statistics.median(g.echo_completion_s):.3f}</td>' if g else "<td>–</td>")
        echo_groups = [g for g in flood + probes if g.contestant == c]
        rss = max((g.server_rss_peak_bytes or 0 for g in echo_groups), default=0)
        row.append(f'<td class="num">{fmt.size_bytes(rss or None)}</td>')
        probe = next((g for g in probes if g.contestant == c), None)
        m = report.measurement(probe.median_measurement_id) if probe and probe.median_measurement_id else None
        system = (((m.monitor or {}).get("summary") or {}).get("system") or {}) if m else {}
        for key, digits in (("cpu_user_pct_mean", 0), ("cpu_sys_pct_mean", 0), ("ctx_switches_per_s_mean", 0),
                            ("interrupts_per_s_mean", 0)):
            value = system.get(key)
            row.append(f'<td class="num">{"–" if value is None else f"{value:,.{digits}f}"}</td>')
        delay = probe.probe if probe else None
        row.append(f'<td class="num">{fmt.us(delay["p50_us"]) if delay else "–"}</td>'
                   f'<td class="num">{fmt.us(delay["max_us"]) if delay else "–"}</td>')
        rows.append(f'<tr data-seed-000="{e(c)}" data-contestant="{e(c)}">' + "".join(row) + "</tr>")
    headers = ["server", *[f"{fmt.size_bytes(size)} × {n:,} (s)" for size, n in cells], "peak RSS",
               "us %", "sy %", "cs/s", "in/s", "client delay p50", "client delay max"]
    page.add('<h3 id="seed-000">One row per server (seed 000\'s table)</h3>')
    page.add('<p class="note">Time to finish (median of repeats) per size sent per connection × connections; peak RSS '
             "over every echo measurement; the system's vmstat columns (user %, system %, context switches/s, "
             "interrupts/s, means over the samples) and the client-delay probe during the saturating flood (its "
             "median repeat).</p>")
    page.add(_table(headers, rows, cls="seed-000"))


def _thresholds(page: _Page, report: Report) -> None:
    verdicts = [(g, t) for g in report.groups for t in g.thresholds]
    if not verdicts:
        return
    page.add('<h2 id="thresholds">Thresholds</h2>')
    page.add('<p class="note">Each repeat\'s verdict on each threshold, as netarena-load judged it on that repeat\'s '
             "own result; a failed one makes <code>netarena run</code> exit 99.</p>")
    rows = [f'<tr data-pass="{1 if t.get("pass") else 0}" data-contestant="{e(g.contestant)}">'
            f"<td>{e(g.contestant)}</td><td>{e(g.scenario)}</td>"
            f"<td>{e(g.level_key)}</td><td>{ids_html([t['measurement_id']])}</td><td><code>{e(t.get('expr'))}</code>"
            f"</td><td class=\"num\">{e(fmt.measured(t))}</td><td>"
            + ("pass" if t.get("pass") else '<b style="color:#cf222e">FAIL</b>') + "</td></tr>"
            for g, t in verdicts]
    page.add(_table(["contestant", "scenario", "level", "measurement", "threshold", "measured", "verdict"], rows,
                    cls="thresholds"))


def _environment(page: _Page, report: Report) -> None:
    run, env = report.run, report.run.environment or {}
    page.add('<h2 id="environment">Environment</h2>')
    cpu, kernel, memory = env.get("cpu") or {}, env.get("kernel") or {}, env.get("memory") or {}
    generator = env.get("generator") or env.get("netarena_load") or {}
    pairs = [
        ("host", env.get("hostname")), ("CPU", cpu.get("model")),
        ("cores (logical / physical)", f"{cpu.get('logical_cores')} / {cpu.get('physical_cores')}"),
        ("memory", fmt.size_bytes(memory.get("total_bytes"))),
        ("kernel", " ".join(str(kernel.get(k)) for k in ("system", "release", "machine") if kernel.get(k))),
        ("distribution", env.get("distro")),
        ("server CPUs", run.server_cpus), ("generator CPUs", run.generator_cpus),
        ("netarena", f"{run.netarena_version} (git {run.git_sha or 'unknown'})"),
        ("netarena-load", generator), ("backend", run.backend), ("suite", run.suite),
        ("command line", " ".join(map(str, (run.args or {}).get("argv") or [])) or None),
        ("limits", env.get("limits")), ("sysctls", env.get("sysctls")), ("runtimes", env.get("runtimes")),
        ("python", env.get("python")),
        ("backing services", "; ".join(
            f"{d.get('display_name')} {d.get('version')} ({d.get('backend')}), CPUs {d.get('cpus')}"
            for d in (env.get("services") or {}).values()) or None),
    ]
    pairs += fmt.calibration_pairs(env)
    if env.get("error"):
        pairs.append(("environment error", env["error"]))
    page.add(_kv_table([(k, v) for k, v in pairs if v not in (None, "", {}, [])]))
    page.add('<p class="note">The suite as run is in the table above (its <code>measure</code> entries one per '
             "row); below, every field the environment probe recorded, as stored.</p>")
    page.add("<details><summary>everything envinfo recorded</summary>" + _kv_table(sorted(env.items())) + "</details>")
    page.add("<details><summary>the same as JSON</summary>"
             f"<pre>{e(json.dumps(env, indent=1, default=str))}</pre></details>")
    if report.contestants:
        rows = [f"<tr data-contestant=\"{e(c['name'])}\"><td>{e(c['name'])}</td><td>{e(c['display_name'])}</td>"
                f"<td>{e(c['language'])} / "
                f"{e(c['runtime'])}</td><td>{e(c['framework'])} {e(c['framework_version'])}</td>"
                f"<td>{e(c['concurrency_model'])}</td><td>{e(database_text(c.get('database')))}</td>"
                f"<td>{e(c['status'])}</td><td>"
                + (f"<details><summary>install record</summary><pre>{e(json.dumps(c['install'], indent=1))}</pre>"
                   "</details>" if c.get("install") else "") + "</td></tr>" for c in report.contestants]
        page.add("<h3>Contestants</h3>" + _table(["name", "display name", "language / runtime", "framework",
                                                   "model", "database", "status", "install"], rows))


def _relative(page: _Page, report: Report) -> None:
    """Each group's figures relative to the run's reference pair (only when the run has one)."""
    groups = [g for g in report.groups if g.requests_per_s_vs_reference is not None
              or g.server_cpu_per_req_vs_reference is not None]
    if not groups:
        return
    page.add('<h2 id="relative">Relative to the reference</h2>'
             '<p class="note">Each figure divided by the same figure of this run\'s reference pair (netarena-load '
             "against netarena's fixed reference server, measured before the first measurement on the same CPUs; "
             "see Environment): req/s × reference = requests/s ÷ the reference's; server CPU/req × reference = "
             "server CPU µs per response ÷ the reference server's. They carry between machines better than the "
             "absolute figures, not perfectly (docs/reports.md, Calibration).</p>")
    rows = [f'<tr data-contestant="{e(g.contestant)}" data-scenario="{e(g.scenario)}" data-level="{e(g.level_key)}">'
            f"<td>{e(g.contestant)}</td><td>{e(g.scenario)}</td><td>{e(g.level_key)}</td>"
            f'<td class="num">{fmt.rps(g.requests_per_s_median)}</td>'
            f'<td class="num rel-rps">{fmt.times_reference(g.requests_per_s_vs_reference)}</td>'
            f'<td class="num">{fmt.cpu_us(g.server_cpu_us_median)}</td>'
            f'<td class="num rel-cpu">{fmt.times_reference(g.server_cpu_per_req_vs_reference)}</td></tr>'
            for g in sorted(groups, key=rank_key)]
    page.add(_table(["contestant", "scenario", "level", "req/s", "req/s × reference", "server CPU µs/req",
                     "server CPU/req × reference"], rows, cls="relative"))


# Pixels per frame level of a flame graph, and its bounds: deep stacks stay readable and the page stays short.
FLAME_LEVEL_PX = 18
FLAME_HEIGHT_PX = (320, 900)


def _flame_graph(page: _Page, tree: profiles.Tree, title: str) -> None:
    """An icicle of one view, root at the bottom as in a flame graph: width = samples, hover for the share. A
    differential tree (one built with a baseline) is coloured by each frame's change of share instead."""
    depth = _depth(tree)
    fig = go.Figure(_differential_icicle(tree) if tree.baseline is not None else go.Icicle(
        ids=tree.ids, labels=tree.labels, parents=tree.parents, values=tree.values, branchvalues="total",
        customdata=[fmt.pct(v / tree.total, 2) if tree.total else "-" for v in tree.values],
        hovertemplate="%{label}<br>%{value:,} samples, %{customdata} of the view<extra></extra>",
        marker={"colors": [_flame_colour(label) for label in tree.labels]},
        tiling={"orientation": "v", "flip": "y"}, textinfo="label", sort=False))
    fig.update_layout(height=max(FLAME_HEIGHT_PX[0], min(FLAME_HEIGHT_PX[1], 100 + FLAME_LEVEL_PX * depth)))
    page.chart(fig, title, cls="flame differential" if tree.baseline is not None else "flame")
    page.add(f'<p class="note flame-cap">{e(profiles.cap_note(tree))}.</p>')


# A differential flame graph's colours, as Brendan Gregg's: blue = the frame's share shrank, white = unchanged,
# red = it grew; the strongest colour is the largest change in the graph, either way.
DIFF_COLOURSCALE = [[0.0, "rgb(40,90,220)"], [0.5, "rgb(255,255,255)"], [1.0, "rgb(220,40,40)"]]


def _differential_icicle(tree: profiles.Tree) -> go.Icicle:
    """B's stacks (the tree), each box coloured by its share of B's samples minus its share of A's (the
    baseline); the hover gives both shares."""
    deltas = tree.deltas()
    largest = max((abs(d) for d in deltas), default=0.0) or 1e-9
    a_total, b_total = tree.baseline_total, tree.total
    customdata = [[fmt.pct(a / a_total if a_total else None, 2), fmt.pct(v / b_total if b_total else None, 2),
                   f"{d * 100:+.2f} points", f"{a:,}"] for v, a, d in zip(tree.values, tree.baseline, deltas)]
    return go.Icicle(
        ids=tree.ids, labels=tree.labels, parents=tree.parents, values=tree.values, branchvalues="total",
        customdata=customdata,
        hovertemplate=("%{label}<br>A: %{customdata[0]} of its samples (%{customdata[3]})<br>"
                       "B: %{customdata[1]} of its samples (%{value:,})<br>change: %{customdata[2]}<extra></extra>"),
        marker={"colors": deltas, "colorscale": DIFF_COLOURSCALE, "cmin": -largest, "cmax": largest,
                "showscale": True, "colorbar": {"title": {"text": "share B − A"}, "tickformat": "+.1%"}},
        tiling={"orientation": "v", "flip": "y"}, textinfo="label", sort=False)


def _flame_colour(frame: str) -> str:
    """flamegraph.pl's warm colours, from the frame's name alone: the same frame has the same colour in every
    graph, neighbours differ; the root and the merged "(other)" boxes are grey."""
    if frame in ("all", profiles.OTHER):
        return "#d0d7de"
    digest = hashlib.sha256(frame.encode()).digest()
    return f"rgb(205,{100 + digest[0] % 130},{digest[1] % 55})"


def _depth(tree: profiles.Tree) -> int:
    level = {"0": 1}
    for node, parent in zip(tree.ids[1:], tree.parents[1:]):
        level[node] = level[parent] + 1
    return max(level.values())


def _profiles(page: _Page, report: Report) -> None:
    """Where each profiled repeat's server spent its time: flame graphs, the top frames, the split by part."""
    found = profiles.entries(report)
    if not found:
        return
    page.add('<h2 id="profiles">Profiles</h2>')
    page.add('<p class="note">One extra repeat per profiled level ran with a sampling profiler attached (badged '
             "PROF in Measurements); it is in no figure of its group, and its throughput against the group's "
             "median of unprofiled repeats is the <b>profiling overhead</b>. In a flame graph each box is a frame, "
             "its width the samples in which it was on the stack, the root at the bottom and each frame's callees "
             "above it (click a box to zoom, hover for its samples and share); own code = the contestant's source, "
             "framework = its framework and libraries, runtime = the interpreter or VM and the C library, "
             "kernel = system calls and interrupts, unknown = frames without a name. docs/profiles.md says how "
             "profiles are taken and what they can and cannot show.</p>")
    for entry in found:
        m, p = entry.measurement, entry.profile
        anchor = f"profile-{m.id}"
        page.add(f'<h3 id="{anchor}" data-contestant="{e(m.contestant)}">{e(m.contestant)} · {e(m.scenario)} · '
                 f"{e(m.level_key)} {ids_html([m.id])}</h3>")
        if entry.unsupported:
            page.add(f'<p class="profile-unsupported" data-measurement="{m.id}">not profiled: '
                     f"{e(entry.unsupported)}</p>")
            _generator_profile(page, entry)
            continue
        page.add(_kv_table([("tool", f"{p.get('tool')} ({p.get('tool_version')})"), ("event", p.get("event")),
                            ("rate", f"{p.get('rate_hz')} Hz"), ("window", f"{p.get('window_s')} s"),
                            ("processes", ", ".join(map(str, p.get("pids") or [])) or "-"),
                            ("samples", f"{p.get('samples') or 0:,}"),
                            *([("off-CPU view", f"{p['idle_event']}; {p.get('idle_samples') or 0:,} counts of "
                                                f"1/{p.get('rate_hz')} s of a thread's time")]
                              if p.get("idle_event") else []),
                            ("profiling overhead", profiles.overhead_text(entry)),
                            *([("error", p["error"])] if p.get("error") else [])])
                 .replace('<table class="kv">', f'<table class="kv profile-meta" data-measurement="{m.id}">', 1))
        views = p.get("views") or {}
        if not views.get("cpu"):
            why = f": {e(p['error'])}" if p.get("error") else ""
            page.add(f'<p class="note">No on-CPU stack was recorded{why}.</p>')
        for view, what in (("cpu", "on CPU"), ("idle", "where the server waited (off-CPU)")):
            if views.get(view):
                _flame_graph(page, profiles.build_tree(views[view]), f"#{m.id} {m.contestant} {m.level_key}: {what}")
        top = p.get("top_self") or []
        if top:
            rows = [f'<tr><td><code>{e(t.get("frame"))}</code></td><td class="num">{int(t.get("samples") or 0):,}'
                    f'</td><td class="num">{fmt.pct(t.get("share"), 1)}</td></tr>' for t in top]
            page.add('<p class="note">The frames most often on CPU themselves (the leaf of the stack), with their '
                     "share of the on-CPU samples, as the profile lists them:</p>")
            page.add(_table(["frame (self)", "samples", "share"], rows, cls=f"profile-top profile-top-{m.id}"))
        split = profiles.category_shares(p)
        if any(samples for _, samples, _ in split):
            cells = "".join(f'<td class="num" data-category="{e(label)}">{samples:,} ({fmt.pct(share, 1)})</td>'
                            for label, samples, share in split)
            page.add(_table([e(label) for label, _, _ in split], [f"<tr>{cells}</tr>"],
                            cls=f"profile-split profile-split-{m.id}"))
        _generator_profile(page, entry)


def _generator_profile(page: _Page, entry: profiles.Entry) -> None:
    """netarena-load's own profile of the repeat, drawn only when the generator was the limit (GEN): then its
    figure says more about the generator than about the server, and this says where the generator's time went."""
    g, m = profiles.generator_profile(entry), entry.measurement
    if g is None or not profiles.generator_bound(entry):
        return
    page.add(f'<h4 class="generator-profile" data-measurement="{m.id}">The load generator (netarena-load), '
             "flagged GEN</h4>")
    cpu = (g.get("views") or {}).get("cpu")
    if not cpu:
        page.add(f'<p class="generator-unprofiled" data-measurement="{m.id}">The generator was not profiled: '
                 f"{e(g.get('error') or 'no samples')}.</p>")
        return
    page.add(f'<p class="note">netarena-load sampled by {e(g.get("tool"))} ({e(g.get("event"))}, '
             f"{e(g.get('tool_version'))}) over the same window: {g.get('samples') or 0:,} samples; own code = "
             "the netarena_load crate's functions"
             + (f"; partial: {e(g['error'])}" if g.get("error") else "") + ".</p>")
    _flame_graph(page, profiles.build_tree(cpu), f"#{m.id} {m.contestant} {m.level_key}: the load generator on CPU")
    idle = (g.get("views") or {}).get("idle")
    if idle:  # a starved generator's wait for a CPU is its "[waiting for a CPU: preempted]" root here
        page.add(f'<p class="note">Where the generator waited (off-CPU): {e(g.get("idle_event"))}.</p>')
        _flame_graph(page, profiles.build_tree(idle),
                     f"#{m.id} {m.contestant} {m.level_key}: where the load generator waited (off-CPU)")
    top = g.get("top_self") or []
    if top:
        rows = [f'<tr><td><code>{e(t.get("frame"))}</code></td><td class="num">{int(t.get("samples") or 0):,}'
                f'</td><td class="num">{fmt.pct(t.get("share"), 1)}</td></tr>' for t in top]
        page.add(_table(["generator frame (self)", "samples", "share"], rows,
                        cls=f"generator-top generator-top-{m.id}"))


def _skipped(page: _Page, report: Report) -> None:
    page.add('<h2 id="skipped">Skipped and failed</h2>')
    if not report.skipped and not any(m.status == "failed" for m in report.measurements):
        page.add("<p>Nothing was skipped and no measurement failed.</p>")
        return
    if report.skipped:
        rows = [f"<tr data-contestant=\"{e(s.contestant)}\"><td>{e(s.contestant)}</td>"
                f"<td>{e(s.scenario or 'all')}</td><td>{e(s.level_key or 'all')}</td>"
                f"<td>{e(s.reason)}"
                + (f'<details class="skip-detail"><summary>details</summary><pre>{e(s.detail)}</pre></details>'
                   if s.detail else "") + "</td></tr>" for s in report.skipped]
        page.add(_table(["contestant", "scenario", "level", "why"], rows, cls="skipped"))
    failed = [m for m in report.measurements if m.status == "failed"]
    if failed:
        rows = [f"<tr data-contestant=\"{e(m.contestant)}\"><td>{ids_html([m.id])}</td><td>{e(m.contestant)}</td>"
                f"<td>{e(m.scenario)}</td>"
                f"<td>{e(m.level_key)}</td><td>{m.repeat_index}</td><td>{e(m.failure_kind)}</td><td>{e(m.error)}</td>"
                "</tr>" for m in failed]
        page.add(_table(["id", "contestant", "scenario", "level", "repeat", "failure", "error"], rows, cls="failed"))


def _measurements(page: _Page, report: Report) -> None:
    page.add('<h2 id="measurements">Measurements</h2>')
    page.add('<p class="note">Every measurement of the run as stored (id = measurements.id in the store), with the '
             "exact netarena-load command line.</p>")
    rows = []
    for m in report.measurements:
        gen = m.generator or {}
        rows.append(
            f'<tr id="m{m.id}" data-contestant="{e(m.contestant)}"><td class="num">#{m.id}</td>'
            f"<td>{e(m.contestant)}</td><td>{e(m.scenario)}</td>"
            f"<td>{e(m.level_key)}</td><td>{m.repeat_index}</td><td>{e(m.status)}"
            f"{(' (' + e(m.failure_kind) + ')') if m.failure_kind else ''}</td>"
            f'<td class="num">{fmt.rps(m.requests_per_s)}</td><td class="num">{fmt.us(m.latency_p99_us)}</td>'
            f'<td class="num">{fmt.pct(m.error_rate)}</td>'
            f'<td class="num">{fmt.pct(_busiest_thread(gen), 0)}</td>'
            f'<td class="num">{fmt.cpu_us((m.cost or {}).get("server_cpu_us"))}</td>'
            f"<td>{e(' '.join(m.flags))}"
            + _kept_out(m) + "</td>"
            f"<td><td><code>{e(' '.join(map(str, m.generator_argv or [])))}</code></td>"
            "</tr>")
    page.add(_table(["id", "contestant", "scenario", "level", "repeat", "status", "req/s", "p99", "errors",
                     "generator busy (busiest thread)", "server CPU per request (MiB)", "flags",
                     "generator command line"], rows, cls="measurements"))


def _kept_out(m: Measurement) -> str:
    """Why a measurement is in no figure: a profiled repeat is badged (expected), anything else is discarded."""
    if profiles.badged(m):
        return (f'<br>{badges_html(["PROF"])}<span class="note"> kept out of the figures (see '
                f'<a href="#profile-{m.id}">its profile</a>)</span>')
    if profiles.is_profiled(m):
        return (f'<br><span class="note">profiling repeat, kept out of the figures; not profiled: '
                f'{e((m.profile or {}).get("unsupported"))}</span>')
    return f'<br><b data-discarded="{m.id}">discarded: {e(m.discarded)}</b>' if m.discarded else ""


# ----------------------------------------------------------------------------- the page


# The page's filter by language and model (config.MODEL_GROUPS): it hides the table rows and chart lines of the
# contestants outside the choice. Rows carry data-contestant; traces carry meta {contestant} (a line) or meta
# {contestants: [...]} (bars, one contestant per point: the filter keeps the chosen points). Ranks stay the
# whole run's. The Over time charts, one measurement at a time behind their own menu, are not filtered.
FILTER_JS = """
(function () {
  const groups = JSON.parse(document.getElementById('contestant-groups').textContent);
  const language = document.getElementById('filter-language'), model = document.getElementById('filter-model');
  const count = document.getElementById('filter-count');
  const original = new Map();  // chart div -> its traces' data as drawn first
  const shown = name => {
    const c = groups[name];
    return !c || ((!language.value || c.language === language.value) && (!model.value || c.model === model.value));
  };
  const keep = (values, mask) => Array.isArray(values) ? values.filter((_, i) => mask[i]) : values;
  function filterChart(div) {
    if (!div.data) return;
    if (!original.has(div)) {
      original.set(div, div.data.map(t => ({visible: t.visible === undefined ? true : t.visible, x: t.x, y: t.y,
        text: t.text, customdata: t.customdata, color: t.marker ? t.marker.color : undefined,
        high: t.error_y ? t.error_y.array : undefined, low: t.error_y ? t.error_y.arrayminus : undefined})));
    }
    div.data.forEach((t, i) => {
      const meta = t.meta || {}, o = original.get(div)[i];
      if (meta.contestant !== undefined) {
        Plotly.restyle(div, {visible: [shown(meta.contestant) ? o.visible : false]}, [i]);
      } else if (Array.isArray(meta.contestants)) {
        const mask = meta.contestants.map(shown);
        const update = {x: [keep(o.x, mask)], y: [keep(o.y, mask)]};
        if (o.text !== undefined) update.text = [keep(o.text, mask)];
        if (o.customdata !== undefined) update.customdata = [keep(o.customdata, mask)];
        if (Array.isArray(o.color)) update['marker.color'] = [keep(o.color, mask)];
        if (Array.isArray(o.high)) update['error_y.array'] = [keep(o.high, mask)];
        if (Array.isArray(o.low)) update['error_y.arrayminus'] = [keep(o.low, mask)];
        Plotly.restyle(div, update, [i]);
      }
    });
  }
  function apply() {
    document.querySelectorAll('[data-contestant]').forEach(el => { el.hidden = !shown(el.dataset.contestant); });
    document.querySelectorAll('.plotly-graph-div').forEach(filterChart);
    const names = Object.keys(groups), n = names.filter(shown).length;
    count.textContent = n === names.length ? `all ${n} contestants` : `${n} of ${names.length} contestants`;
  }
  language.addEventListener('change', apply);
  model.addEventListener('change', apply);
  apply();
})();
"""


def _filter_bar(report: Report) -> tuple[str, str]:
    """The filter's controls and its script, when the run's contestants span several languages or models."""
    groups = {c["name"]: {"language": c["language"] or "unknown", "model": model_group(c["concurrency_model"])}
              for c in report.contestants}
    languages = sorted({g["language"] for g in groups.values()})
    models = [m for m in dict.fromkeys([*MODEL_GROUPS.values(), *(g["model"] for g in groups.values())])
              if any(g["model"] == m for g in groups.values())]
    if len(languages) < 2 and len(models) < 2:
        return "", ""

    def select(id_: str, label: str, values: list[str]) -> str:
        options = "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)
        return f'<label>{label} <select id="{id_}"><option value="">all</option>{options}</select></label>'

    bar = ('<div class="filter" id="filter">Show: ' + select("filter-language", "language", languages) + " "
           + select("filter-model", "model", models) + ' <span id="filter-count" class="note"></span>'
           '<span class="note"> (tables and charts below; ranks stay the whole run\'s; the Over time charts are '
           "not filtered)</span></div>")
    # JSON inside <script>: "</" is escaped so no name can close the element.
    data = json.dumps(groups).replace("</", "<\\/")
    script = (f'<script type="application/json" id="contestant-groups">{data}</script>'
              f"<script>{FILTER_JS}</script>")
    return bar, script


def render(report: Report) -> bytes:
    page = _Page()
    run = report.run
    _summary(page, report)
    _thresholds(page, report)
    _cost_section(page, report)
    _protocol_cost(page, report)
    _throughput_charts(page, report)
    _rate_charts(page, report)
    _find_max_section(page, report)
    _requests_section(page, report)
    _sweep_section(page, report)
    _handshake_cost(page, report)
    _latency_charts(page, report)
    _errors(page, report)
    _over_time(page, report)
    _echo(page, report)
    _profiles(page, report)
    _relative(page, report)
    _environment(page, report)
    _skipped(page, report)
    _measurements(page, report)
    body = "\n".join(page.parts)
    filter_bar, filter_script = _filter_bar(report)
    sections = [("summary", "Summary"), ("thresholds", "Thresholds"), ("cost", "Cost per request"),
                ("protocols", "Cost of the protocol"),
                ("throughput", "Throughput"),
                ("rates", "Against rate"), ("find-max", "Highest rate"), ("requests", "Request counts"),
                ("sweeps", "Sweeps"), ("handshakes", "TLS handshakes"), ("latency", "Latency"), ("errors", "Errors"),
                ("resources", "Over time"), ("echo", "Echo flood"), ("profiles", "Profiles"),
                ("relative", "Relative to the reference"), ("environment", "Environment"),
                ("skipped", "Skipped and failed"), ("measurements", "Measurements")]
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in sections if f'id="{anchor}"' in body)
    used = [c for c in BADGES if any(c in g.badges for g in report.groups)]
    if any(profiles.badged(m) for m in report.measurements):
        used.append("PROF")  # on measurements, never on groups
    legend = ("<p>Badges: " + "; ".join(f"{badges_html([c])} {e(BADGES[c][1])}" for c in used) + "</p>") if used \
        else "<p>No figure in this run carries a badge.</p>"
    if any(g.open_loop for g in report.groups):
        legend += (f'<p class="open-loop-note">This run has open-loop levels (a rate or a connection rate): their '
                   f"latencies are <b>{OPEN_LOOP_NOTE}</b>, so time a request waited because the server fell behind "
                   "is counted (no coordinated omission), and their contestants are ranked by p99, not "
                   "throughput.</p>")
    counts = {s: sum(1 for m in report.measurements if m.status == s) for s in ("ok", "failed", "interrupted")}
    discarded = sum(1 for m in report.measurements if m.discarded and not profiles.is_profiled(m))
    profiled = sum(1 for m in report.measurements if profiles.is_profiled(m))
    title = f"netarena run {run.id}: {run.suite_name}"
    partial = ""
    if run.status != "complete":
        made = counts["ok"] + counts["failed"]
        why = {"interrupted": "it was interrupted", "running": "it is still running (or its orchestrator died)",
               "failed": "it failed"}.get(run.status, f"its status is {run.status}")
        partial = (f'<p class="partial" data-partial="{e(run.status)}"><b>Partial report</b>: {why} after {made} of '
                   f"{run.planned_measurements} planned measurements; figures cover only those. "
                   f"<code>netarena run --resume {run.id}</code> (with the same <code>--results</code>) finishes "
                   "the run and rewrites this report.</p>")
    head = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style>'
            f'<script type="text/javascript">{_plotly_js()}</script></head><body>')
    header = (f"<h1>{e(title)}</h1><p class=\"meta\">{e(run.status)} · started {e(run.started_at)}"
              f"{' · ended ' + e(run.ended_at) if run.ended_at else ''} · {counts['ok']} ok, {counts['failed']} failed"
              f"{', ' + str(counts['interrupted']) + ' interrupted' if counts['interrupted'] else ''}"
              f"{', ' + str(discarded) + ' discarded as noisy (see Cost per request)' if discarded else ''}"
              f"{', ' + str(profiled) + ' profiled (see Profiles)' if profiled else ''} of "
              f"{run.planned_measurements} planned · server CPUs {e(run.server_cpus)}, generator CPUs "
              f"{e(run.generator_cpus)} · store <code>{e(report.store_path)}</code></p>"
              + (f'<p class="external" data-url="{e(run.args["external"]["url"])}"><b>{e(external_line(run))}</b></p>'
                 if external_line(run) else "")
              + f"{partial}<nav>{nav}</nav>{legend}{filter_bar}")
    return (head + header + body + filter_script + "</body></html>\n").encode("utf-8")
