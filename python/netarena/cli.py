"""netarena's command line: parse → validate → run → export.

Exit codes: 0 success; 1 something checked failed (verify, a run whose every measurement failed);
2 bad input (nothing was started); 130 interrupted (what was measured is kept; the resume command is printed).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .config import SCENARIOS, Suite, check_suite, load_suite, value_line
from .contestants import (InstallError, availability, markdown_catalog, cache_root, default_contestants_dir, install, list_names, load,
                          repo_root, select, tail)
from .errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, ConfigError, did_you_mean
from .export import export_csv, export_json, run_summary
from .server_user import RUN_AS_ROOT_ENV, SERVER_USER, for_servers
from .store import Store, unreadable
from .term import console as make_console, styled

DEFAULT_SUITE = "quick"
DEFAULT_RESULTS_DIR = "results"
VERIFY_LOG_TAIL_LINES = 20  # enough for a stack trace's useful end, few enough to read under the table


# ----------------------------------------------------------------------------- output

FAIL = styled(("FAIL", "red"))


class UI:
    """Everything the run shows. --quiet keeps warnings only; --json keeps stdout for the final document."""

    def __init__(self, quiet: bool = False, json_mode: bool = False):
        self.quiet = quiet or json_mode
        self.out = make_console(stderr=json_mode)
        self.err = make_console(stderr=True)
        self.progress: Progress | None = None
        self.task = None
        self.current = ""
        self.last_figure = ""

    def info(self, message: str) -> None:
        if not self.quiet:
            self.out.print(message)

    def warn(self, message: str) -> None:
        self.err.print(styled(("warning:", "yellow"), " ", message))

    def start_progress(self, total: int, already_done: int = 0) -> None:
        if already_done:
            self.info(f"{already_done} measurement(s) already stored; {total} to go")
        if self.quiet or total == 0:
            return
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[figure]}", markup=False),
                                 console=self.out, transient=False)
        self.progress.start()
        self.task = self.progress.add_task("measuring", total=total, figure="")

    def measuring(self, item, repeat_index: int) -> None:
        self.current = f"{item.contestant} {item.scenario} {item.level.key} #{repeat_index + 1}"
        if self.progress is not None:
            self.progress.update(self.task, description=self.current)

    def phase(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=f"{self.current} ({text})")

    def measured(self, record: dict) -> None:
        name = f"{record['contestant']} {record['scenario']} {record['level_key']} #{record['repeat_index'] + 1}"
        if record["status"] == "ok":
            figure = f"{record['requests_per_s']:,.0f} req/s" if record.get("requests_per_s") is not None else ""
            flags = f" [{', '.join(record['flags'])}]" if record.get("flags") else ""
            self.last_figure = f"last: {name}: {figure}{flags}"
        else:
            self.last_figure = f"last: {name}: FAILED"
            message = f"{name}: {record.get('failure_kind')}: {record.get('error')}"
            if self.progress is not None:
                self.progress.console.print(styled(("failed", "red"), " ", message))
            elif not self.quiet:
                self.err.print(f"failed: {message}")
        if self.progress is not None:
            self.progress.update(self.task, advance=1, figure=self.last_figure)

    def end_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def fail_bad_input(exc: ConfigError) -> None:
    make_console(stderr=True).print(f"error: {exc.render()}", soft_wrap=True)
    sys.exit(EXIT_BAD_INPUT)


def resolve_suite_path(value: str | None) -> Path:
    """A path to a .toml file, or a suite name looked up in the checkout's suites/ (and suites/seeds/)."""
    name = value or DEFAULT_SUITE
    candidate = Path(name)
    if candidate.suffix == ".toml" or os.sep in name:
        if not candidate.is_file():
            raise ConfigError("suite file not found", path=candidate)
        return candidate
    roots = [Path("suites")]
    if repo_root() is not None:
        roots.insert(0, repo_root() / "suites")
    for root in roots:
        for sub in ("", "seeds"):
            path = root / sub / f"{name}.toml"
            if path.is_file():
                return path
    known = sorted({p.stem for root in roots if root.is_dir() for p in root.rglob("*.toml")})
    raise ConfigError(f"unknown suite '{name}' (looked in {', '.join(str(r) for r in roots)}; known: "
                      f"{', '.join(known) or 'none'})", path="SUITE", hint=did_you_mean(name, known))


