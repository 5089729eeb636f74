"""Compare two runs: per contestant × scenario × level, the ratio B/A of throughput and of p99 latency.

A difference is called significant by a stated test: a percentile bootstrap of the ratio of medians (Efron &
Tibshirani, An Introduction to the Bootstrap, ch. 13). Each side's repeats are resampled with replacement
``BOOTSTRAP_RESAMPLES`` times (a seeded generator: the same runs always give the same verdict), the ratio of
the resamples' medians taken each time, and the central ``confidence`` share of those ratios is the interval
of B/A. The change is significant when that interval excludes 1.

It needs ``MIN_REPEATS_FOR_SIGNIFICANCE`` ok repeats on each side. With three repeats each, no test can do
better than the ranges: the bootstrap interval is then B min / A max – B max / A min, and two runs of the
same thing have non-overlapping ranges one time in ten by chance alone (2 × 3!3!/6!); with five or more the
false-alarm rate of two runs of the same contestant stays under 5% at 95% confidence, and near 1% at 99%
(bench/aa_compare.py measures it on the machine at hand, docs/reports.md says what it found).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

from rich import box
from rich.console import Console, Group as RichGroup
from rich.table import Table
from rich.text import Text

from ..term import console as make_console

from . import fmt, profiles
from ..reference import machine_differences, ratio, reference_of, server_cpu_us_per_req
from .model import Group, Report

MIN_REPEATS_FOR_SIGNIFICANCE = 5
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 1  # any fixed seed: the verdict must not change from one `netarena compare` to the next
DEFAULT_CONFIDENCE = 0.95

VERDICT_NONE = "no significant change"
VERDICT_FEW = "too few repeats"
VERDICT_MISSING = "missing"


def significance_rule(confidence: float = DEFAULT_CONFIDENCE) -> str:
    """How a difference is called significant, said by every output of compare."""
    return (f"significant = the {confidence:.0%} bootstrap interval of B/A (ratio of medians, "
            f"{BOOTSTRAP_RESAMPLES} resamples of the repeats) excludes 1; at least {MIN_REPEATS_FOR_SIGNIFICANCE} "
            "ok repeats each")




def bootstrap_ratio_interval(a_values: list[float], b_values: list[float], confidence: float = DEFAULT_CONFIDENCE,
                             resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
                             ) -> tuple[float, float] | None:
    """The percentile bootstrap interval of median(B) / median(A) (see the module's docstring); None when
    a side is empty or every resample of A has median 0."""
    if not a_values or not b_values:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        a_median = statistics.median(rng.choices(a_values, k=len(a_values)))
        b_median = statistics.median(rng.choices(b_values, k=len(b_values)))
        if a_median:
            ratios.append(b_median / a_median)
    if not ratios:
        return None
    ratios.sort()
    tail = (1 - confidence) / 2
    return ratios[int(tail * len(ratios))], ratios[max(0, math.ceil((1 - tail) * len(ratios)) - 1)]


@dataclass
class Metric:
    a_median: float | None
    a_min: float | None
    a_max: float | None
    b_median: float | None
    b_min: float | None
    b_max: float | None
    ratio: float | None            # B / A of the medians
    ratio_low: float | None        # the bootstrap interval of B/A (bootstrap_ratio_interval)
    ratio_high: float | None
    verdict: str                   # "higher" | "lower" | VERDICT_NONE | VERDICT_FEW | VERDICT_MISSING

    @property
    def significant(self) -> bool:
        return self.verdict in ("higher", "lower")


@dataclass
class Row:
    contestant: str
    scenario: str
    level_key: str
    a_ids: list[int]
    b_ids: list[int]
    throughput: Metric
    p99: Metric
    # Relative to each run's own reference pair (netarena.reference); None unless both runs have one.
    throughput_vs_reference: Metric | None = None
    server_cpu_per_req_vs_reference: Metric | None = None
    # The server's CPU µs per request (per MiB for echo), each repeat's stats.cost_per_unit: under a noisy machine
    # throughput moves and this should not, so a change here is the server's own.
    server_cpu_us: Metric | None = None


@dataclass
class ProfilePair:
    """A level profiled in both runs (netarena run --profile): B's profile against A's."""

    contestant: str
    scenario: str
    level_key: str
    a: profiles.Entry
    b: profiles.Entry
    self_changes: list[profiles.SelfChange]   # on CPU, the frames whose self share moved most

    @property
    def label(self) -> str:
        return f"{self.contestant} {self.scenario} {self.level_key} (A #{self.a.measurement.id}, " \
               f"B #{self.b.measurement.id})"


@dataclass
class Comparison:
    a: Report
    b: Report
    rows: list[Row]
    only_in_a: list[str]
    only_in_b: list[str]
    environment_differences: list[str]
    confidence: float = DEFAULT_CONFIDENCE
    # The machine fingerprint's fields that differ (netarena.reference.machine_differences): non-empty means
    # the runs ran on different machines, and the relative figures are the ones to read.
    machine_differences: list[str] = field(default_factory=list)
    profile_pairs: list[ProfilePair] = field(default_factory=list)

    @property
    def rule(self) -> str:
        return significance_rule(self.confidence)

    @property
    def different_machines(self) -> bool:
        return bool(self.machine_differences)

    @property
    def relative(self) -> bool:
        """Both runs have a reference pair, so each row carries its relative figures."""
        return reference_of(self.a.run.environment) is not None and reference_of(self.b.run.environment) is not None


def metric_of(a_values: list[float], b_values: list[float], a_median: float | None = None,
              b_median: float | None = None, confidence: float = DEFAULT_CONFIDENCE) -> Metric:
    """One metric of one row: the ratio of the medians, its bootstrap interval and compare's verdict (also
    what bench/aa_compare.py applies to the repeats of two runs of the same contestant)."""
    if not a_values or not b_values:
        return Metric(a_median, min(a_values, default=None), max(a_values, default=None), b_median,
                      min(b_values, default=None), max(b_values, default=None), None, None, None, VERDICT_MISSING)
    a_median = statistics.median(a_values) if a_median is None else a_median
    b_median = statistics.median(b_values) if b_median is None else b_median
    interval = bootstrap_ratio_interval(a_values, b_values, confidence)
    low, high = interval if interval is not None else (None, None)
    if len(a_values) < MIN_REPEATS_FOR_SIGNIFICANCE or len(b_values) < MIN_REPEATS_FOR_SIGNIFICANCE:
        verdict = VERDICT_FEW
    elif low is not None and low > 1:
        verdict = "higher"
    elif high is not None and high < 1:
        verdict = "lower"
    else:
        verdict = VERDICT_NONE
    return Metric(a_median, min(a_values), max(a_values), b_median, min(b_values), max(b_values),
                  b_median / a_median if a_median else None, low, high, verdict)


def _throughput_values(report: Report, g: Group) -> list[float]:
    return [m.generator["throughput"]["requests_per_s"] for m in report.measurements if m.id in g.ok_ids]


def _cpu_values(report: Report, g: Group) -> list[float]:
    return [m.cost["server_cpu_us"] for m in report.measurements
            if m.id in g.ok_ids and m.cost and m.cost.get("server_cpu_us") is not None]



def _relative_values(report: Report, g: Group) -> tuple[list[float], list[float]]:
    """The group's ok repeats' requests/s and server CPU µs per request, each ÷ the run's reference figure."""
    reference = reference_of(report.run.environment)
    members = [m for m in report.measurements if m.id in g.ok_ids]
    rps = [ratio(m.generator["throughput"]["requests_per_s"], reference["rps"]) for m in members]
    cpu = [ratio(server_cpu_us_per_req(m.generator, m.monitor), reference["server_cpu_us_per_req"])
           for m in members]
    return [v for v in rps if v is not None], [v for v in cpu if v is not None]


