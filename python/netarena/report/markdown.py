"""The summary tables as Markdown (`netarena export --markdown`), ready to paste into a write-up.

A pure function of a ``Report``, with the HTML page's figures and formatting (``fmt``): one table per scenario
and level, ranked as the page ranks them, each row naming the measurement ids it came from.
"""

from __future__ import annotations

from .. import stats
from . import fmt, profiles
from .protocols import HANDSHAKE_COST_NOTE, PROTOCOL_COST_NOTE, handshake_costs, protocol_costs
from .model import (BADGES, TIE_RULE, Report, database_bound_note, find_max_line, level_title, rank_text, ranking,
                    requests_line, stopped_line, sweep_line)

HEADERS = ["rank", "contestant", "{unit} (median)", "interval", "server CPU/{per} (user+sys)", "ctx switches/{per} "
           "(vol+invol)", "generator CPU/{per}", "p50", "p99", "p99.9", "mean", "stdev", "max", "ok", "errors",
           "error rate", "MB/s", "server CPU", "peak RSS", "badges", "from"]
_TEXT_COLUMNS = (1, len(HEADERS) - 2, len(HEADERS) - 1)  # contestant, badges, from: left-aligned


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _cost(g) -> str:
    if g.server_cpu_us_median is None:
        return "-"
    return (f"{fmt.cpu_us(g.server_cpu_us_median)} ({fmt.cpu_us(g.server_cpu_user_us_median)}+"
            f"{fmt.cpu_us(g.server_cpu_sys_us_median)})")


def render_markdown(report: Report) -> str:
    run = report.run
    out = [f"# netarena run {run.id}: {run.suite_name}", "",
           f"{run.status}, started {run.started_at}; server CPUs {run.server_cpus}, generator CPUs "
           f"{run.generator_cpus}; netarena {run.netarena_version} (git {run.git_sha or 'unknown'}). Medians of "
           f"the repeats with their interval ({stats.interval_note()}); latency from the repeats' merged histograms; "
           "ok / errors summed over the repeats; server CPU in % of the CPUs it was pinned to; CPU and context "
           "switches per request (per MiB for echo) over the measured phase; #N = measurement id "
           f"in the store. Rank: {TIE_RULE}.", ""]
    rank = ranking(report.groups)
    used: set[str] = set()
    for scenario in report.scenarios():
        for level_key, groups in report.levels_for(scenario):
            out += [f"## {level_title(scenario, groups[0])}", ""]
            per = fmt.cost_unit(groups[0].cost_unit)
            headers = [h.format(unit=fmt.throughput_unit(scenario), per=per) for h in HEADERS]
            out.append("| " + " | ".join(headers) + " |")
            out.append("|" + "|".join("---:" if i not in _TEXT_COLUMNS else "---" for i in range(len(headers))) + "|")
            for g in groups:
                used.update(g.badges)
                cells = [rank_text(rank, g), g.contestant,
                         fmt.rps(g.requests_per_s_median),
                         fmt.rps_range(g.requests_per_s_ci_low, g.requests_per_s_ci_high),
                         _cost(g), f"{fmt.per_unit(g.server_ctx_voluntary_median)}+"
                         f"{fmt.per_unit(g.server_ctx_involuntary_median)}", fmt.cpu_us(g.generator_cpu_us_median),
                         fmt.us(g.latency_p50_us), fmt.us(g.latency_p99_us), fmt.us(g.latency_p99_9_us),
                         fmt.us(g.latency_mean_us), fmt.us(g.latency_stdev_us), fmt.us(g.latency_max_us),
                         f"{g.requests_total:,}", f"{g.errors_total:,}", fmt.pct(g.error_rate_median),
                         fmt.mb_per_s(g.bytes_per_s_median),
                         fmt.cpu_capacity(g.server_cpu_capacity_pct_median, g.server_cpus),
                         fmt.size_bytes(g.server_rss_peak_bytes), " ".join(g.badges), fmt.ids(g.measurement_ids)]
                out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
            out.append("")
            found = [f"- {find_max_line(g)}" for g in groups if g.find_max is not None]
            found += [f"- {requests_line(g)}" for g in groups if g.requests_asked is not None]
            found += [f"- {sweep_line(g)}" for g in groups if g.sweep is not None]
            found += [f"- {stopped_line(g)}" for g in groups if g.stopped_because is not None]
            found += [f"- {database_bound_note(groups)}"] if database_bound_note(groups) else []
            found += [f"- bound (server / database / host / neither): " + ", ".join(
                f"{g.contestant} {g.bound_by or 'neither'}" for g in groups)] \
                if any(g.database_cpu_pct_median is not None for g in groups) else []
            out += found + ([""] if found else [])
    costs = protocol_costs(report.groups)
    if costs:
        out += ["## Cost of the protocol", "", PROTOCOL_COST_NOTE, "",
                "| contestant | scenario | level | against | req/s (it / h1) | throughput × | server CPU/req (it / h1) "
                "| server CPU × | generator CPU × | p99 × | within noise | from |",
                "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
        for c in costs:
            cells = [c.contestant, c.scenario, c.level_key, c.base_key,
                     f"{fmt.rps(c.requests_per_s)} / {fmt.rps(c.base_requests_per_s)}",
                     fmt.times_reference(c.throughput_ratio),
                     f"{fmt.cpu_us(c.server_cpu_us)} / {fmt.cpu_us(c.base_server_cpu_us)}",
                     fmt.times_reference(c.server_cpu_ratio), fmt.times_reference(c.generator_cpu_ratio),
                     fmt.times_reference(c.p99_ratio), "yes" if c.within_noise else "no",
                     f"{fmt.ids(c.ids)} vs {fmt.ids(c.base_ids)}"]
            out.append("| " + " | ".join(_cell(x) for x in cells) + " |")
        out.append("")
    handshakes = handshake_costs(report.groups)
    if handshakes:
        out += ["## TLS handshakes: full against resumed", "", HANDSHAKE_COST_NOTE, "",
                "| contestant | scenario | level (full handshakes) | steps | server CPU/req, full | resumed "
                "| full ÷ resumed | sessions resumed | from |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
        for c in handshakes:
            cells = [c.contestant, c.scenario, c.level_key, str(len(c.steps)), fmt.cpu_us(c.server_cpu_us),
                     fmt.cpu_us(c.resumed_server_cpu_us), fmt.times_reference(c.server_cpu_ratio), c.sessions_resumed,
                     f"{fmt.ids([c.id])} vs {fmt.ids([c.resumed_id])}"]
            out.append("| " + " | ".join(_cell(x) for x in cells) + " |")
        out.append("")
    if used:
        out += ["Badges: " + "; ".join(f"{code} = {BADGES[code][0]}" for code in BADGES if code in used), ""]
    for g in report.groups:
        if g.discarded:
            out.append(f"- discarded: {g.contestant} {g.scenario} {g.level_key}: {g.discarded} measurement(s) kept "
                       f"out of the figures: {'; '.join(g.discarded_reasons)}")
    if profiles.profiled_line(report):
        out.append(f"- {profiles.profiled_line(report)}")
    for s in report.skipped:
        what = " ".join(x for x in (s.contestant, s.scenario, s.level_key) if x)
        out.append(f"- skipped: {what}: {s.reason}")
    return "\n".join(out).rstrip() + "\n"
