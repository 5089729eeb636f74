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
from pathlib import Path

import click
from rich.table import Table

from . import __version__
from .backends import RealBackend
from .backends.cluster import ClusterBackend
from .calibration import CALIBRATION_ENV
from .cli_common import (exit_interrupted, fail_bad_input, ignore_stop_signals, parse_cpus, set_as_program,
                         split_list)
from .cli_report import register as register_report_commands
from .cluster import ClusterError
from .cluster.certs import ROLES, make_certs
from .cluster.lab import down, up
from .cluster.spec import load_cluster
from .config import SCENARIOS, SERVICE_SCENARIOS, load_not_here, model_group, protocols_for
from .scenarios import registry
from .contestants import (InstallError, availability, markdown_catalog, cache_root, default_contestants_dir,
                          default_install_jobs, for_servers, install, install_concurrently, install_parts, list_names,
                          load, scenario_note, select, tail)
from .doctor import PROFILES as DOCTOR_PROFILES
from .doctor import apply_profile, restore_saved, run_doctor
from .errors import EXIT_FAILED, EXIT_OK, ConfigError, did_you_mean
from .export import export_csv, export_json, write_folded
from .plan.external import DEFAULT_NAME as EXTERNAL_NAME
from .plan.suite import minutes_seconds
from .ports import free_port
from .process import StopRequest, available_cpus
from .report import load_report
from .report.profiles import folded_files as profile_files
from .report.markdown import render_markdown
from . import run_modes
from .run_modes import UI, RunOptions, cluster_mode, resume_mode, suite_mode, url_mode
from .scaffold import create, next_steps
from .scenarios import STATIC_SET_VERSION, build_static_files, static_set_ready
from .tls import is_tls, make_run_certificate, remove_stale_certificates, verify_certificate_folder
from .server_user import RUN_AS_ROOT_ENV, SERVER_USER
from .services import Service, chain, load_all, service_availability
from .store import Store, unreadable
from .term import console as make_console, styled

DEFAULT_RESULTS_DIR = "results"
VERIFY_LOG_TAIL_LINES = 20  # enough for a stack trace's useful end, few enough to read under the table


# ----------------------------------------------------------------------------- output

FAIL = styled(("FAIL", "red"))


def backend_name(value: str | None) -> str:
    return value or os.environ.get("NETARENA_BACKEND") or "real"


# ----------------------------------------------------------------------------- commands


def program() -> None:
    """The `netarena` command (console script and `python -m netarena`): `main` as the process's program, so an
    interrupted `run` may end the process itself (see `run`)."""
    set_as_program()
    main()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="netarena")
def main() -> None:
    """Benchmark network servers honestly: same experiments, same load, verified responses, repeats, medians."""


def _run_as_root_option(f):
    return click.option("--run-as-root", is_flag=True,
                        help=f"As root, run the contestants' servers as root too (default: as the unprivileged user "
                             f"'{SERVER_USER}'; also {RUN_AS_ROOT_ENV}=1).")(f)


def _install_jobs_option(f):
    return click.option("--install-jobs", type=click.IntRange(1, 64), default=None,
                        help="Contestants installed at once (default: two per CPU, at most 4).")(f)


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
@click.option("--profile", "profile", is_flag=True,
              help="Also profile each level once: one more repeat, sampled by the contestant's profiler (py-spy, "
                   "perf) and kept out of every figure (docs/profiles.md).")
@click.option("--duration", help="Measured time per measurement, e.g. 3s (default: the suite's).")
@click.option("--warmup", help="Warm-up per measurement, e.g. 1s (default: the suite's).")
@click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False),
              default=DEFAULT_RESULTS_DIR, show_default=True, help="Folder holding the results store.")
@click.option("--resume", "resume", is_flag=False, flag_value="latest", default=None,
              help="Finish an interrupted run: the latest unfinished one in --results, or the given run id.")
@click.option("--server-cpus", help="CPUs for the contestant (default: the first available CPU).")
@click.option("--generator-cpus", help="CPUs for netarena-load (default: the second available CPU).")
@click.option("--no-apt", is_flag=True, help="Never apt-get install a contestant's Debian packages.")
@_install_jobs_option
@click.option("--calibration/--no-calibration", default=True, envvar=CALIBRATION_ENV, show_envvar=True,
              help="Take the run's calibration before its first measurement: a fixed CPU loop and the reference "
                   "pair, about 3 s of both CPUs (docs/reports.md, Calibration). --no-calibration leaves it out: "
                   "the report then has no figures relative to the reference.")
