"""netarena's command line: parse → validate → run → export.

Exit codes: 0 success; 1 something checked failed (verify, a run whose every measurement failed, a regression
found by compare --fail-on-regression); 2 bad input (nothing was started); 99 a run completed and a measurement
failed a threshold; 130 interrupted (what was measured is kept; the resume command is printed).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import NoReturn

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .config import SCENARIOS, SERVICE_SCENARIOS, Suite, check_suite, load_suite, value_line
from .scenarios import registry
from .contestants import (InstallError, availability, markdown_catalog, cache_root, default_contestants_dir, install, list_names, load,
                          scenario_note,
                          repo_root, select, tail)
from .errors import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_THRESHOLD_FAILED, ConfigError,
                     did_you_mean)
from .doctor import PROFILES as DOCTOR_PROFILES
from .export import export_csv, export_json, run_summary
from .external import DEFAULT_NAME as EXTERNAL_NAME
from .server_user import RUN_AS_ROOT_ENV, SERVER_USER, for_servers
from .store import Store, unreadable
from .term import console as make_console, styled

DEFAULT_SUITE = "quick"
DEFAULT_RESULTS_DIR = "results"
VERIFY_LOG_TAIL_LINES = 20  # enough for a stack trace's useful end, few enough to read under the table


# ----------------------------------------------------------------------------- output

FAIL = styled(("FAIL", "red"))


class UI:
    """Everything the run shows. --quiet keeps warnings only; --json keeps stdout for the final document.

    On a terminal, a live progress bar; elsewhere (CI, `| tee`, a file) a bar is invisible until the end, so
    one plain line per finished measurement instead, which a log shows as it comes."""

    def __init__(self, quiet: bool = False, json_mode: bool = False):
        self.quiet = quiet or json_mode
        self.out = make_console(stderr=json_mode)
        self.err = make_console(stderr=True)
        self.progress: Progress | None = None
        self.task = None
        self.current = ""
        self.last_figure = ""
        self.lines_total = 0   # measurements of this run when printing one line each (not on a terminal)
        self.lines_done = 0

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
        if not self.out.is_terminal:
            self.lines_total, self.lines_done = total, 0
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
            line = styled(f"{name}: {figure}{flags}")
        else:
            self.last_figure = f"last: {name}: FAILED"
            message = f"{name}: {record.get('failure_kind')}: {record.get('error')}"
            line = styled(("failed", "red"), " ", message)
            if self.progress is not None:
                self.progress.console.print(line)
            elif not self.quiet and not self.lines_total:
                self.err.print(f"failed: {message}")
        if self.progress is not None:
            self.progress.update(self.task, advance=1, figure=self.last_figure)
        elif self.lines_total:
            self.lines_done += 1
            self.out.print(styled(f"[{self.lines_done}/{self.lines_total}] ", line), soft_wrap=True)

    def end_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        self.lines_total = 0


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


# True when `main` runs as this process's program (`program`), not in-process (click's CliRunner in tests).
_as_program = False


def program() -> None:
    """The `netarena` command (console script and `python -m netarena`): `main` as the process's program, so an
    interrupted `run` may end the process itself (see `run`)."""
    global _as_program
    _as_program = True
    main()


def _ignore_stop_signals(previous: dict) -> dict:
    """Already stopping: a further Ctrl-C/SIGTERM must not cut the clean-up or the exit short (it killed the process
    by the signal between the clean-up and exit 130, seen when a second Ctrl-C landed after the last message).
    Returns the handlers the caller's `finally` restores: none as the `netarena` program (the signals stay ignored
    until the process ends), the caller's own when called in-process (click's CliRunner)."""
    for sig in previous:
        signal.signal(sig, signal.SIG_IGN)
    return {} if _as_program else previous


def _exit_interrupted() -> NoReturn:
    """Everything is stopped, stored and said: exit 130.

    As the program the process ends here, by os._exit: through sys.exit, a second Ctrl-C that came as the clean-up
    finished ended the process by SIGINT during the interpreter's own exit in about 1 run of 6, although SIGINT was
    ignored then (/proc showed it; where in the exit was not found); with os._exit, 0 of 30 (tests/test_run_real.py,
    a Ctrl-C after the clean-up). atexit handlers do not run on this path; netarena registers none."""
    if not _as_program:
        sys.exit(EXIT_INTERRUPTED)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


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
@click.option("--scenario", "scenario_opt", help="Comma-separated scenarios to keep from the suite (with --url: "
                                                 "the catalog scenarios to measure).")
@click.option("--repeat", type=int, help="Repeats per measurement (default: the suite's); with --precision, the "
                                        "minimum.")
@click.option("--precision", "precision_opt", metavar="PCT",
              help="Repeat until the 95%% interval of each throughput median is within ±PCT of it (e.g. 3%%), "
                   "up to the suite's repeat_max (default 20) and precision_budget_s (docs/suites.md).")
@click.option("--duration", help="Measured time per measurement, e.g. 3s (default: the suite's).")
@click.option("--warmup", help="Warm-up per measurement, e.g. 1s (default: the suite's).")
@click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False),
              default=DEFAULT_RESULTS_DIR, show_default=True, help="Folder holding the results store.")
@click.option("--resume", "resume", is_flag=False, flag_value="latest", default=None,
              help="Finish an interrupted run: the latest unfinished one in --results, or the given run id.")
@click.option("--server-cpus", help="CPUs for the contestant (default: the first available CPU).")
@click.option("--generator-cpus", help="CPUs for netarena-load (default: the second available CPU).")
@click.option("--no-apt", is_flag=True, help="Never apt-get install a contestant's Debian packages.")
@click.option("--install-jobs", type=click.IntRange(1, 64), default=None,
              help="Contestants installed at once (default: one per CPU, at least 2, at most 4).")
@_run_as_root_option
@_contestants_dir_option
@click.option("--quiet", "-q", is_flag=True, help="Only warnings and errors.")
@click.option("--json", "json_mode", is_flag=True, help="Print the run summary as JSON on stdout.")
@click.option("--threshold", "thresholds", multiple=True, metavar="EXPR",
              help="A pass/fail gate on every measurement, as netarena-load --threshold takes it (e.g. "
                   "'p99<=5ms', 'errors<=0.1%', 'rps>=50000'); repeatable. Exit 99 when one fails.")
@click.option("--url", help="Measure a server that is already running at this http:// URL instead of a suite's "
                            "contestants: nothing is installed, started or stopped.")
@click.option("--pid", type=int, help="--url: the server's process (its tree is monitored: CPU, RSS, context "
                                      "switches). Default: the process listening on the URL's port.")
@click.option("--process-name", help="--url: find the server's process by name instead of --pid.")
@click.option("--name", "server_name", help=f"--url: the name the server is stored and compared under "
                                            f"(default: {EXTERNAL_NAME}).")
@click.option("--connections", help="--url: comma-separated connection counts, one level each (default: 50).")
@click.option("--allow-target", multiple=True, metavar="HOST",
              help="--url: allow a host that is not loopback (repeatable; passed to netarena-load).")
@click.option("--request", "request_file", type=click.Path(path_type=Path, dir_okay=False),
              help="--url: a TOML file describing a custom request (docs/own-server.md).")
@click.option("--method", help="--url: custom request method (its path is the URL's).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="--url: custom request header "
                                                                                  "(repeatable).")
@click.option("--body", help="--url: custom request body.")
@click.option("--expect-status", type=int, help="--url: the custom request's expected status (default: any "
                                                "2xx/3xx).")
@click.option("--expect-body", help="--url: the custom request's expected body, byte for byte.")
@click.option("--cluster", "cluster_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Run across hosts: the server on one, the load on the others (docs/many-machines.md).")
@click.option("--backend", "backend_opt", type=click.Choice(["real", "mock"]), hidden=True)
def run(suite, only, scenario_opt, repeat, precision_opt, duration, warmup, results_dir, resume, server_cpus, generator_cpus,
        no_apt, install_jobs, run_as_root, contestants_dir, quiet, json_mode, cluster_file, thresholds, url, pid, process_name, server_name, connections,
        allow_target, request_file, method, headers, body, expect_status, expect_body, backend_opt):
    """Run a suite (default: quick), or measure your own server (--url), and store every measurement in
    RESULTS/netarena.sqlite.

    Exit codes: 0 ok; 1 every measurement failed; 2 bad input (nothing started or stored); 99 the run
    completed and at least one measurement failed a --threshold (or a suite entry's `thresholds`);
    130 interrupted.
    """
    from .backend import GeneratorMissing, check_thresholds, find_generator, generator_version, make_backend
    from .contestants import default_install_jobs
    from .runner import (Interrupted, Runner, StopRequest, StopRun, build_plan, cleanup_orphans, minutes_seconds,
                         new_run, orchestrator_alive, resolve_cpus)
    from .cli_report import measured_any, report_after_run, summary_after_run

    ui = UI(quiet=quiet, json_mode=json_mode)
    install_jobs = install_jobs or default_install_jobs()
    external = None  # the server of --url (external.ExternalServer)
    # ---- parse and validate: any problem exits 2 before anything starts
    try:
        backend_kind = backend_name(backend_opt)
        if backend_kind not in ("real", "mock"):
            raise ConfigError(f"unknown backend {backend_kind!r} (real | mock)", path="NETARENA_BACKEND")
        url_only = {"--pid": pid, "--process-name": process_name, "--name": server_name, "--connections": connections,
                    "--allow-target": allow_target or None, "--request": request_file, "--method": method,
                    "--header": headers or None, "--body": body, "--expect-status": expect_status,
                    "--expect-body": expect_body}
        if url is None and any(v is not None for v in url_only.values()):
            given = [k for k, v in url_only.items() if v is not None]
            raise ConfigError(f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} to a server of "
                              "your own", path=given[0], hint="add --url http://HOST:PORT")
        store = None
        if url is not None:
            clash = [k for k, v in (("SUITE", suite), ("--only", only), ("--resume", resume),
                                    ("--server-cpus", server_cpus), ("--contestants-dir", contestants_dir),
                                    ("--cluster", cluster_file), ("--backend", backend_opt)) if v]
            if clash:
                raise ConfigError(f"{', '.join(clash)} cannot be combined with --url: the server is the one at the URL "
                                  "(netarena neither starts nor pins it) and the run's levels come from --scenario, "
                                  "--connections, --repeat, --duration and --warmup", path=clash[0])
            from .external import pick_cpus, plan_external

            backend_kind = "external"
            external, effective, plan, found_by = plan_external(
                url=url, scenarios=split_list(scenario_opt), connections=connections, pid=pid,
                process_name=process_name, name=server_name, allow_target=list(allow_target),
                request_file=request_file, method=method, headers=headers, body=body, expect_status=expect_status,
                expect_body=expect_body, overrides=lambda base: _override(base, _run_overrides(
                    repeat, duration, warmup, thresholds, precision_opt)))
            server, generator_set, cpu_warning = pick_cpus(external.pid,
                                                           parse_cpus(generator_cpus, "--generator-cpus"))
            suite_path, scenario_filter, contestants_dir, allow_apt = None, None, None, False
        elif resume:
            if not (Path(results_dir) / "netarena.sqlite").is_file():
                raise ConfigError(f"no store in {results_dir} to resume from", path="--results")
            store = Store(results_dir)
            run_row = _find_resumable(store, resume, results_dir)
            if orchestrator_alive(run_row):
                raise ConfigError(f"run {run_row['id']} is still running (pid {run_row['orchestrator_pid']})",
                                  path="--resume")
            stored_args = json.loads(run_row["args_json"])
            if stored_args.get("external"):
                raise ConfigError(f"run {run_row['id']} measured a server of your own "
                                  f"({stored_args['external']['url']}); such a run is not resumed: measure again "
                                  "with the same `netarena run --url ...`", path="--resume")
            if any(v is not None for v in (suite, only, scenario_opt, repeat, precision_opt, duration, warmup,
                                           thresholds or None)):
                ui.warn("--resume replays the stored suite and options; the suite/--only/--scenario/--repeat/"
                        "--precision/"
                        "--duration/--warmup/--threshold given now are ignored")
            effective = Suite.model_validate(json.loads(run_row["suite_json"]))
            # The commands run come from the contestants folder named now (--contestants-dir, else the
            # checkout's), never from a path the store holds; each manifest must still be the one stored.
            contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
            scenario_filter = stored_args.get("scenarios")
            server, generator_set = json.loads(run_row["server_cpus_json"]), json.loads(run_row["generator_cpus_json"])
            backend_kind = run_row["backend"]
            if backend_kind == "cluster":
                cluster_file = cluster_file or Path(stored_args["cluster"])
            elif backend_kind not in ("real", "mock"):
                raise ConfigError(f"run {run_row['id']} names backend {backend_kind!r} (real | mock | cluster)",
                                  path="--resume")
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
            overrides = _run_overrides(repeat, duration, warmup, thresholds, precision_opt)
            if only:
                overrides["contestants"] = split_list(only)
                overrides["exclude"] = []
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
            if effective.cpus is not None and effective.cpus.services:
                from .process import available_cpus

                unknown = sorted(set(effective.cpus.services) - set(available_cpus()))
                if unknown:
                    raise ConfigError(f"CPU(s) {unknown} not available to this process (available: "
                                      f"{available_cpus()})", path=str(suite_path), field="cpus.services")
            allow_apt = not no_apt
            source = "--only" if only else f"{suite_path}: contestants"
            where = {} if only else {"field": "contestants",
                                     "line_of": lambda name: value_line(suite_path, "contestants", name)}
            names = select(contestants_dir, list(effective.contestants), list(effective.exclude),
                           "--only" if only else str(suite_path), **where)
            if not names:
                raise ConfigError(f"no contestant matches {list(effective.contestants)} in {contestants_dir}",
                                  path=source)
            for index, entry in enumerate(effective.measure):
                if entry.contestants is not None:  # an exact name that does not exist is a typo: say so
                    select(contestants_dir, list(entry.contestants), [], str(suite_path),
                           field=f"measure[{index}].contestants")
        if external is None:
            from .spread import open_files_hard_limit

            contestants = load(contestants_dir, names)
            # Servers on this machine start with the open-files hard limit (a cluster's server host has its own).
            on_this_machine = backend_kind == "real" and cluster_file is None
            plan = build_plan(effective, contestants, scenario_filter,
                              open_files_hard_limit() if on_this_machine else None,
                              generator_set if on_this_machine else None)
        generator_path = None
        cluster = None
        if cluster_file is not None:
            from .cluster.spec import load_cluster

            if server_cpus or generator_cpus:
                raise ConfigError("CPUs are each host's own across hosts (its worker's CPU affinity)",
                                  path="--server-cpus/--generator-cpus")
            # Each generator host judges only its own share: a threshold or a find-max search would be decided on
            # part of the load. Refused until the merged result is judged instead (docs/many-machines.md).
            if any(item.level.thresholds for item in plan.items):
                raise ConfigError("thresholds are not supported across hosts (each host would judge its share of "
                                  "the load only)", path="--threshold" if thresholds else str(suite_path),
                                  hint="run the suite without --cluster, or drop the thresholds")
            if any(item.level.find_max_slo is not None for item in plan.items):
                raise ConfigError("find_max is not supported across hosts (each host would search its share of "
                                  "the rate only)", path=str(suite_path), hint="run the search without --cluster")
            if any(item.level.param("conn_rate_steps") for item in plan.items):
                raise ConfigError("connections_per_step is not supported across hosts (each host would open the "
                                  "whole count at its share of the rate)", path=str(suite_path),
                                  hint="run the sweep without --cluster")
            cluster = load_cluster(cluster_file)
            backend_kind = "cluster"
        elif backend_kind in ("real", "external"):
            try:
                generator_path = find_generator()
            except GeneratorMissing as exc:
                raise ConfigError(str(exc)) from None
            from .spread import is_loopback_host, plan_for

            gates = list(dict.fromkeys(t for item in plan.items for t in item.level.thresholds))
            refused = check_thresholds(generator_path, gates)
            if refused:
                raise ConfigError(refused, path="--threshold" if thresholds else str(suite_path),
                                  field=None if thresholds else "measure.thresholds",
                                  hint="docs/load-generator.md lists the metrics, operators and units")
            # A level beyond one generator process is spread over several (spread.plan_spread); refused here
            # only when no spread can hold it, before anything starts.
            for item in plan.items:
                try:
                    spread = plan_for(item.level.connections, probe=item.level.probe_interval_s is not None,
                                      open_files_cap=effective.generator_open_files,
                                      loopback=external is None or is_loopback_host(external.host))
                    if spread.processes > 1 and item.level.find_max_slo is not None:
                        # Each process would search a rate of its own: no one highest rate comes of that.
                        raise ConfigError(f"find_max needs one generator process, and {spread.reason}")
                    if spread.processes > 1 and item.level.param("conn_rate_steps"):
                        # Each process would open the whole count per step at its share of the rate.
                        raise ConfigError(f"connections_per_step needs one generator process, and {spread.reason}")
                except ConfigError as exc:
                    raise ConfigError(f"{item.scenario} at {item.level.connections:,} connections: {exc}",
                                      path=str(suite_path or "--connections"),
                                      field="measure.connections" if suite_path else None,
                                      hint="`netarena doctor` shows the limits and how to raise them") from None
        user = for_servers(run_as_root, contestants) if backend_kind == "real" else None
        if plan.total == 0:
            skipped = [f"{c} {sc or ''} {lk or ''}: {why}".replace("  ", " ") for c, sc, lk, why in plan.skips
                       if lk is not None]
            if skipped:  # every level was skipped for a reason of its own (e.g. more connections than fit)
                raise ConfigError("nothing to measure: every planned level is skipped: " + "; ".join(skipped[:5]))
            raise ConfigError("nothing to measure: no selected contestant implements the selected scenarios "
                              "(see `netarena list`)")
    except ConfigError as exc:  # StoreError too: a damaged store or one of another schema version
        fail_bad_input(exc)
        return
    if cpu_warning:
        ui.warn(cpu_warning)
    for notice in plan.notices:
        ui.warn(notice)
    if external is not None and external.pid is None:
        ui.warn(f"the server's process: {found_by}; its CPU, RSS and context switches are not monitored "
                "(give --pid or --process-name)")

    cluster_backend, cluster_info = None, None
    if cluster is not None:
        from .cluster import ClusterError
        from .cluster.backend import ClusterBackend

        try:
            cluster_backend = ClusterBackend(*cluster, say=ui.info).connect()
            cluster_info = cluster_backend.check()
        except ClusterError as exc:
            if cluster_backend is not None:
                cluster_backend.close()
            fail_bad_input(ConfigError(str(exc), path=cluster_file))
        # Each host's own CPU numbers (its worker's affinity), recorded as the run's CPU sets.
        roles = {h["role"]: [] for h in cluster_info["hosts"]}
        for host in cluster_info["hosts"]:
            roles[host["role"]] += host["cpus"]
        server, generator_set = sorted(set(roles["server"])), sorted(set(roles.get("generator", [])))
        ui.info(f"cluster {cluster[0].scheduler}: server host {cluster[0].server.worker} "
                f"({cluster[0].server.address}), generator hosts {', '.join(cluster[0].generators.workers)}")

    if store is None:  # last: bad input elsewhere (the cluster too) leaves no store behind
        try:
            store = Store(results_dir)
        except ConfigError as exc:  # StoreError: a damaged store or one of another schema version
            if cluster_backend is not None:
                cluster_backend.close()
            fail_bad_input(exc)
            return

    # ---- run
    cleanup_orphans(store, ui.warn)
    from .services import remove_stale_data

    for folder in remove_stale_data(Path(results_dir), {r["id"] for r in store.runs() if orchestrator_alive(r)}):
        ui.warn(f"removed the database data left by an interrupted run: {folder}")
    if resume:
        run_id = run_row["id"]
        store.claim_run(run_id, _own_start_time())
        ui.info(f"resuming run {run_id} ({plan.suite.name}) in {store.path}")
    else:
        args = {"argv": sys.argv, "contestants_dir": str(contestants_dir) if contestants_dir else None,
                "scenarios": scenario_filter, "allow_apt": allow_apt, "results_dir": str(results_dir),
                "cluster": str(Path(cluster_file).absolute()) if cluster_file else None}
        if external is not None:
            args["external"] = dict(external.describe(), found_by=found_by)
        run_id = new_run(store, plan, suite_path=str(suite_path) if suite_path else None, args=args,
                         backend_name=backend_kind,
            server_cpus=server, generator_cpus=generator_set,
            generator_path=str(generator_path) if generator_path else None,
            generator_version=generator_version(generator_path) if generator_path else None, cluster=cluster_info)
        # Installs are estimated from this machine's cache; a cluster's happen on its server host.
        estimate = plan.estimate(install_jobs, installs=backend_kind == "real")
        installs_elsewhere = " plus installs on the server host" if backend_kind == "cluster" else ""
        ui.info(f"run {run_id}: suite {plan.suite.name}, {len({i.contestant for i in plan.items})} contestant(s), "
                f"{len(plan.items)} measurement(s) x {plan.suite.repeat} repeat(s) = {plan.total}; estimated "
                f"{minutes_seconds(estimate.total_s)}{installs_elsewhere}: {estimate.describe()}; server CPUs "
                f"{server}, generator CPUs {generator_set}; store {store.path}")
        if plan.suite.precision:
            from .precision import settings as precision_settings

            _, repeat_max, budget_s = precision_settings(plan.suite)
            ui.info(f"precision ±{plan.suite.precision}: the estimate is for the minimum {plan.suite.repeat} "
                    f"repeat(s); measurements wider than that get more, up to {repeat_max}"
                    + (f" or {budget_s:g} s of measuring" if budget_s else ""))
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

    runner = Runner(store, None, ui, allow_apt=allow_apt, install_jobs=install_jobs)
    if cluster_backend is not None:
        backend = cluster_backend
    elif backend_kind == "real":
        backend = make_backend(backend_kind, generator=generator_path, on_spawn=runner.track,
                               on_reaped=runner.untrack, user=user)
    elif backend_kind == "external":
        backend = make_backend(backend_kind, generator=generator_path, on_spawn=runner.track,
                               on_reaped=runner.untrack)
    else:
        backend = make_backend(backend_kind)
    runner.backend = backend
    StopRequest.requested = False
    previous = {sig: signal.signal(sig, StopRequest.handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupted = False
    try:
        runner.execute(plan, run_id, results_dir, server, generator_set)
    except (Interrupted, KeyboardInterrupt):
        previous = _ignore_stop_signals(previous)
        ui.end_progress()
        store.set_run_status(run_id, "interrupted")
        cleanup_orphans(store, ui.warn)
        # What was measured gets its report too (marked partial); --resume rewrites it when the run completes.
        partial = report_after_run(store, run_id, results_dir, ui.err) if measured_any(store, run_id) else None
        again = "Measure again with the same command (a run of --url is not resumed)." if external is not None \
            else f"Resume with:\n  {resume_command(run_id, results_dir, contestants_dir)}"
        ui.err.print(f"interrupted: what was measured is stored in {store.path}"
                     f"{f'; partial report: {partial}' if partial else ''}. {again}", soft_wrap=True)
        store.close()
        interrupted = True
    except StopRun as exc:
        ui.end_progress()
        store.set_run_status(run_id, "interrupted")
        ui.err.print(f"error: the run stopped: {exc}. What was measured is stored in {store.path}. Resume with:\n"
                     f"  {resume_command(run_id, results_dir, contestants_dir)}", soft_wrap=True)
        sys.exit(EXIT_FAILED)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if cluster_backend is not None:
            cluster_backend.close()
    if interrupted:
        _exit_interrupted()
    store.set_run_status(run_id, "complete")
    summary = run_summary(store, run_id)
    # The HTML report is written from the store (never from live state), like `netarena report` does; a
    # failure to render it is a warning, never a traceback over a run whose results are stored.
    report_started = time.monotonic()
    report_path = report_after_run(store, run_id, results_dir, ui.err)
    phases = _phase_times(runner.phase_s, time.monotonic() - report_started)
    store.add_to_run_environment(run_id, "phase_s", phases)
    summary["phase_s"] = phases
    if json_mode:
        summary["report"] = str(report_path) if report_path else None
        click.echo(json.dumps(summary, indent=2, default=str))
    elif not quiet:
        summary_after_run(store, run_id, results_dir, ui.out, ui.err)
        if report_path:
            ui.out.print(f"report: {report_path}")
        ui.out.print("took: " + ", ".join(f"{name} {minutes_seconds(s)}" for name, s in phases.items()))
    store.close()  # the WAL folded into netarena.sqlite: that one file now holds the run
    if summary["measurements"]["ok"] == 0:
        sys.exit(EXIT_FAILED)
    if summary["measurements"]["threshold_failed"]:
        if not json_mode:
            ui.err.print(f"{summary['measurements']['threshold_failed']} measurement(s) failed a threshold "
                         f"(exit {EXIT_THRESHOLD_FAILED})", markup=False, highlight=False)
        sys.exit(EXIT_THRESHOLD_FAILED)


# Set by `make run` to the seconds its build (the editable install, which compiles netarena-load) took: the
# run's first phase, which happens before netarena starts.
BUILD_TIME_ENV = "NETARENA_BUILD_S"


def _phase_times(runner_phase_s: dict[str, float], report_s: float) -> dict[str, float]:
    """Seconds per phase of the run, in order: build (when `make run` said), installs, measuring, report."""
    phases: dict[str, float] = {}
    try:
        phases["build"] = float(os.environ[BUILD_TIME_ENV])
    except (KeyError, ValueError):
        pass
    phases.update(runner_phase_s)
    phases["report"] = report_s
    return {name: round(s, 1) for name, s in phases.items()}


def _own_start_time() -> float:
    import psutil
    return psutil.Process().create_time()


def _run_overrides(repeat: int | None, duration: str | None, warmup: str | None, thresholds: tuple[str, ...],
                   precision_text: str | None = None) -> dict:
    """What `netarena run`'s options change in a suite (the one given, or the one --url builds)."""
    overrides: dict = {}
    if precision_text is not None:
        from .precision import precision_option

        overrides["precision"] = precision_option(precision_text)
    if repeat is not None:
        overrides["repeat"] = repeat
    if duration is not None:
        overrides["duration_s"] = parse_duration_s(duration, "--duration")
    if warmup is not None:
        overrides["warmup_s"] = parse_duration_s(warmup, "--warmup")
    if thresholds:
        overrides["thresholds"] = list(thresholds)
    return overrides


def _override(suite: Suite, overrides: dict) -> Suite:
    if not overrides:
        return suite
    data = suite.model_dump(mode="json")
    overrides = dict(overrides)
    # --threshold adds to every entry's own thresholds.
    for entry in data["measure"]:
        entry["thresholds"] = [*entry.get("thresholds", []), *overrides.get("thresholds", [])]
    overrides.pop("thresholds", None)
    data.update(overrides)
    if "precision" in overrides and "repeat" not in overrides:
        from .precision import MIN_REPEATS

        # --precision makes the suite's repeat a minimum, which must be at least MIN_REPEATS.
        data["repeat"] = max(data["repeat"], MIN_REPEATS)
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
            option = {"repeat": "--repeat", "duration_s": "--duration", "warmup_s": "--warmup", "precision": "--precision",
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
    from .services import load_all, service_availability

    try:
        services = load_all()
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    service_status = {name: service_availability(services, name, None, allow_apt=not no_apt)
                      for name in dict.fromkeys(n for c in contestants for n in c.manifest.needs)}
    rows = []
    for c in contestants:
        av = availability(c, allow_apt=not no_apt)
        rows.append({"name": c.name, "display_name": c.manifest.display_name, "language": c.manifest.language,
                     "runtime": c.manifest.runtime, "framework": f"{c.manifest.framework} {c.manifest.framework_version}",
                     "concurrency_model": c.manifest.concurrency_model, "runnable": av.runnable,
                     "reasons": av.reasons, "notes": av.notes,
                     # The scenarios needing a service that cannot be built or installed here are skipped.
                     "services": {n: {"runnable": service_status[n][0], "reasons": service_status[n][1]}
                                  for n in c.manifest.needs},
                     # None: implemented; else why not (a service scenario left out: "not implemented").
                     "scenarios": {s: scenario_note(c, s) for s in SCENARIOS}})
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
    for name, (runnable, reasons) in service_status.items():
        if not runnable:
            users = ", ".join(r["name"] for r in rows if name in r["services"])
            console.print(styled((f"service {name}", "red"), f" cannot run here, so {users} skip its scenarios: "
                                 + "; ".join(reasons)))
    console.print("Scenarios: " + ", ".join(SCENARIOS) + " (definitions: docs/scenarios.md); the reason for each "
                  "one not implemented: `netarena list --json`")


@main.command()
@click.argument("contestant_names", nargs=-1)
@_contestants_dir_option
@click.option("--scenario", "scenario_opt", help="Comma-separated scenarios (default: every one it claims).")
@click.option("--no-apt", is_flag=True, help="Never apt-get install a contestant's Debian packages.")
@click.option("--install-jobs", type=click.IntRange(1, 64), default=None,
              help="Contestants installed at once (default: one per CPU, at least 2, at most 4).")
@click.option("--server-cpus", help="CPUs for the contestant (default: the first available CPU).")
@_run_as_root_option
@click.option("--workers", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Start each contestant with this many workers ({workers}); contestants without worker "
                   "support are skipped with their reason when it is above 1.")
@click.option("--threads", type=click.IntRange(1, 65_536), default=None,
              help="Start each contestant with this thread-pool size per worker ({threads}; default: the "
                   "manifest's threads.default); contestants without a thread pool are skipped with their reason.")
def verify(contestant_names, contestants_dir, scenario_opt, no_apt, install_jobs, server_cpus, run_as_root, workers,
           threads):
    """Start each contestant, check every scenario it claims, stop it: pass/fail per pair with the reason."""
    from .backend import RealBackend
    from .contestants import default_install_jobs, install_concurrently, install_parts
    from .ports import free_port
    from .runner import minutes_seconds
    from .process import available_cpus
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
    failed_logs: list[Path] = []  # failed servers and installs: their log's last lines follow the table
    table = Table(title="verification")
    for col in ("contestant", "scenario", "result", "reason"):
        table.add_column(col)
    def checked(contestant) -> list[str]:
        return [s for s in contestant.manifest.scenarios if not scenario_filter or s in scenario_filter]

    # verify starts no database: the scenarios that need one are not checked, so their install parts are not built.
    def parts(contestant) -> list[str]:
        return install_parts(contestant, [s for s in checked(contestant) if s not in SERVICE_SCENARIOS])

    cannot: dict[str, str] = {}
    for contestant in contestants:
        av = availability(contestant, allow_apt=not no_apt, parts=parts(contestant))
        no_pool = threads is not None and not contestant.manifest.threads.supported
        if not av.runnable or (workers > 1 and not contestant.manifest.workers.supported) or no_pool:
            cannot[contestant.name] = av.summary if not av.runnable else \
                "no thread pool to size (threads.supported = false)" if no_pool else \
                f"no worker support: {contestant.manifest.workers.how}"
    # Installs first, several at once (each one's output in its install log, a line here as each ends); then
    # the checks, one server at a time.
    install_failed: dict[str, InstallError] = {}

    def installed(result) -> None:
        if isinstance(result.error, InstallError):
            install_failed[result.contestant.name] = result.error
            console.print(f"{result.contestant.name}: install failed after {minutes_seconds(result.seconds)}")
        elif result.error is not None:
            raise result.error
        else:
            console.print(f"{result.contestant.name}: ready after {minutes_seconds(result.seconds)}")

    install_concurrently([c for c in contestants if c.name not in cannot],
                         lambda c: install(c, allow_apt=not no_apt, user=user, parts=parts(c)),
                         install_jobs or default_install_jobs(), installed)
    for contestant in contestants:
        scenarios = checked(contestant)
        if contestant.name in cannot:
            for s in scenarios:
                table.add_row(contestant.name, s, styled(("skipped", "yellow")), cannot[contestant.name])
            continue
        if contestant.name in install_failed:
            exc = install_failed[contestant.name]
            failures += len(scenarios)
            for s in scenarios:
                table.add_row(contestant.name, s, FAIL, f"install failed: {exc}")
            failed_logs.append(contestant.env_dir / "install.log")
            continue
        # verify starts no database: only the self-contained scenarios' static set is needed here.
        if any(registry.get(s).static_set and s not in SERVICE_SCENARIOS for s in scenarios) \
                and not static_set_ready(static_dir):
            console.print(f"generating the static file set in {static_dir} (once)")
            build_static_files(static_dir)
        for scenario in scenarios:
            if scenario in SERVICE_SCENARIOS:
                # verify starts no database; a run does (services.md), and verifies the scenario before its load.
                table.add_row(contestant.name, scenario, styled(("skipped", "yellow")),
                              f"needs the {SERVICE_SCENARIOS[scenario]} service: checked by `netarena run` "
                              "before each measurement")
                continue
            port = free_port()
            log_path = log_dir / f"{contestant.name}.{scenario}.log"
            try:
                proc = backend.start_server(contestant, scenario, port, workers, static_dir, cpus, log_path,
                                            threads=threads)
            except OSError as exc:
                failures += 1
                table.add_row(contestant.name, scenario, FAIL, f"cannot start: {exc}")
                continue
            try:
                kind, error, verification = backend.wait_ready(proc, contestant, scenario, port, static_dir, 5.0,
                                                               workers=workers, threads=threads)
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
@click.argument("name")
@click.option("--language", required=True, metavar="LANGUAGE",
              help="python | node | go | rust | java | ruby | erlang: the template's language.")
@click.option("--scenarios", "scenario_opt", default="hello", show_default=True,
              help="Comma-separated catalog scenarios the new contestant claims.")
@_contestants_dir_option
def new(name, language, scenario_opt, contestants_dir):
    """Write contestants/NAME: a commented contestant.toml and a minimal server (standard library only) that
    passes `netarena verify NAME` as written. Exit 2 (nothing written) for a bad name, language or scenario,
    or when the folder exists."""
    from .scaffold import create, next_steps

    given_dir = contestants_dir
    contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
    try:
        contestants_dir.mkdir(parents=True, exist_ok=True)
        target = create(name, language, split_list(scenario_opt) or [], contestants_dir)
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    click.echo(next_steps(target, name, f" --contestants-dir {given_dir}" if given_dir else ""))


@main.command()
@click.option("--apply", is_flag=True, help="Raise the limits that can be raised (needs root).")
@click.option("--profile", type=click.Choice(sorted(DOCTOR_PROFILES)),
              help="Set a seed's own kernel settings, saving the values replaced (needs root).")
@click.option("--restore", is_flag=True, help="Put back the values --profile saved (needs root).")
def doctor(apply, profile, restore):
    """Limits and settings that bound a run, what each means, and the command that raises it."""
    from .doctor import apply_profile, restore_saved, run_doctor

    given = [flag for flag, on in (("--apply", apply), ("--profile", profile), ("--restore", restore)) if on]
    if len(given) > 1:
        fail_bad_input(ConfigError(f"{' and '.join(given)} cannot be combined: give one", path=given[1]))
        return
    console = make_console()
    if profile:
        sys.exit(apply_profile(profile, console))
    if restore:
        sys.exit(restore_saved(console))
    sys.exit(run_doctor(apply=apply, console=console))


@main.command()
@click.argument("run_id", required=False)
@click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False),
              default=DEFAULT_RESULTS_DIR, show_default=True)
