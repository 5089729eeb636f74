"""One self-contained HTML page for a run: a pure function from a ``Report`` to bytes.

The page works offline: plotly.js (the version pinned in pyproject.toml) is embedded once, inline, and
no style, font or script is fetched from anywhere. Every figure in a table names the measurement ids it
came from, and each id links to that measurement's row in the "Measurements" appendix (with its exact
generator command line), so any number can be traced back to the store.
"""

from __future__ import annotations

import html
import json
import statistics
from functools import lru_cache

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from . import fmt
from .model import BADGES, Group, Measurement, Report, ranks

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
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; vertical-align: top; }
th { background: #f6f8fa; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.level-start td { border-top: 2px solid #8c959f; }
.badge { display: inline-block; background: #fff8c5; border: 1px solid #d4a72c; color: #6f4b00; border-radius: 4px;
         padding: 0 0.3rem; margin: 0 0.15rem 0.1rem 0; font-size: 0.78rem; white-space: nowrap; }
.badge.bad { background: #ffebe9; border-color: #ff8182; color: #82071e; }
.ids { white-space: nowrap; } .ids a { color: #0969da; text-decoration: none; font-size: 0.8rem; }
.note { color: #57606a; font-size: 0.9rem; }
.chart { min-height: 420px; margin-bottom: 1rem; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.8rem; }
pre { white-space: pre-wrap; word-break: break-all; background: #f6f8fa; padding: 0.4rem; margin: 0; }
details { margin: 0.4rem 0; } summary { cursor: pointer; }
.partial { background: #ffebe9; border: 1px solid #ff8182; border-radius: 6px; padding: 0.5rem 1rem; }
"""

_BAD_BADGES = {"VERIFY", "CRASH", "HUNG", "FAIL", "ERR", "NOANS"}


def e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    # "</script" cannot appear inside an inline script; plotly.js does not contain it, but be sure.
    return get_plotlyjs().replace("</script", "<\\/script")


class _Page:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chart_count = 0

    def add(self, text: str) -> None:
        self.parts.append(text)

    def chart(self, fig: go.Figure, title: str, margin_top_px: int = 60) -> None:
        self.chart_count += 1
        fig.update_layout(height=fig.layout.height or CHART_HEIGHT_PX, template="plotly_white",
                          title={"text": title}, margin={"t": margin_top_px, "l": 70, "r": 30, "b": 60})
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{self.chart_count}",
                          config=PLOTLY_CONFIG)
        self.add(f'<div class="chart" data-chart="{e(title)}">{div}</div>')


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


def _kv_table(pairs: list[tuple[str, object]]) -> str:
    rows = []
    for key, value in pairs:
        if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
            value_html = e(", ".join(map(str, value)))
        elif isinstance(value, (dict, list)):
            value_html = f"<pre>{e(json.dumps(value, indent=1, default=str))}</pre>"
        else:
            value_html = e(value)
        rows.append(f"<tr><th>{e(key)}</th><td>{value_html}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-").lower()


def _series_key(g: Group) -> str:
    """The level without its connection count: what stays the same along a throughput-vs-connections line."""
    rest = [p for p in g.level_key.split(",") if not p.startswith("c=")]
    return ",".join(rest)


# ----------------------------------------------------------------------------- sections


def _summary(page: _Page, report: Report) -> None:
    page.add('<h2 id="summary">Summary</h2>')
    page.add('<p class="note">Per scenario and load level, contestants ranked by median throughput across repeats; '
             "min–max across repeats; latency percentiles from the repeats' merged HdrHistograms (never averaged); "
             "error rate = errors / (successes + errors), median of repeats; server CPU in % of one core (median of "
             "repeats); peak RSS of the server's process tree over all repeats. <b>from</b> lists the measurement "
             "ids each row was computed from.</p>")
    rank = ranks(report.groups)
    for scenario in report.scenarios():
        unit = fmt.throughput_unit(scenario)
        page.add(f'<h3 id="summary-{_slug(scenario)}">{e(scenario)}</h3>')
        rows, previous = [], None
        for g in report.groups_for(scenario):
            cls = ' class="level-start"' if previous is not None and g.level_key != previous else ""
            previous = g.level_key
            position = rank.get((g.contestant, g.scenario, g.level_key))
            cells = [
                f'<td class="num">{position or "–"}</td>', f"<td>{e(g.contestant)}</td>", f"<td>{e(g.level_key)}</td>",
                f'<td class="num" data-field="rps">{fmt.rps(g.requests_per_s_median)}</td>',
                f'<td class="num">{fmt.rps_range(g.requests_per_s_min, g.requests_per_s_max)}</td>',
                f'<td class="num">{fmt.pct(g.cv, 1)}</td>',
                f'<td class="num">{fmt.us(g.latency_p50_us)}</td>', f'<td class="num">{fmt.us(g.latency_p99_us)}</td>',
                f'<td class="num">{fmt.us(g.latency_p99_9_us)}</td>',
                f'<td class="num">{fmt.pct(g.error_rate_median)}</td>',
                f'<td class="num">{fmt.cpu_pct(g.server_cpu_pct_median)}</td>',
                f'<td class="num">{fmt.size_bytes(g.server_rss_peak_bytes)}</td>',
                f"<td>{g.repeats_ok}/{g.repeats_ok + g.repeats_failed}</td>",
                f"<td>{badges_html(g.badges)}</td>", f"<td>{ids_html(g.measurement_ids)}</td>"]
            rows.append(f'<tr{cls} data-contestant="{e(g.contestant)}" data-level="{e(g.level_key)}">'
                        + "".join(cells) + "</tr>")
        page.add(_table(["rank", "contestant", "level", f"{unit} (median)", "min–max", "CV", "p50", "p99", "p99.9",
                         "errors", "server CPU", "peak RSS", "ok/repeats", "badges", "from"], rows,
                        cls=f"summary scenario-{_slug(scenario)}"))


def _throughput_charts(page: _Page, report: Report) -> None:
    page.add('<h2 id="throughput">Throughput against concurrency</h2>')
    page.add('<p class="note">Median across repeats, error bars to the min and max; log x axis. Hover for the '
             "measurement ids.</p>")
    for scenario in report.scenarios():
        fig = go.Figure()
        lines: dict[tuple, list[Group]] = {}
        for g in report.groups_for(scenario):
            if g.requests_per_s_median is not None:
                lines.setdefault((g.contestant, _series_key(g)), []).append(g)
        for (contestant, rest), groups in sorted(lines.items()):
            groups.sort(key=lambda g: g.connections)
            fig.add_trace(go.Scatter(
                x=[g.connections for g in groups], y=[g.requests_per_s_median for g in groups],
                error_y={"type": "data", "symmetric": False,
                         "array": [g.requests_per_s_max - g.requests_per_s_median for g in groups],
                         "arrayminus": [g.requests_per_s_median - g.requests_per_s_min for g in groups]},
                mode="lines+markers", name=contestant + (f" ({rest})" if rest else ""),
                customdata=[fmt.ids(g.ok_ids) for g in groups],
                hovertemplate="%{x} connections: %{y:,.0f}/s<br>from %{customdata}<extra>%{fullData.name}</extra>"))
        if not fig.data:
            page.add(f"<p>{e(scenario)}: no successful measurement to plot.</p>")
            continue
        fig.update_xaxes(type="log", title="connections")
        fig.update_yaxes(title=fmt.throughput_unit(scenario), rangemode="tozero")
        page.chart(fig, f"{scenario}: throughput vs connections")


def _latency_charts(page: _Page, report: Report) -> None:
    page.add('<h2 id="latency">Latency distribution</h2>')
    page.add('<p class="note">Percentiles of each contestant\'s repeats merged into one HdrHistogram; x is '
             "1/(1−percentile), so each step right is one more nine; both axes logarithmic. Successful requests "
             "(echo: per-chunk round trips), plus one censored lower bound per request still unanswered at the end: "
             "the time it had waited (see Errors, Unfinished).</p>")
    for scenario in report.scenarios():
        levels: dict[str, list[Group]] = {}
        for g in report.groups_for(scenario):
            if g.percentile_curve:
                levels.setdefault(g.level_key, []).append(g)
        for level_key, groups in levels.items():
            fig = go.Figure()
            for g in groups:
                xs = [1.0 / (1.0 - p / 100.0) if p < 100 else None for p, _ in g.percentile_curve]
                points = [(x, v, p) for x, (p, v) in zip(xs, g.percentile_curve) if x is not None]
                fig.add_trace(go.Scatter(
                    x=[x for x, _, _ in points], y=[v / 1000.0 for _, v, _ in points], mode="lines",
                    name=g.contestant, customdata=[[p, fmt.ids(g.ok_ids)] for _, _, p in points],
                    hovertemplate="p%{customdata[0]:.4f}: %{y:.3f} ms<br>from %{customdata[1]}<extra>"
                                  "%{fullData.name}</extra>"))
            top = max(x for trace in fig.data for x in trace.x)
            ticks = [(v, t) for v, t in PERCENTILE_TICKS if v <= top * 10]
            fig.update_xaxes(type="log", title="percentile", tickvals=[v for v, _ in ticks],
                             ticktext=[t for _, t in ticks])
            fig.update_yaxes(type="log", title="latency (ms)")
            page.chart(fig, f"{scenario} {level_key}: latency by percentile")


def _errors(page: _Page, report: Report) -> None:
    page.add('<h2 id="errors">Errors by class</h2>')
    page.add('<p class="note">Summed over every repeat that produced a generator result (failed repeats included). '
             "Classes as netarena-load defines them (docs/load-generator.md).</p>")
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
                                 customdata=[fmt.ids(g.measurement_ids) for g in groups],
                                 hovertemplate="%{x}: %{y:,} " + c + "<br>from %{customdata}<extra></extra>"))
        fig.update_layout(barmode="stack")
        fig.update_yaxes(title="errors")
        page.chart(fig, f"{scenario}: errors by class")
        rows = [f"<tr><td>{e(g.contestant)}</td><td>{e(g.level_key)}</td>"
                + "".join(f'<td class="num">{g.errors_by_class.get(c, 0):,}</td>' for c in classes)
                + f"<td>{ids_html(g.measurement_ids)}</td></tr>" for g in groups]
        page.add(_table(["contestant", "level", *map(e, classes), "from"], rows))
    _unfinished(page, report)


def _unfinished(page: _Page, report: Report) -> None:
    """Requests in flight at the end: not errors (a healthy closed loop ends with one per connection), but their
    waits are censored lower bounds inside the percentiles, and connections left without any answer flag NOANS."""
    groups = [g for g in report.groups if g.unfinished]
    if not groups:
        return
    page.add('<h3 id="unfinished">Unfinished at the end</h3>')
    page.add('<p class="note">Requests still in flight when the measured phase ended, summed over the ok repeats. '
             "Not counted as errors; each one's wait so far is in the latency percentiles as a censored lower bound. "
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


def _rate_series(samples: list[dict], key) -> tuple[list[float], list[float]]:
    ts, values = [], []
    for before, now in zip(samples, samples[1:]):
        dt_s = now["t_s"] - before["t_s"]
        if dt_s > 0:
            ts.append(now["t_s"])
            values.append((key(now) - key(before)) / dt_s)
    return ts, values


def _resources(page: _Page, report: Report) -> None:
    page.add('<h2 id="resources">Server resources over time</h2>')
    page.add('<p class="note">For each contestant and level, the repeat with the median throughput (pick it in the '
             "menu at the top right of each chart). CPU in % of one core from the server process tree's cumulative "
             "user and system time; RSS summed over the tree; context switches (voluntary + involuntary) per "
             "second over all its threads. Then the system-wide vmstat-style table of the same measurement.</p>")
    for scenario in report.scenarios():
        chosen = []
        for g in report.groups_for(scenario):
            m = report.measurement(g.median_measurement_id) if g.median_measurement_id else None
            if m is not None and m.monitor and len(m.monitor.get("server") or []) >= 2:
                chosen.append((g, m))
        if not chosen:
            page.add(f"<p><b>{e(scenario)}</b>: no monitor samples stored.</p>")
            continue
        fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                            subplot_titles=("server CPU (% of one core)", "server RSS (MiB)",
                                            "server context switches per second"))
        buttons, per = [], 4
        for index, (g, m) in enumerate(chosen):
            samples = m.monitor["server"]
            visible = index == 0
            label = f"{g.contestant} {g.level_key} (#{m.id})"
            t_user, user = _rate_series(samples, lambda s: s["cpu_user_s"])
            t_sys, system = _rate_series(samples, lambda s: s["cpu_sys_s"])
            t_ctx, ctx = _rate_series(samples, lambda s: s["ctx_voluntary"] + s["ctx_involuntary"])
            fig.add_trace(go.Scatter(x=t_user, y=[100 * v for v in user], name="user", visible=visible,
                                     stackgroup="cpu", line={"color": "#1f77b4"}), row=1, col=1)
            fig.add_trace(go.Scatter(x=t_sys, y=[100 * v for v in system], name="system", visible=visible,
                                     stackgroup="cpu", line={"color": "#ff7f0e"}), row=1, col=1)
            fig.add_trace(go.Scatter(x=[s["t_s"] for s in samples], y=[s["rss_bytes"] / 2**20 for s in samples],
                                     name="RSS", visible=visible, line={"color": "#2ca02c"}), row=2, col=1)
            fig.add_trace(go.Scatter(x=t_ctx, y=ctx, name="context switches/s", visible=visible,
                                     line={"color": "#9467bd"}), row=3, col=1)
            mask = [False] * (per * len(chosen))
            mask[per * index: per * index + per] = [True] * per
            buttons.append({"label": label, "method": "update",
                            "args": [{"visible": mask}, {"title.text": f"{scenario}: {label}"}]})
        fig.update_xaxes(title="seconds since the monitor started", row=3, col=1)
        # The menu sits top right, clear of the title (top left) and above the legend.
        fig.update_layout(height=660, updatemenus=[{"buttons": buttons, "x": 1, "xanchor": "right", "y": 1.02,
                                                    "yanchor": "bottom", "showactive": True}])
        first = buttons[0]["label"]
        page.chart(fig, f"{scenario}: {first}", margin_top_px=110)
        for g, m in chosen:
            page.add(_vmstat(g, m))


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
    groups = [g for g in report.groups if g.scenario == "echo"]
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
            series.setdefault(_series_key(g), []).append(g)
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
                rows.append(f'<tr data-flood-contestant="{e(c)}">' + "".join(cells) + "</tr>")
            page.add(f'<h3 id="echo-{_slug(key)}">{e(label)} per connection</h3>')
            page.add(_table(["contestant", *[f"{n:,} connections" for n in connections]], rows,
                            cls=f"echo-flood flood-{_slug(key)}"))
            for c in contestants:
                gs = sorted((g for g in members if g.contestant == c), key=lambda g: g.connections)
                medians = [statistics.median(g.echo_completion_s) for g in gs]
                fig.add_trace(go.Scatter(
                    x=[g.connections for g in gs], y=medians, mode="lines+markers", name=f"{c} ({label})",
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
        rows = [f"<tr><td>{e(g.contestant)}</td><td>{e(g.level_key)}</td>"
                f'<td class="num">{g.probe["completed"]}/{g.probe["attempts"]}</td>'
                f'<td class="num">{g.probe["errors"]}</td><td class="num">{fmt.us(g.probe["p50_us"])}</td>'
                f'<td class="num">{fmt.us(g.probe["p99_us"])}</td><td class="num">{fmt.us(g.probe["max_us"])}</td>'
                f"<td>{ids_html(g.ok_ids)}</td></tr>" for g in sorted(probes, key=lambda g: (g.connections,
                                                                                            g.contestant))]
        page.add(_table(["contestant", "level", "completed/attempts", "errors", "p50", "p99", "max", "from"], rows,
                        cls="probe"))


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
    ]
    if env.get("error"):
        pairs.append(("environment error", env["error"]))
    page.add(_kv_table([(k, v) for k, v in pairs if v not in (None, "", {}, [])]))
    page.add("<details><summary>everything envinfo recorded (JSON)</summary>"
             f"<pre>{e(json.dumps(env, indent=1, default=str))}</pre></details>")
    if report.contestants:
        rows = [f"<tr><td>{e(c['name'])}</td><td>{e(c['display_name'])}</td><td>{e(c['language'])} / "
                f"{e(c['runtime'])}</td><td>{e(c['framework'])} {e(c['framework_version'])}</td>"
                f"<td>{e(c['concurrency_model'])}</td><td>{e(c['status'])}</td><td>"
                + (f"<details><summary>install record</summary><pre>{e(json.dumps(c['install'], indent=1))}</pre>"
                   "</details>" if c.get("install") else "") + "</td></tr>" for c in report.contestants]
        page.add("<h3>Contestants</h3>" + _table(["name", "display name", "language / runtime", "framework",
                                                   "model", "status", "install"], rows))


def _skipped(page: _Page, report: Report) -> None:
    page.add('<h2 id="skipped">Skipped and failed</h2>')
    if not report.skipped and not any(m.status == "failed" for m in report.measurements):
        page.add("<p>Nothing was skipped and no measurement failed.</p>")
        return
    if report.skipped:
        rows = [f"<tr><td>{e(s.contestant)}</td><td>{e(s.scenario or 'all')}</td><td>{e(s.level_key or 'all')}</td>"
                f"<td>{e(s.reason)}"
                + (f'<details class="skip-detail"><summary>details</summary><pre>{e(s.detail)}</pre></details>'
                   if s.detail else "") + "</td></tr>" for s in report.skipped]
        page.add(_table(["contestant", "scenario", "level", "why"], rows, cls="skipped"))
    failed = [m for m in report.measurements if m.status == "failed"]
    if failed:
        rows = [f"<tr><td>{ids_html([m.id])}</td><td>{e(m.contestant)}</td><td>{e(m.scenario)}</td>"
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
            f'<tr id="m{m.id}"><td class="num">#{m.id}</td><td>{e(m.contestant)}</td><td>{e(m.scenario)}</td>'
            f"<td>{e(m.level_key)}</td><td>{m.repeat_index}</td><td>{e(m.status)}"
            f"{(' (' + e(m.failure_kind) + ')') if m.failure_kind else ''}</td>"
            f'<td class="num">{fmt.rps(m.requests_per_s)}</td><td class="num">{fmt.us(m.latency_p99_us)}</td>'
            f'<td class="num">{fmt.pct(m.error_rate)}</td>'
            f'<td class="num">{fmt.pct(_busiest_thread(gen), 0)}</td>'
            f"<td>{e(' '.join(m.flags))}</td><td><code>{e(' '.join(map(str, m.generator_argv or [])))}</code></td>"
            "</tr>")
    page.add(_table(["id", "contestant", "scenario", "level", "repeat", "status", "req/s", "p99", "errors",
                     "generator busy (busiest thread)", "flags", "generator command line"], rows, cls="measurements"))


# ----------------------------------------------------------------------------- the page


def render(report: Report) -> bytes:
    page = _Page()
    run = report.run
    _summary(page, report)
    _throughput_charts(page, report)
    _latency_charts(page, report)
    _errors(page, report)
    _resources(page, report)
    _echo(page, report)
    _environment(page, report)
    _skipped(page, report)
    _measurements(page, report)
    body = "\n".join(page.parts)
    sections = [("summary", "Summary"), ("throughput", "Throughput"), ("latency", "Latency"), ("errors", "Errors"),
                ("resources", "Resources"), ("echo", "Echo flood"), ("environment", "Environment"),
                ("skipped", "Skipped and failed"), ("measurements", "Measurements")]
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in sections if f'id="{anchor}"' in body)
    used = [c for c in BADGES if any(c in g.badges for g in report.groups)]
    legend = ("<p>Badges: " + "; ".join(f"{badges_html([c])} {e(BADGES[c][1])}" for c in used) + "</p>") if used \
        else "<p>No figure in this run carries a badge.</p>"
    counts = {s: sum(1 for m in report.measurements if m.status == s) for s in ("ok", "failed", "interrupted")}
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
              f"{', ' + str(counts['interrupted']) + ' interrupted' if counts['interrupted'] else ''} of "
              f"{run.planned_measurements} planned · server CPUs {e(run.server_cpus)}, generator CPUs "
              f"{e(run.generator_cpus)} · store <code>{e(report.store_path)}</code></p>"
              f"{partial}<nav>{nav}</nav>{legend}")
    return (head + header + body + "</body></html>\n").encode("utf-8")