@_run_as_root_option
@_contestants_dir_option
@click.option("--quiet", "-q", is_flag=True, help="Only warnings and errors.")
@click.option("--json", "json_mode", is_flag=True, help="Print the run summary as JSON on stdout.")
@click.option("--threshold", "thresholds", multiple=True, metavar="EXPR",
              help="A pass/fail gate on every measurement, as netarena-load --threshold takes it (e.g. "
                   "'p99<=5ms', 'errors<=0.1%', 'rps>=50000'); repeatable. Exit 99 when one fails.")
@click.option("--url", help="Measure a server that is already running at this http:// or https:// URL instead of "
                            "a suite's contestants: nothing is installed, started or stopped.")
@click.option("--cacert", type=click.Path(path_type=Path, dir_okay=False),
              help="--url https://: trust the certificates of this PEM file (the server's CA, or its self-signed "
                   "certificate), in the checks and in netarena-load.")
@click.option("--insecure", is_flag=True, help="--url https://: trust any certificate (the handshakes are made "
                                               "and measured all the same).")
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
def run(suite, only, scenario_opt, repeat, precision_opt, profile, duration, warmup, results_dir, resume, server_cpus, generator_cpus,
        no_apt, install_jobs, calibration, run_as_root, contestants_dir, quiet, json_mode, cluster_file, thresholds, url, pid,
        process_name, server_name, connections, allow_target, request_file, method, headers, body, expect_status,
        expect_body, backend_opt, cacert, insecure):
    """Run a suite (default: quick), or measure your own server (--url), and store every measurement in
    RESULTS/netarena.sqlite.

    Exit codes: 0 ok; 1 every measurement failed; 2 bad input (nothing started or stored); 99 the run
    completed and at least one measurement failed a --threshold (or a suite entry's `thresholds`);
    130 interrupted.
    """
    ui = UI(quiet=quiet, json_mode=json_mode)
    install_jobs = install_jobs or default_install_jobs()
    # ---- parse and validate the options: any problem exits 2 before anything starts
    try:
        backend_kind = backend_name(backend_opt)
        if backend_kind not in ("real", "mock"):
            raise ConfigError(f"unknown backend {backend_kind!r} (real | mock)", path="NETARENA_BACKEND")
        url_only = {"--pid": pid, "--process-name": process_name, "--name": server_name, "--connections": connections,
                    "--allow-target": allow_target or None, "--request": request_file, "--method": method,
                    "--header": headers or None, "--body": body, "--expect-status": expect_status,
                    "--expect-body": expect_body, "--cacert": cacert, "--insecure": insecure or None}
        if url is None and any(v is not None for v in url_only.values()):
            given = [k for k, v in url_only.items() if v is not None]
            raise ConfigError(f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} to a server of "
                              "your own", path=given[0], hint="add --url http://HOST:PORT")
        if url is not None:
            clash = [k for k, v in (("SUITE", suite), ("--only", only), ("--resume", resume), ("--profile", profile),
                                    ("--server-cpus", server_cpus), ("--contestants-dir", contestants_dir),
                                    ("--cluster", cluster_file), ("--backend", backend_opt)) if v]
            if clash:
                raise ConfigError(f"{', '.join(clash)} cannot be combined with --url: the server is the one at the URL "
                                  "(netarena neither starts nor pins it) and the run's levels come from --scenario, "
                                  "--connections, --repeat, --duration and --warmup", path=clash[0])
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    options = RunOptions(suite, only, scenario_opt, repeat, precision_opt, profile, duration, warmup, results_dir, resume,
                         server_cpus, generator_cpus, no_apt, install_jobs, run_as_root, contestants_dir, quiet,
                         json_mode, cluster_file, thresholds, url, pid, process_name, server_name, connections,
                         allow_target, request_file, method, headers, body, expect_status, expect_body, backend_kind,
                         cacert, insecure, calibration)
    # ---- one function per run mode (netarena.run_modes)
    if url is not None:
        mode = url_mode
    elif resume:
        mode = resume_mode
    elif cluster_file is not None:
        mode = cluster_mode
    else:
        mode = suite_mode
    run_modes.run(mode, options, ui)


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
    try:
        not_here = load_not_here(contestants_dir)
    except ConfigError as exc:
        fail_bad_input(exc)
        return
    if markdown:
        click.echo(markdown_catalog(contestants, not_here), nl=False)
        return
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
                     "concurrency_model": c.manifest.concurrency_model, "protocols": c.manifest.protocols,
                     "model_group": model_group(c.manifest.concurrency_model), "runnable": av.runnable,
                     "reasons": av.reasons, "notes": av.notes,
                     # The scenarios needing a service that cannot be built or installed here are skipped.
                     "services": {n: {"runnable": service_status[n][0], "reasons": service_status[n][1]}
                                  for n in c.manifest.needs},
                     # None: implemented; else why not (a service scenario left out: "not implemented").
                     "scenarios": {s: scenario_note(c, s) for s in SCENARIOS}})
    if json_mode:
        click.echo(json.dumps({"contestants_dir": str(contestants_dir), "scenarios": list(SCENARIOS),
                               "contestants": rows, "not_here": [n.model_dump() for n in not_here]}, indent=2))
        return
    console = make_console()
    if not rows:
        console.print(f"no contestants in {contestants_dir}")
        return
    table = Table(title=f"contestants in {contestants_dir}, by language and model")
    table.add_column("contestant", no_wrap=True)
    for col in ("language", "model", "runtime / framework", "scenarios", "protocols", "runs here?"):
        table.add_column(col)
    previous_language = None
    for row in sorted(rows, key=lambda r: (r["language"], r["model_group"], r["name"])):
        if previous_language is not None and row["language"] != previous_language:
            table.add_section()
        previous_language = row["language"]
        implemented = " ".join(s for s in SCENARIOS if row["scenarios"][s] is None)
        status = styled(("yes", "green")) if row["runnable"] else styled(("no", "red"))
        if row["runnable"] and row["notes"]:
            status.append(" (after install)")
        model = row["model_group"] + (f" ({row['concurrency_model']})"
                                      if row["model_group"] != row["concurrency_model"].replace("-", " ") else "")
        table.add_row(row["name"], row["language"], model, f"{row['runtime']} / {row['framework']}", implemented,
                      " ".join(row["protocols"]), status)
    console.print(table)
    for row in rows:
        for reason in row["reasons"]:
            console.print(styled((row["name"], "red"), ": ", reason))
        for note in row["notes"]:
            console.print(f"{row['name']}: {note}")
    for entry in not_here:
        console.print(styled((f"not here: {entry.framework}", "yellow"), f" ({entry.language}): {entry.reason}"))
    for name, (runnable, reasons) in service_status.items():
        if not runnable:
            users = ", ".join(r["name"] for r in rows if name in r["services"])
            console.print(styled((f"service {name}", "red"), f" cannot run here, so {users} skip its scenarios: "
                                 + "; ".join(reasons)))
    console.print("Scenarios: " + ", ".join(SCENARIOS) + " (definitions: docs/scenarios.md); the reason for each "
                  "one not implemented: `netarena list --json`")