def split_list(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_cpus(value: str | None, option: str) -> list[int] | None:
    if value is None:
        return None
    cpus: list[int] = []
    try:
        for part in value.split(","):
            if "-" in part:
                low, high = part.split("-", 1)
                cpus += list(range(int(low), int(high) + 1))
            else:
                cpus.append(int(part))
    except ValueError:
        raise ConfigError(f"{value!r} is not a CPU list (e.g. 0, 0,2 or 2-5)", path=option) from None
    return cpus


def parse_duration_s(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    text = value.strip().lower()
    scale = 1.0
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    try:
        seconds = float(text) * scale
    except ValueError:
        raise ConfigError(f"{value!r} is not a duration (e.g. 500ms, 3s, 2m or 2.5)", path=option) from None
    if seconds <= 0 and option != "--warmup":
        raise ConfigError(f"{value!r} must be more than zero", path=option)
    return seconds


def backend_name(value: str | None) -> str:
    return value or os.environ.get("NETARENA_BACKEND") or "real"


# ----------------------------------------------------------------------------- commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="netarena")
def main() -> None:
    """Benchmark network servers honestly: same experiments, same load, verified responses, repeats, medians."""


def _run_as_root_option(f):
    return click.option("--run-as-root", is_flag=True,
                        help=f"As root, run the contestants' servers as root too (default: as the unprivileged user "
                             f"'{SERVER_USER}'; also {RUN_AS_ROOT_ENV}=1).")(f)


def _contestants_dir_option(f):
    return click.option("--contestants-dir", type=click.Path(path_type=Path, file_okay=False),
                        default=None, help="Folder of contestants (default: the checkout's contestants/).")(f)


@main.command()
@click.argument("suite", required=False)
@click.option("--only", help="Comma-separated contestant names or globs (replaces the suite's list).")
@click.option("--scenario", "scenario_opt", help="Comma-separated scenarios to keep from the suite.")
@click.option("--repeat", type=int, help="Repeats per measurement (default: the suite's).")
@click.option("--duration", help="Measured time per measurement, e.g. 3s (default: the suite's).")
@click.option("--warmup", help="Warm-up per measurement, e.g. 1s (default: the suite's).")
@click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False),
              default=DEFAULT_RESULTS_DIR, show_default=True, help="Folder holding the results store.")
@click.option("--resume", "resume", is_flag=False, flag_value="latest", default=None,
              help="Finish an interrupted run: the latest unfinished one in --results, or the given run id.")