@click.option("--json", "fmt", flag_value="json", help="Everything about the run as one JSON document.")
@click.option("--csv", "fmt", flag_value="csv", help="One row per measurement.")
@click.option("--markdown", "fmt", flag_value="markdown",
              help="The summary tables as Markdown, ready to paste into a write-up.")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write to FILE instead of stdout.")
def export(run_id, results_dir, fmt, output):
    """Export RUN (default: the latest run) from the store as JSON, CSV or Markdown, on stdout or into -o FILE."""
    try:
        if fmt is None:
            raise ConfigError("choose a format: --json, --csv or --markdown", path="export")
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
        if output is not None and output.parent != Path("") and not output.parent.is_dir():
            raise ConfigError(f"folder {output.parent} does not exist", path="-o", hint="create it first")
        if fmt == "markdown":
            from .report import load_report
            from .report.markdown import render_markdown

            data = render_markdown(load_report(store, selected))
        else:
            data = export_json(store, selected) if fmt == "json" else export_csv(store, selected)  # not a scenario
    except sqlite3.DatabaseError as exc:  # damage the open's quick_check did not see
        fail_bad_input(unreadable(db, exc))
        return
    except ConfigError as exc:  # StoreError too: damaged, or of another schema version
        fail_bad_input(exc)
        return
    store.close()
    if output is None:
        sys.stdout.write(data)
        return
    # Written beside its name and renamed into place: a reader never sees half a file, a failure leaves none.
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail_bad_input(ConfigError(f"cannot write {output}: {exc.strerror or exc}", path="-o"))
        return
    click.echo(f"wrote {output} (run {selected}, {fmt})", err=True)