def compare(a: Report, b: Report, confidence: float = DEFAULT_CONFIDENCE) -> Comparison:
    a_groups = {(g.contestant, g.scenario, g.level_key): g for g in a.groups}
    b_groups = {(g.contestant, g.scenario, g.level_key): g for g in b.groups}
    rows = []
    for key in sorted(set(a_groups) & set(b_groups), key=lambda k: (k[1], a_groups[k].connections, k[2], k[0])):
        ga, gb = a_groups[key], b_groups[key]
        rows.append(Row(
            *key, a_ids=ga.measurement_ids, b_ids=gb.measurement_ids,
            throughput=metric_of(_throughput_values(a, ga), _throughput_values(b, gb), confidence=confidence),
            # The headline p99 is the merged histogram's; the test resamples the repeats' own p99s.
            p99=metric_of(ga.p99_us_by_repeat, gb.p99_us_by_repeat, ga.latency_p99_us, gb.latency_p99_us,
                        confidence),
            server_cpu_us=metric_of(_cpu_values(a, ga), _cpu_values(b, gb), ga.server_cpu_us_median,
                                    gb.server_cpu_us_median, confidence)))
    label = lambda k: " ".join(k)  # noqa: E731
    c = Comparison(a, b, rows, [label(k) for k in sorted(set(a_groups) - set(b_groups))],
                   [label(k) for k in sorted(set(b_groups) - set(a_groups))], environment_differences(a, b),
                   confidence=confidence,
                   machine_differences=machine_differences(a.run.environment, b.run.environment))
    a_profiles, b_profiles = profiles.comparable(a), profiles.comparable(b)
    for row in rows:
        key = (row.contestant, row.scenario, row.level_key)
        if key in a_profiles and key in b_profiles:
            pa, pb = a_profiles[key], b_profiles[key]
            c.profile_pairs.append(ProfilePair(*key, pa, pb, profiles.self_changes(pa.profile["views"]["cpu"],
                                                                                   pb.profile["views"]["cpu"])))
    if c.relative:
        for row in rows:
            key = (row.contestant, row.scenario, row.level_key)
            (a_rps, a_cpu), (b_rps, b_cpu) = _relative_values(a, a_groups[key]), _relative_values(b, b_groups[key])
            row.throughput_vs_reference = metric_of(a_rps, b_rps, confidence=confidence)
            row.server_cpu_per_req_vs_reference = metric_of(a_cpu, b_cpu, confidence=confidence)
    return c