def verify_on_one_server(backend: RealBackend, contestant, scenarios: list[str], protocol: str, log_path: Path, *,
                         workers: int, threads: int | None, static_dir: Path, cpus: list[int],
                         tls) -> dict[str, tuple[str | None, str | None, str]]:
    """Start the contestant once for `protocol`, check each of `scenarios` on that server, stop it: per scenario
    (failure_kind, error, note), failure_kind None when it passed. The first scenario's check waits for the
    server to be ready; once the server has exited, the scenarios not yet checked fail saying so; processes
    left after the stop fail every scenario checked on that server."""
    outcome: dict[str, tuple[str | None, str | None, dict | None]] = {}
    port = free_port()
    try:
        proc = backend.start_server(contestant, scenarios[0], port, workers, static_dir, cpus, log_path,
                                    threads=threads, tls=tls, protocol=protocol)
    except OSError as exc:
        return {s: ("start_failed", f"cannot start: {exc}", "") for s in scenarios}
    try:
        for index, scenario in enumerate(scenarios):
            if index > 0 and proc.poll() is not None:
                outcome[scenario] = ("crashed", f"not checked: the server exited (code {proc.poll()}) during the "
                                     f"checks of {scenarios[index - 1]}", None)
                continue
            if index > 0 and outcome[scenarios[0]][0] in ("start_failed", "not_ready") \
                    and outcome[scenarios[0]][2] is None:  # its port never opened
                outcome[scenario] = (outcome[scenarios[0]][0], f"not checked: {outcome[scenarios[0]][1]}", None)
                continue
            check = backend.wait_ready if index == 0 else backend.check_running
            outcome[scenario] = check(proc, contestant, scenario, port, static_dir, 5.0, workers=workers,
                                      threads=threads, tls=tls, protocol=protocol)
    finally:
        stop = backend.stop_server(contestant, proc)
    results = {}
    for scenario, (kind, error, verification) in outcome.items():
        if kind is None and (stop["leftover"] or stop["escaped"]):
            kind, error = "leftover", f"processes left after stop: {stop['leftover'] + stop['escaped']}"
        observed = (verification or {}).get("observed")
        note = (" (needed SIGKILL to stop)" if stop["killed"] else "") + (f" ({observed})" if observed else "")
        results[scenario] = (kind, error, note)
    return results