@main.group()
def cluster() -> None:
    """Runs across hosts through Dask distributed: check a cluster file, make its TLS certificates."""


@cluster.command(name="certs")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@click.option("--force", is_flag=True, help="Replace certificates already in FOLDER.")
def cluster_certs(folder, force):
    """Make the control plane's TLS files in FOLDER: a CA and a certificate per role (scheduler, worker, client)."""
    from .cluster.certs import ROLES, make_certs

    try:
        make_certs(folder, force=force)
    except FileExistsError as exc:
        fail_bad_input(ConfigError(str(exc), path=folder))
    click.echo(f"{folder}: ca.pem (ca.key: keep it off the hosts), " + ", ".join(f"{r}.pem/{r}.key" for r in ROLES))


@cluster.command(name="check")
@click.argument("cluster_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "json_mode", is_flag=True, help="Print what would be recorded as JSON.")
def cluster_check(cluster_file, json_mode):
    """Connect with CLUSTER_FILE's TLS files; every named worker present, the same netarena, clock offsets."""
    from .cluster import ClusterError
    from .cluster.backend import ClusterBackend
    from .cluster.spec import load_cluster

    backend = None
    try:
        backend = ClusterBackend(*load_cluster(cluster_file)).connect()
        info = backend.check()
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    except ClusterError as exc:
        fail_bad_input(ConfigError(str(exc), path=cluster_file))
        return
    finally:
        if backend is not None:
            backend.close()
    if json_mode:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    for host in info["hosts"]:
        click.echo(f"{host['name']:<10} {host['role']:<9} {host['address']:<28} netarena {host['netarena_version']}, "
                   f"{host['generator']['version']}, CPUs {host['cpus']}, clock offset "
                   f"{host['clock_offset_s'] * 1e3:+.3f} ms")
    click.echo(f"ok: {len(info['hosts'])} hosts on {info['scheduler']}")


@main.group()
def lab() -> None:
    """A cluster of network namespaces on this machine (root): a scheduler and one worker per host."""


@lab.command(name="up")
@click.option("--hosts", type=int, default=3, show_default=True, help="Hosts: one server, the rest generators.")
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=Path("lab"),
              show_default=True, help="Where the certificates, logs, lab.json and cluster.toml go.")