# The metrics a regression gate can watch: the Row attribute and the direction that is better.
GATE_METRICS = {"rps": ("throughput", "higher"), "p99": ("p99", "lower"), "cpu": ("server_cpu_us", "lower")}


@dataclass
class Regression:
    row: Row
    metric: str  # a key of GATE_METRICS

    @property
    def text(self) -> str:
        m = getattr(self.row, GATE_METRICS[self.metric][0])
        return (f"{self.row.contestant} {self.row.scenario} {self.row.level_key}: {self.metric} {m.verdict} "
                f"(B/A {_ratio_short(m)})")


def regressions(c: Comparison, metrics: list[str]) -> list[Regression]:
    """Rows whose chosen metric changed significantly (the Metric verdict, nothing else) the wrong way."""
    out = []
    for row in c.rows:
        for name in metrics:
            attribute, better = GATE_METRICS[name]
            m = getattr(row, attribute)
            if m is not None and m.significant and m.verdict != better:
                out.append(Regression(row, name))
    return out


def to_dict(c: Comparison, metrics: list[str]) -> dict:
    """The comparison as one JSON-ready document (`netarena compare --json`)."""
    from dataclasses import asdict

    found = regressions(c, metrics)
    return {
        "a": {"run": c.a.run.id, "suite": c.a.run.suite_name, "store": c.a.store_path},
        "b": {"run": c.b.run.id, "suite": c.b.run.suite_name, "store": c.b.store_path},
        "significance": c.rule, "confidence": c.confidence, "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "min_repeats_for_significance": MIN_REPEATS_FOR_SIGNIFICANCE,
        "metrics": metrics,
        "rows": [{"contestant": r.contestant, "scenario": r.scenario, "level_key": r.level_key, "a_ids": r.a_ids,
                  "b_ids": r.b_ids, "rps": dict(asdict(r.throughput), significant=r.throughput.significant),
                  "p99_us": dict(asdict(r.p99), significant=r.p99.significant),
                  "server_cpu_us_per_unit": dict(asdict(r.server_cpu_us), significant=r.server_cpu_us.significant)
                  if r.server_cpu_us is not None else None,
                  **({"rps_vs_reference": dict(asdict(r.throughput_vs_reference),
                                               significant=r.throughput_vs_reference.significant),
                      "server_cpu_per_req_vs_reference": dict(asdict(r.server_cpu_per_req_vs_reference),
                                                              significant=r.server_cpu_per_req_vs_reference.significant)}
                     if r.throughput_vs_reference is not None else {})} for r in c.rows],
        "regressions": [{"contestant": g.row.contestant, "scenario": g.row.scenario, "level_key": g.row.level_key,
                         "metric": g.metric, "text": g.text} for g in found],
        "profiles": [{"contestant": p.contestant, "scenario": p.scenario, "level_key": p.level_key,
                      "a_id": p.a.measurement.id, "b_id": p.b.measurement.id,
                      "self_changes": [dict(asdict(ch), change=ch.change) for ch in p.self_changes]}
                     for p in c.profile_pairs],
        "only_in_a": c.only_in_a, "only_in_b": c.only_in_b,
        "environment_differences": c.environment_differences,
        "machines": {"different": c.different_machines, "differences": c.machine_differences,
                     "relative_figures": c.relative},
    }