@click.option("--server-cpus", help="CPUs for the contestant (default: the first available CPU).")
@click.option("--generator-cpus", help="CPUs for netarena-load (default: the second available CPU).")
@click.option("--no-apt", is_flag=True, help="Never apt-get install a contestant's Debian packages.")
@_run_as_root_option
@_contestants_dir_option
@click.option("--quiet", "-q", is_flag=True, help="Only warnings and errors.")
@click.option("--json", "json_mode", is_flag=True, help="Print the run summary as JSON on stdout.")
@click.option("--backend", "backend_opt", type=click.Choice(["real", "mock"]), hidden=True)
def run(suite, only, scenario_opt, repeat, duration, warmup, results_dir, resume, server_cpus, generator_cpus,
        no_apt, run_as_root, contestants_dir, quiet, json_mode, backend_opt):
    """Run a suite (default: quick) and store every measurement in RESULTS/netarena.sqlite."""
    from .backend import GeneratorMissing, find_generator, generator_version, make_backend
    from .runner import Interrupted, Runner, StopRequest, build_plan, cleanup_orphans, new_run, orchestrator_alive, resolve_cpus
    from .cli_report import measured_any, report_after_run, summary_after_run

    ui = UI(quiet=quiet, json_mode=json_mode)
    # ---- parse and validate: any problem exits 2 before anything starts
    try:
        backend_kind = backend_name(backend_opt)
        if backend_kind not in ("real", "mock"):
            raise ConfigError(f"unknown backend {backend_kind!r} (real | mock)", path="NETARENA_BACKEND")
        store = None
        if resume:
            if not (Path(results_dir) / "netarena.sqlite").is_file():
                raise ConfigError(f"no store in {results_dir} to resume from", path="--results")
            store = Store(results_dir)
            run_row = _find_resumable(store, resume, results_dir)
            if orchestrator_alive(run_row):
                raise ConfigError(f"run {run_row['id']} is still running (pid {run_row['orchestrator_pid']})",
                                  path="--resume")
            stored_args = json.loads(run_row["args_json"])
            if any(v is not None for v in (suite, only, scenario_opt, repeat, duration, warmup)):
                ui.warn("--resume replays the stored suite and options; the suite/--only/--scenario/--repeat/"
                        "--duration/--warmup given now are ignored")
            effective = Suite.model_validate(json.loads(run_row["suite_json"]))
            # The commands run come from the contestants folder named now (--contestants-dir, else the
            # checkout's), never from a path the store holds; each manifest must still be the one stored.
            contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
            scenario_filter = stored_args.get("scenarios")
            server, generator_set = json.loads(run_row["server_cpus_json"]), json.loads(run_row["generator_cpus_json"])
            backend_kind = run_row["backend"]
            if backend_kind not in ("real", "mock"):
                raise ConfigError(f"run {run_row['id']} names backend {backend_kind!r} (real | mock)", path="--resume")
            allow_apt = stored_args.get("allow_apt", True) and not no_apt
            suite_path = run_row["suite_path"]
            try:
                names = select(contestants_dir, list(effective.contestants), list(effective.exclude),
                               "the resumed run's contestants")
            except ConfigError as exc:
                used = stored_args.get("contestants_dir")
                if used and Path(used) != contestants_dir:
                    exc.hint = f"the run used --contestants-dir {used}: pass it again"
                raise
            _same_manifests(store, run_row["id"], load(contestants_dir, names), contestants_dir)
            cpu_warning = None
        else:
            suite_path = resolve_suite_path(suite)
            parsed, _ = load_suite(suite_path)
            contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
            overrides: dict = {}
            if only:
                overrides["contestants"] = split_list(only)
                overrides["exclude"] = []
            if repeat is not None:
                overrides["repeat"] = repeat
            if duration is not None:
                overrides["duration_s"] = parse_duration_s(duration, "--duration")
            if warmup is not None:
                overrides["warmup_s"] = parse_duration_s(warmup, "--warmup")
            effective = _override(parsed, overrides)
            scenario_filter = split_list(scenario_opt)
            for name in scenario_filter or []:
                if name not in SCENARIOS:
                    raise ConfigError(f"unknown scenario '{name}' (known: {', '.join(SCENARIOS)})",
                                      path="--scenario", hint=did_you_mean(name, SCENARIOS))
            in_suite = {m.scenario for m in effective.measure}
            if scenario_filter and not set(scenario_filter) & in_suite:
                raise ConfigError(f"the suite measures {', '.join(sorted(in_suite))}; none of those is in "
                                  f"--scenario {scenario_opt}", path="--scenario")
            cli_cpus = (parse_cpus(server_cpus, "--server-cpus"), parse_cpus(generator_cpus, "--generator-cpus"))
            if cli_cpus == (None, None) and effective.cpus is not None:
                cli_cpus = (effective.cpus.server, effective.cpus.generator)
            server, generator_set, cpu_warning = resolve_cpus(*cli_cpus)
            allow_apt = not no_apt
            source = "--only" if only else f"{suite_path}: contestants"
            where = {} if only else {"field": "contestants",
                                     "line_of": lambda name: value_line(suite_path, "contestants", name)}
            names = select(contestants_dir, list(effective.contestants), list(effective.exclude),
                           "--only" if only else str(suite_path), **where)
            if not names:
                raise ConfigError(f"no contestant matches {list(effective.contestants)} in {contestants_dir}",
                                  path=source)
        contestants = load(contestants_dir, names)
        plan = build_plan(effective, contestants, scenario_filter)
        generator_path = None
        if backend_kind == "real":
            try:
                generator_path = find_generator()
            except GeneratorMissing as exc:
                raise ConfigError(str(exc)) from None
            from .doctor import max_connections

            limit = max_connections()
            for item in plan.items:
                if item.level.connections > limit:
                    raise ConfigError(f"{item.level.connections} connections ({item.scenario}) is more than this "
                                      f"machine allows one generator: at most {limit:,}",
                                      path=str(suite_path), field="measure.connections",
                                      hint="`netarena doctor` shows the limits and how to raise them")
        user = for_servers(run_as_root, contestants) if backend_kind == "real" else None
        if plan.total == 0:
            raise ConfigError("nothing to measure: no selected contestant implements the selected scenarios "
                              "(see `netarena list`)")
        if store is None:  # last: bad input elsewhere leaves no store behind
            store = Store(results_dir)
    except ConfigError as exc:  # StoreError too: a damaged store or one of another schema version
        fail_bad_input(exc)
        return
    if cpu_warning:
        ui.warn(cpu_warning)

    # ---- run
    cleanup_orphans(store, ui.warn)
    if resume:
        run_id = run_row["id"]
        store.claim_run(run_id, _own_start_time())
        ui.info(f"resuming run {run_id} ({plan.suite.name}) in {store.path}")
    else:
        run_id = new_run(store, plan, suite_path=str(suite_path), args={
            "argv": sys.argv, "contestants_dir": str(contestants_dir), "scenarios": scenario_filter,
            "allow_apt": allow_apt, "results_dir": str(results_dir)}, backend_name=backend_kind,
            server_cpus=server, generator_cpus=generator_set,
            generator_path=str(generator_path) if generator_path else None,
            generator_version=generator_version(generator_path) if generator_path else None)
        minutes, seconds = divmod(int(plan.estimate_s()), 60)
        ui.info(f"run {run_id}: suite {plan.suite.name}, {len({i.contestant for i in plan.items})} contestant(s), "
                f"{len(plan.items)} measurement(s) x {plan.suite.repeat} repeat(s) = {plan.total}; estimated "
                f"{minutes} min {seconds:02d} s plus first-time installs; server CPUs {server}, generator CPUs "
                f"{generator_set}; store {store.path}")
        if plan.suite.time_budget_s and plan.estimate_s() > plan.suite.time_budget_s:
            ui.warn(f"the estimate exceeds the suite's time_budget_s ({plan.suite.time_budget_s:g} s)")
    for contestant in plan.contestants:
        if contestant.manifest.start.warmup_min_s > plan.suite.warmup_s and not json_mode:
            ui.info(f"{contestant.name}: warm-up {contestant.manifest.start.warmup_min_s:g} s instead of "
                    f"{plan.suite.warmup_s:g} s (its start.warmup_min_s; marked WARM in the report)")
    for contestant, scenario, level_key, reason in plan.skips:
        if not json_mode:
            ui.info(f"skip {contestant}{' ' + scenario if scenario else ''}"
                    f"{' ' + level_key if level_key else ''}: {reason}")

    runner = Runner(store, None, ui, allow_apt=allow_apt)
    backend = make_backend(backend_kind, generator=generator_path, on_spawn=runner.track, on_reaped=runner.untrack,
                           user=user) if backend_kind == "real" else make_backend(backend_kind)
    runner.backend = backend
    StopRequest.requested = False
    previous = {sig: signal.signal(sig, StopRequest.handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        runner.execute(plan, run_id, results_dir, server, generator_set)
    except (Interrupted, KeyboardInterrupt):
        ui.end_progress()
        store.set_run_status(run_id, "interrupted")
        cleanup_orphans(store, ui.warn)
        # What was measured gets its report too (marked partial); --resume rewrites it when the run completes.
        partial = report_after_run(store, run_id, results_dir, ui.err) if measured_any(store, run_id) else None
        ui.err.print(f"interrupted: what was measured is stored in {store.path}"
                     f"{f'; partial report: {partial}' if partial else ''}. Resume with:\n"
                     f"  {resume_command(run_id, results_dir, contestants_dir)}", soft_wrap=True)
        store.close()
        sys.exit(EXIT_INTERRUPTED)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    store.set_run_status(run_id, "complete")
    summary = run_summary(store, run_id)
    # The HTML report is written from the store (never from live state), like `netarena report` does; a
    # failure to render it is a warning, never a traceback over a run whose results are stored.
    report_path = report_after_run(store, run_id, results_dir, ui.err)
    if json_mode:
        summary["report"] = str(report_path) if report_path else None
        click.echo(json.dumps(summary, indent=2, default=str))
    elif not quiet:
        summary_after_run(store, run_id, results_dir, ui.out, ui.err)
        if report_path:
            ui.out.print(f"report: {report_path}")
    store.close()  # the WAL folded into netarena.sqlite: that one file now holds the run
    if summary["measurements"]["ok"] == 0:
        sys.exit(EXIT_FAILED)


def _own_start_time() -> float:
    import psutil
    return psutil.Process().create_time()


def _override(suite: Suite, overrides: dict) -> Suite:
    if not overrides:
        return suite
    data = suite.model_dump(mode="json")
    data.update(overrides)
    # --duration / --warmup replace every timing of the suite, per-entry ones included.
    for key in ("duration_s", "warmup_s"):
        if key in overrides:
            for entry in data["measure"]:
                entry[key] = None
    try:
        effective = Suite.model_validate(data)
    except Exception as exc:  # e.g. --repeat 0
        from pydantic import ValidationError
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            option = {"repeat": "--repeat", "duration_s": "--duration", "warmup_s": "--warmup",
                      "contestants": "--only"}.get(str(err["loc"][0]), str(err["loc"][0]))
            raise ConfigError(f"{err['msg']} (got {err.get('input')!r})", path=option) from None
        raise
    check_suite(effective, "command line")
    return effective


def resume_command(run_id: int, results_dir: Path, contestants_dir: Path) -> str:
    folder = "" if Path(contestants_dir) == default_contestants_dir().absolute() else \
        f" --contestants-dir {contestants_dir}"
    return f"netarena run --resume {run_id} --results {results_dir}{folder}"


def _same_manifests(store: Store, run_id: int, contestants: list, contestants_dir: Path) -> None:
    stored = {row["name"]: json.loads(row["manifest_json"]) for row in
              store.db.execute("SELECT name, manifest_json FROM contestants WHERE run_id=?", (run_id,))}
    for contestant in contestants:
        if contestant.name in stored and stored[contestant.name] != contestant.manifest.model_dump(mode="json"):
            raise ConfigError(f"the manifest of {contestant.name} in {contestants_dir} is not the one run {run_id} "
                              "started with", path="--resume",
                              hint="pass the --contestants-dir the run used, or start a new run")


def _find_resumable(store: Store, resume: str, results_dir: Path):
    if resume == "latest":
        row = store.latest_unfinished_run()
        if row is None:
            raise ConfigError(f"no unfinished run in {store.path}", path="--resume")
        return row
    try:
        run_id = int(resume)
    except ValueError:
        raise ConfigError(f"{resume!r} is not a run id (a number; `netarena export` lists them)",
                          path="--resume") from None
    row = store.run(run_id)
    if row is None:
        known = [str(r["id"]) for r in store.runs()]
        raise ConfigError(f"no run {run_id} in {store.path} (runs: {', '.join(known) or 'none'})", path="--resume")
    if row["status"] == "complete":
        raise ConfigError(f"run {run_id} is already complete", path="--resume")
    return row


@main.command(name="list")
@_contestants_dir_option
@click.option("--json", "json_mode", is_flag=True, help="Print as JSON.")
@click.option("--no-apt", is_flag=True, help="Report as if Debian packages will not be installed.")
@click.option("--markdown", is_flag=True, help="Print the contestants x scenarios table of docs/contestants.md "
              "(from the manifests alone).")
def list_cmd(contestants_dir, json_mode, no_apt, markdown):
    """Contestants and scenarios, and whether each can run here (and if not, exactly why)."""
    contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
    try:
        contestants = load(contestants_dir, list_names(contestants_dir))
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    if markdown:
        click.echo(markdown_catalog(contestants), nl=False)
        return
    rows = []
    for c in contestants:
        av = availability(c, allow_apt=not no_apt)
        rows.append({"name": c.name, "display_name": c.manifest.display_name, "language": c.manifest.language,
                     "runtime": c.manifest.runtime, "framework": f"{c.manifest.framework} {c.manifest.framework_version}",
                     "concurrency_model": c.manifest.concurrency_model, "runnable": av.runnable,
                     "reasons": av.reasons, "notes": av.notes,
                     "scenarios": {s: (None if s in c.manifest.scenarios else c.manifest.unsupported.get(s))
                                   for s in SCENARIOS}})
    if json_mode:
        click.echo(json.dumps({"contestants_dir": str(contestants_dir), "scenarios": list(SCENARIOS),
                               "contestants": rows}, indent=2))
        return
    console = make_console()
    if not rows:
        console.print(f"no contestants in {contestants_dir}")
        return
    table = Table(title=f"contestants in {contestants_dir}")
    table.add_column("contestant", no_wrap=True)
    for col in ("runtime / framework", "model", "scenarios", "runs here?"):
        table.add_column(col)
    for row in rows:
        implemented = " ".join(s for s in SCENARIOS if row["scenarios"][s] is None)
        status = styled(("yes", "green")) if row["runnable"] else styled(("no", "red"))
        if row["runnable"] and row["notes"]:
            status.append(" (after install)")
        table.add_row(row["name"], f"{row['runtime']} / {row['framework']}", row["concurrency_model"], implemented,
                      status)
    console.print(table)
    for row in rows:
        for reason in row["reasons"]:
            console.print(styled((row["name"], "red"), ": ", reason))
        for note in row["notes"]:
            console.print(f"{row['name']}: {note}")
    console.print("Scenarios: " + ", ".join(SCENARIOS) + " (definitions: docs/scenarios.md); the reason for each "
                  "one not implemented: `netarena list --json`")


@main.command()
@click.argument("contestant_names", nargs=-1)
@_contestants_dir_option
@click.option("--scenario", "scenario_opt", help="Comma-separated scenarios (default: every one it claims).")
@click.option("--no-apt", is_flag=True, help="Never apt-get install a contestant's Debian packages.")
@click.option("--server-cpus", help="CPUs for the contestant (default: the first available CPU).")
@_run_as_root_option
@click.option("--workers", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Start each contestant with this many workers ({workers}); contestants without worker "
                   "support are skipped with their reason when it is above 1.")
def verify(contestant_names, contestants_dir, scenario_opt, no_apt, server_cpus, run_as_root, workers):
    """Start each contestant, check every scenario it claims, stop it: pass/fail per pair with the reason."""
    from .backend import RealBackend
    from .process import available_cpus, free_port
    from .scenarios import STATIC_SET_VERSION, build_static_files, static_set_ready

    console = make_console()
    contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
    try:
        names = select(contestants_dir, list(contestant_names) or ["*"], [], "CONTESTANT")
        if not names:
            raise ConfigError(f"no contestants in {contestants_dir}", path="--contestants-dir")
        contestants = load(contestants_dir, names)
        scenario_filter = split_list(scenario_opt)
        for name in scenario_filter or []:
            if name not in SCENARIOS:
                raise ConfigError(f"unknown scenario '{name}'", path="--scenario", hint=did_you_mean(name, SCENARIOS))
        cpus = parse_cpus(server_cpus, "--server-cpus") or [available_cpus()[0]]
        user = for_servers(run_as_root, contestants)
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    static_dir = cache_root() / "static" / f"v{STATIC_SET_VERSION}"
    static_dir.mkdir(parents=True, exist_ok=True)
    backend = RealBackend(generator=None, user=user)
    log_dir = cache_root() / "verify-logs"
    failures = 0
    failed_logs: list[Path] = []  # servers that failed: their log's last lines follow the table
    table = Table(title="verification")
    for col in ("contestant", "scenario", "result", "reason"):
        table.add_column(col)
    for contestant in contestants:
        scenarios = [s for s in contestant.manifest.scenarios if not scenario_filter or s in scenario_filter]
        av = availability(contestant, allow_apt=not no_apt)
        if not av.runnable or (workers > 1 and not contestant.manifest.workers.supported):
            why = av.summary if not av.runnable else f"no worker support: {contestant.manifest.workers.how}"
            for s in scenarios:
                table.add_row(contestant.name, s, styled(("skipped", "yellow")), why)
            continue
        try:
            install(contestant, allow_apt=not no_apt, say=console.print, user=user)
        except InstallError as exc:
            failures += len(scenarios)
            for s in scenarios:
                table.add_row(contestant.name, s, FAIL, f"install failed: {exc}")
            continue
        if "static" in scenarios and not static_set_ready(static_dir):
            console.print(f"generating the static file set in {static_dir} (once)")
            build_static_files(static_dir)
        for scenario in scenarios:
            port = free_port()
            log_path = log_dir / f"{contestant.name}.{scenario}.log"
            try:
                proc = backend.start_server(contestant, scenario, port, workers, static_dir, cpus, log_path)
            except OSError as exc:
                failures += 1
                table.add_row(contestant.name, scenario, FAIL, f"cannot start: {exc}")
                continue
            try:
                kind, error, verification = backend.wait_ready(proc, contestant, scenario, port, static_dir, 5.0,
                                                               workers=workers)
            finally:
                stop = backend.stop_server(contestant, proc)
            if kind is None and (stop["leftover"] or stop["escaped"]):
                kind, error = "leftover", f"processes left after stop: {stop['leftover'] + stop['escaped']}"
            if kind is None:
                note = " (needed SIGKILL to stop)" if stop["killed"] else ""
                observed = (verification or {}).get("observed")
                table.add_row(contestant.name, scenario, styled(("pass", "green")),
                              "all checks passed" + note + (f" ({observed})" if observed else ""))
            else:
                failures += 1
                table.add_row(contestant.name, scenario, FAIL, f"{kind}: {error} (log: {log_path})")
                failed_logs.append(log_path)
    console.print(table)
    for log_path in failed_logs:
        lines = tail(log_path).splitlines()[-VERIFY_LOG_TAIL_LINES:]
        console.print(f"--- last {len(lines)} lines of {log_path} ---")
        console.print("\n".join(lines) if lines else "(empty)")
    sys.exit(EXIT_FAILED if failures else EXIT_OK)


@main.command()
@click.option("--apply", is_flag=True, help="Raise the limits that can be raised (needs root).")
def doctor(apply):
    """Limits and settings that bound a run, what each means, and the command that raises it."""
    from .doctor import run_doctor

    sys.exit(run_doctor(apply=apply, console=make_console()))


@main.command()
@click.argument("run_id", required=False)
@click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False),
              default=DEFAULT_RESULTS_DIR, show_default=True)