def needed_services(contestants, cannot: dict[str, str], checked, no_apt: bool) -> dict[str, Service | str]:
    """The services the database scenarios of the installable contestants need (each with those it stores into,
    FerretDB's PostgreSQL), by name: the Service, or why it cannot be installed here."""
    found: dict[str, Service | str] = {}
    everything = load_all()
    for provides in sorted({SERVICE_SCENARIOS[s] for c in contestants if c.name not in cannot
                            for s in checked(c) if s in SERVICE_SCENARIOS}):
        runnable, reasons = service_availability(everything, provides, None, allow_apt=not no_apt)
        if not runnable:  # the whole chain is reported under what it provides: one line, every reason
            found[provides] = "; ".join(reasons)
            continue
        for service, _ in chain(everything, provides, None):
            found[service.name] = service
    return found


@main.command()
@click.argument("contestant_names", nargs=-1)
@_contestants_dir_option
@click.option("--scenario", "scenario_opt", help="Comma-separated scenarios (default: every one it claims).")
@click.option("--no-apt", is_flag=True, help="Never apt-get install a contestant's Debian packages.")
@_install_jobs_option
@click.option("--server-cpus", help="CPUs for the contestant (default: the first available CPU).")
@_run_as_root_option
@click.option("--workers", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Start each contestant with this many workers ({workers}); contestants without worker "
                   "support are skipped with their reason when it is above 1.")
@click.option("--threads", type=click.IntRange(1, 65_536), default=None,
              help="Start each contestant with this thread-pool size per worker ({threads}; default: the "
                   "manifest's threads.default); contestants without a thread pool are skipped with their reason.")
@click.option("--build-all-parts", is_flag=True,
              help="Also build every optional install part ([install.optional]: the database drivers) of the "
                   "scenarios checked, those verify skips for their database included, in one build: a later run "
                   "with a database then finds them built.")
@click.option("--install-only", is_flag=True,
              help="Install the contestants (and the parts asked for) as a check would, then stop: start no server, "
                   "check nothing; with --build-all-parts also the services (databases) of the database scenarios. "
                   "Exits 1 if an install failed, with its log's last lines.")