def environment_differences(a: Report, b: Report) -> list[str]:
    """What differs between the two runs' machines and settings: a reason to doubt any ratio."""
    def pick(r: Report) -> dict:
        env = r.run.environment or {}
        cpu, kernel = env.get("cpu") or {}, env.get("kernel") or {}
        generator = env.get("generator") or {}
        return {"CPU model": cpu.get("model"), "logical cores": cpu.get("logical_cores"),
                "kernel": kernel.get("release"), "host": env.get("hostname"), "server CPUs": r.run.server_cpus,
                "generator CPUs": r.run.generator_cpus, "netarena-load": generator.get("version"),
                "sysctls": env.get("sysctls"), "open files limit": (env.get("limits") or {}).get("open_files"),
                "backend": r.run.backend}
    pa, pb = pick(a), pick(b)
    return [f"{k}: A {pa[k]!r}, B {pb[k]!r}" if k != "sysctls" else "sysctls differ"
            for k in pa if pa[k] != pb[k]]


# ----------------------------------------------------------------------------- terminal


def _ratio_text(m: Metric) -> str:
    if m.ratio is None:
        return "-"
    return f"{m.ratio:.3f} [{fmt.ratio(m.ratio_low)}–{fmt.ratio(m.ratio_high)}]"


def _ratio_short(m: Metric) -> str:
    if m.ratio is None:
        return "-"
    return f"{m.ratio:.2f} [{m.ratio_low:.2f}–{m.ratio_high:.2f}]" if m.ratio_low is not None and \
        m.ratio_high is not None else f"{m.ratio:.2f}"


# The terminal's narrow columns: short words for the verdicts that are not a change (its legend says them).
_SHORT_VERDICTS = {VERDICT_NONE: "n.s.", VERDICT_FEW: "few"}


def _cpu_ratio(m: Metric | None) -> Text:
    """The CPU-per-request ratio, short (the terminal has no room for its range), * when significant."""
    if m is None or m.ratio is None:
        return Text("-")
    if not m.significant:
        return Text(f"{m.ratio:.2f}")
    return Text(f"{m.ratio:.2f}*", style="bold green" if m.verdict == "lower" else "bold red")


def _verdict_text(m: Metric, better: str) -> Text:
    if not m.significant:
        return Text(_SHORT_VERDICTS.get(m.verdict, m.verdict), style="dim")
    good = m.verdict == better
    return Text(f"{m.verdict}*", style="bold green" if good else "bold red")