@click.option("--json", "fmt", flag_value="json", help="Everything about the run as one JSON document.")
@click.option("--csv", "fmt", flag_value="csv", help="One row per measurement.")
def export(run_id, results_dir, fmt):
    """Export RUN (default: the latest run) from the store as JSON or CSV on stdout."""
    try:
        if fmt is None:
            raise ConfigError("choose a format: --json or --csv", path="export")
        db = Path(results_dir) / "netarena.sqlite"
        if not db.is_file():
            raise ConfigError(f"no store at {db}", path="--results", hint="run `netarena run` first or pass --results")
        store = Store(results_dir)
        runs = store.runs()
        if not runs:
            raise ConfigError(f"no runs in {db}", path="--results")
        if run_id is None or run_id == "latest":
            selected = runs[-1]["id"]
        else:
            try:
                selected = int(run_id)
            except ValueError:
                raise ConfigError(f"{run_id!r} is not a run id", path="RUN") from None
            if store.run(selected) is None:
                raise ConfigError(f"no run {selected} in {db} (runs: {', '.join(str(r['id']) for r in runs)})",
                                  path="RUN")
        data = export_json(store, selected) if fmt == "json" else export_csv(store, selected)
    except sqlite3.DatabaseError as exc:  # damage the open's quick_check did not see
        fail_bad_input(unreadable(db, exc))
        return
    except ConfigError as exc:  # StoreError too: damaged, or of another schema version
        fail_bad_input(exc)
        return
    store.close()
    sys.stdout.write(data)


def _register_report_commands() -> None:
    # report / show / compare live in cli_report.py (the reports' own module, reading only the store).
    from .cli_report import register

    register(main)


_register_report_commands()

if __name__ == "__main__":
    main()