def verify(contestant_names, contestants_dir, scenario_opt, no_apt, install_jobs, server_cpus, run_as_root, workers,
           threads, build_all_parts, install_only):
    """Start each contestant, check every scenario it claims, stop it: pass/fail per pair with the reason."""
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
        if install_only:
            server_options = [name for name, given in (("--server-cpus", server_cpus is not None),
                                                       ("--workers", workers != 1), ("--threads", threads is not None))
                              if given]
            if server_options:
                raise ConfigError(f"{' and '.join(server_options)} {'sets' if len(server_options) == 1 else 'set'} how "
                                  "servers start, and --install-only starts none",
                                  path=server_options[0], hint="drop them, or drop --install-only")
        cpus = parse_cpus(server_cpus, "--server-cpus") or [available_cpus()[0]]
        user = for_servers(run_as_root, contestants)
    except ConfigError as exc:
        fail_bad_input(exc)
        return

    def print_log_tails(paths: list[Path]) -> None:
        for log_path in paths:
            lines = tail(log_path).splitlines()[-VERIFY_LOG_TAIL_LINES:]
            console.print(f"--- last {len(lines)} lines of {log_path} ---")
            console.print("\n".join(lines) if lines else "(empty)")

    static_dir = cache_root() / "static" / f"v{STATIC_SET_VERSION}"
    static_dir.mkdir(parents=True, exist_ok=True)
    backend = RealBackend(generator=None, user=user)
    log_dir = cache_root() / "verify-logs"
    failures = 0
    failed_logs: list[Path] = []  # failed servers and installs: their log's last lines follow the table
    table = Table(title="verification")
    for col in ("contestant", "scenario", "protocol", "result", "reason"):
        table.add_column(col)
    def verified_pairs(manifest, scenarios: list[str]) -> list[tuple[str, str]]:
        return [(s, p) for s in scenarios for p in protocols_for(manifest, s)]

    def checked(contestant) -> list[str]:
        return [s for s in contestant.manifest.scenarios if not scenario_filter or s in scenario_filter]

    # verify starts no database: the scenarios that need one are not checked, so their install parts are not built,
    # unless asked for (--build-all-parts: one build with every driver instead of one more build per database later).
    def parts(contestant) -> list[str]:
        if isinstance(contestant, Service):  # a service has no optional parts
            return []
        return install_parts(contestant, verified_pairs(contestant.manifest, [
            s for s in checked(contestant) if build_all_parts or s not in SERVICE_SCENARIOS]))

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

    # --install-only also installs the services (databases) of the database scenarios it builds the parts of
    # (--build-all-parts), as a run that measures them would, beside the contestants: a run, or the tests, then
    # find the database built too. A check starts no database, so without --install-only they stay as they are.
    services = needed_services(contestants, cannot, checked, no_apt) if install_only and build_all_parts else {}
    cannot.update({name: reason for name, reason in services.items() if isinstance(reason, str)})
    to_install = [c for c in contestants if c.name not in cannot] + \
        [s for s in services.values() if not isinstance(s, str)]
    install_concurrently(to_install,
                         lambda c: install(c, allow_apt=not no_apt, parts=parts(c),
                                           user=None if isinstance(c, Service) else user),
                         install_jobs or default_install_jobs(), installed, parts)
    if install_only:
        for name, reason in cannot.items():
            console.print(f"{name}: not installed: {reason}")
        for name, exc in install_failed.items():
            console.print(f"{name}: install failed: {exc}")
        print_log_tails([c.env_dir / "install.log" for c in to_install if c.name in install_failed])
        sys.exit(EXIT_FAILED if install_failed else EXIT_OK)
    # One certificate for every server verified over TLS, removed once they are all checked; a folder of this
    # verify's own, since several may run at once on one cache.
    for folder in remove_stale_certificates(verify_log_dir=log_dir):
        console.print(f"removed the TLS certificate and key left by an interrupted verify: {folder}")
    certificate = make_run_certificate(verify_certificate_folder(log_dir, os.getpid())) if any(
        is_tls(p) for c in contestants for p in c.manifest.protocols) else None
    try:
        for contestant in contestants:
            scenarios = checked(contestant)
            if contestant.name in cannot:
                for s, protocol in verified_pairs(contestant.manifest, scenarios):
                    table.add_row(contestant.name, s, protocol, styled(("skipped", "yellow")), cannot[contestant.name])
                continue
            if contestant.name in install_failed:
                exc = install_failed[contestant.name]
                pairs = verified_pairs(contestant.manifest, scenarios)
                failures += len(pairs)
                for s, protocol in pairs:
                    table.add_row(contestant.name, s, protocol, FAIL, f"install failed: {exc}")
                failed_logs.append(contestant.env_dir / "install.log")
                continue
            # verify starts no database: only the self-contained scenarios' static set is needed here.
            if any(registry.get(s).static_set and s not in SERVICE_SCENARIOS for s in scenarios) \
                    and not static_set_ready(static_dir):
                console.print(f"generating the static file set in {static_dir} (once)")
                build_static_files(static_dir)
            # One server start per (start command, protocol), its scenarios checked one after another on it:
            # a server serves every scenario its command claims at once, as its users run it, and a JVM's start
            # (seconds) is paid once, not once per scenario. A server started for one protocol serves that
            # one only.
            starts: dict[tuple, list[str]] = {}
            rows: dict[tuple[str, str], tuple] = {}
            for scenario, protocol in verified_pairs(contestant.manifest, scenarios):
                if scenario in SERVICE_SCENARIOS:
                    # verify starts no database; a run does (services.md), and verifies the scenario before its load.
                    rows[scenario, protocol] = (styled(("skipped", "yellow")),
                                                f"needs the {SERVICE_SCENARIOS[scenario]} service: checked by "
                                                "`netarena run` before each measurement")
                    continue
                starts.setdefault((tuple(contestant.command(scenario)), protocol), []).append(scenario)
            for (_, protocol), shared in starts.items():
                log_path = log_dir / f"{contestant.name}.{'-'.join(shared)}.{protocol}.log"
                for scenario, (kind, error, note) in verify_on_one_server(
                        backend, contestant, shared, protocol, log_path, workers=workers, threads=threads,
                        static_dir=static_dir, cpus=cpus, tls=certificate if is_tls(protocol) else None).items():
                    if kind is None:
                        rows[scenario, protocol] = (styled(("pass", "green")), "all checks passed" + note)
                    else:
                        failures += 1
                        rows[scenario, protocol] = (FAIL, f"{kind}: {error} (log: {log_path})")
                        if log_path not in failed_logs:
                            failed_logs.append(log_path)
            for scenario, protocol in verified_pairs(contestant.manifest, scenarios):
                table.add_row(contestant.name, scenario, protocol, *rows[scenario, protocol])
    finally:
        if certificate is not None:
            certificate.remove()
    console.print(table)
    print_log_tails(failed_logs)
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
@click.option("--folded", "folded", type=click.Path(path_type=Path), metavar="DIR",
              help="Write each profiled measurement's folded stacks into DIR (made if missing): "
                   "<id>-<contestant>-<scenario>-<level>.cpu.folded, and .idle.folded when recorded; exit 1 when "
                   "the run has none.")