def renderables(c: Comparison) -> list:
    out: list = [Text(f"A = run {c.a.run.id} ({c.a.run.suite_name}, {c.a.run.started_at})  "
                      f"B = run {c.b.run.id} ({c.b.run.suite_name}, {c.b.run.started_at})"),
                 *([Text(machines_line(c), style="bold yellow")] if machines_line(c) else []),
                 Text(f"ratio = B/A of the medians [its {c.confidence:.0%} bootstrap interval]; "
                      + c.rule + f"; * = significant; n.s. = {VERDICT_NONE}; few = {VERDICT_FEW}. The measurement ids behind each row are in "
                      "the HTML comparison (netarena compare A B -o FILE).", style="dim")]
    levels: dict[tuple, list[Row]] = {}
    for r in c.rows:
        levels.setdefault((r.scenario, r.level_key), []).append(r)
    for (scenario, level_key), rows in levels.items():
        table = Table(title=f"{scenario} · {level_key}", title_justify="left", title_style="bold",
                      box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), show_edge=False)
        table.add_column("contestant", overflow="fold", min_width=10)
        table.add_column(f"{fmt.throughput_unit(scenario)} A→B", justify="right", no_wrap=True)
        table.add_column("B/A [interval]", justify="right", no_wrap=True)
        table.add_column("", min_width=7)
        table.add_column("p99 A→B", justify="right", no_wrap=True)
        table.add_column("B/A [interval]", justify="right", no_wrap=True)
        table.add_column("", min_width=7)
        for r in rows:
            t, p = r.throughput, r.p99
            table.add_row(r.contestant, f"{fmt.rps_short(t.a_median)}→{fmt.rps_short(t.b_median)}",
                          _ratio_short(t), _verdict_text(t, "higher"), f"{fmt.us(p.a_median)}→{fmt.us(p.b_median)}",
                          _ratio_short(p), _verdict_text(p, "lower"))
        out += [Text(""), table]
        # The table has no room left in 100 columns: the server's CPU per request is a line of its own.
        cpu = [(r.contestant, r.server_cpu_us) for r in rows if r.server_cpu_us and r.server_cpu_us.ratio is not None]
        if cpu:
            line = Text(f"  server CPU per {fmt.cpu_per(scenario, short=True)} A→B (B/A): ")
            for i, (contestant, m) in enumerate(cpu):
                line.append(("; " if i else "") + f"{contestant} {fmt.cpu_us(m.a_median)}→{fmt.cpu_us(m.b_median)} ")
                line.append(_cpu_ratio(m))
            out.append(line)
    out += _relative_renderables(c)
    out += _profile_renderables(c)
    for label, items in (("only in A", c.only_in_a), ("only in B", c.only_in_b)):
        if items:
            out.append(Text(f"{label}: " + "; ".join(items)))
    if c.environment_differences:
        out.append(Text("the runs' environments differ (ratios may reflect that): "
                        + "; ".join(c.environment_differences), style="yellow"))
    return out


def machines_line(c: Comparison) -> str | None:
    """What compare says first when the runs ran on different machines."""
    if not c.different_machines:
        return None
    read = ("compare the figures relative to each run's reference pair (below), not the absolute ones"
            if c.relative else "one of the runs has no calibration, so there are no relative figures to compare")
    return f"different machines ({', '.join(c.machine_differences)} differ): {read}"


def _relative_renderables(c: Comparison) -> list:
    if not c.relative:
        return []
    out: list = [Text(""), Text("relative to each run's reference pair (figure ÷ that run's reference figure; "
                                "B/A of those)", style="bold")]
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), show_edge=False)
    for name in ("contestant", "scenario · level", "req/s ×ref A→B", "B/A [range]", "", "cpu/req ×ref A→B",
                 "B/A [range]", ""):
        table.add_column(name, overflow="fold")
    for r in c.rows:
        t, p = r.throughput_vs_reference, r.server_cpu_per_req_vs_reference
        table.add_row(r.contestant, f"{r.scenario} · {r.level_key}",
                      f"{fmt.times_reference(t.a_median)}→{fmt.times_reference(t.b_median)}", _ratio_short(t),
                      _verdict_text(t, "higher"),
                      f"{fmt.times_reference(p.a_median)}→{fmt.times_reference(p.b_median)}", _ratio_short(p),
                      _verdict_text(p, "lower"))
    return [*out, table]