@click.option("--name", default="nalab", show_default=True, help="Prefix of the namespaces (NAME-ctl, NAME-h1, ...).")
def lab_up(hosts, folder, name):
    """Build the lab and print its cluster file (remove it with `netarena lab down`)."""
    from .cluster import ClusterError
    from .cluster.lab import up

    from .process import StopRequest

    # Ctrl-C/SIGTERM are remembered, not raised: up() finishes the step it is in, stops at its next check and
    # removes what it made (a KeyboardInterrupt raised mid-step could be swallowed, or kill an `ip` half-way).
    StopRequest.requested = False
    previous = {sig: signal.signal(sig, StopRequest.remember) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cluster_file = up(folder, hosts, name, say=click.echo)
    except ClusterError as exc:
        fail_bad_input(ConfigError(str(exc)))
        return
    except KeyboardInterrupt:  # up() removed what it had made
        previous = _ignore_stop_signals(previous)
        _exit_interrupted()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo(f"run a suite across it: netarena run SUITE --cluster {cluster_file}")


@lab.command(name="down")
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=Path("lab"),
              show_default=True, help="The folder `lab up` used.")
def lab_down(folder):
    """Stop the lab's processes and remove its namespaces (and with them its links)."""
    from .cluster.lab import down

    if not down(folder, say=click.echo):
        click.echo(f"no lab in {folder} (no lab.json)")


def _register_report_commands() -> None:
    # report / show / compare live in cli_report.py (the reports' own module, reading only the store).
    from .cli_report import register

    register(main)


_register_report_commands()

if __name__ == "__main__":
    main()