def export(run_id, results_dir, fmt, output, folded):
    """Export RUN (default: the latest run) from the store as JSON, CSV or Markdown, on stdout or into -o FILE;
    or its profiles' folded stacks into --folded DIR."""
    try:
        if folded is not None and (fmt is not None or output is not None):
            raise ConfigError("--folded writes one file per profile into DIR: give it without --json, --csv, "
                              "--markdown and -o", path="--folded")
        if fmt is None and folded is None:
            raise ConfigError("choose a format: --json, --csv or --markdown (or --folded DIR: the profiles' "
                              "folded stacks)", path="export")
        if folded is not None and folded.exists() and not folded.is_dir():
            raise ConfigError(f"{folded} exists and is not a folder", path="--folded",
                              hint="give a folder, new or existing")
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
        if folded is not None:
            data = None
            files = profile_files(load_report(store, selected))
        elif fmt == "markdown":
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
    if folded is not None:
        if not files:
            # The command ran and found nothing to write: a run without --profile, or whose contestants could not
            # be profiled here (exit 1, as for a run with no result).
            make_console(stderr=True).print(f"error: run {selected} has no profile with folded stacks (netarena "
                                            "run --profile records them; docs/profiles.md)", soft_wrap=True)
            sys.exit(EXIT_FAILED)
        try:
            written = write_folded(files, folded)
        except OSError as exc:
            fail_bad_input(ConfigError(f"cannot write into {folded}: {exc.strerror or exc}; nothing was written",
                                       path="--folded"))
            return
        for path in written:
            click.echo(f"wrote {path}")
        click.echo(f"{len(written)} folded file(s) of run {selected} in {folded}")
        return
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
        previous = ignore_stop_signals(previous)
        exit_interrupted()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo(f"run a suite across it: netarena run SUITE --cluster {cluster_file}")


@lab.command(name="down")
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=Path("lab"),
              show_default=True, help="The folder `lab up` used.")
def lab_down(folder):
    """Stop the lab's processes and remove its namespaces (and with them its links)."""
    if not down(folder, say=click.echo):
        click.echo(f"no lab in {folder} (no lab.json)")


# report / show / compare live in cli_report.py (the reports' own module, reading only the store).
register_report_commands(main)

if __name__ == "__main__":
    main()