def _profile_renderables(c: Comparison) -> list:
    """Per level profiled in both runs, the frames whose self share (on CPU) moved most."""
    if not c.profile_pairs:
        return []
    out: list = [Text(""), Text(f"profiles: the {profiles.TOP_CHANGES} frames whose self share on CPU changed most, "
                                "A → B (shares of each profile's own samples; the HTML comparison, -o FILE, draws "
                                "the differential flame graphs)", style="bold")]
    for pair in c.profile_pairs:
        out.append(Text(f"  {pair.label}:"))
        out += [Text(f"    {profiles.change_text(ch)}", style="red" if ch.change > 0 else "blue")
                for ch in pair.self_changes] or [Text("    no frame's self share changed", style="dim")]
    return out


def render_text(c: Comparison, width: int = 100) -> str:
    console = make_console(width=width, record=True, file=_Null(), color_system=None)
    console.print(RichGroup(*renderables(c)))
    return console.export_text()


def print_comparison(c: Comparison, console: Console | None = None) -> None:
    from .terminal import console_width

    (console or make_console(width=console_width())).print(RichGroup(*renderables(c)))


class _Null:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass


# ----------------------------------------------------------------------------- HTML


def render_html(c: Comparison) -> bytes:
    import plotly.graph_objects as go

    from .html import CSS, _plotly_js, chart_div, e

    def verdict_html(m: Metric, better: str) -> str:
        if not m.significant:
            return f'<span class="note">{e(m.verdict)}</span>'
        color = "#1a7f37" if m.verdict == better else "#cf222e"
        return f'<b style="color:{color}" data-significant="1">{e(m.verdict)}</b>'

    def spread(m: Metric, f) -> str:
        return "-" if m.a_min is None or m.b_min is None else \
            f"A {f(m.a_min)}–{f(m.a_max)}<br>B {f(m.b_min)}–{f(m.b_max)}"

    parts = []
    for scenario in sorted({r.scenario for r in c.rows}):
        rows = []
        for r in (r for r in c.rows if r.scenario == scenario):
            t, p, cpu = r.throughput, r.p99, r.server_cpu_us
            rows.append(
                f'<tr data-contestant="{e(r.contestant)}" data-level="{e(r.level_key)}"><td>{e(r.contestant)}</td>'
                f"<td>{e(r.level_key)}</td><td class=\"num\">{fmt.rps(t.a_median)} → {fmt.rps(t.b_median)}</td>"
                f'<td class="num">{spread(t, fmt.rps)}</td><td class="num">{_ratio_text(t)}</td>'
                f"<td>{verdict_html(t, 'higher')}</td>"
                f'<td class="num">{fmt.us(p.a_median)} → {fmt.us(p.b_median)}</td>'
                f'<td class="num">{spread(p, fmt.us)}</td><td class="num">{_ratio_text(p)}</td>'
                f"<td>{verdict_html(p, 'lower')}</td>"
                + (f'<td class="num" data-metric="server-cpu">{fmt.cpu_us(cpu.a_median)} → {fmt.cpu_us(cpu.b_median)}'
                   f'</td><td class="num">{spread(cpu, fmt.cpu_us)}</td><td class="num">{_ratio_text(cpu)}</td>'
                   f"<td>{verdict_html(cpu, 'lower')}</td>" if cpu else '<td>-</td><td>-</td><td>-</td><td></td>') +
                f'<td class="ids">A {fmt.ids(r.a_ids)}<br>B {fmt.ids(r.b_ids)}</td></tr>')
        head = "".join(f"<th>{h}</th>" for h in ["contestant", "level", f"{fmt.throughput_unit(scenario)} A → B",
                                                  "repeats' range", "B/A", "", "p99 A → B", "repeats' range",
                                                  "B/A", "", "server CPU/"
                                                  + fmt.cpu_per(scenario) + " A → B",
                                                  "repeats' range", "B/A", "", "from"])
        parts.append(f"<h2>{e(scenario)}</h2><table class=\"compare\"><thead><tr>{head}</tr></thead><tbody>"
                     + "".join(rows) + "</tbody></table>")
        fig = go.Figure()
        scenario_rows = [r for r in c.rows if r.scenario == scenario and r.throughput.ratio is not None]
        labels = [f"{r.contestant} {r.level_key}" for r in scenario_rows]
        for name, metric in (("throughput B/A", lambda r: r.throughput), ("p99 B/A", lambda r: r.p99),
                             ("server CPU per request B/A", lambda r: r.server_cpu_us)):
            ms = [metric(r) for r in scenario_rows]
            if not any(m is not None and m.ratio is not None for m in ms):
                continue
            ms = [m if m is not None and m.ratio is not None else Metric(*[None] * 9, "missing") for m in ms]
            fig.add_trace(go.Bar(
                x=labels, y=[m.ratio for m in ms], name=name,
                error_y={"type": "data", "symmetric": False,
                         "array": [(m.ratio_high or m.ratio) - m.ratio if m.ratio is not None else 0 for m in ms],
                         "arrayminus": [m.ratio - (m.ratio_low or m.ratio) if m.ratio is not None else 0
                                        for m in ms]}))
        if fig.data and scenario_rows:
            fig.add_hline(y=1.0, line_dash="dot", line_color="#57606a")
            fig.update_layout(barmode="group", height=420, margin={"t": 60},
                              title={"text": f"{scenario}: B/A (1 = no change; bars to the bootstrap interval)"})
            fig.update_yaxes(title="B / A")
            parts.append('<div class="chart">' + chart_div(fig, f"compare-{len(parts)}", {"displaylogo": False})
                         + "</div>")
    extras = []
    if machines_line(c):
        extras.append(f'<p class="machines" data-different="1"><b>{e(machines_line(c))}</b></p>')
    if c.relative:
        rows = [f'<tr class="relative" data-contestant="{e(r.contestant)}" data-level="{e(r.level_key)}">'
                f"<td>{e(r.contestant)}</td><td>{e(r.scenario)} · {e(r.level_key)}</td>"
                f'<td class="num">{fmt.times_reference(r.throughput_vs_reference.a_median)} → '
                f"{fmt.times_reference(r.throughput_vs_reference.b_median)}</td>"
                f'<td class="num rel-rps">{_ratio_text(r.throughput_vs_reference)}</td>'
                f"<td>{verdict_html(r.throughput_vs_reference, 'higher')}</td>"
                f'<td class="num">{fmt.times_reference(r.server_cpu_per_req_vs_reference.a_median)} → '
                f"{fmt.times_reference(r.server_cpu_per_req_vs_reference.b_median)}</td>"
                f'<td class="num rel-cpu">{_ratio_text(r.server_cpu_per_req_vs_reference)}</td>'
                f"<td>{verdict_html(r.server_cpu_per_req_vs_reference, 'lower')}</td></tr>" for r in c.rows]
        head = "".join(f"<th>{h}</th>" for h in ["contestant", "scenario · level", "req/s × reference A → B", "B/A",
                                                  "", "server CPU/req × reference A → B", "B/A", ""])
        extras.append("<h2 id=\"relative\">Relative to each run's reference pair</h2><p class=\"note\">Each figure "
                      "÷ the same figure of its own run's reference pair (docs/reports.md, Calibration), then B/A "
                      "of those.</p>"
                      f'<table class="compare relative"><thead><tr>{head}</tr></thead><tbody>' + "".join(rows)
                      + "</tbody></table>")
    for label, items in (("Only in A", c.only_in_a), ("Only in B", c.only_in_b)):
        if items:
            extras.append(f"<p><b>{label}:</b> {e('; '.join(items))}</p>")
    if c.environment_differences:
        extras.append("<p><b>The runs' environments differ</b> (ratios may reflect that): "
                      + e("; ".join(c.environment_differences)) + "</p>")
    title = f"netarena: run {c.b.run.id} (B) against run {c.a.run.id} (A)"
    header = (f"<h1>{e(title)}</h1><p class=\"meta\">A = run {c.a.run.id} ({e(c.a.run.suite_name)}, "
              f"{e(c.a.run.started_at)}, store <code>{e(c.a.store_path)}</code>) · B = run {c.b.run.id} "
              f"({e(c.b.run.suite_name)}, {e(c.b.run.started_at)}, store <code>{e(c.b.store_path)}</code>)</p>"
              f"<p class=\"note\">Ratio = B/A of the medians (throughput: median of repeats; p99: from the merged "
              f"histograms), with in brackets its {c.confidence:.0%} bootstrap interval; the repeats' ranges beside. "
              f"{e(c.rule)}. Measurement ids refer to each run's own store.</p>")
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            f"<style>{CSS}</style><script type=\"text/javascript\">{_plotly_js()}</script></head><body>"
            + header + "".join(extras) + "".join(parts) + _profiles_html(c) + "</body></html>\n")
    return page.encode("utf-8")


def _profiles_html(c: Comparison) -> str:
    """Per level profiled in both runs: B's flame graph coloured by the change from A (differential), and the
    frames whose self share moved most."""
    from .html import _flame_graph, _Page, _table, e

    if not c.profile_pairs:
        return ""
    page = _Page()
    page.add('<h2 id="profiles">Profiles: B against A</h2>')
    page.add('<p class="note">For each level profiled in both runs (netarena run --profile), a differential flame '
             "graph: the boxes are B's stacks, as in B's own flame graph (width = B's samples), and each box's colour "
             "is the change of its share of the samples from A to B: <b style=\"color:#dc2828\">red</b> = a "
             "larger share of B's samples than of A's (grew), <b style=\"color:#285adc\">blue</b> = a smaller one "
             "(shrank), white = unchanged; the strongest colour is the largest change in that graph. Shares, not "
             "samples: each profile is divided by its own total, since the two rarely have the same number of "
             "samples. A frame only A had is not drawn (it is in the \"(other)\" box of its parent, if B has one). "
             "Hover for both shares. docs/profiles.md says how to read them.</p>")
    for pair in c.profile_pairs:
        a_views, b_views = pair.a.profile.get("views") or {}, pair.b.profile.get("views") or {}
        page.add(f'<h3 class="profile-pair" data-contestant="{e(pair.contestant)}" data-level="{e(pair.level_key)}">'
                 f"{e(pair.contestant)} · {e(pair.scenario)} · {e(pair.level_key)} "
                 f"(A #{pair.a.measurement.id}: {pair.a.profile.get('samples') or 0:,} samples, "
                 f"B #{pair.b.measurement.id}: {pair.b.profile.get('samples') or 0:,} samples)</h3>")
        for view, what in (("cpu", "on CPU"), ("idle", "where the server waited (off-CPU)")):
            if a_views.get(view) and b_views.get(view):
                _flame_graph(page, profiles.build_tree(b_views[view], baseline=a_views[view]),
                             f"{pair.contestant} {pair.scenario} {pair.level_key}: {what}, B against A")
        if pair.self_changes:
            rows = [f'<tr><td><code>{e(ch.frame)}</code></td><td class="num">{fmt.pct(ch.a_share, 1)}</td>'
                    f'<td class="num">{fmt.pct(ch.b_share, 1)}</td><td class="num">{ch.change * 100:+.1f}</td></tr>'
                    for ch in pair.self_changes]
            page.add('<p class="note">The frames whose self time (on CPU, as the leaf of the stack) moved most, '
                     "as shares of each profile's samples:</p>")
            page.add(_table(["frame (self)", "A", "B", "change (points)"], rows, cls="profile-changes"))
    return "".join(page.parts)
